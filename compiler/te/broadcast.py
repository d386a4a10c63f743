"""Binary operators on tensors with numpy's broadcasting, as TVM's ``topi.add`` and
friends: what ``A + B`` builds for tensors ``A`` and ``B`` (and ``A * 2``, ``x - A``).

Two tensors broadcast: their shapes are aligned on the right, and a dimension of extent 1
stretches to the other's extent; the result is tagged ``"broadcast"``. A tensor and a
scalar (a Python number, an expression, a tensor element ``A[i, j]``) combine element by
element, tagged ``"elemwise"``. The result is named ``T_add``, ``T_subtract``,
``T_multiply`` or ``T_divide``.
"""

from __future__ import annotations

import operator

from ..arith import Analyzer
from ..errors import CompilerError
from ..tir.expr import PrimExpr, convert, is_const_int
from ..tir.op import div
from .operation import compute
from .tag import BROADCAST, ELEMWISE
from .tensor import Tensor

__all__ = ["add", "subtract", "multiply", "divide", "broadcast_shape"]


def broadcast_shape(lhs: tuple, rhs: tuple, what: str = "broadcast") -> tuple:
    """The shape two shapes broadcast to (numpy's rule: aligned on the right, an extent 1
    stretches); a :class:`CompilerError` names the dimensions that do not match."""
    analyzer = Analyzer()
    out = []
    n = max(len(lhs), len(rhs))
    for k in range(1, n + 1):
        a = convert(lhs[-k]) if k <= len(lhs) else None
        b = convert(rhs[-k]) if k <= len(rhs) else None
        if a is None or b is None:
            out.append(b if a is None else a)
        elif is_const_int(a) and is_const_int(b) and a.value == b.value:
            out.append(a)
        elif is_const_int(b, 1):
            out.append(a)
        elif is_const_int(a, 1):
            out.append(b)
        elif analyzer.can_prove_equal(a, b):
            out.append(a)
        else:
            raise CompilerError(f"{what}: shapes {tuple(lhs)} and {tuple(rhs)} do not broadcast: "
                                f"dimension {n - k} (from the left of the result) is {a} against {b}")
    return tuple(reversed(out))


def _index(t: Tensor, out_shape: tuple, idx: tuple) -> tuple:
    """The index of ``t`` at the result's index ``idx``: its dimensions aligned on the right,
    a dimension of extent 1 read at 0 (it stretches)."""
    lead = len(out_shape) - t.ndim
    return tuple(0 if is_const_int(convert(d), 1) else idx[lead + k] for k, d in enumerate(t.shape))


def _binary(name: str, fop, lhs, rhs):
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        return fop(lhs, rhs)  # two scalars: the expression
    if isinstance(lhs, Tensor) and isinstance(rhs, Tensor):
        shape = broadcast_shape(lhs.shape, rhs.shape, f"{name}({lhs.name}, {rhs.name})")
        return compute(shape, lambda *i: fop(lhs(*_index(lhs, shape, i)), rhs(*_index(rhs, shape, i))),
                       name=f"T_{name}", tag=BROADCAST)
    tensor = lhs if isinstance(lhs, Tensor) else rhs
    scalar = rhs if tensor is lhs else lhs
    if not isinstance(scalar, (int, float, PrimExpr)) and not hasattr(scalar, "asobject"):
        raise TypeError(f"{name}: cannot combine tensor {tensor.name!r} with {scalar!r} "
                        f"of type {type(scalar).__name__}")
    if tensor is lhs:
        return compute(tensor.shape, lambda *i: fop(tensor(*i), scalar), name=f"T_{name}", tag=ELEMWISE)
    return compute(tensor.shape, lambda *i: fop(scalar, tensor(*i)), name=f"T_{name}", tag=ELEMWISE)


def add(lhs, rhs):
    """``lhs + rhs`` with broadcasting (tensors, or a tensor and a scalar)."""
    return _binary("add", operator.add, lhs, rhs)


def subtract(lhs, rhs):
    """``lhs - rhs`` with broadcasting (tensors, or a tensor and a scalar)."""
    return _binary("subtract", operator.sub, lhs, rhs)


def multiply(lhs, rhs):
    """``lhs * rhs`` with broadcasting (tensors, or a tensor and a scalar)."""
    return _binary("multiply", operator.mul, lhs, rhs)


def divide(lhs, rhs):
    """``lhs / rhs`` with broadcasting, as in C (TVM's ``tir.div``): true division of floats,
    truncating division of integers."""
    return _binary("divide", div, lhs, rhs)
