"""Symbolic interval arithmetic: the closed range of an integer expression when some
variables range over (possibly symbolic) bounds and the rest stay fixed.

This is what bound inference and loop partitioning use: relaxing ``xi`` in
``[0, 7]`` in ``xo*8 + xi`` gives ``[xo*8, xo*8 + 7]``. ``None`` stands for an
unbounded side. Results are sound over-approximations, exact for monotone
affine expressions in which each relaxed variable appears once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes
from ..tir import expr as E
from ..tir.analysis import substitute, uses_var
from ..tir.functor import Functor
from .bound import ConstBounder
from .canonical import int_const, is_index_dtype

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["IntervalEval"]

Interval = tuple  # (lo_expr | None, hi_expr | None)


def _lo_min(a, b):
    return None if a is None or b is None else E.Min(a, b, a.dtype)


def _hi_min(a, b):
    return b if a is None else a if b is None else E.Min(a, b, a.dtype)


def _lo_max(a, b):
    return b if a is None else a if b is None else E.Max(a, b, a.dtype)


def _hi_max(a, b):
    return None if a is None or b is None else E.Max(a, b, a.dtype)


class IntervalEval(Functor):
    """Computes intervals of simplified expressions; ``relax`` maps ``var -> (lo, hi)``."""

    def __init__(self, analyzer: Analyzer, relax: dict):
        self.an = analyzer
        self.relax = dict(relax)
        self._active: set[E.Var] = set()  # relaxed variables being expanded (cycle protection)

    def get(self, e: E.PrimExpr) -> Interval:
        if not uses_var(e, self.relax):
            return e, e
        if not is_index_dtype(e.dtype):
            return self._fallback(e)
        return self.visit(e)

    def generic_visit(self, e: E.PrimExpr) -> Interval:
        return self._fallback(e)

    def visit_Var(self, e: E.Var) -> Interval:
        if e in self._active:
            return None, None
        lo_b, hi_b = self.relax[e]
        self._active.add(e)
        try:
            lo = None if lo_b is None else self.get(E.convert(lo_b))[0]
            hi = None if hi_b is None else self.get(E.convert(hi_b))[1]
        finally:
            self._active.discard(e)
        return lo, hi

    def visit_Add(self, e) -> Interval:
        (a0, a1), (b0, b1) = self.get(e.a), self.get(e.b)
        dt = e.dtype
        return (None if a0 is None or b0 is None else E.Add(a0, b0, dt),
                None if a1 is None or b1 is None else E.Add(a1, b1, dt))

    def visit_Sub(self, e) -> Interval:
        (a0, a1), (b0, b1) = self.get(e.a), self.get(e.b)
        dt = e.dtype
        return (None if a0 is None or b1 is None else E.Sub(a0, b1, dt),
                None if a1 is None or b0 is None else E.Sub(a1, b0, dt))

    def visit_Mul(self, e) -> Interval:
        x, c = (e.a, e.b) if isinstance(e.b, E.IntImm) else (e.b, e.a)
        if not isinstance(c, E.IntImm):
            return self._fallback(e)
        lo, hi = self.get(x)
        dt = e.dtype
        scale = (lambda v: None if v is None else E.Mul(v, c, dt))
        return (scale(lo), scale(hi)) if c.value >= 0 else (scale(hi), scale(lo))

    def _divide(self, e, op) -> Interval:
        if not isinstance(e.b, E.IntImm) or e.b.value == 0:
            return self._fallback(e)
        lo, hi = self.get(e.a)
        # floor and truncating division are both monotone in the numerator.
        div = (lambda v: None if v is None else op(v, e.b, e.dtype))
        return (div(lo), div(hi)) if e.b.value > 0 else (div(hi), div(lo))

    def visit_FloorDiv(self, e) -> Interval:
        return self._divide(e, E.FloorDiv)

    def visit_Div(self, e) -> Interval:
        return self._divide(e, E.Div)

    def visit_FloorMod(self, e) -> Interval:
        if not isinstance(e.b, E.IntImm) or e.b.value == 0:
            return self._fallback(e)
        c, dt = e.b.value, e.dtype
        if c < 0:
            return int_const(c + 1, dt), int_const(0, dt)
        lo, hi = self.get(e.a)
        if lo is not None and hi is not None:
            periods = self.an.simplify(E.Sub(E.FloorDiv(hi, e.b, dt), E.FloorDiv(lo, e.b, dt), dt))
            if isinstance(periods, E.IntImm) and periods.value == 0:
                return E.FloorMod(lo, e.b, dt), E.FloorMod(hi, e.b, dt)
        return int_const(0, dt), int_const(c - 1, dt)

    def visit_Min(self, e) -> Interval:
        (a0, a1), (b0, b1) = self.get(e.a), self.get(e.b)
        return _lo_min(a0, b0), _hi_min(a1, b1)

    def visit_Max(self, e) -> Interval:
        (a0, a1), (b0, b1) = self.get(e.a), self.get(e.b)
        return _lo_max(a0, b0), _hi_max(a1, b1)

    def visit_Select(self, e) -> Interval:
        (a0, a1), (b0, b1) = self.get(e.true_value), self.get(e.false_value)
        return _lo_min(a0, b0), _hi_max(a1, b1)

    def visit_Cast(self, e: E.Cast) -> Interval:
        src = e.value.dtype
        if is_index_dtype(src) and dtypes.bits(e.dtype) >= dtypes.bits(src):
            lo, hi = self.get(e.value)
            return (None if lo is None else E.Cast(e.dtype, lo),
                    None if hi is None else E.Cast(e.dtype, hi))
        return self._fallback(e)

    def visit_Let(self, e: E.Let) -> Interval:
        return self.get(substitute(e.body, {e.var: e.value}))

    def _fallback(self, e: E.PrimExpr) -> Interval:
        """Constant bounds, with every relaxed variable at its constant bounds."""

        def var_bound(v: E.Var):
            if v in self.relax:
                lo, hi = self.visit_Var(v)
                return (None if lo is None else self.an.const_int_bound(lo)[0],
                        None if hi is None else self.an.const_int_bound(hi)[1])
            return self.an._var_const_bound(v)

        if not (dtypes.is_int(e.dtype) or e.dtype == "bool"):
            return None, None
        lo, hi = ConstBounder(var_bound).bound(e)
        dt = e.dtype
        return (None if lo == -float("inf") else int_const(lo, dt),
                None if hi == float("inf") else int_const(hi, dt))
