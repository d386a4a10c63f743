"""FLOP counts worked out from a compute definition.

Every output element of a ComputeOp costs the arithmetic in its body; a reduction
costs, per reduction point, its source plus one combine, so ``sum(a * b)`` counts
two (multiply and add) and an ``N x L x M`` matmul ``2 * N * L * M``.

Only arithmetic on tensor data counts: index arithmetic (inside ``T[...]`` or in
conditions that read no tensor, such as padding bounds) is bookkeeping, and of an
``if_then_else`` only the costlier side counts, since only one runs. An intrinsic
(``exp``, ``tanh``, ...) counts one. Placeholders cost nothing.

:func:`autotvm_flops` counts by AutoTVM's rules instead (``autotvm.task.task.compute_flop``: index
arithmetic counts, and a producer counts once per consumer path),
and raises :class:`FlopCalculationError` on what those rules cannot count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from compiler.tir import expr as E
from search_spaces.errors import SearchSpaceError

__all__ = ["count_flops", "expr_flops", "autotvm_flops", "FlopCalculationError"]

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
        total += _const_prod(op.shape, op.name) * expr_flops(op.bodies[0])
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
            raise FlopCalculationError(f"cannot count FLOPs of {what!r}: its extent {s} is not a constant")
        out.append(value)
    return math.prod(out)


# ---------------------------------------------------------------------------- AutoTVM's rules


class FlopCalculationError(SearchSpaceError, RuntimeError):
    """A compute definition whose FLOPs AutoTVM's rules cannot count (an operation other than
    a compute or placeholder, a multi-output compute or reduction, an expression kind they
    do not know, a non-constant extent); the message names it. Set the FLOPs by hand with
    ``cfg.add_flop``."""


_AUTOTVM_BINARY = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.CmpOp, E.And, E.Or)


def autotvm_flops(outputs: Sequence[Tensor | Operation] | Tensor | Operation) -> int:
    """The FLOPs of ``outputs`` by AutoTVM's rules: every operator of an output element's
    expression counts one, index arithmetic included (only the indices of tensor reads are
    left out); a reduction costs, per point, its source plus its combiner's expression; of a
    ``select`` the costlier side counts; an intrinsic call counts its arguments only.

    As AutoTVM walks the graph from each output through each operation's input tensors, an
    operation counts once per path that reaches it: a producer read by two consumers counts
    twice (a tensor read twice by one consumer, once)."""
    if isinstance(outputs, (Tensor, Operation)):
        outputs = [outputs]
    # An operation's total (itself and everything under it) is the same on every path that
    # reaches it; remembering it keeps a graph of many shared producers linear to count.
    totals: dict[int, int] = {}

    def total(op) -> int:
        if id(op) not in totals:
            totals[id(op)] = _own_flops(op) + sum(total(t.op) for t in op.input_tensors)
        return totals[id(op)]

    return sum(total(t.op if isinstance(t, Tensor) else t) for t in outputs)


def _own_flops(op) -> int:
    """The FLOPs of ``op``'s own body over its whole output, by AutoTVM's rules."""
    if isinstance(op, PlaceholderOp):
        return 0
    if not isinstance(op, ComputeOp):
        raise FlopCalculationError(f"only te.compute is supported, not {type(op).__name__} {op.name!r} "
                                   "(other operations such as te.extern cannot be counted)")
    if len(op.bodies) != 1:
        raise FlopCalculationError(f"found multiple outputs in the compute {op.name!r}")
    return _const_prod([iv.dom.extent for iv in op.axis], op.name) * _autotvm_count(op.bodies[0])


def _autotvm_count(e) -> int:
    if isinstance(e, E.Reduce):
        combiner = getattr(e.combiner, "result", None)
        if combiner is not None and len(combiner) != 1:
            raise FlopCalculationError("found multiple outputs in the combiner of a reduction")
        if len(e.all_sources) != 1:
            raise FlopCalculationError("found multiple outputs in the source of a reduction")
        combine = 1 if combiner is None else _autotvm_count(combiner[0])  # sum/min/max: one operator
        points = _const_prod([iv.dom.extent for iv in e.axis], "reduction")
        return points * (combine + _autotvm_count(e.source))
    if isinstance(e, (E.IntImm, E.FloatImm, E.Var, E.ProducerLoad)):
        return 0  # reads count nothing, nor their indices
    if isinstance(e, E.Cast):
        return _autotvm_count(e.value)
    if isinstance(e, _AUTOTVM_BINARY):
        return 1 + _autotvm_count(e.a) + _autotvm_count(e.b)
    if isinstance(e, E.Not):
        return 1 + _autotvm_count(e.a)
    if isinstance(e, E.Select):
        return _autotvm_count(e.condition) + max(_autotvm_count(e.true_value), _autotvm_count(e.false_value))
    if isinstance(e, E.Call):
        return sum(_autotvm_count(a) for a in e.args)
    raise FlopCalculationError(f"found an unsupported operator in the compute expression: "
                               f"{type(e).__name__} ({e})")
