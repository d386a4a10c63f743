"""Replace unrolled loops by copies of their bodies."""

from __future__ import annotations

import logging

from .. import expr as E
from .. import stmt as S
from ..analysis import substitute
from ..function import PrimFunc
from ..functor import IRMutator
from ._common import apply_to_body
from .simplify import StmtSimplifier

__all__ = ["unroll_loops", "MAX_UNROLLED_STATEMENTS"]

logger = logging.getLogger(__name__)

# Beyond this many statement copies an unroll request is refused (the loop stays
# serial): code size would grow without bound and compile time with it.
MAX_UNROLLED_STATEMENTS = 4096


def unroll_loops(func: PrimFunc | S.Stmt, auto_max_step: int = 0) -> PrimFunc | S.Stmt:
    """Unroll loops of kind UNROLLED with a constant extent (others become SERIAL).

    With ``auto_max_step > 0``, serial innermost loops of constant extent whose
    unrolled size is at most ``auto_max_step`` statements are unrolled as well.
    """
    return apply_to_body(func, lambda body, an: _Unroller(auto_max_step).visit(body))


def _count(s: S.Stmt) -> int | None:
    """Statements executed by ``s`` (None when a loop extent is not constant)."""
    if isinstance(s, S.SeqStmt):
        total = 0
        for c in s.seq:
            n = _count(c)
            if n is None:
                return None
            total += n
        return total
    if isinstance(s, S.For):
        n = _count(s.body)
        if n is None or not isinstance(s.extent, E.IntImm):
            return None
        return max(s.extent.value, 0) * n
    if isinstance(s, S.IfThenElse):
        a, b = _count(s.then_case), _count(s.else_case) if s.else_case is not None else 0
        return None if a is None or b is None else max(a, b)
    if isinstance(s, (S.LetStmt, S.AttrStmt, S.Allocate)):
        return _count(s.body)
    return 1


def _has_loop(s: S.Stmt) -> bool:
    from ..analysis import collect

    return bool(collect(s, lambda n: isinstance(n, S.For)))


class _Unroller(IRMutator):
    def __init__(self, auto_max_step: int):
        self.auto_max_step = auto_max_step

    def visit(self, node):
        if isinstance(node, E.PrimExpr):
            return node
        return super().visit(node)

    def visit_For(self, s: S.For) -> S.Stmt:
        body = self.visit(s.body)
        const_ext = isinstance(s.extent, E.IntImm)
        wanted = s.kind is S.ForKind.UNROLLED
        if (not wanted and self.auto_max_step > 0 and s.kind is S.ForKind.SERIAL and const_ext
                and not _has_loop(body)):
            n = _count(body)
            wanted = n is not None and s.extent.value * n <= self.auto_max_step
        if wanted and const_ext:
            n = _count(body)
            if n is not None and s.extent.value * n <= MAX_UNROLLED_STATEMENTS:
                return self._unroll(s, body)
            logger.debug("not unrolling %s: more than %d statements", s.loop_var.name,
                         MAX_UNROLLED_STATEMENTS)
        kind = S.ForKind.SERIAL if s.kind is S.ForKind.UNROLLED else s.kind
        if body is s.body and kind is s.kind:
            return s
        return S.For(s.loop_var, s.min, s.extent, kind, body, s.thread_tag)

    def _unroll(self, s: S.For, body: S.Stmt) -> S.Stmt:
        simplifier = StmtSimplifier()
        dt = s.loop_var.dtype
        copies = []
        for k in range(s.extent.value):
            value = E.Add(s.min, E.IntImm(k, dt), dt) if k else s.min
            copies.append(simplifier.visit(substitute(body, {s.loop_var: value})))
        return S.seq(*copies)
