"""Remove statements that do nothing."""

from __future__ import annotations

from ..arith import expr_key
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import contains
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body, is_no_op

__all__ = ["remove_no_op"]

# Attributes that mean something even around an empty body.
_KEEP_EMPTY_ATTR_WORDS = ("barrier", "sync")


def remove_no_op(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Drop constant evaluations, empty loops/branches/lets, ``x = x`` stores, empty
    sequences and allocations whose buffer is never used."""
    return apply_to_body(func, lambda body, an: _RemoveNoOp().visit(body))


def _uses_buffer(node, data: E.Var) -> bool:
    return contains(node, lambda n: n is data or (isinstance(n, (E.BufferLoad, S.BufferStore))
                                                 and n.buffer.data is data))


class _RemoveNoOp(IRMutator):
    def visit_PrimExpr(self, e):
        return e  # expressions have no statements inside

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        return S.NOP if is_no_op(s) else s

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        return S.seq(*[c for c in (self.visit(c) for c in s.seq) if not is_no_op(c)])

    def visit_For(self, s: S.For) -> S.Stmt:
        if isinstance(s.extent, E.IntImm) and s.extent.value <= 0:
            return S.NOP
        body = self.visit(s.body)
        if is_no_op(body):
            return S.NOP
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        v = s.value
        if (isinstance(v, E.BufferLoad) and v.buffer.data is s.buffer.data
                and len(v.indices) == len(s.indices)
                and all(expr_key(a) == expr_key(b) for a, b in zip(v.indices, s.indices, strict=True))):
            return S.NOP
        return s

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        then_case = self.visit(s.then_case)
        else_case = None if s.else_case is None else self.visit(s.else_case)
        if is_no_op(else_case):
            else_case = None
        if is_no_op(then_case):
            if else_case is None:
                return S.NOP
            return S.IfThenElse(E.Not(s.condition, "bool"), else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(s.condition, then_case, else_case)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return S.NOP
        return s if body is s.body else S.LetStmt(s.var, s.value, body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body) and not any(w in s.key for w in _KEEP_EMPTY_ATTR_WORDS):
            return S.NOP
        return s if body is s.body else S.AttrStmt(s.node, s.key, s.value, body)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return S.NOP
        if not _uses_buffer(body, s.buffer.data):
            return body
        return s if body is s.body else S.Allocate(s.buffer, body)
