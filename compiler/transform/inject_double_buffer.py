"""Double buffering of shared-memory tiles (``Stage.double_buffer()``), for GPU kernels.

A stage marked double-buffered is computed at the start of a serial loop's body (the
loop over reduction tiles) and read by the rest of that body; outside any loop (a
loop of extent 1 is gone by now) it keeps its single buffer. Its allocation is
doubled and hoisted out of the loop; the first tile is loaded before the loop, and
iteration ``k`` loads tile ``k + 1`` into one half while the rest of the body reads
tile ``k`` from the other:

    load(0) -> buf[0]
    for k in range(n):
        if k + 1 < n: load(k + 1) -> buf[(k + 1) % 2]     # double_buffer_write
        compute(k) <- buf[k % 2]

The barrier planner (:mod:`.thread_sync`) knows that a ``double_buffer_write`` and the
reads after it in the same iteration touch different halves, so the body needs one
barrier (at its end) instead of two, and the loads of the next tile overlap with the
arithmetic of the current one.
"""

from __future__ import annotations

import dataclasses

from ..errors import LoweringError
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, substitute
from ..tir.builtin import DOUBLE_BUFFER_SCOPE, DOUBLE_BUFFER_WRITE
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body

__all__ = ["inject_double_buffer", "DOUBLE_BUFFER_SCOPE", "DOUBLE_BUFFER_WRITE"]


def inject_double_buffer(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Double the buffers marked ``double_buffer_scope`` and pipeline their loops."""
    body = func.body if isinstance(func, PrimFunc) else func
    if not collect(body, lambda n: isinstance(n, S.AttrStmt) and n.key == DOUBLE_BUFFER_SCOPE):
        return func
    return apply_to_body(func, lambda body, an: _Injector().visit(body))


def _peel(body: S.Stmt) -> tuple[list, list, S.Stmt]:
    """``(double-buffered Allocates, other Allocates, the statement inside them)`` of a loop
    body that starts with allocations."""
    doubled, others = [], []
    while True:
        if isinstance(body, S.AttrStmt) and body.key == DOUBLE_BUFFER_SCOPE:
            if not isinstance(body.body, S.Allocate) or body.body.buffer.data is not body.node:
                raise LoweringError("double_buffer: malformed double_buffer_scope annotation")
            doubled.append(body.body)
            body = body.body.body
        elif isinstance(body, S.Allocate):
            others.append(body)
            body = body.body
        else:
            return doubled, others, body


def _buffers(s: S.Stmt, kind: type) -> set[E.Var]:
    """The data of the buffers that ``kind`` nodes (stores or loads) in ``s`` touch."""
    return {n.buffer.data for n in collect(s, lambda n: isinstance(n, kind))}


def _loads_only_into(s: S.Stmt, data: set[E.Var]) -> bool:
    """Whether ``s`` stores into some of the buffers with ``data`` and nothing else,
    reading none of them."""
    stores = _buffers(s, S.BufferStore)
    return bool(stores) and stores <= data and not _buffers(s, E.BufferLoad) & data


class _Injector(IRMutator):
    def visit_AttrStmt(self, s: S.AttrStmt):
        if s.key == DOUBLE_BUFFER_SCOPE:  # in no loop (one of extent 1 is gone): one copy is enough
            return self.visit(s.body)
        return self.generic_visit(s)

    def visit_For(self, s: S.For):
        doubled, others, inner = _peel(s.body)
        if not doubled:
            return self.generic_visit(s)
        names = ", ".join(a.buffer.name for a in doubled)
        if s.kind is not S.ForKind.SERIAL:
            raise LoweringError(f"double_buffer of {names}: the loop {s.loop_var.name!r} it is computed "
                                f"in must be serial, not {s.kind.name.lower()}")
        extent = E.const_value(s.extent)
        if not isinstance(extent, int) or not E.is_const_int(s.min, 0):
            raise LoweringError(f"double_buffer of {names}: the loop {s.loop_var.name!r} needs a constant "
                                f"extent and to start at 0, got [{s.min}, {s.min} + {s.extent})")
        inner = self.visit(inner)
        if extent < 2:  # nothing to overlap: keep the single buffers
            return S.For(s.loop_var, s.min, s.extent, s.kind, _wrap(doubled + others, inner), s.thread_tag)
        data = {a.buffer.data for a in doubled}
        children = list(inner.seq) if isinstance(inner, S.SeqStmt) else [inner]
        split = 0
        while split < len(children) and _loads_only_into(children[split], data):
            split += 1
        producers, rest = children[:split], children[split:]
        if not producers:
            raise LoweringError(f"double_buffer of {names}: the loop {s.loop_var.name!r} does not start "
                                "by computing it")
        if any(_buffers(c, S.BufferStore) & data for c in rest):
            raise LoweringError(f"double_buffer of {names}: the body of loop {s.loop_var.name!r} writes it "
                                "after reading it")
        sizes, twins = {}, {}  # by data: elements of one copy; the buffer holding two
        for a in doubled:
            buf = a.buffer
            if len(buf.shape) != 1 or not isinstance(E.const_value(buf.shape[0]), int):
                raise LoweringError(f"double_buffer of {buf.name}: needs a constant-size buffer")
            sizes[buf.data] = E.const_value(buf.shape[0])
            twins[buf.data] = dataclasses.replace(buf, shape=(E.const(2 * sizes[buf.data],
                                                                      buf.shape[0].dtype),))
        k = s.loop_var
        one = E.const(1, k.dtype)
        two = E.const(2, k.dtype)

        def half(phase):
            return _Halves(twins, sizes, phase)

        loads = S.seq(*producers)
        prologue = half(E.const(0, k.dtype)).visit(substitute(loads, {k: E.const(0, k.dtype)}))
        following = half(E.FloorMod(k + one, two, k.dtype)).visit(substitute(loads, {k: k + one}))
        load_next = S.AttrStmt(doubled[0].buffer.data, DOUBLE_BUFFER_WRITE, E.const(1),
                               S.IfThenElse(E.LT(k + one, E.const(extent, k.dtype), "bool"), following))
        body = S.seq(load_next, half(E.FloorMod(k, two, k.dtype)).visit(S.seq(*rest)))
        loop = S.For(k, s.min, s.extent, s.kind, _wrap(others, body), s.thread_tag)
        out = S.seq(prologue, loop)
        for a in reversed(doubled):
            out = S.Allocate(twins[a.buffer.data], out)
        return out


def _wrap(allocs: list, body: S.Stmt) -> S.Stmt:
    for a in reversed(allocs):
        body = S.Allocate(a.buffer, body)
    return body


class _Halves(IRMutator):
    """Accesses of the doubled buffers moved to the half ``phase`` (0 or 1, an expression)."""

    def __init__(self, twins: dict, sizes: dict, phase: E.PrimExpr):
        self.twins, self.sizes, self.phase = twins, sizes, phase

    def _shift(self, buf, indices):
        key = buf.data
        (index,) = indices
        offset = self.phase * E.const(self.sizes[key], index.dtype)  # vector nodes carry the lane type
        if isinstance(index, E.Ramp):
            return self.twins[key], (E.Ramp(index.base + offset, index.stride, index.lanes, index.dtype),)
        vectors = collect(index, lambda n: isinstance(n, (E.Ramp, E.Broadcast)))
        if vectors:  # a gather or scatter index
            return self.twins[key], (index + E.Broadcast(offset, vectors[0].lanes, index.dtype),)
        return self.twins[key], (index + offset,)

    def visit_BufferLoad(self, e: E.BufferLoad):
        e = self.generic_visit(e)
        if e.buffer.data not in self.twins:
            return e
        buf, indices = self._shift(e.buffer, e.indices)
        return dataclasses.replace(e, buffer=buf, indices=indices)

    def visit_BufferStore(self, s: S.BufferStore):
        s = self.generic_visit(s)
        if s.buffer.data not in self.twins:
            return s
        buf, indices = self._shift(s.buffer, s.indices)
        return dataclasses.replace(s, buffer=buf, indices=indices)
