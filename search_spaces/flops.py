"""FLOP counts worked out from a compute definition.

Every output element of a ComputeOp costs the arithmetic in its body; a reduction
costs, per reduction point, its source plus one combine, so ``sum(a * b)`` counts
two (multiply and add) and an ``N x L x M`` matmul ``2 * N * L * M``.

Only arithmetic on tensor data counts: index arithmetic (inside ``T[...]`` or in
conditions that read no tensor, such as padding bounds) is bookkeeping, and of an
``if_then_else`` only the costlier side counts, since only one runs. An intrinsic
(``exp``, ``tanh``, ...) counts one. Placeholders cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.te.tensor import ComputeOp, Operation, Tensor
from compiler.tir import expr as E
from search_spaces.errors import SearchSpaceError

__all__ = ["count_flops", "expr_flops"]

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max,
          E.CmpOp, E.And, E.Or)


def count_flops(outputs: Sequence[Tensor] | Tensor) -> int:
    """The arithmetic operations needed to compute ``outputs`` from their inputs."""
    if isinstance(outputs, (Tensor, Operation)):
        outputs = [outputs]
    seen: set[int] = set()
    todo = [t.op if isinstance(t, Tensor) else t for t in outputs if isinstance(t, (Tensor, Operation))]
    total = 0
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if not isinstance(op, ComputeOp):
            continue
        total += _const_prod(op.shape, op.name) * expr_flops(op.body)
        todo += [t.op for t in op.input_tensors]
    return total


def expr_flops(e: E.PrimExpr) -> int:
    """The arithmetic in one evaluation of ``e`` (reductions count all their points)."""
    return _count(e)[0]


def _count(e) -> tuple[int, bool]:
    """(operations, whether ``e`` reads tensor data)."""
    if isinstance(e, E.ProducerLoad):
        return 0, True
    if isinstance(e, E.Reduce):
        ops, _ = _count(e.source)
        points = _const_prod([iv.dom.extent for iv in e.axis], "reduction")
        return points * (ops + 1), True
    if isinstance(e, _ARITH):
        (a, da), (b, db) = _count(e.a), _count(e.b)
        data = da or db
        return (a + b + 1 if data else 0), data
    if isinstance(e, E.Not):
        return _count(e.a)
    if isinstance(e, E.Cast):
        return _count(e.value)
    if isinstance(e, E.Select):
        (c, dc), (t, dt), (f, df) = _count(e.condition), _count(e.true_value), _count(e.false_value)
        return c + max(t, f), dc or dt or df
    if isinstance(e, E.Call):
        counts = [_count(a) for a in e.args]
        data = any(d for _, d in counts)
        return (sum(c for c, _ in counts) + 1 if data else 0), data
    if isinstance(e, E.Let):
        (v, dv), (b, db) = _count(e.value), _count(e.body)
        return v + b, dv or db
    return 0, False  # variables and constants


def _const_prod(shape, what: str) -> int:
    out = []
    for s in shape:
        value = getattr(E.convert(s), "value", None)
        if not isinstance(value, int):
            raise SearchSpaceError(f"cannot count FLOPs of {what!r}: its extent {s} is not a constant")
        out.append(value)
    return math.prod(out)
