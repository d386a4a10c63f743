"""ONNX's elementwise operators: unary math, the parametrised activations, binary operators with
broadcasting (``Mod`` too), comparisons and logic, ``Where``, ``Clip``, ``Cast`` and the identities.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...graph import Value
from .importer import NodeContext, converts, element_dtype, optional_input, scalar_like

__all__ = ["activation_of"]

# ---------------------------------------------------------------------------- elementwise

_UNARY = {"Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Erf": "erf", "Neg": "negative", "Abs": "abs", "Reciprocal": "reciprocal",
          "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign",
          "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
          "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "IsNaN": "isnan"}


@converts(*_UNARY)
def _unary(ctx: NodeContext, ins, attrs):
    return ctx.emit(_UNARY[ctx.op_type], [ins[0]])


@converts("Gelu")
def _gelu(ctx: NodeContext, ins, attrs):
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate={approximate!r}")
    return ctx.emit("nn.gelu", [ins[0]], approximate=approximate)


# ONNX's parametrised activations, written out in the catalog's elementwise operators: each
# chain then fuses into one kernel with its neighbours, as any chain of injective operators does.
# Where the parameters allow, they are written with maximum and minimum rather than a select, which
# channel-blocked layouts carry through (a select would take the tensor back to NCHW and out again).
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875



def _scaled_below_zero(ctx: NodeContext, x: Value, slope: Value) -> Value:
    """``x`` where ``x >= 0``, else ``slope * x``: ``max(x, slope * x)`` for a constant slope in
    [0, 1], a select otherwise."""
    scaled = ctx.emit("multiply", [x, slope])
    if slope.is_constant and np.all((slope.data >= 0) & (slope.data <= 1)):
        return ctx.emit("maximum", [x, scaled])
    return ctx.emit("where", [ctx.emit("less", [x, scalar_like(ctx, x, 0)]), scaled, x])


def exponential_below_zero(ctx: NodeContext, x: Value, alpha: float, scale: float = 1.0) -> Value:
    """``x`` where ``x >= 0``, else ``alpha * (exp(x / scale) - 1)`` (ELU; CELU with ``scale =
    alpha``): ``max(x, 0) + min(alpha * (exp(x / scale) - 1), 0)`` where ``alpha >= 0``."""
    inner = x if scale == 1.0 else ctx.emit("divide", [x, scalar_like(ctx, x, scale)])
    em1 = ctx.emit("subtract", [ctx.emit("exp", [inner]), scalar_like(ctx, x, 1)])
    negative = ctx.emit("multiply", [em1, scalar_like(ctx, x, alpha)])
    if alpha >= 0:
        return ctx.emit("add", [ctx.emit("maximum", [x, scalar_like(ctx, x, 0)]),
                                ctx.emit("minimum", [negative, scalar_like(ctx, x, 0)])])
    return ctx.emit("where", [ctx.emit("less", [x, scalar_like(ctx, x, 0)]), negative, x])


def softplus_of(ctx: NodeContext, x: Value) -> Value:
    """``log(1 + exp(x))`` as ``max(x, 0) + log(1 + exp(-|x|))``: no overflow for large ``x``."""
    tail = ctx.emit("exp", [ctx.emit("negative", [ctx.emit("abs", [x])])])
    return ctx.emit("add", [ctx.emit("maximum", [x, scalar_like(ctx, x, 0)]),
                            ctx.emit("log", [ctx.emit("add", [tail, scalar_like(ctx, x, 1)])])])


@converts("IsInf")
def _is_inf(ctx: NodeContext, ins, attrs):
    x = ins[0]
    positive, negative = bool(attrs.get("detect_positive", 1)), bool(attrs.get("detect_negative", 1))
    if positive and negative:
        return ctx.emit("isinf", [x])
    if positive or negative:
        return ctx.emit("equal", [x, scalar_like(ctx, x, math.inf if positive else -math.inf)])
    return ctx.emit("greater", [x, scalar_like(ctx, x, math.inf)])  # detects nothing: false everywhere


@converts("Shrink")
def _shrink(ctx: NodeContext, ins, attrs):
    """``x - bias`` above ``lambd``, ``x + bias`` below ``-lambd``, 0 between."""
    x = ins[0]
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    below = ctx.emit("where", [ctx.emit("less", [x, scalar_like(ctx, x, -lambd)]),
                               ctx.emit("add", [x, scalar_like(ctx, x, bias)]), scalar_like(ctx, x, 0)])
    return ctx.emit("where", [ctx.emit("greater", [x, scalar_like(ctx, x, lambd)]),
                              ctx.emit("subtract", [x, scalar_like(ctx, x, bias)]), below])


@converts("Swish")
def _swish(ctx: NodeContext, ins, attrs):
    """``x * sigmoid(alpha * x)``: SiLU (one operator, fused into the layer before) where alpha is 1."""
    x, alpha = ins[0], float(attrs.get("alpha", 1.0))
    if alpha == 1.0:
        return ctx.emit("nn.silu", [x])
    gate = ctx.emit("sigmoid", [ctx.emit("multiply", [x, scalar_like(ctx, x, alpha)])])
    return ctx.emit("multiply", [x, gate])


@converts("LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
            "Softplus", "Softsign", "Mish")
def _activation(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"input of dtype {x.dtype} (a float type is needed)")
    if ctx.op_type == "PRelu":  # the slope broadcasts to x (unidirectionally)
        return _scaled_below_zero(ctx, x, ctx.cast(ins[1], x.dtype))
    return activation_of(ctx, ctx.op_type, x, attrs)


def activation_of(ctx: NodeContext, op: str, x: Value, attrs) -> Value:
    """ONNX's activation ``op`` (``LeakyRelu``, ``Elu``, ``Selu``, ``Celu``, ``ThresholdedRelu``,
    ``HardSigmoid``, ``HardSwish``, ``Softplus``, ``Softsign`` or ``Mish``) of float ``x``, with
    its attributes ``attrs`` (ONNX's defaults where absent): also what a recurrent layer's
    activations are."""
    if op == "LeakyRelu":
        return ctx.emit("nn.leaky_relu", [x], alpha=float(attrs.get("alpha", 0.01)))
    if op == "Elu":
        return exponential_below_zero(ctx, x, attrs.get("alpha", 1.0))
    if op == "Selu":
        elu = exponential_below_zero(ctx, x, attrs.get("alpha", _SELU_ALPHA))
        return ctx.emit("multiply", [elu, scalar_like(ctx, x, attrs.get("gamma", _SELU_GAMMA))])
    if op == "Celu":
        alpha = attrs.get("alpha", 1.0)
        if alpha == 0:
            raise ctx.unsupported("alpha=0 (Celu divides by alpha)")
        return exponential_below_zero(ctx, x, alpha, scale=alpha)
    if op == "ThresholdedRelu":
        above = ctx.emit("greater", [x, scalar_like(ctx, x, attrs.get("alpha", 1.0))])
        return ctx.emit("where", [above, x, scalar_like(ctx, x, 0)])
    if op == "HardSigmoid":
        line = ctx.emit("add", [ctx.emit("multiply", [x, scalar_like(ctx, x, attrs.get("alpha", 0.2))]),
                                scalar_like(ctx, x, attrs.get("beta", 0.5))])
        return ctx.emit("clip", [line], a_min=0.0, a_max=1.0)
    if op == "HardSwish":  # one operator: it fuses into the layer before as its output stage
        return ctx.emit("nn.hardswish", [x])
    if op == "Softplus":
        return softplus_of(ctx, x)
    if op == "Softsign":
        return ctx.emit("divide", [x, ctx.emit("add", [ctx.emit("abs", [x]), scalar_like(ctx, x, 1)])])
    return ctx.emit("multiply", [x, ctx.emit("tanh", [softplus_of(ctx, x)])])  # Mish


_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
           "GreaterOrEqual": "greater_equal"}
_COMMUTATIVE = {"Add", "Mul", "Equal"}


@converts(*_BINARY)
def _binary(ctx: NodeContext, ins, attrs):
    a, b = ins
    if ctx.opset < 7 and attrs.get("broadcast", 0) and "axis" in attrs:
        raise ctx.unsupported("legacy broadcasting along attribute axis")
    if ctx.op_type == "Pow":
        if a.is_constant and b.is_constant:  # shape arithmetic may raise integers to powers
            return ctx.const(np.power(a.data, b.data).astype(a.dtype))
        b = ctx.cast(b, a.dtype)
    elif ctx.op_type in _COMMUTATIVE and a.is_constant and not b.is_constant:
        a, b = b, a  # the constant second, as a bias or a scale usually is
    return ctx.emit(_BINARY[ctx.op_type], [a, b])


@converts("Mod")
def _mod(ctx: NodeContext, ins, attrs):
    """The remainder with the divisor's sign (``fmod=0``, integers only) or the dividend's."""
    a, b = ins
    if not attrs.get("fmod", 0) and dtypes.is_float(a.dtype):
        raise ctx.error("fmod=0 on floating-point inputs (ONNX requires fmod=1 for them)")
    return ctx.emit("fmod" if attrs.get("fmod", 0) else "mod", [a, b])


_VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


@converts(*_VARIADIC)
def _variadic(ctx: NodeContext, ins, attrs):
    out = ins[0]
    for v in ins[1:]:
        out = ctx.emit(_VARIADIC[ctx.op_type], [out, v])
    if ctx.op_type == "Mean" and len(ins) > 1:
        out = ctx.emit("divide", [out, ctx.const(np.array(len(ins), out.dtype))])
    return out


@converts("Not")
def _not(ctx: NodeContext, ins, attrs):
    return ctx.emit("equal", [ins[0], ctx.const(np.array(False))])


@converts("And", "Or")
def _logical(ctx: NodeContext, ins, attrs):
    a, b = ins
    if ctx.op_type == "And":
        return ctx.emit("where", [a, b, ctx.const(np.array(False))])
    return ctx.emit("where", [a, ctx.const(np.array(True)), b])


_BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@converts(*_BITWISE, "BitwiseNot", "BitShift")
def _bitwise(ctx: NodeContext, ins, attrs):
    """Opset 18's bitwise operators and opset 11's ``BitShift`` (``direction`` ``"LEFT"`` or
    ``"RIGHT"``; a shift by the width or more gives 0, where hardware leaves it undefined)."""
    if ctx.op_type == "BitwiseNot":
        return ctx.emit("bitwise_not", ins[:1])
    if ctx.op_type != "BitShift":
        return ctx.emit(_BITWISE[ctx.op_type], ins[:2])
    direction = attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return ctx.emit("left_shift" if direction == "LEFT" else "right_shift", ins[:2])


@converts("Where")
def _where(ctx: NodeContext, ins, attrs):
    return ctx.emit("where", ins[:3])


@converts("Clip")
def _clip(ctx: NodeContext, ins, attrs):
    if ctx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo, hi = ctx.scalar(optional_input(ins, 1), "min"), ctx.scalar(optional_input(ins, 2), "max")
    return ctx.emit("clip", [ins[0]], a_min=None if lo is None else float(lo),
                    a_max=None if hi is None else float(hi))


@converts("Cast")
def _cast(ctx: NodeContext, ins, attrs):
    return ctx.cast(ins[0], element_dtype(attrs["to"], ctx.where))


@converts("CastLike")
def _cast_like(ctx: NodeContext, ins, attrs):
    return ctx.cast(ins[0], ins[1].dtype)


@converts("Identity")
def _identity(ctx: NodeContext, ins, attrs):
    return ins[0]


@converts("Dropout")
def _dropout(ctx: NodeContext, ins, attrs):
    x = ins[0]  # inference: the input, and a mask that keeps everything
    return [x, ctx.const(np.ones(x.shape, bool)) if ctx.wants(1) else None]
