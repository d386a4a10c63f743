"""Simplify every expression of a function with what its loops and lets imply."""

from __future__ import annotations

from ..arith import Analyzer
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body

__all__ = ["simplify", "StmtSimplifier"]


def simplify(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Simplify expressions knowing loop ranges and let values; remove provably dead
    branches, inline loops of extent 1 and drop loops of extent 0."""
    return apply_to_body(func, lambda body, an: StmtSimplifier(an).visit(body))


class StmtSimplifier(IRMutator):
    """The statement rewriter behind :func:`simplify`, usable with an existing Analyzer."""

    def __init__(self, analyzer: Analyzer | None = None):
        self.an = analyzer or Analyzer()

    def visit_PrimExpr(self, e):
        return self.an.simplify(e)

    def visit_For(self, s: S.For) -> S.Stmt:
        lo, ext = self.an.simplify(s.min), self.an.simplify(s.extent)
        if isinstance(ext, E.IntImm) and ext.value <= 0:
            return S.NOP
        if E.is_const_int(ext, 1) and s.kind is not S.ForKind.THREAD_BINDING:
            with self.an.substituting({s.loop_var: lo}):
                return self.visit(s.body)
        with self.an.bound(s.loop_var, E.Range(lo, ext)):
            body = self.visit(s.body)
        if lo is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(s.loop_var, lo, ext, s.kind, body, s.thread_tag)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.an.simplify(s.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            with self.an.substituting({s.var: value}):
                return self.visit(s.body)
        with self.an.bound(s.var, (value, value)):
            body = self.visit(s.body)
        return S.LetStmt(s.var, value, body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        cond = self.an.simplify(s.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return self.visit(s.then_case)
            return S.NOP if s.else_case is None else self.visit(s.else_case)
        with self.an.constraint(cond):
            then_case = self.visit(s.then_case)
        else_case = None
        if s.else_case is not None:
            with self.an.constraint(E.Not(cond, "bool")):
                else_case = self.visit(s.else_case)
        return S.IfThenElse(cond, then_case, else_case)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        value = self.an.simplify(s.value)
        var = getattr(s.node, "var", s.node)
        if s.key == "thread_extent" and isinstance(var, E.Var):
            with self.an.bound(var, E.Range(E.IntImm(0, var.dtype), value)):
                body = self.visit(s.body)
        else:
            body = self.visit(s.body)
        return S.AttrStmt(s.node, s.key, value, body)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        return S.seq(*[self.visit(c) for c in s.seq])
