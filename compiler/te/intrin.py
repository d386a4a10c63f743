"""Reductions and intrinsic functions for tensor expressions.

The reductions (``sum``, ``max``, ``min``, ``comm_reducer``),
the math (``exp``, ``nearbyint``, ``fmod``, ...), the divisions (``div``, ``truncdiv``,
``truncmod``, ``floordiv``, ``floormod``, ``indexdiv``, ``indexmod``), ``popcount``, the
``isnan``/``isinf``/``isfinite`` tests, ``all``/``any`` and the calls by name (``call_intrin``,
``call_pure_extern``, ``call_extern``) come from :mod:`compiler.tir.op`, where the operators
and their lowering rules are registered: ``te.X is tir.X``, as in TVM.
"""

from __future__ import annotations

from ..tir import expr as E
from ..tir.expr import PrimExpr
from ..tir.op import (  # noqa: A004  (tir owns these; te re-exports the same objects, as TVM does)
    abs,
    acos,
    acosh,
    all,
    any,
    asin,
    asinh,
    atan,
    atanh,
    call_extern,
    call_intrin,
    call_pure_extern,
    ceil,
    comm_reducer,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    indexdiv,
    indexmod,
    isfinite,
    isinf,
    isnan,
    log,
    log2,
    log10,
    max,
    min,
    nearbyint,
    popcount,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sinh,
    sqrt,
    sum,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)

__all__ = ["sum", "max", "min", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh",
           "sin", "cos", "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc", "power",
           "isnan", "if_then_else", "all", "any", "max_value", "min_value", "const", "floordiv",
           "floormod", "indexdiv", "indexmod", "call_extern", "call_pure_extern", "call_intrin",
           "comm_reducer", "div", "truncdiv", "truncmod", "nearbyint", "popcount", "fmod", "isinf",
           "isfinite", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` (infinity for floats)."""
    return E.max_value(dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (minus infinity for floats)."""
    return E.min_value(dtype)


def const(value, dtype: str | None = None) -> PrimExpr:
    """A constant expression."""
    return E.const(value, dtype)
