"""Helpers on shapes and constant expressions, as in TVM's ``topi.utils``."""

from __future__ import annotations

from ..arith import Analyzer
from ..tir.expr import IntImm, Var, convert

__all__ = ["get_const_int", "get_const_tuple"]

def get_const_int(expr) -> int:
    """The value of a constant integer expression; ``ValueError`` if it is not constant."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    e = convert(expr)
    if not isinstance(e, IntImm):
        e = Analyzer().simplify(e)
    if not isinstance(e, IntImm) or e.dtype == "bool":
        raise ValueError(f"expected a constant integer, got {expr}")
    return e.value

def get_const_tuple(in_tuple) -> tuple:
    """The entries of a shape as ints where they are constant.

    Symbolic entries stay expressions (a ``te.var`` as itself, other expressions
    simplified), so ``get_const_tuple(A.shape)`` works for symbolic shapes as in TVM.
    """
    out: list = []
    analyzer = Analyzer()
    for elem in in_tuple:
        if isinstance(elem, Var):
            out.append(elem)
            continue
        e = convert(elem)
        if not isinstance(e, IntImm):
            e = analyzer.simplify(e)
        out.append(e.value if isinstance(e, IntImm) else e)
    return tuple(out)
