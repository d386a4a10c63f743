"""Loops that start at 0: ``for i in range(a, a + n)`` becomes ``for i in range(n)`` with
``i + a`` in the body.

GPU lowering runs it so that, once a small loop is unrolled, the indices of per-thread
(local) arrays are constants and the arrays live in registers.
"""

from __future__ import annotations

from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import substitute
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator

__all__ = ["normalize_loops"]


def normalize_loops(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Rewrite every loop with a non-zero start to start at 0."""
    if isinstance(func, PrimFunc):
        body = _Normalize().visit(func.body)
        return func if body is func.body else func.with_body(body)
    return _Normalize().visit(func)


class _Normalize(IRMutator):
    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if E.is_const_int(s.min, 0):
            if body is s.body:
                return s
            return S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)
        start = s.min if s.min.dtype == s.loop_var.dtype else E.Cast(s.loop_var.dtype, s.min)
        body = substitute(body, {s.loop_var: s.loop_var + start})
        return S.For(s.loop_var, E.const(0, s.loop_var.dtype), s.extent, s.kind, body, s.thread_tag)
