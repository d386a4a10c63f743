"""Turn ``Stage.prefetch`` into prefetch instructions.

The loop builder writes ``AttrStmt(buffer data, PREFETCH_SCOPE, offset)`` as the body of the
loop the prefetch is at. Here the region of that buffer the body reads is found with every
loop inside the body taken whole and the loop's own variable moved ``offset`` iterations on,
and the region becomes prefetches of its 64-byte lines: loops over its leading dimensions,
each around the lines of one contiguous run of its trailing ones. It runs on the
multi-dimensional buffers, before :func:`~.storage_flatten.storage_flatten`. Inside loops
bound to GPU threads a prefetch is dropped.
"""

from __future__ import annotations

from .. import dtypes
from ..arith import Analyzer
from ..errors import LoweringError
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, substitute
from ..tir.buffer import ACCESS_PTR, Buffer
from ..tir.builtin import PREFETCH, PREFETCH_SCOPE
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body
from .storage_flatten import flat_index

__all__ = ["inject_prefetch", "CACHE_LINE_BYTES"]

#: The line size the prefetches step by: 64 bytes on the x86 and Arm cores this targets.
CACHE_LINE_BYTES = 64


def inject_prefetch(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Replace each prefetch scope by the prefetches of the region its body reads
    ``offset`` iterations of the enclosing loop ahead (see the module's docstring)."""
    return apply_to_body(func, lambda body, an: _Injector(an).visit(body))


class _Injector(IRMutator):
    def __init__(self, analyzer: Analyzer):
        self.an = analyzer
        self.loops: list[S.For] = []

    def visit_PrimExpr(self, e):
        return e

    def visit_For(self, s: S.For) -> S.Stmt:
        self.loops.append(s)
        try:
            body = self.visit(s.body)
        finally:
            self.loops.pop()
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if s.key != PREFETCH_SCOPE:
            return s if body is s.body else S.AttrStmt(s.node, s.key, s.value, body)
        if not self.loops:
            raise LoweringError("a prefetch scope outside any loop")
        if any(outer.thread_tag for outer in self.loops):
            return body  # a GPU kernel: its loads go through the caches it manages itself
        loop = self.loops[-1]
        if loop.kind is S.ForKind.VECTORIZED:
            raise LoweringError(f"prefetch at the vectorized loop {loop.loop_var.name!r}: prefetch at a loop "
                                "outside it")
        loads = collect(body, lambda n: isinstance(n, E.BufferLoad) and n.buffer.data is s.node)
        if not loads:
            return body
        # Inner loops' bounds may follow the loop's variable too (a stage computed at it).
        ahead = {loop.loop_var: loop.loop_var + s.value}
        relax = {}
        for inner in collect(body, lambda n: isinstance(n, S.For)):
            last = inner.min + inner.extent - 1
            relax[inner.loop_var] = (substitute(inner.min, ahead), substitute(last, ahead))
        region = self._region(loads, ahead, relax)
        return S.seq(_line_prefetches(loads[0].buffer, region), body)

    def _region(self, loads: list, ahead: dict, relax: dict) -> list[tuple[E.PrimExpr, int]]:
        """``(first index, constant extent)`` per dimension: the union of the loads' ranges,
        the loop moved on by ``ahead``, the loops inside it over ``relax``."""
        buf: Buffer = loads[0].buffer
        region = []
        for d in range(len(buf.shape)):
            lo = hi = None
            for load in loads:
                index = load.indices[d]
                if isinstance(index, E.Ramp):  # an element of a vector tensor: its first lane
                    index = index.base
                a, b = self.an.interval(substitute(index, ahead), relax)
                if a is None or b is None:
                    raise LoweringError(f"prefetch of {buf.name!r}: cannot bound its index {index} "
                                        "over the loops inside the prefetch axis")
                lo = a if lo is None else self.an.simplify(E.Min(lo, a, a.dtype))
                hi = b if hi is None else self.an.simplify(E.Max(hi, b, b.dtype))
            extent = self.an.const_int_bound(self.an.simplify(hi - lo + 1))[1]
            if extent is None:
                raise LoweringError(f"prefetch of {buf.name!r}: the region's extent along dimension {d} "
                                    "is not bounded by a constant")
            region.append((lo, max(int(extent), 1)))
        return region


def _line_prefetches(buf: Buffer, region: list) -> S.Stmt:
    """Prefetches of every line of ``region`` in ``buf``: trailing dimensions the region
    covers whole, with the first one it does not, make one contiguous run."""
    shape = [d.value if isinstance(d, E.IntImm) else None for d in buf.shape]  # symbolic: never whole
    split = len(region) - 1
    run = region[split][1]
    while (split > 0 and not buf.strides and shape[split] is not None
           and region[split][1] >= shape[split]):
        split -= 1
        run *= region[split][1]
    itemsize = max(dtypes.bits(buf.dtype) // 8, 1)
    per_line = max(CACHE_LINE_BYTES // itemsize, 1)
    lines = -(-run // per_line)
    outer = [E.Var(f"prefetch_{buf.name}_{d}", "int32") for d in range(split)]
    line = E.Var(f"prefetch_{buf.name}_line", "int32")
    indices = [lo + v for (lo, _), v in zip(region[:split], outer)] + [lo for lo, _ in region[split:]]
    start = flat_index(buf, indices)
    address = E.Call("handle", ACCESS_PTR, (E.StringImm(buf.dtype), buf.data, start + line * per_line,
                                            E.const(1, start.dtype), E.StringImm("r")))
    stmt: S.Stmt = S.Evaluate(E.Call("int32", PREFETCH, (address,)))
    stmt = S.For(line, E.const(0, "int32"), E.const(lines, "int32"), S.ForKind.SERIAL, stmt)
    for v, (_, extent) in reversed(list(zip(outer, region[:split]))):
        stmt = S.For(v, E.const(0, "int32"), E.const(extent, "int32"), S.ForKind.SERIAL, stmt)
    return stmt
