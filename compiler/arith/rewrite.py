"""The expression simplifier: constant folding plus canonical index arithmetic.

Signed integer arithmetic is rewritten through :class:`LinearSum` (so terms
merge and cancel, and divisions by constants split exactly); every other dtype
is only constant-folded and stripped of ``x + 0`` / ``x * 1``. Floats are never
reassociated. Facts about variables come from the :class:`Analyzer`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .. import dtypes
from ..tir import expr as E
from ..tir.evaluate import binary_value, cast_value, evaluate, wrap_int
from ..tir.functor import Functor, IRMutator
from ..tir.op import INT_OPS
from .canonical import LinearSum, bool_const, expr_key, flatten, int_const, is_index_dtype

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["Simplifier"]

_CONST = (E.IntImm, E.FloatImm)
_NEGATE = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}


def _make_const(value, dtype: str) -> E.PrimExpr:
    if dtypes.is_float(dtype):
        return E.FloatImm(float(value), dtype)
    return E.IntImm(int(value), dtype)


class Simplifier(IRMutator):
    """Simplifies expressions; ``visit(expr)`` returns the simplified expression."""

    def __init__(self, analyzer: Analyzer):
        self.an = analyzer
        self._sums = _ToSum(self)
        # Variables replaced as they are met (Analyzer.substituting): values already simple.
        self.substitutions: dict[E.Var, E.PrimExpr] = {}

    def visit_Var(self, e: E.Var) -> E.PrimExpr:
        return self.substitutions.get(e, e)

    # -- canonical integer arithmetic --------------------------------------------------

    def _canonical(self, e: E.PrimExpr) -> E.PrimExpr:
        if not is_index_dtype(e.dtype):
            return self._generic_arith(e)
        return self.merge_divmod(self.to_sum(e)).to_expr()

    visit_Add = visit_Sub = visit_Mul = visit_FloorDiv = visit_FloorMod = _canonical

    def visit_Div(self, e: E.Div) -> E.PrimExpr:
        return self._canonical(e)

    visit_Mod = visit_Div

    def visit_Min(self, e) -> E.PrimExpr:
        return self._canonical(e)

    visit_Max = visit_Min

    def to_sum(self, e: E.PrimExpr) -> LinearSum:
        """The simplified canonical sum of a signed integer expression."""
        if is_index_dtype(e.dtype):
            return self._sums.visit(e)
        return flatten(self.visit(e))

    def _mul(self, sa: LinearSum, sb: LinearSum) -> LinearSum:
        if sa.is_const:
            return sb.scaled(sa.const)
        if sb.is_const:
            return sa.scaled(sb.const)
        return LinearSum.atom(E.Mul(sa.to_expr(), sb.to_expr(), sa.dtype))

    def _fold_int(self, op, sa: LinearSum, sb: LinearSum) -> LinearSum | None:
        if sa.is_const and sb.is_const and sb.const != 0:
            # Sums keep constants unwrapped; the operation sees them as the machine would.
            dt = sa.dtype
            return LinearSum(dt, binary_value(op, wrap_int(sa.const, dt), wrap_int(sb.const, dt), dt))
        return None

    def floordiv(self, sa: LinearSum, sb: LinearSum) -> LinearSum:
        """``sa // sb`` (floor); exact splits ``(x*8 + y) // 8 -> x + y // 8``."""
        dt = sa.dtype
        folded = self._fold_int(E.FloorDiv, sa, sb)
        if folded is not None:
            return folded
        if not sb.is_const or sb.const == 0:
            return LinearSum.atom(E.FloorDiv(sa.to_expr(), sb.to_expr(), dt))
        c = sb.const
        if c == 1:
            return sa
        if c == -1:
            return sa.scaled(-1)
        if c < 0:
            return LinearSum.atom(E.FloorDiv(sa.to_expr(), int_const(c, dt), dt))
        quot, rest = LinearSum(dt, sa.const // c), LinearSum(dt, sa.const % c)
        for key, (atom, coef) in sa.terms.items():
            if coef % c == 0:
                quot.add_term(atom, coef // c, key)
            else:
                rest.add_term(atom, coef, key)
        # floor((g*M + g*q + r) / (g*c')) == floor((M + q) / c') when 0 <= r < g.
        g = math.gcd(c, *(coef for _, coef in rest.terms.values()))
        if g > 1 and rest.terms:
            rest = LinearSum(dt, rest.const // g,
                             {k: [a, coef // g] for k, (a, coef) in rest.terms.items()})
            c //= g
        return quot.iadd(self._floordiv_core(rest, c))

    def _floordiv_core(self, rest: LinearSum, c: int) -> LinearSum:
        dt = rest.dtype
        if rest.is_const:
            return LinearSum(dt, rest.const // c)
        lo, hi = self.an._sum_bound(rest)
        if not math.isinf(lo) and not math.isinf(hi) and lo // c == hi // c:
            return LinearSum(dt, lo // c)
        inner = rest.single_atom()
        if isinstance(inner, E.FloorDiv) and isinstance(inner.b, E.IntImm) and inner.b.value > 0:
            return self.floordiv(flatten(inner.a), LinearSum(dt, inner.b.value * c))
        return LinearSum.atom(E.FloorDiv(rest.to_expr(), int_const(c, dt), dt))

    def floormod(self, sa: LinearSum, sb: LinearSum) -> LinearSum:
        """``sa % sb`` (floor); drops multiples of the divisor, removes it when in range."""
        dt = sa.dtype
        folded = self._fold_int(E.FloorMod, sa, sb)
        if folded is not None:
            return folded
        if not sb.is_const or sb.const == 0:
            return LinearSum.atom(E.FloorMod(sa.to_expr(), sb.to_expr(), dt))
        c = sb.const
        if c in (1, -1):
            return LinearSum(dt)
        if c < 0:
            return LinearSum.atom(E.FloorMod(sa.to_expr(), int_const(c, dt), dt))
        rest = LinearSum(dt, sa.const % c)
        for key, (atom, coef) in sa.terms.items():
            # Shrink coefficients towards zero, keeping their sign (x*9 % 8 == x % 8).
            coef = coef % c if coef > 0 else -((-coef) % c)
            rest.add_term(atom, coef, key)
        g = math.gcd(c, *(coef for _, coef in rest.terms.values())) if rest.terms else 1
        if g > 1:
            # (g*M + g*q + r) % (g*c') == g * ((M + q) % c') + r when 0 <= r < g.
            q, r = divmod(rest.const, g)
            inner = LinearSum(dt, q, {k: [a, coef // g] for k, (a, coef) in rest.terms.items()})
            out = self._floormod_core(inner, c // g).scaled(g)
            out.const += r
            return out
        return self._floormod_core(rest, c)

    def _floormod_core(self, rest: LinearSum, c: int) -> LinearSum:
        dt = rest.dtype
        if rest.is_const:
            return LinearSum(dt, rest.const % c)
        lo, hi = self.an._sum_bound(rest)
        if not math.isinf(lo) and not math.isinf(hi) and lo // c == hi // c:
            out = rest.copy()
            out.const -= (lo // c) * c
            return out
        inner = rest.single_atom()
        if isinstance(inner, E.FloorMod) and isinstance(inner.b, E.IntImm) and inner.b.value % c == 0:
            return self.floormod(flatten(inner.a), LinearSum(dt, c))
        return LinearSum.atom(E.FloorMod(rest.to_expr(), int_const(c, dt), dt))

    def _truncdiv(self, sa: LinearSum, sb: LinearSum) -> LinearSum:
        folded = self._fold_int(E.Div, sa, sb)
        if folded is not None:
            return folded
        if sb.is_const and sb.const == 1:
            return sa
        # Truncation equals flooring when the numerator cannot be negative.
        if sb.is_const and sb.const > 0 and self.an._sum_bound(sa)[0] >= 0:
            return self.floordiv(sa, sb)
        return LinearSum.atom(E.Div(sa.to_expr(), sb.to_expr(), sa.dtype))

    def _truncmod(self, sa: LinearSum, sb: LinearSum) -> LinearSum:
        folded = self._fold_int(E.Mod, sa, sb)
        if folded is not None:
            return folded
        if sb.is_const and sb.const in (1, -1):
            return LinearSum(sa.dtype)
        # The remainders agree when the numerator cannot be negative.
        if sb.is_const and sb.const > 0 and self.an._sum_bound(sa)[0] >= 0:
            return self.floormod(sa, sb)
        return LinearSum.atom(E.Mod(sa.to_expr(), sb.to_expr(), sa.dtype))

    def _minmax(self, op, sa: LinearSum, sb: LinearSum) -> LinearSum:
        folded = self._fold_int(op, sa, sb)
        if folded is not None:
            return folded
        diff = self.merge_divmod(sa - sb)
        if self.an._prove_sum_le(diff, 0):
            return sa if op is E.Min else sb
        if self.an._prove_sum_ge(diff, 0):
            return sb if op is E.Min else sa
        return LinearSum.atom(op(sa.to_expr(), sb.to_expr(), sa.dtype))

    def merge_divmod(self, s: LinearSum) -> LinearSum:
        """Use ``c*(A//c) + A%c == A`` wherever it makes the sum simpler.

        ``(n//8)*8 - n -> 0 - n%8``, ``(f//10)*10 + f%10 + 3 -> f + 3``,
        ``((x+y)//4)*4 + (x+y)%4 -> x + y``, ``(x//4)*5 + x%4 -> x + x//4``. Simpler means
        a smaller :func:`_divmod_cost` (terms plus divisions), so rewriting terminates.
        """
        changed = True
        while changed and len(s.terms) > 1:
            changed = False
            for atom, coef in list(s.terms.values()):
                if not (isinstance(atom, (E.FloorDiv, E.FloorMod)) and isinstance(atom.b, E.IntImm)
                        and atom.b.value > 0 and is_index_dtype(atom.dtype)):
                    continue
                c = atom.b.value
                num = flatten(atom.a)
                cand = s.copy()
                cand.add_term(atom, -coef)
                if isinstance(atom, E.FloorDiv):
                    if coef % c:
                        continue
                    m = coef // c
                    cand.iadd(num, m).iadd(self.floormod(num, LinearSum(atom.dtype, c)), -m)
                else:
                    cand.iadd(num, coef).iadd(self.floordiv(num, LinearSum(atom.dtype, c)), -coef * c)
                if _divmod_cost(cand) < _divmod_cost(s):
                    s, changed = cand, True
                    break
        return s

    # -- comparisons and logic ---------------------------------------------------------

    def _compare(self, e: E.CmpOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        op = type(e)
        if isinstance(a, _CONST) and isinstance(b, _CONST):
            return bool_const(binary_value(op, a.value, b.value, a.dtype))
        if not is_index_dtype(a.dtype):
            return e if a is e.a and b is e.b else op(a, b, "bool")
        if op is E.GT:
            op, a, b = E.LT, b, a
        elif op is E.GE:
            op, a, b = E.LE, b, a
        diff = self.merge_divmod(flatten(a) - flatten(b))
        decided = self._decide(op, diff)
        if decided is not None:
            return bool_const(decided)
        g = math.gcd(*(coef for _, coef in diff.terms.values()))
        if g > 1:
            # Divide through by the common factor: x*4 - 36 < 0  ->  x - 9 < 0.
            c0 = diff.const
            if op in (E.EQ, E.NE) and c0 % g:
                return bool_const(op is E.NE)
            new_const = c0 // g if op is E.LT else -((-c0) // g)
            diff = LinearSum(diff.dtype, new_const,
                             {k: [a, coef // g] for k, (a, coef) in diff.terms.items()})
        lhs, rhs = LinearSum(diff.dtype), LinearSum(diff.dtype)
        for key, (atom, coef) in diff.terms.items():
            if coef > 0:
                lhs.add_term(atom, coef, key)
            else:
                rhs.add_term(atom, -coef, key)
        if lhs.terms:
            rhs.const = -diff.const
        else:
            lhs.const = diff.const
        return op(lhs.to_expr(), rhs.to_expr(), "bool")

    visit_LT = visit_LE = visit_GT = visit_GE = visit_EQ = visit_NE = _compare

    def _decide(self, op, diff: LinearSum) -> bool | None:
        an = self.an
        if op is E.LT:
            return True if an._prove_sum_le(diff, -1) else False if an._prove_sum_ge(diff, 0) else None
        if op is E.LE:
            return True if an._prove_sum_le(diff, 0) else False if an._prove_sum_ge(diff, 1) else None
        if diff.is_const:
            return (diff.const == 0) == (op is E.EQ)
        if an._prove_sum_ge(diff, 1) or an._prove_sum_le(diff, -1):
            return op is E.NE
        return None

    def visit_And(self, e: E.And) -> E.PrimExpr:
        return self._logical(e, absorbing=0)

    def visit_Or(self, e: E.Or) -> E.PrimExpr:
        return self._logical(e, absorbing=1)

    def _logical(self, e, absorbing: int) -> E.PrimExpr:
        a = self.visit(e.a)
        if isinstance(a, E.IntImm):
            return bool_const(absorbing) if bool(a.value) == bool(absorbing) else self.visit(e.b)
        b = self.visit(e.b)
        if isinstance(b, E.IntImm):
            return bool_const(absorbing) if bool(b.value) == bool(absorbing) else a
        if expr_key(a) == expr_key(b):
            return a
        return e if a is e.a and b is e.b else type(e)(a, b, "bool")

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        if isinstance(a, E.IntImm):
            return bool_const(not a.value)
        if isinstance(a, E.Not):
            return a.a
        # Negating a comparison is exact for integers (no NaN to worry about).
        if isinstance(a, E.CmpOp) and not dtypes.is_float(a.a.dtype):
            return self.visit(_NEGATE[type(a)](a.a, a.b, "bool"))
        return e if a is e.a else E.Not(a, e.dtype)

    # -- other expressions -------------------------------------------------------------

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.IntImm):
            return self.visit(e.true_value if cond.value else e.false_value)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if expr_key(t) == expr_key(f):
            return t
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f, e.dtype)

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, _CONST):
            try:
                return _make_const(cast_value(v.value, e.dtype), e.dtype)
            except ValueError:  # NaN or infinity to an integer: leave it to run time
                pass
        # int32(int64(x)) where x is int32: widening then narrowing back is the identity.
        if (isinstance(v, E.Cast) and v.value.dtype == e.dtype and dtypes.is_int(e.dtype)
                and dtypes.is_int(v.dtype) and dtypes.bits(v.dtype) >= dtypes.bits(e.dtype)):
            return v.value
        return e if v is e.value else E.Cast(e.dtype, v)

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        call = self.generic_visit(e)
        if call.op not in INT_OPS or not all(isinstance(a, _CONST) for a in call.args):
            return call
        if call.op in ("shift_left", "shift_right") and not 0 <= call.args[1].value < dtypes.bits(call.dtype):
            return call  # undefined: left to the machine, as C leaves it
        return _make_const(evaluate(call), call.dtype)

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            with self.an.substituting({e.var: value}):
                return self.visit(e.body)
        with self.an.bound(e.var, (value, value)):
            body = self.visit(e.body)
        return E.Let(e.var, value, body, e.dtype)

    def _generic_arith(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        op = type(e)
        if isinstance(a, _CONST) and isinstance(b, _CONST):
            try:
                return _make_const(binary_value(op, a.value, b.value, e.dtype), e.dtype)
            except ZeroDivisionError:
                pass
        is_float = dtypes.is_float(e.dtype)
        if op is E.Add and _is_value(b, 0):
            return a
        if op is E.Add and _is_value(a, 0):
            return b
        if op is E.Sub and _is_value(b, 0):
            return a
        if op is E.Mul and _is_value(b, 1):
            return a
        if op is E.Mul and _is_value(a, 1):
            return b
        if _is_value(b, 1) and (op is E.Div or (op is E.FloorDiv and not is_float)):
            return a
        if op in (E.Min, E.Max) and expr_key(a) == expr_key(b):
            return a
        return e if a is e.a and b is e.b else op(a, b, e.dtype)


def _divmod_cost(s: LinearSum) -> int:
    """How complex a sum is for :meth:`Simplifier.merge_divmod`: its terms, and its
    ``//``/``%`` terms once more (so trading ``(A//c)*c + A%c`` for ``A``'s terms pays off)."""
    return sum(2 if isinstance(atom, (E.FloorDiv, E.FloorMod)) else 1 for atom, _ in s.terms.values())


def _is_value(e: E.PrimExpr, v) -> bool:
    return isinstance(e, _CONST) and e.value == v and e.dtype != "bool"


class _ToSum(Functor):
    """Canonical sums of index-dtype arithmetic, built from the sums of the operands; any
    other node is simplified, then read as a sum."""

    def __init__(self, simplifier: Simplifier):
        self.s = simplifier

    def visit_IntImm(self, e):
        return LinearSum(e.dtype, e.value)

    def visit_Var(self, e):
        # The commonest leaf, read directly (generic_visit would simplify it, then flatten it).
        value = self.s.substitutions.get(e)
        return LinearSum.atom(e) if value is None else flatten(value)

    def visit_Add(self, e):
        return self.s.to_sum(e.a).iadd(self.s.to_sum(e.b))

    def visit_Sub(self, e):
        return self.s.to_sum(e.a).iadd(self.s.to_sum(e.b), -1)

    def visit_Mul(self, e):
        return self.s._mul(self.s.to_sum(e.a), self.s.to_sum(e.b))

    def visit_FloorDiv(self, e):
        return self.s.floordiv(self.s.to_sum(e.a), self.s.to_sum(e.b))

    def visit_FloorMod(self, e):
        return self.s.floormod(self.s.to_sum(e.a), self.s.to_sum(e.b))

    def visit_Div(self, e):
        return self.s._truncdiv(self.s.to_sum(e.a), self.s.to_sum(e.b))

    def visit_Mod(self, e):
        return self.s._truncmod(self.s.to_sum(e.a), self.s.to_sum(e.b))

    def visit_Min(self, e):
        return self.s._minmax(type(e), self.s.to_sum(e.a), self.s.to_sum(e.b))

    visit_Max = visit_Min

    def generic_visit(self, e):
        return flatten(self.s.visit(e))
