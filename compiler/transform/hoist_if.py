"""Move a branch out of the loops it does not depend on (TVM's ``HoistIfThenElse``).

``for v in ...: if cond: body`` where ``cond`` does not read ``v`` becomes
``if cond: for v in ...: body``, again at each loop outward, so a condition of the outer loops
only is tested once per iteration of those, not at every point of the inner ones. Of a
conjunction, the conjuncts that do not read ``v`` move and the others stay. A reduction
whose ``where`` says which kernel taps read the image (a padded convolution's) is the case
in point: its guard is a function of the output row and the tap, but the schedule stores it
with the update, innermost, inside the unrolled register tile; hoisted to the tap's loop, the
loop partitioner then turns it into that loop's bounds.

A condition that reads the loop's variable moves too where it is the same at every iteration:
the register tile's loop over columns ``x`` in ``[4 * xo, 4 * xo + 4)`` and a condition of
``x // 4`` (the tile's first column), which the analyzer rewrites as ``xo`` once the loop is
counted from 0. Only a branch without an ``else`` that is a loop's whole body moves, and only a
condition of index arithmetic (no loads, no calls: evaluating it once before the loop, even a
loop of no iterations, is then the same as at each iteration). Loops bound to GPU threads keep
theirs.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import conjuncts, contains, free_vars, substitute
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body

__all__ = ["hoist_if"]


def hoist_if(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Hoist loop-invariant branches out of their loops (see the module docstring)."""
    return apply_to_body(func, lambda body, an: _Hoist(an).visit(body))


def _pure(cond: E.PrimExpr) -> bool:
    return not contains(cond, lambda n: isinstance(n, (E.BufferLoad, E.Call)))


def _reads(cond: E.PrimExpr, var: E.Var) -> bool:
    return any(v is var for v in free_vars(cond))


class _Hoist(IRMutator):
    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.analyzer = analyzer

    def visit_PrimExpr(self, e):
        return e  # expressions have no statements inside

    def invariant(self, cond: E.PrimExpr, s: S.For) -> E.PrimExpr | None:
        """``cond`` as it holds at every iteration of loop ``s``, or None where it differs."""
        if not _reads(cond, s.loop_var):
            return cond
        step = E.Var(f"{s.loop_var.name}.from0", s.loop_var.dtype)
        with self.analyzer.bound(step, (0, s.extent - 1)):
            fixed = self.analyzer.simplify(substitute(cond, {s.loop_var: s.min + step}))
        return None if _reads(fixed, step) else fixed

    def visit_For(self, s: S.For) -> S.Stmt:
        body = self.visit(s.body)
        if (isinstance(body, S.IfThenElse) and body.else_case is None
                and s.kind is not S.ForKind.THREAD_BINDING and _pure(body.condition)):
            outer, inner = [], []
            for c in conjuncts(body.condition):
                fixed = self.invariant(c, s)
                (inner if fixed is None else outer).append(c if fixed is None else fixed)
            if outer:
                then = body.then_case if not inner else S.IfThenElse(E.all_of(*inner), body.then_case)
                loop = S.For(s.loop_var, s.min, s.extent, s.kind, then, s.thread_tag)
                return S.IfThenElse(E.all_of(*outer), loop)
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)
