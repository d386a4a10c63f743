"""ONNX's quantized operators: ``QuantizeLinear`` and ``DequantizeLinear`` (the QDQ format), and
``QLinearConv``, ``QLinearMatMul``, ``ConvInteger`` and ``MatMulInteger`` (the QOperator format).

``QuantizeLinear`` and ``DequantizeLinear`` become ``qnn.quantize`` and ``qnn.dequantize``, per
tensor or per channel (``axis``, opset 13); a DequantizeLinear of a constant weight folds at
import. In a QDQ model the operators between a DequantizeLinear and a QuantizeLinear run in
float32, as the ONNX graph says; ONNX Runtime fuses such groups into integer kernels, whose
results can differ by one quantization step where a value lies next to a rounding boundary.

The integer products accumulate in int32 exactly as ONNX defines them: each operand cast to int32
minus its zero point (``subtract``, folded for a constant weight), then ``nn.conv2d`` or
``nn.dense``/``nn.batch_matmul`` on int32 (the ``Conv`` and ``MatMul`` converters, so every
window and broadcasting form of those comes along). The QLinear operators then requantize the
accumulator with ``qnn.requantize``, whose float32 multiplier ``(x_scale * w_scale) / y_scale``
is ONNX Runtime's. The int32 products are compiled as any other (the default schedule, or a tuned
template's): correct, but without int8 dot-product instructions yet. ONNX Runtime's own u8s8
kernels on x86 CPUs without VNNI add pairs of products in int16, which saturates with full 8-bit
weights (hence ``reduce_range``); the import computes ONNX's exact result there.

Not supported (UnsupportedOperatorError naming them): float8, int4 and uint4 types, blocked
quantization (``block_size``), a division ``precision`` other than float32, and a per-channel
scale of an activation (QLinearConv's ``x_scale``, QLinearMatMul's per-row ``a_scale``).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ...graph import Value
from ...graph.ops.qnn import DEQUANTIZED_DTYPES, QUANTIZED_DTYPES
from .importer import CONVERTERS, NodeContext, converts, element_dtype, optional_input

__all__: list[str] = []

_F32 = "float32"
_SCALE_DTYPES = ("float32", "float16", "bfloat16")
_ONNX_QUANTIZED = {onnx.TensorProto.INT8: "int8", onnx.TensorProto.UINT8: "uint8",
                   onnx.TensorProto.INT16: "int16", onnx.TensorProto.UINT16: "uint16"}


def _type_name(elem_type: int) -> str:
    known = elem_type in onnx.TensorProto.DataType.values()
    return onnx.TensorProto.DataType.Name(elem_type) if known else str(elem_type)


def _no_blocks(ctx: NodeContext, attrs) -> None:
    block = attrs.get("block_size", 0)
    if block:
        raise ctx.unsupported(f"blocked quantization (block_size={block})")


def _integer(ctx: NodeContext, v: Value, what: str, allowed=QUANTIZED_DTYPES) -> None:
    if v.dtype not in allowed:
        raise ctx.unsupported(f"{what} of type {v.dtype} (supported: {', '.join(allowed)})")


def _scale(ctx: NodeContext, v: Value, what: str) -> Value:
    """A scale as float32 (ONNX Runtime computes with float16 and bfloat16 scales in float32)."""
    if v.dtype not in _SCALE_DTYPES:
        raise ctx.error(f"{what} must be a float tensor, got {v.dtype}")
    return ctx.cast(v, _F32)


def _per_tensor(v: Value) -> bool:
    return len(v.shape) <= 1 and math.prod(v.shape) == 1


def _channels(ctx: NodeContext, x: Value, params: list[tuple[str, Value]], axis: int | None):
    """``params`` as ``qnn`` operands: a per-tensor one as a scalar, a per-channel one as a vector
    along ``axis`` of ``x``; and the operator's attributes (``axis`` only where one is per channel,
    so that a per-tensor operator has no axis for a reshape to move)."""
    out, per_channel = [], False
    for what, p in params:
        if _per_tensor(p):
            out.append(ctx.reshape(p, ()))
            continue
        if axis is None or len(p.shape) != 1:
            raise ctx.unsupported(f"{what} of shape {p.shape} (per tensor or per channel along one axis is "
                                  f"supported)")
        if p.shape[0] != x.shape[axis]:
            raise ctx.error(f"{what} has {p.shape[0]} entries but axis {axis} of {x.shape} has "
                            f"{x.shape[axis]}")
        per_channel = True
        out.append(p)
    return out, ({"axis": axis} if per_channel else {})


def _axis(ctx: NodeContext, attrs, x: Value) -> int | None:
    """QuantizeLinear's and DequantizeLinear's channel axis (None for a scalar input)."""
    return ctx.axis(int(attrs.get("axis", 1)), len(x.shape)) if x.shape else None


# ---------------------------------------------------------------------------- QDQ


def _quantized_dtype(ctx: NodeContext, zero_point: Value | None, attrs) -> str:
    """QuantizeLinear's output type: its zero point's, else attribute output_dtype's, else uint8."""
    wanted = int(attrs.get("output_dtype", 0))
    if wanted:
        dtype = _ONNX_QUANTIZED.get(wanted)
        if dtype is None:
            raise ctx.unsupported(f"output_dtype {_type_name(wanted)}")
        if zero_point is not None and zero_point.dtype != dtype:
            raise ctx.error(f"output_dtype {dtype} differs from the zero point's type {zero_point.dtype}")
        return dtype
    if zero_point is None:
        return "uint8"
    _integer(ctx, zero_point, "y_zero_point")
    return zero_point.dtype


@converts("QuantizeLinear")
def _quantize_linear(ctx: NodeContext, ins, attrs):
    x, scale, zero = ins[0], ins[1], optional_input(ins, 2)
    _no_blocks(ctx, attrs)
    out_dtype = _quantized_dtype(ctx, zero, attrs)
    if zero is None:
        zero = ctx.const(np.array(0, out_dtype))
    if x.dtype not in (*_SCALE_DTYPES, "int32"):
        raise ctx.unsupported(f"input x of type {x.dtype}")
    precision = int(attrs.get("precision", 0))
    if precision not in (0, onnx.TensorProto.FLOAT):
        raise ctx.unsupported(f"precision {_type_name(precision)} (the division runs in float32)")
    params, axis = _channels(ctx, x, [("y_scale", _scale(ctx, scale, "y_scale")), ("y_zero_point", zero)],
                             _axis(ctx, attrs, x))
    return ctx.emit("qnn.quantize", [ctx.cast(x, _F32), *params], out_dtype=out_dtype, **axis)


@converts("DequantizeLinear")
def _dequantize_linear(ctx: NodeContext, ins, attrs):
    x, scale, zero = ins[0], ins[1], optional_input(ins, 2)
    _no_blocks(ctx, attrs)
    _integer(ctx, x, "input x", DEQUANTIZED_DTYPES)
    if zero is None:
        zero = ctx.const(np.array(0, x.dtype))
    elif zero.dtype != x.dtype:
        raise ctx.error(f"x_zero_point is {zero.dtype} but x is {x.dtype}")
    out_dtype = scale.dtype
    if int(attrs.get("output_dtype", 0)):
        out_dtype = element_dtype(int(attrs["output_dtype"]), f"{ctx.where}: output_dtype")
    params, axis = _channels(ctx, x, [("x_scale", _scale(ctx, scale, "x_scale")), ("x_zero_point", zero)],
                             _axis(ctx, attrs, x))
    y = ctx.emit("qnn.dequantize", [x, *params], **axis)
    return ctx.cast(y, out_dtype)


# ---------------------------------------------------------------------------- integer products


def _shifted(ctx: NodeContext, v: Value, zero: Value | None, zero_shape: tuple[int, ...]) -> Value:
    """``v - zero`` in int32, ``zero`` reshaped to ``zero_shape`` (it broadcasts against ``v``)."""
    v32 = ctx.cast(v, "int32")
    if zero is None or (zero.is_constant and not zero.data.any()):
        return v32
    out = ctx.emit("subtract", [v32, ctx.reshape(ctx.cast(zero, "int32"), zero_shape)])
    if out.shape != v.shape:
        raise ctx.error(f"a zero point of shape {zero.shape} does not fit an input of shape {v.shape}")
    return out


def _zero_point(ctx: NodeContext, zero: Value | None, v: Value, what: str) -> Value | None:
    if zero is not None and zero.dtype != v.dtype:
        raise ctx.error(f"{what} is {zero.dtype} but its input is {v.dtype}")
    return zero


def _conv_integer(ctx: NodeContext, x: Value, w: Value, x_zero: Value | None, w_zero: Value | None,
                  bias: Value | None, attrs) -> Value:
    """The int32 convolution of ``x - x_zero`` with ``w - w_zero`` (per tensor, or per output
    channel for the weight), plus ``bias``: a ``Conv`` of the shifted operands."""
    _integer(ctx, x, "input x", ("int8", "uint8"))
    _integer(ctx, w, "input w", ("int8", "uint8"))
    x_zero, w_zero = _zero_point(ctx, x_zero, x, "x_zero_point"), _zero_point(ctx, w_zero, w, "w_zero_point")
    if x_zero is not None and not _per_tensor(x_zero):
        raise ctx.unsupported(f"x_zero_point of shape {x_zero.shape} (per tensor is supported)")
    filters = w.shape[0]
    if w_zero is not None and not _per_tensor(w_zero) and w_zero.shape != (filters,):
        raise ctx.error(f"w_zero_point must be per tensor or have {filters} entries, got shape "
                        f"{w_zero.shape}")
    w_zero_shape = () if w_zero is None or _per_tensor(w_zero) else (filters,) + (1,) * (len(w.shape) - 1)
    ins = [_shifted(ctx, x, x_zero, ()), _shifted(ctx, w, w_zero, w_zero_shape)]
    if bias is not None:
        if bias.dtype != "int32":
            raise ctx.error(f"the bias must be int32, got {bias.dtype}")
        ins.append(bias)
    return CONVERTERS["Conv"](ctx, ins, attrs)


def _row_zero_shape(zero: Value | None, a: Value) -> tuple[int, ...]:
    """``a_zero_point``'s shape against ``a``: a scalar, one per row (M,) as (M, 1), or as given."""
    if zero is None or _per_tensor(zero):
        return ()
    if len(zero.shape) == 1 and len(a.shape) >= 2:
        return zero.shape + (1,)
    return zero.shape


def _matmul_integer(ctx: NodeContext, a: Value, b: Value, a_zero: Value | None,
                    b_zero: Value | None) -> Value:
    """The int32 product of ``a - a_zero`` and ``b - b_zero`` (per tensor, per row of ``a``, per
    column of ``b``): a ``MatMul`` of the shifted operands."""
    _integer(ctx, a, "input A", ("int8", "uint8"))
    _integer(ctx, b, "input B", ("int8", "uint8"))
    a_zero, b_zero = _zero_point(ctx, a_zero, a, "a_zero_point"), _zero_point(ctx, b_zero, b, "b_zero_point")
    b_shape = () if b_zero is None or _per_tensor(b_zero) else b_zero.shape
    ins = [_shifted(ctx, a, a_zero, _row_zero_shape(a_zero, a)), _shifted(ctx, b, b_zero, b_shape)]
    return CONVERTERS["MatMul"](ctx, ins, {})


@converts("ConvInteger")
def _conv_integer_node(ctx: NodeContext, ins, attrs):
    return _conv_integer(ctx, ins[0], ins[1], optional_input(ins, 2), optional_input(ins, 3), None, attrs)


@converts("MatMulInteger")
def _matmul_integer_node(ctx: NodeContext, ins, attrs):
    return _matmul_integer(ctx, ins[0], ins[1], optional_input(ins, 2), optional_input(ins, 3))


# ---------------------------------------------------------------------------- QLinear


def _requantize(ctx: NodeContext, acc: Value, in_scale: Value, y_scale: Value, y_zero: Value,
                axis: int) -> Value:
    """``acc`` (int32, in units of ``in_scale``) requantized to ``y_scale`` and ``y_zero``."""
    _integer(ctx, y_zero, "y_zero_point", ("int8", "uint8"))
    if not _per_tensor(y_scale) or not _per_tensor(y_zero):
        raise ctx.unsupported(f"a per-channel y_scale or y_zero_point (shapes {y_scale.shape} and "
                              f"{y_zero.shape})")
    zero = ctx.const(np.array(0, "int32"))
    params, attrs = _channels(ctx, acc, [("the input scale", in_scale), ("y_scale", y_scale),
                                         ("y_zero_point", y_zero)], axis)
    in_scale, y_scale, y_zero = params
    return ctx.emit("qnn.requantize", [acc, in_scale, zero, y_scale, y_zero], out_dtype=y_zero.dtype, **attrs)


@converts("QLinearConv")
def _qlinear_conv(ctx: NodeContext, ins, attrs):
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = ins[:8]
    x_scale, w_scale, y_scale = (_scale(ctx, s, what) for s, what in
                                 ((x_scale, "x_scale"), (w_scale, "w_scale"), (y_scale, "y_scale")))
    if not _per_tensor(x_scale):
        raise ctx.unsupported(f"a per-channel x_scale (shape {x_scale.shape})")
    if not _per_tensor(w_scale) and w_scale.shape != (w.shape[0],):
        raise ctx.error(f"w_scale must be per tensor or have {w.shape[0]} entries, got shape {w_scale.shape}")
    acc = _conv_integer(ctx, x, w, x_zero, w_zero, optional_input(ins, 8), attrs)
    # float32 x_scale * w_scale, then divided by y_scale in the kernel: ONNX Runtime's multiplier
    in_scale = ctx.emit("multiply", [ctx.reshape(x_scale, ()), w_scale])
    return _requantize(ctx, acc, in_scale, y_scale, y_zero, 1)


@converts("QLinearMatMul")
def _qlinear_matmul(ctx: NodeContext, ins, attrs):
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = ins[:8]
    a_scale, b_scale, y_scale = (_scale(ctx, s, what) for s, what in
                                 ((a_scale, "a_scale"), (b_scale, "b_scale"), (y_scale, "y_scale")))
    if not _per_tensor(a_scale):
        raise ctx.unsupported(f"a per-row a_scale (shape {a_scale.shape})")
    acc = _matmul_integer(ctx, a, b, a_zero, b_zero)
    if not _per_tensor(b_scale):
        # per column: (N,), or (..., 1, N) with ones before
        if len(b.shape) < 2 or b_scale.shape[-1] != b.shape[-1] or math.prod(b_scale.shape[:-1]) != 1:
            raise ctx.unsupported(f"b_scale of shape {b_scale.shape} for B of shape {b.shape} (per tensor "
                                  f"or per column is supported)")
        b_scale = ctx.reshape(b_scale, (b.shape[-1],))
    in_scale = ctx.emit("multiply", [ctx.reshape(a_scale, ()), b_scale])
    return _requantize(ctx, acc, in_scale, y_scale, y_zero, len(acc.shape) - 1)
