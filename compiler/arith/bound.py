"""Constant integer bounds: the closed range ``[lo, hi]`` an integer expression can take.

Internally bounds use ``-inf``/``inf`` floats for "unbounded"; the public
:meth:`Analyzer.const_int_bound` turns those into ``None``. Overflow is not
modelled (index arithmetic is assumed not to wrap), as in TVM.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import dtypes
from ..tir import expr as E
from ..tir.functor import Functor
from .canonical import LinearSum, flatten, is_index_dtype

__all__ = ["ConstBounder", "INF"]

INF = math.inf
Bound = tuple  # (lo, hi): ints, or -inf/inf


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return a * b


def _floordiv(a, c):
    if math.isinf(a):
        return a if c > 0 else -a
    return a // c


def _truncdiv(a, c):
    if math.isinf(a):
        return a if c > 0 else -a
    q = abs(a) // abs(c)
    return q if (a >= 0) == (c >= 0) else -q


def _corners(f, x: Bound, y: Bound) -> Bound:
    vals = [f(a, b) for a in x for b in y]
    return min(vals), max(vals)


def dtype_bound(dtype: str) -> Bound:
    """What a value of ``dtype`` can be when nothing else is known."""
    if dtype == "bool":
        return 0, 1
    if dtypes.is_uint(dtype):
        return 0, (2 ** dtypes.bits(dtype) - 1) if dtypes.bits(dtype) <= 16 else INF
    if dtypes.is_int(dtype) and dtypes.bits(dtype) <= 16:
        half = 2 ** (dtypes.bits(dtype) - 1)
        return -half, half - 1
    return -INF, INF


class ConstBounder(Functor):
    """Computes bounds of expressions given bounds of their free variables.

    ``var_bound(var)`` returns ``(lo, hi)`` (ints, None or infinities) or None
    when nothing is known about the variable.
    """

    def __init__(self, var_bound: Callable[[E.Var], tuple | None]):
        self.var_bound = var_bound
        self._lets: dict[E.Var, Bound] = {}

    def bound(self, e: E.PrimExpr) -> Bound:
        if isinstance(e, E.IntImm):
            return e.value, e.value
        if isinstance(e, E.FloatImm) or dtypes.is_float(e.dtype) or e.dtype == "handle":
            return -INF, INF
        lo, hi = self.visit(e)
        dlo, dhi = dtype_bound(e.dtype)
        return max(lo, dlo), min(hi, dhi)

    def sum_bound(self, s: LinearSum) -> Bound:
        """Bound of a canonical sum; pairs ``m*(A+d)//c - m*A//c`` are bounded together."""
        lo = hi = s.const
        items = list(s.terms.values())
        used: set[int] = set()
        for i, (atom, coef) in enumerate(items):
            if i in used:
                continue
            pair = self._find_div_pair(items, i, used)
            if pair is not None:
                plo, phi = pair
            else:
                alo, ahi = self.bound(atom)
                plo, phi = (_mul(alo, coef), _mul(ahi, coef)) if coef > 0 else \
                    (_mul(ahi, coef), _mul(alo, coef))
            lo, hi = lo + plo, hi + phi
        return lo, hi

    def _find_div_pair(self, items, i, used) -> Bound | None:
        atom, coef = items[i]
        if not (isinstance(atom, E.FloorDiv) and isinstance(atom.b, E.IntImm) and atom.b.value > 0):
            return None
        c = atom.b.value
        num = flatten(atom.a)
        for j in range(i + 1, len(items)):
            other, ocoef = items[j]
            if j in used or ocoef != -coef or not isinstance(other, E.FloorDiv):
                continue
            if not (isinstance(other.b, E.IntImm) and other.b.value == c):
                continue
            diff = num - flatten(other.a)
            if not diff.is_const:
                continue
            used.add(j)
            # floor((B + d)/c) - floor(B/c) lies in [floor(d/c), ceil(d/c)].
            d = diff.const
            lo, hi = d // c, -((-d) // c)
            return (lo * coef, hi * coef) if coef > 0 else (hi * coef, lo * coef)
        return None

    # -- per node kind -------------------------------------------------------------------

    def visit_Var(self, e: E.Var) -> Bound:
        if e in self._lets:
            return self._lets[e]
        b = self.var_bound(e)
        if b is None:
            return dtype_bound(e.dtype)
        lo, hi = b
        return (-INF if lo is None else lo), (INF if hi is None else hi)

    def visit_Add(self, e) -> Bound:
        if is_index_dtype(e.dtype):
            return self.sum_bound(flatten(e))
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return a0 + b0, a1 + b1

    def visit_Sub(self, e) -> Bound:
        if is_index_dtype(e.dtype):
            return self.sum_bound(flatten(e))
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return a0 - b1, a1 - b0

    def visit_Mul(self, e) -> Bound:
        return _corners(_mul, self.bound(e.a), self.bound(e.b))

    def _div_like(self, e, f) -> Bound:
        num, den = self.bound(e.a), self.bound(e.b)
        if den[0] > 0 or den[1] < 0:
            return _corners(f, num, den)
        m = max(abs(num[0]), abs(num[1]))
        return -m, m

    def visit_FloorDiv(self, e) -> Bound:
        return self._div_like(e, _floordiv)

    def visit_Div(self, e) -> Bound:
        return self._div_like(e, _truncdiv)

    def visit_FloorMod(self, e) -> Bound:
        (n0, n1), (d0, d1) = self.bound(e.a), self.bound(e.b)
        if d0 > 0:
            if d0 == d1 and not math.isinf(n0) and not math.isinf(n1) and n0 // d0 == n1 // d0:
                return n0 % d0, n1 % d0
            if n0 >= 0:
                return 0, min(n1, d1 - 1)
            return 0, d1 - 1
        if d1 < 0:
            return d0 + 1, 0
        m = max(abs(d0), abs(d1))
        return -(m - 1), m - 1

    def visit_Mod(self, e) -> Bound:
        # truncmod: the sign of the numerator, and smaller in magnitude than the divisor.
        (n0, n1), (d0, d1) = self.bound(e.a), self.bound(e.b)
        if n0 >= 0 and d0 > 0 and n1 < d0:
            return n0, n1
        m = max(abs(d0), abs(d1))
        return (0 if n0 >= 0 else max(n0, -(m - 1))), (0 if n1 <= 0 else min(n1, m - 1))

    def visit_Min(self, e) -> Bound:
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return min(a0, b0), min(a1, b1)

    def visit_Max(self, e) -> Bound:
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return max(a0, b0), max(a1, b1)

    def visit_Select(self, e) -> Bound:
        (a0, a1), (b0, b1) = self.bound(e.true_value), self.bound(e.false_value)
        return min(a0, b0), max(a1, b1)

    def visit_Cast(self, e: E.Cast) -> Bound:
        target = dtype_bound(e.dtype)
        if dtypes.is_float(e.value.dtype):
            return target
        lo, hi = self.bound(e.value)
        if e.dtype == "bool":
            return (1, 1) if lo > 0 or hi < 0 else (0, 0) if lo == hi == 0 else (0, 1)
        if dtypes.is_int(e.dtype) and dtypes.bits(e.dtype) >= 32 and not dtypes.is_uint(e.dtype):
            limit = 2 ** (dtypes.bits(e.dtype) - 1)
            if lo >= -limit and hi < limit:
                return lo, hi
            if dtypes.bits(e.dtype) >= 64:
                # As unbounded as any 64-bit value (dtype_bound): a finite limit of 2**63 would
                # read as a bound and size buffers by it.
                return (lo if lo >= -limit else -INF), (hi if hi < limit else INF)
            return -limit, limit - 1
        if target[0] <= lo and hi <= target[1]:
            return lo, hi
        return target

    def visit_Let(self, e: E.Let) -> Bound:
        self._lets[e.var] = self.bound(e.value)
        try:
            return self.bound(e.body)
        finally:
            del self._lets[e.var]

    def _logical(self, e) -> Bound:
        return 0, 1

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _logical
    visit_And = visit_Or = visit_Not = _logical

    def generic_visit(self, e) -> Bound:
        # Nothing known about this node kind: whatever its dtype allows.
        return dtype_bound(e.dtype)
