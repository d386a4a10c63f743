"""The integer type of index arithmetic, chosen so that it cannot wrap.

A wrapped index makes a kernel skip or overwrite elements. Loops and indices count
in the dtype of the sizes they run over, widened to int64 where that is not enough:

* a size of a 64-bit dtype (``te.var(name, "int64")``) makes int64 loops and indices;
* a size that mentions an int32 variable stays int32, and the runtime refuses
  arrays of :data:`INT32_INDEX_LIMIT` elements or more for it
  (:mod:`compiler.runtime.arguments`);
* constant shapes of :data:`INT32_INDEX_LIMIT` elements or more make int64 loops.

The limit leaves int32 arithmetic room above the last element: a loop split by ``f``
runs up to ``f - 1`` past the extent before its guard stops it.
"""

from __future__ import annotations

from .. import dtypes
from ..dtypes import INT32_INDEX_LIMIT
from .analysis import free_vars
from .expr import Cast, IntImm, PrimExpr, Var, convert, is_const_int
from .functor import IRMutator

__all__ = ["INT32_INDEX_LIMIT", "index_dtype", "widen", "as_index"]


def as_index(e, dtype: str) -> PrimExpr:
    """``e`` as an index expression of ``dtype``: constants retyped, others cast."""
    e = convert(e)
    if e.dtype == dtype:
        return e
    if isinstance(e, IntImm):
        return IntImm(e.value, dtype)
    return e.astype(dtype)


def index_dtype(extents) -> str:
    """The dtype to count over ``extents`` (a shape, or a domain's min and extent) in."""
    extents = [convert(e) for e in extents]
    if any(dtypes.bits(e.dtype) > 32 for e in extents):
        return "int64"
    if any(not is_const_int(e) for e in extents):
        # Symbolic in int32 variables: the runtime bounds the arrays they describe.
        return "int32" if all(dtypes.bits(v.dtype) <= 32 for e in extents for v in free_vars(e)) else "int64"
    total = 1
    for e in extents:
        total *= max(e.value, 1)
    return "int32" if total < INT32_INDEX_LIMIT else "int64"


def widen(e, dtype: str = "int64") -> PrimExpr:
    """``e`` computed in ``dtype``: narrower integer variables and constants are widened
    before the arithmetic on them, not after it."""
    e = convert(e)
    if not dtypes.is_int(e.dtype) or dtypes.bits(e.dtype) >= dtypes.bits(dtype):
        return e
    return _Widen(dtype).visit(e)


class _Widen(IRMutator):
    def __init__(self, dtype: str):
        self.dtype = dtype

    def _to(self, e: PrimExpr) -> PrimExpr:
        return e if e.dtype == self.dtype else Cast(self.dtype, e)

    def generic_visit(self, node):
        return self._to(node)  # anything else (a cast, a call): computed as it is, then widened

    def visit_Var(self, node: Var):
        return self._to(node)

    def visit_IntImm(self, node: IntImm):
        return IntImm(node.value, self.dtype)

    def _binary(self, node):
        return type(node)(self._to(self.visit(node.a)), self._to(self.visit(node.b)), self.dtype)

    visit_Add = visit_Sub = visit_Mul = visit_FloorDiv = visit_FloorMod = visit_Min = visit_Max = _binary
