"""Barrier insertion: ``__syncthreads()`` where threads of a block exchange data through
shared memory, and only there.

A barrier goes into a statement sequence of the kernel before the first statement
that reads a shared buffer other threads wrote since the last barrier (a read after
a cooperative load), or writes a location other threads may still read or write
(the next tile's load in a loop over tiles). Loops are checked for the dependence
their iterations carry: when the accesses after the body's last barrier conflict
with those before its first one, a barrier ends the body (the classic second
barrier of a tiled matmul's k loop).

Two accesses conflict when they touch the same shared buffer, one of them writes and
the other reads (a write after a write is left alone, as in TVM), and they are not
provably the same element of the same thread: the same index
expression that mentions no loop varying between them (as TVM's planner decides).
Conditionals are not split: a barrier inside a branch that some threads skip would
hang the block, so a conditional statement counts as one access of all it touches.
A write inside a ``double_buffer_write`` (:mod:`.inject_double_buffer`) does not
conflict with the reads that follow it in its loop iteration: they read the other half.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..tir import stmt as S
from ..tir.analysis import free_vars, post_order_visit
from ..tir.builtin import DOUBLE_BUFFER_WRITE, SYNC_OP, is_sync, sync_stmt
from ..tir.expr import Var
from ..tir.function import PrimFunc
from ..tir.functor import Functor, IRVisitor
from ..tir.printer import expr_to_str

__all__ = ["insert_thread_sync", "SYNC_OP", "sync_stmt", "is_sync"]


@dataclass(frozen=True, eq=False)
class _Access:
    data: Var          # the buffer's data
    write: bool
    index: str         # the index expression, as text
    index_vars: frozenset  # the variables the index mentions
    loops: frozenset   # the loop variables enclosing the access
    double_write: bool = False  # a load of the next tile into the other half of a double buffer


@dataclass
class _Summary:
    synced: bool       # whether the statement contains a barrier
    head: list         # accesses before its first barrier (all accesses when not synced)
    tail: list         # accesses after its last barrier


def insert_thread_sync(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Insert the barriers that the shared buffers of a kernel body need."""
    body = func.body if isinstance(func, PrimFunc) else func
    shared: set = set()

    def note(n):
        if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            shared.add(n.buffer.data)

    post_order_visit(body, note)
    if not shared:
        return func
    new, _ = _Planner(shared).stmt(body, frozenset())
    return func.with_body(new) if isinstance(func, PrimFunc) else new


def _as_double_write(a: _Access) -> _Access:
    return dataclasses.replace(a, double_write=True) if a.write else a


def _conflict(before: list, after: list, outer: frozenset) -> bool:
    for a in before:
        for b in after:
            if a.data is not b.data or a.write == b.write:
                continue  # two reads never conflict; nor, as in TVM, do two writes
            if a.double_write:
                continue  # the reads after it in its iteration read the other half
            if a.index == b.index and not (a.index_vars & (a.loops - outer)) \
                    and not (b.index_vars & (b.loops - outer)):
                continue  # the same element, touched by the same thread
            return True
    return False


class _Planner(Functor):
    """Plans barriers: ``visit`` returns the statement with its barriers and a summary of
    its shared accesses; ``loops`` holds the enclosing loop variables."""

    def __init__(self, shared: set):
        self.shared = shared
        self.loops: frozenset = frozenset()

    def stmt(self, s: S.Stmt, loops: frozenset) -> tuple[S.Stmt, _Summary]:
        saved, self.loops = self.loops, loops
        try:
            return self.visit(s)
        finally:
            self.loops = saved

    def visit_SeqStmt(self, s):
        return self.seq(list(s.seq), self.loops)

    def visit_For(self, s):
        return self.loop(s, self.loops)

    def visit_AttrStmt(self, s):
        body, summary = self.stmt(s.body, self.loops)
        if s.key == DOUBLE_BUFFER_WRITE:
            summary.head = [_as_double_write(a) for a in summary.head]
            summary.tail = [_as_double_write(a) for a in summary.tail]
        return S.AttrStmt(s.node, s.key, s.value, body), summary

    def visit_Allocate(self, s):
        body, summary = self.stmt(s.body, self.loops)
        return S.Allocate(s.buffer, body), summary

    def visit_LetStmt(self, s):
        body, summary = self.stmt(s.body, self.loops)
        summary.head = self.accesses(s.value, self.loops) + summary.head
        return S.LetStmt(s.var, s.value, body), summary

    def visit_Evaluate(self, s):
        if is_sync(s):
            return s, _Summary(True, [], [])
        return self.generic_visit(s)

    def generic_visit(self, s):
        acc = self.accesses(s, self.loops)
        return s, _Summary(False, acc, acc)

    def seq(self, children: list, loops: frozenset) -> tuple[S.Stmt, _Summary]:
        out: list = []
        head: list = []
        head_done = False
        pending: list = []
        for c in children:
            new, sm = self.stmt(c, loops)
            if pending and _conflict(pending, sm.head, loops):
                out.append(sync_stmt())
                pending = []
                head_done = True
            out.append(new)
            if not head_done:
                head += sm.head
            if sm.synced:
                head_done = True
                pending = list(sm.tail)
            else:
                pending += sm.head
        return S.seq(*out), _Summary(head_done, head, pending)

    def loop(self, s: S.For, loops: frozenset) -> tuple[S.Stmt, _Summary]:
        body, sm = self.stmt(s.body, loops | {s.loop_var})
        # Iteration i's last accesses against iteration i + 1's first ones: the loop variable
        # differs between them, so indices that mention it are different elements.
        if sm.tail and sm.head and _conflict(sm.tail, sm.head, loops):
            body = S.seq(body, sync_stmt())
            sm = _Summary(True, sm.head, [])
        new = S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)
        return new, sm

    def accesses(self, node, loops: frozenset) -> list:
        """Shared-buffer accesses anywhere in ``node`` (loops inside it included)."""
        finder = _SharedAccesses(self.shared, loops)
        finder.visit(node)
        return finder.found


class _SharedAccesses(IRVisitor):
    """The accesses of shared buffers in a statement, each with its enclosing loops."""

    def __init__(self, shared: set, loops: frozenset):
        self.shared = shared
        self.enclosing = loops
        self.found: list = []

    def visit_For(self, n):
        self.visit(n.min)
        self.visit(n.extent)
        saved, self.enclosing = self.enclosing, self.enclosing | {n.loop_var}
        try:
            self.visit(n.body)
        finally:
            self.enclosing = saved

    def visit_BufferLoad(self, n):
        if n.buffer.data in self.shared:
            text = ", ".join(expr_to_str(i) for i in n.indices)
            self.found.append(_Access(n.buffer.data, isinstance(n, S.BufferStore), text,
                                      frozenset(v for i in n.indices for v in free_vars(i)),
                                      self.enclosing))
        self.generic_visit(n)

    visit_BufferStore = visit_BufferLoad
