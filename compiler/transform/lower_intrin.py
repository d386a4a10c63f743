"""Lower intrinsic calls through the per-target rules of :mod:`compiler.tir.op` (TVM's LowerIntrin).

For every ``Call`` of a registered operator, the rules for the target being built are
tried in order (``"llvm"``; or ``"cuda"`` then ``"nvptx"``; then ``"default"``). A rule gets
the call (its ``op`` an :class:`~compiler.tir.op.Op`, so ``call.op.name == "tir.exp"``)
and returns what to use instead; a rule that returns the call itself declines and the next
one is tried. The replacement is lowered again, so rules may produce other intrinsics.
The built-in rule :data:`~compiler.tir.op.BUILTIN_LOWERING` leaves the call to the code
generator. A call of an operator that only a user registered, and that no rule lowers
for the target, is a :class:`~compiler.errors.LoweringError` naming the operator.
"""

from __future__ import annotations

from ..errors import LoweringError
from ..tir import expr as E
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ..tir.op import BUILTIN_LOWERING, Op, is_builtin, is_registered, lowering_rules

__all__ = ["lower_intrin"]

_MAX_DEPTH = 32  # rules that keep rewriting a call into another rewritten call


def lower_intrin(func: PrimFunc, target_kind: str) -> PrimFunc:
    """``func`` with its intrinsic calls lowered for ``target_kind`` (``"llvm"``, ``"cuda"``)."""
    body = _Lowerer(target_kind, func.name).visit(func.body)
    return func if body is func.body else func.with_body(body)


class _Lowerer(IRMutator):
    def __init__(self, target_kind: str, func_name: str):
        self.target = target_kind
        self.func_name = func_name
        self.depth = 0

    def visit_Call(self, e: E.Call):  # noqa: N802
        if not is_registered(e.op):
            return self.generic_visit(e)
        call = e if isinstance(e.op, Op) else E.Call(e.dtype, Op(e.op), e.args)
        for key, rule in lowering_rules(e.op, self.target):
            if rule is BUILTIN_LOWERING:
                break
            result = rule(call)
            if result is call or result is e:
                continue
            return self._lowered(call, key, result)
        else:
            if not is_builtin(e.op):
                raise LoweringError(
                    f"in {self.func_name!r}: no lowering of intrinsic {call.op.name!r} for target "
                    f"{self.target!r}; register one with register_intrin_lowering({call.op.name!r}, "
                    f"target={self.target!r}, f=..., level=...)")
        return self.generic_visit(e)

    def _lowered(self, call: E.Call, key: str, result) -> E.PrimExpr:
        where = f"the {key!r} lowering rule of {call.op.name!r}"
        if not isinstance(result, E.PrimExpr):
            raise LoweringError(f"{where} returned {result!r}, not an expression")
        if result.dtype != call.dtype:
            raise LoweringError(f"{where} returned a {result.dtype} expression for a {call.dtype} call")
        if self.depth >= _MAX_DEPTH:
            raise LoweringError(f"{where} keeps producing calls to lower ({_MAX_DEPTH} levels deep)")
        self.depth += 1
        try:
            return self.visit(result)
        finally:
            self.depth -= 1
