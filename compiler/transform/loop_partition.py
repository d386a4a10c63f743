"""Split loops so that bounds-check guards stay out of the hot part.

For a loop ``v in [min, end)`` whose body holds ``if cond: ...`` with a conjunct
of ``cond`` affine in ``v`` (after the loops between ``v`` and the ``if`` are
relaxed over their ranges), the conjunct holds exactly on an interval
``[L, U)`` of ``v``. The loop becomes up to three loops: ``[min, L)`` and
``[U, end)`` keep the guard, ``[L, U)`` runs the body with those conjuncts
removed. The pieces cover ``[min, end)`` in order, so iteration order is kept.
Partitioning is attempted at the outermost loop first; the unguarded part is
processed further (inner loops may partition on other conjuncts). A tail of a few
constant iterations gets a body for each, its variable substituted, processed
further too (a register tile's last, partial tile); longer tails are left as they
are, guarded.

Where the guards below a loop never all hold together (a register tile's last
columns against the kernel taps that read only padding, whose ranges of the tile
index differ), the loop is partitioned on one guard alone, the innermost first,
if what that guard leaves outside its range is a few constant iterations. A loop
to be unrolled is not cut into pieces of symbolic extent: those would not unroll,
while unrolled, each iteration's guards fold to constants.

A parallel loop is not cut into pieces, which would leave its tails to one thread
after it: its body chooses, per iteration, between the unguarded body and the
guarded one, and a guarded tail of a few constant iterations is specialised to
each of them and processed further.
"""

from __future__ import annotations

from ..arith import Analyzer, expr_key
from ..arith.canonical import flatten, is_index_dtype
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import conjuncts, free_vars, substitute
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator, IRVisitor
from ._common import apply_to_body

__all__ = ["loop_partition"]

# Loops whose extent must stay as written: vector lanes and GPU thread axes.
_NO_PARTITION = (S.ForKind.VECTORIZED, S.ForKind.THREAD_BINDING)
SPECIALISED = 2  # a parallel loop's guarded iterations get a body each, up to this many


def loop_partition(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Partition loops on affine guards (see the module docstring)."""
    return apply_to_body(func, lambda body, an: _Partitioner(an).visit(body))


class _Guard:
    """One ``if`` below the loop, with the ranges of the loops and lets between."""

    def __init__(self, node: S.IfThenElse, relax: dict, lets: dict):
        self.node = node
        self.relax = relax
        self.lets = lets


class _GuardCollector(IRVisitor):
    def __init__(self, an: Analyzer):
        self.an = an
        self.relax: dict = {}
        self.lets: dict = {}
        self.guards: list[_Guard] = []

    def visit_PrimExpr(self, e) -> None:
        return  # guards are statements: expressions are not entered

    def visit_For(self, s: S.For) -> None:
        hi = E.Sub(E.Add(s.min, s.extent, s.min.dtype), E.IntImm(1, s.min.dtype), s.min.dtype)
        self.relax[s.loop_var] = (s.min, hi)
        self.visit(s.body)
        del self.relax[s.loop_var]

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.lets[s.var] = s.value
        self.visit(s.body)
        del self.lets[s.var]

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        self.guards.append(_Guard(s, dict(self.relax), dict(self.lets)))
        self.generic_visit(s)


class _Partitioner(IRMutator):
    def __init__(self, an: Analyzer):
        self.an = an

    def visit_PrimExpr(self, e):
        return e  # statements only

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        with self.an.bound(s.var, (s.value, s.value)):
            body = self.visit(s.body)
        return s if body is s.body else S.LetStmt(s.var, s.value, body)

    def visit_For(self, s: S.For) -> S.Stmt:
        if s.kind not in _NO_PARTITION and is_index_dtype(s.loop_var.dtype):
            parts = self._partition(s)
            if parts is not None:
                return parts
        with self.an.bound(s.loop_var, E.Range(s.min, s.extent)):
            body = self.visit(s.body)
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)

    # -- planning ----------------------------------------------------------------------

    def _limits(self, v: E.Var, guard: _Guard, cond: E.PrimExpr):
        """``("lo", L)`` if ``cond`` holds for all inner values iff ``v >= L``,
        ``("hi", U)`` if iff ``v < U``; None when it is not affine in ``v``."""
        if not isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) or not is_index_dtype(cond.a.dtype):
            return None
        a, b = cond.a, cond.b
        dt = a.dtype
        one = E.IntImm(1, dt)
        # Normalise to ``e <= 0``.
        if isinstance(cond, E.LT):
            e = E.Add(E.Sub(a, b, dt), one, dt)
        elif isinstance(cond, E.LE):
            e = E.Sub(a, b, dt)
        elif isinstance(cond, E.GT):
            e = E.Add(E.Sub(b, a, dt), one, dt)
        else:
            e = E.Sub(b, a, dt)
        e = substitute(e, guard.lets) if guard.lets else e
        if not any(x is v for x in free_vars(e)):
            return None
        _, hi = self.an.interval(e, guard.relax)
        if hi is None:
            return None
        s = flatten(hi)
        entry = s.terms.get(expr_key(v))
        if entry is None:
            return None
        k = entry[1]
        rest = s.copy()
        rest.add_term(v, -k)
        rest_e = rest.to_expr()
        if any(x is v for x in free_vars(rest_e)):
            return None  # v also appears inside a non-linear term
        # k*v + rest <= 0
        if k > 0:  # v <= floor(-rest / k)
            bound = E.FloorDiv(E.Sub(E.IntImm(0, dt), rest_e, dt), E.IntImm(k, dt), dt)
            return "hi", self.an.simplify(E.Add(bound, one, dt))
        # v >= ceil(rest / -k)
        return "lo", self.an.simplify(
            E.FloorDiv(E.Add(rest_e, E.IntImm(-k - 1, dt), dt), E.IntImm(-k, dt), dt))

    def _partition(self, s: S.For) -> S.Stmt | None:
        v, dt = s.loop_var, s.loop_var.dtype
        lo0 = self.an.simplify(s.min)
        end = self.an.simplify(E.Add(s.min, s.extent, dt))
        collector = _GuardCollector(self.an)
        collector.visit(s.body)
        seen: dict[S.IfThenElse, int] = {}
        for g in collector.guards:
            seen[g.node] = seen.get(g.node, 0) + 1

        limits = []  # per guard: its conjuncts' limits on v
        for g in collector.guards:
            if seen[g.node] > 1:
                continue  # a shared node in several contexts: not safe to rewrite
            found = [(c, lim) for c in conjuncts(g.node.condition)
                     if (lim := self._limits(v, g, c)) is not None]
            if found:
                limits.append((g, found))
        if not limits:
            return None
        main = self._main_range(lo0, end, limits)
        if main is None and s.kind != S.ForKind.PARALLEL:
            # The guards never all hold together (a register tile's last columns, and the kernel
            # taps that read only padding): one guard alone, the innermost first, where what it
            # leaves outside its range is a few constant iterations, specialised below.
            main = next((m for one in reversed(limits)
                         if (m := self._main_range(lo0, end, [one])) is not None
                         and self._few_constant(lo0, m[0]) and self._few_constant(m[1], end)), None)
        if main is None:
            return None  # the guards never all hold: nothing to gain
        lo_main, hi_main, removed = main
        no_prefix = self.an.can_prove(E.LE(lo_main, lo0, "bool"))
        no_suffix = self.an.can_prove(E.GE(hi_main, end, "bool"))
        if s.kind == S.ForKind.UNROLLED and not (no_prefix and no_suffix) \
                and not all(isinstance(x, E.IntImm) for x in (lo_main, hi_main)):
            return None  # pieces of symbolic extent would not unroll; unrolled, its guards fold

        main_body = _RemoveConjuncts(removed).visit(s.body)
        if s.kind == S.ForKind.PARALLEL:
            return self._partition_in_place(s, lo0, end, lo_main, hi_main, no_prefix, no_suffix, main_body)
        pieces = []
        if not no_prefix:
            prefix_end = self.an.simplify(E.Min(lo_main, end, dt))
            pieces.append(self._serial_tail(s, lo0, prefix_end))
        with self.an.bound(v, (lo_main, E.Sub(hi_main, E.IntImm(1, dt), dt))):
            main_body = self.visit(main_body)
        main_ext = self.an.simplify(E.Sub(hi_main, lo_main, dt))
        pieces.append(S.For(v, lo_main, main_ext, s.kind, main_body, s.thread_tag))
        if not no_suffix:
            suffix_start = self.an.simplify(E.Max(hi_main, lo_main, dt))
            pieces.append(self._serial_tail(s, suffix_start, end))
        return S.seq(*pieces)

    def _serial_tail(self, s: S.For, start: E.PrimExpr, stop: E.PrimExpr) -> S.Stmt:
        """The iterations ``[start, stop)`` of serial loop ``s`` outside its unguarded range: a
        few constant ones each get a body of their own with ``v`` substituted, partitioned
        further (a register tile's last, partial tile), others one guarded loop (:meth:`_tail`)."""
        if not self._few_constant(start, stop):
            return self._tail(s, start, stop)
        if not (isinstance(start, E.IntImm) and isinstance(stop, E.IntImm)):
            return S.seq()  # proved empty
        bodies = []
        for value in range(start.value, stop.value):
            c = E.IntImm(value, s.loop_var.dtype)
            with self.an.bound(s.loop_var, (c, c)):
                bodies.append(self.visit(substitute(s.body, {s.loop_var: c})))
        return S.seq(*bodies)

    def _few_constant(self, start: E.PrimExpr, stop: E.PrimExpr) -> bool:
        """Whether ``[start, stop)`` is empty or :data:`SPECIALISED` constant iterations at most."""
        if self.an.can_prove(E.LE(stop, start, "bool")):
            return True
        return (isinstance(start, E.IntImm) and isinstance(stop, E.IntImm)
                and stop.value - start.value <= SPECIALISED)

    def _main_range(self, lo0: E.PrimExpr, end: E.PrimExpr, limits: list):
        """``(lo_main, hi_main, removed)``: the range of the loop from ``lo0`` to ``end`` where
        the conjuncts of ``limits`` (``[(guard, [(conjunct, limit)])]``, :meth:`_limits`) all hold,
        and those conjuncts by guard; None where they never all hold."""
        dt = lo0.dtype
        lows, highs, removed = [], [], {}
        for g, found in limits:
            for c, (kind, bound) in found:
                (lows if kind == "lo" else highs).append(bound)
                removed.setdefault(g.node, set()).add(c)
        lo_main = lo0
        for x in lows:
            lo_main = E.Max(lo_main, x, dt)
        hi_main = end
        for x in highs:
            hi_main = E.Min(hi_main, x, dt)
        lo_main, hi_main = self.an.simplify(lo_main), self.an.simplify(hi_main)
        if self.an.can_prove(E.LE(hi_main, lo_main, "bool")):
            return None
        return lo_main, hi_main, removed

    def _partition_in_place(self, s: S.For, lo0: E.PrimExpr, end: E.PrimExpr, lo_main: E.PrimExpr,
                            hi_main: E.PrimExpr, no_prefix: bool, no_suffix: bool,
                            main_body: S.Stmt) -> S.Stmt:
        """A parallel loop stays one loop whose iterations pick the unguarded body or a
        guarded one. Peeled off, the guarded iterations (a GEMM's last row block) would run
        on one thread while the others wait; in place, the threads share them. A guarded
        piece of few constant iterations gets a body specialised to each, partitioned
        further, so that its inner loops keep their own guards out of their hot parts."""
        v, dt = s.loop_var, s.loop_var.dtype
        with self.an.bound(v, (lo_main, E.Sub(hi_main, E.IntImm(1, dt), dt))):
            body = self.visit(main_body)
        if not no_suffix:  # tested second: v >= hi_main after v >= lo_main
            start = self.an.simplify(E.Max(hi_main, lo_main, dt))
            body = self._guarded(s, start, end, E.GE(v, hi_main, "bool"), body)
        if not no_prefix:
            stop = self.an.simplify(E.Min(lo_main, end, dt))
            body = self._guarded(s, lo0, stop, E.LT(v, lo_main, "bool"), body)
        return S.For(v, s.min, s.extent, s.kind, body, s.thread_tag)

    def _guarded(self, s: S.For, start: E.PrimExpr, stop: E.PrimExpr, cond: E.PrimExpr,
                 otherwise: S.Stmt) -> S.Stmt:
        """``if cond: <s's body for v in [start, stop)> else: otherwise``."""
        v, dt = s.loop_var, s.loop_var.dtype
        constant = isinstance(start, E.IntImm) and isinstance(stop, E.IntImm)
        if constant and stop.value - start.value <= SPECIALISED:
            for value in reversed(range(start.value, stop.value)):
                c = E.IntImm(value, dt)
                with self.an.bound(v, (c, c)):
                    specialised = self.visit(substitute(s.body, {v: c}))
                otherwise = S.IfThenElse(E.EQ(v, c, "bool"), specialised, otherwise)
            return otherwise
        with self.an.bound(v, (start, E.Sub(stop, E.IntImm(1, dt), dt))):
            return S.IfThenElse(cond, self.visit(s.body), otherwise)

    def _tail(self, s: S.For, start: E.PrimExpr, stop: E.PrimExpr) -> S.Stmt:
        """The loop over ``[start, stop)`` with the original (guarded) body and a fresh variable."""
        dt = s.loop_var.dtype
        var = E.Var(s.loop_var.name, dt)
        ext = self.an.simplify(E.Sub(stop, start, dt))
        return S.For(var, start, ext, s.kind, substitute(s.body, {s.loop_var: var}), s.thread_tag)


class _RemoveConjuncts(IRMutator):
    """Drop the proven conjuncts of the given ``if`` nodes (by identity)."""

    def __init__(self, removed: dict[S.IfThenElse, set[E.PrimExpr]]):
        self.removed = removed

    def visit_PrimExpr(self, e):
        return e  # statements only

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        then_case = self.visit(s.then_case)
        else_case = None if s.else_case is None else self.visit(s.else_case)
        drop = self.removed.get(s)
        if drop is None:
            if then_case is s.then_case and else_case is s.else_case:
                return s
            return S.IfThenElse(s.condition, then_case, else_case)
        rest = [c for c in conjuncts(s.condition) if c not in drop]
        if not rest:
            return then_case
        return S.IfThenElse(E.all_of(*rest), then_case, else_case)
