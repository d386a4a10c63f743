"""The Analyzer: what is known about variables, and the questions it answers."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from ..tir import expr as E
from ..tir.analysis import conjuncts, free_vars
from .bound import ConstBounder
from .canonical import LinearSum, expr_key, flatten, is_index_dtype
from .interval import IntervalEval
from .rewrite import Simplifier

__all__ = ["Analyzer", "simplify"]

# How deep symbolic proofs (which simplify interval endpoints, which may need
# proofs again) may nest before falling back to constant bounds only.
_MAX_SYMBOLIC_DEPTH = 2


def _const_or_none(e) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


class Analyzer:
    """Arithmetic facts about variables and the simplifier/prover that uses them.

    Bounds are closed intervals ``[lo, hi]`` whose ends are expressions (possibly
    symbolic) or None for "unbounded". Constant bounds drive most decisions;
    symbolic ones let it prove ``i < n`` for ``i`` bound to ``Range(0, n)``.
    """

    def __init__(self) -> None:
        self._bounds: dict[E.Var, tuple[E.PrimExpr | None, E.PrimExpr | None]] = {}
        self._visiting: set[E.Var] = set()
        self._symbolic_depth = 0
        self._bounder = ConstBounder(self._var_const_bound)
        self._simplifier = Simplifier(self)

    # -- facts -------------------------------------------------------------------------

    def bind(self, var: E.Var, bounds) -> None:
        """Declare the range of ``var``: a :class:`~compiler.tir.Range` ``(min, extent)``
        or an inclusive ``(lo, hi)`` pair of ints/expressions (either may be None)."""
        if isinstance(var, E.IterVar):
            var = var.var
        if isinstance(bounds, E.Range):
            lo = E.convert(bounds.min)
            hi = self.simplify(E.Sub(E.Add(lo, E.convert(bounds.extent), lo.dtype),
                                     E.IntImm(1, lo.dtype), lo.dtype))
        else:
            lo, hi = bounds
            lo = None if lo is None else _as_dtype(lo, var.dtype)
            hi = None if hi is None else _as_dtype(hi, var.dtype)
        self._bounds[var] = (lo, hi)

    def unbind(self, var: E.Var) -> None:
        """Forget what is known about ``var``."""
        self._bounds.pop(var, None)

    @contextlib.contextmanager
    def bound(self, var: E.Var, bounds) -> Iterator[None]:
        """``bind`` for the duration of a ``with`` block, restoring what was known before."""
        old = self._bounds.get(var)
        self.bind(var, bounds)
        try:
            yield
        finally:
            if old is None:
                self._bounds.pop(var, None)
            else:
                self._bounds[var] = old

    @contextlib.contextmanager
    def substituting(self, mapping: dict) -> Iterator[None]:
        """Inside a ``with`` block, simplify as if each variable of ``mapping`` had been
        replaced by its value (:func:`~compiler.tir.analysis.substitute`, then simplify)
        without rebuilding the expression first: a select whose condition the values decide
        is simplified along the branch taken only."""
        for var in mapping:
            if not isinstance(var, E.Var):  # as substitute: anything else would match nothing
                raise TypeError(f"substituting maps variables, got the key {var!r}")
        saved = self._simplifier.substitutions
        values = {var: self.simplify(value) for var, value in mapping.items()}
        self._simplifier.substitutions = {**saved, **values}
        try:
            yield
        finally:
            self._simplifier.substitutions = saved

    @contextlib.contextmanager
    def constraint(self, cond: E.PrimExpr) -> Iterator[None]:
        """Assume ``cond`` inside a ``with`` block (e.g. in the then-branch of an if).

        Conjuncts of the form ``v < e``, ``v <= e``, ``v > e``, ``v >= e`` and
        ``v == e`` (``v`` a variable, ``e`` free of it) tighten ``v``'s bounds;
        other conditions are ignored, which is sound.
        """
        saved = dict(self._bounds)
        try:
            for c in conjuncts(self.simplify(cond)):
                self._assume(c)
            yield
        finally:
            self._bounds = saved

    def _assume(self, c: E.PrimExpr) -> None:
        if not isinstance(c, (E.LT, E.LE, E.GT, E.GE, E.EQ)) or not is_index_dtype(c.a.dtype):
            return
        diff = flatten(c.a) - flatten(c.b)  # cond: diff OP 0
        for atom, coef in diff.terms.values():
            if not isinstance(atom, E.Var) or coef not in (1, -1):
                continue
            rest = diff.copy()
            rest.add_term(atom, -coef)
            rest_e = rest.scaled(-coef).to_expr()  # v OP' rest_e
            if any(v is atom for v in free_vars(rest_e)):
                continue
            op = type(c) if coef == 1 else {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT,
                                             E.GE: E.LE, E.EQ: E.EQ}[type(c)]
            one = E.IntImm(1, rest.dtype)
            lo = hi = None
            if op is E.LT:
                hi = E.Sub(rest_e, one, rest.dtype)
            elif op is E.LE:
                hi = rest_e
            elif op is E.GT:
                lo = E.Add(rest_e, one, rest.dtype)
            elif op is E.GE:
                lo = rest_e
            else:
                lo = hi = rest_e
            old_lo, old_hi = self._bounds.get(atom, (None, None))
            if lo is not None and old_lo is not None:
                lo = E.Max(old_lo, lo, lo.dtype)
            if hi is not None and old_hi is not None:
                hi = E.Min(old_hi, hi, hi.dtype)
            self._bounds[atom] = (self.simplify(lo) if lo is not None else old_lo,
                                  self.simplify(hi) if hi is not None else old_hi)
            return

    # -- questions ---------------------------------------------------------------------

    def simplify(self, expr) -> E.PrimExpr:
        """The simplified, canonical form of ``expr`` (same dtype)."""
        return self._simplifier.visit(E.convert(expr))

    def can_prove(self, cond) -> bool:
        """True only when ``cond`` certainly holds under the known facts."""
        c = self.simplify(cond)
        if isinstance(c, E.IntImm):
            return bool(c.value)
        if isinstance(c, E.And):
            return self.can_prove(c.a) and self.can_prove(c.b)
        if isinstance(c, E.Or):
            return self.can_prove(c.a) or self.can_prove(c.b)
        return False

    def can_prove_equal(self, a, b) -> bool:
        """Whether ``a`` and ``b`` certainly have the same value."""
        a, b = E.convert(a), E.convert(b)
        if is_index_dtype(a.dtype) and is_index_dtype(b.dtype):
            s = self._simplifier
            diff = s.merge_divmod(s.to_sum(a) - s.to_sum(b))
            return diff.is_const and diff.const == 0
        return expr_key(self.simplify(a)) == expr_key(self.simplify(b))

    def const_int_bound(self, expr) -> tuple[int | None, int | None]:
        """Inclusive constant bounds of an integer expression; None where unbounded."""
        e = E.convert(expr)
        if is_index_dtype(e.dtype):
            s = self._simplifier
            lo, hi = self._bounder.sum_bound(s.merge_divmod(s.to_sum(e)))
        else:
            lo, hi = self._bounder.bound(self.simplify(e))
        return (None if math.isinf(lo) else int(lo)), (None if math.isinf(hi) else int(hi))

    def lower_bound(self, expr) -> int | None:
        """The constant lower bound of ``expr``, or None."""
        return self.const_int_bound(expr)[0]

    def upper_bound(self, expr) -> int | None:
        """The constant upper bound of ``expr``, or None."""
        return self.const_int_bound(expr)[1]

    def interval(self, expr, relax: dict) -> tuple[E.PrimExpr | None, E.PrimExpr | None]:
        """Closed interval ``(lo, hi)`` of ``expr`` when each variable ``v`` in ``relax``
        ranges over ``relax[v] = (lo, hi)`` (inclusive, expressions that may mention other
        relaxed variables) and every other variable is a fixed unknown point. None marks an
        unbounded side."""
        e = self.simplify(expr)
        if not relax:
            return e, e
        lo, hi = IntervalEval(self, relax).get(e)
        return (None if lo is None else self.simplify(lo),
                None if hi is None else self.simplify(hi))

    # -- internals used by the simplifier ----------------------------------------------

    def _var_const_bound(self, var: E.Var) -> tuple[int | None, int | None] | None:
        entry = self._bounds.get(var)
        if entry is None or var in self._visiting:
            return None
        lo_e, hi_e = entry
        self._visiting.add(var)
        try:
            lo = None if lo_e is None else _const_or_none(lo_e)
            hi = None if hi_e is None else _const_or_none(hi_e)
            if lo is None and lo_e is not None:
                b = self._bounder.bound(lo_e)[0]
                lo = None if math.isinf(b) else b
            if hi is None and hi_e is not None:
                b = self._bounder.bound(hi_e)[1]
                hi = None if math.isinf(b) else b
        finally:
            self._visiting.discard(var)
        return lo, hi

    def _sum_bound(self, s: LinearSum) -> tuple:
        return self._bounder.sum_bound(s)

    def _symbolic_relax(self, e: E.PrimExpr) -> dict:
        relax = {}
        for v in free_vars(e):
            entry = self._bounds.get(v)
            if entry is None:
                continue
            lo, hi = entry
            if (lo is not None and not isinstance(lo, E.IntImm)) or \
                    (hi is not None and not isinstance(hi, E.IntImm)):
                relax[v] = (lo, hi)
        return relax

    def _symbolic_side(self, s: LinearSum, upper: bool) -> float | int | None:
        """Constant bound of ``s`` after relaxing symbolically bounded variables."""
        if self._symbolic_depth >= _MAX_SYMBOLIC_DEPTH or s.is_const:
            return None
        e = s.to_expr()
        relax = self._symbolic_relax(e)
        if not relax:
            return None
        self._symbolic_depth += 1
        try:
            lo, hi = IntervalEval(self, relax).get(e)
            end = hi if upper else lo
            if end is None:
                return None
            b = self._bounder.bound(self.simplify(end))
            return b[1] if upper else b[0]
        finally:
            self._symbolic_depth -= 1

    def _prove_sum_le(self, s: LinearSum, k: int) -> bool:
        if self._bounder.sum_bound(s)[1] <= k:
            return True
        hi = self._symbolic_side(s, upper=True)
        return hi is not None and hi <= k

    def _prove_sum_ge(self, s: LinearSum, k: int) -> bool:
        if self._bounder.sum_bound(s)[0] >= k:
            return True
        lo = self._symbolic_side(s, upper=False)
        return lo is not None and lo >= k


def _as_dtype(value, dtype: str) -> E.PrimExpr:
    e = E.convert(value)
    if isinstance(e, E.IntImm) and e.dtype != dtype:
        return E.IntImm(e.value, dtype)
    return e


def simplify(expr, analyzer: Analyzer | None = None) -> E.PrimExpr:
    """Simplify ``expr`` (with the facts of ``analyzer`` when given)."""
    return (analyzer or Analyzer()).simplify(expr)
