"""Building loop-IR statements imperatively, as TVM's ``tir.ir_builder``.

>>> ib = ir_builder.create()
>>> ib.emit(call_extern("int32", "gemv_reset", cc.access_ptr("w"), 16))
>>> with ib.for_range(0, n, name="i") as i:
...     ib.emit(buf.vstore(i, 0.0))
>>> stmt = ib.get()

Statements are collected in order; ``for_range`` and ``if_scope`` open nested scopes
whose statements become the body of the loop or the branch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import LoweringError
from .expr import PrimExpr, Var, convert
from .stmt import NOP, Evaluate, For, ForKind, IfThenElse, Stmt, seq

__all__ = ["IRBuilder", "create"]

_KINDS = {"serial": ForKind.SERIAL, "parallel": ForKind.PARALLEL, "vectorize": ForKind.VECTORIZED,
          "unroll": ForKind.UNROLLED}


class IRBuilder:
    """Collects statements; :meth:`get` returns them as one statement."""

    def __init__(self) -> None:
        self._scopes: list[list[Stmt]] = [[]]
        self._last_if: IfThenElse | None = None

    def emit(self, stmt) -> None:
        """Append a statement (an expression, such as a ``call_extern``, is evaluated for its effect)."""
        if isinstance(stmt, PrimExpr):
            stmt = Evaluate(stmt)
        if not isinstance(stmt, Stmt):
            raise LoweringError(f"ir_builder.emit needs a statement or an expression, got {stmt!r}")
        self._scopes[-1].append(stmt)
        self._last_if = None

    @contextlib.contextmanager
    def for_range(self, begin, end, name: str = "i", dtype: str = "int32",
                  kind: str = "serial") -> Iterator[Var]:
        """A loop ``for name in [begin, end)`` around the statements emitted in the block."""
        if kind not in _KINDS:
            raise LoweringError(f"ir_builder.for_range: unknown kind {kind!r}; use one of {list(_KINDS)}")
        var = Var(name, dtype)
        begin, end = convert(begin), convert(end)
        self._scopes.append([])
        yield var
        body = seq(*self._scopes.pop())
        self.emit(For(var, begin, end - begin, _KINDS[kind], body))

    @contextlib.contextmanager
    def if_scope(self, cond) -> Iterator[None]:
        """The statements emitted in the block run only where ``cond`` holds."""
        cond = convert(cond)
        if cond.dtype != "bool":
            raise LoweringError(f"ir_builder.if_scope needs a boolean condition, got {cond} ({cond.dtype})")
        self._scopes.append([])
        yield
        stmt = IfThenElse(cond, seq(*self._scopes.pop()))
        self.emit(stmt)
        self._last_if = stmt

    @contextlib.contextmanager
    def else_scope(self) -> Iterator[None]:
        """The other branch of the ``if_scope`` emitted just before."""
        last = self._last_if
        if last is None or last.else_case is not None:
            raise LoweringError("ir_builder.else_scope must directly follow an if_scope")
        self._scopes.append([])
        yield
        stmt = IfThenElse(last.condition, last.then_case, seq(*self._scopes.pop()))
        scope = self._scopes[-1]
        scope[-1] = stmt
        self._last_if = None

    def get(self) -> Stmt:
        """Everything emitted so far, as one statement."""
        if len(self._scopes) != 1:
            raise LoweringError("ir_builder.get called inside an open for_range or if_scope")
        out = seq(*self._scopes[0])
        return out if out is not None else NOP


def create() -> IRBuilder:
    """A new, empty builder."""
    return IRBuilder()
