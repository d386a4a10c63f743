"""Helpers shared by the passes: applying a statement rewrite to a PrimFunc or a Stmt."""

from __future__ import annotations

from collections.abc import Callable

from ..arith import Analyzer
from ..tir.buffer import Buffer
from ..tir.expr import FloatImm, IntImm, Var
from ..tir.function import PrimFunc
from ..tir.stmt import Evaluate, Stmt

__all__ = ["apply_to_body", "func_analyzer", "is_no_op"]


def func_analyzer(func: PrimFunc | None) -> Analyzer:
    """An Analyzer that knows what a function's signature implies: sizes are >= 0."""
    an = Analyzer()
    if func is not None:
        for p in func.params:
            if isinstance(p, Buffer):
                for dim in p.shape:
                    if isinstance(dim, Var):
                        an.bind(dim, (0, None))
    return an


def apply_to_body(func_or_stmt, rewrite: Callable[[Stmt, Analyzer], Stmt]):
    """Run ``rewrite(body, analyzer)`` on a PrimFunc's body (or on a bare statement)."""
    if isinstance(func_or_stmt, PrimFunc):
        body = rewrite(func_or_stmt.body, func_analyzer(func_or_stmt))
        return func_or_stmt if body is func_or_stmt.body else func_or_stmt.with_body(body)
    return rewrite(func_or_stmt, Analyzer())


def is_no_op(s: Stmt | None) -> bool:
    """Whether ``s`` does nothing: absent, or the evaluation of a constant."""
    return s is None or (isinstance(s, Evaluate) and isinstance(s.value, (IntImm, FloatImm)))
