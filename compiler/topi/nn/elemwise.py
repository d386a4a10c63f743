"""Elementwise activations (TVM's ``topi.nn.relu``), and the one table of their formulas.

:data:`ACTIVATIONS` writes each activation twice: as a TE expression of one element, which the
graph's operators and the templates' epilogues both build their kernels from, and in numpy, which
their references and constant folding compute with. One table means a kernel and its reference
cannot drift apart.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import te

__all__ = ["relu", "leaky_relu", "Activation", "ACTIVATIONS", "activation", "leaky_relu_name", "erf_numpy"]

_SQRT1_2 = math.sqrt(0.5)
_SQRT2_PI = math.sqrt(2.0 / math.pi)


@functools.cache
def _erf_ufunc() -> Callable:
    """scipy's erf, imported on first use (importing scipy.special takes about 0.4 s beyond numpy,
    which every process importing this module would pay); without scipy, math.erf per element."""
    try:
        from scipy.special import erf
    except ImportError:  # pragma: no cover - depends on the environment
        return np.vectorize(math.erf, otypes=[np.float64])
    return erf


def erf_numpy(x):
    """The error function of ``x`` elementwise, in numpy."""
    return _erf_ufunc()(x)


@dataclass(frozen=True)
class Activation:
    """One activation: ``expr(v)`` on one TE element (its result has ``v``'s dtype) and
    ``numpy(x)`` on an array (computed in ``x``'s dtype: pass float64 for a reference)."""

    expr: Callable[[te.PrimExpr], te.PrimExpr]
    numpy: Callable[[np.ndarray], np.ndarray]
    formula: str


def _c(value: float, like: te.PrimExpr) -> te.PrimExpr:
    return te.const(value, like.dtype)


def _hard_sigmoid(v: te.PrimExpr) -> te.PrimExpr:
    """``min(max(v / 6 + 1/2, 0), 1)``, HardSwish's gate."""
    gate = v * _c(1.0 / 6.0, v) + _c(0.5, v)
    return te.min(te.max(gate, _c(0.0, v)), _c(1.0, v))


def _gelu(v: te.PrimExpr) -> te.PrimExpr:
    return _c(0.5, v) * v * (_c(1.0, v) + te.erf(v * _c(_SQRT1_2, v)))


def _gelu_tanh(v: te.PrimExpr) -> te.PrimExpr:
    inner = _c(_SQRT2_PI, v) * (v + _c(0.044715, v) * v * v * v)
    return _c(0.5, v) * v * (_c(1.0, v) + te.tanh(inner))


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(lambda v: te.max(v, _c(0, v)), lambda x: np.maximum(x, 0), "max(v, 0)"),
    "relu6": Activation(lambda v: te.min(te.max(v, _c(0, v)), _c(6, v)), lambda x: np.clip(x, 0, 6),
                        "min(max(v, 0), 6)"),
    "sigmoid": Activation(te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "1 / (1 + exp(-v))"),
    "silu": Activation(lambda v: v * te.sigmoid(v), lambda x: x / (1 + np.exp(-x)), "v * sigmoid(v)"),
    "hardswish": Activation(lambda v: v * _hard_sigmoid(v), lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
                            "v * min(max(v / 6 + 1/2, 0), 1)"),
    "gelu": Activation(_gelu, lambda x: 0.5 * x * (1 + erf_numpy(x * _SQRT1_2)),
                       "0.5 * v * (1 + erf(v / sqrt(2)))"),
    "gelu_tanh": Activation(_gelu_tanh,
                            lambda x: 0.5 * x * (1 + np.tanh(_SQRT2_PI * (x + 0.044715 * x**3))),
                            "0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v^3)))"),
}


_LEAKY = re.compile(r"leaky_relu\((-?[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?)\)")


def _leaky(alpha: float, text: str) -> Activation:
    """``v`` where positive, ``alpha * v`` below: ``max(v, alpha * v)`` for a slope in [0, 1]."""
    if 0.0 <= alpha <= 1.0:
        expr = lambda v: te.max(v, v * _c(alpha, v))  # noqa: E731
    else:
        expr = lambda v: te.if_then_else(v < _c(0, v), v * _c(alpha, v), v)  # noqa: E731
    return Activation(expr, lambda x: np.where(x < 0, x * alpha, x), f"v if v >= 0 else {text} * v")


def leaky_relu_name(alpha: float) -> str:
    """The name :func:`activation` knows LeakyReLU of slope ``alpha`` by: ``"leaky_relu(0.1)"``
    (the shortest decimal of ``alpha`` as float32, the precision the kernels compute in)."""
    value = np.float32(alpha)
    if not np.isfinite(value):
        raise ValueError(f"leaky_relu: alpha must be finite, got {alpha!r}")
    return f"leaky_relu({np.format_float_positional(value, unique=True, trim='0')})"


def activation(name: str) -> Activation:
    """The activation called ``name``: an entry of :data:`ACTIVATIONS`, or ``"leaky_relu(a)"``
    (:func:`leaky_relu_name`) with its slope ``a``. ValueError for any other name."""
    if name in ACTIVATIONS:
        return ACTIVATIONS[name]
    m = _LEAKY.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"unknown activation {name!r}: one of {', '.join(ACTIVATIONS)} "
                         "or 'leaky_relu(alpha)'")
    return _leaky(float(np.float32(m.group(1))), m.group(1))


def relu(x):
    """``max(x, 0)`` elementwise."""
    if not isinstance(x, te.Tensor):
        raise TypeError(f"relu: x must be a te.Tensor, got {type(x).__name__}")
    expr = ACTIVATIONS["relu"].expr
    return te.compute(x.shape, lambda *i: expr(x[i]), name="T_relu", tag="elemwise")


def leaky_relu(x, alpha: float):
    """``x`` where positive, ``alpha * x`` below, elementwise (TVM's ``topi.nn.leaky_relu``)."""
    if not isinstance(x, te.Tensor):
        raise TypeError(f"leaky_relu: x must be a te.Tensor, got {type(x).__name__}")
    expr = activation(leaky_relu_name(alpha)).expr
    return te.compute(x.shape, lambda *i: expr(x[i]), name="T_leaky_relu", tag="elemwise")
