"""ONNX's softmaxes, normalisations and reductions: ``Softmax``, ``LayerNormalization``,
``InstanceNormalization``, ``GroupNormalization``, ``Reduce*``, ``ArgMax``/``ArgMin``.
"""

from __future__ import annotations

import math

import numpy as np

from ...graph import Value
from .importer import NodeContext, converts, optional_input

__all__ = ["reduce_axes"]

# ---------------------------------------------------------------------------- reductions


@converts("Softmax", "LogSoftmax")
def _softmax(ctx: NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    axis = ctx.axis(attrs.get("axis", -1 if ctx.opset >= 13 else 1), ndim)
    if ctx.opset >= 13 or axis == ndim - 1:
        out = ctx.emit("nn.softmax", [x], axis=axis)
    else:  # before opset 13: over all the axes from axis on, as one
        flat = ctx.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        out = ctx.reshape(ctx.emit("nn.softmax", [flat], axis=1), x.shape)
    return ctx.emit("log", [out]) if ctx.op_type == "LogSoftmax" else out


@converts("LayerNormalization")
def _layer_norm(ctx: NodeContext, ins, attrs):
    if ctx.wants(1) or ctx.wants(2):
        raise ctx.unsupported("the Mean and InvStdDev outputs")
    x, scale, bias = ins[0], ins[1], optional_input(ins, 2)
    if bias is None:
        bias = ctx.const(np.zeros(scale.shape, scale.dtype))
    axis = ctx.axis(attrs.get("axis", -1), len(x.shape))
    return ctx.emit("nn.layer_norm", [x, ctx.cast(scale, x.dtype), ctx.cast(bias, x.dtype)], axis=axis,
                    epsilon=float(attrs.get("epsilon", 1e-5)))


def _channel_affine(ctx: NodeContext, x: Value, scale: Value, bias: Value) -> Value:
    """``x * scale + bias`` with one value of each per channel (axis 1) of ``x``."""
    per_channel = (1, x.shape[1]) + (1,) * (len(x.shape) - 2)
    scaled = ctx.emit("multiply", [x, ctx.reshape(ctx.cast(scale, x.dtype), per_channel)])
    return ctx.emit("add", [scaled, ctx.reshape(ctx.cast(bias, x.dtype), per_channel)])


def _normalized(ctx: NodeContext, x: Value, groups: int, epsilon: float) -> Value:
    """``x`` normalised over each group of ``C / groups`` channels and every position (a layer
    norm of ``x`` seen as ``(N, groups, rest)``), with no scale or shift of its own."""
    N, C = x.shape[:2]
    rest = int(np.prod(x.shape[2:], dtype=np.int64)) * (C // groups)
    one, zero = ctx.const(np.ones(1, x.dtype)), ctx.const(np.zeros(1, x.dtype))
    grouped = ctx.reshape(x, (N, groups, rest))
    normed = ctx.emit("nn.layer_norm", [grouped, one, zero], axis=2, epsilon=epsilon)
    return ctx.reshape(normed, x.shape)


@converts("InstanceNormalization", "GroupNormalization")
def _channel_norm(ctx: NodeContext, ins, attrs):
    x, scale, bias = ins[0], ins[1], ins[2]
    if len(x.shape) < 3 or np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"an input of shape {x.shape} and dtype {x.dtype} (N, C and positions, float)")
    C = x.shape[1]
    epsilon = float(attrs.get("epsilon", 1e-5))
    if ctx.op_type == "InstanceNormalization":
        return _channel_affine(ctx, _normalized(ctx, x, C, epsilon), scale, bias)
    groups = int(attrs.get("num_groups", 0))
    if groups < 1 or C % groups:
        raise ctx.error(f"num_groups={groups} must divide the {C} channels")
    if scale.shape == (groups,) and bias.shape == (groups,) and groups != C:
        # opset 18's one scale and shift per group, for each of its channels
        scale, bias = (ctx.const(np.repeat(ctx.array(v, what), C // groups))
                       for v, what in ((scale, "scale"), (bias, "bias")))
    elif scale.shape != (C,) or bias.shape != (C,):
        raise ctx.error(f"scale {scale.shape} and bias {bias.shape} must have one entry per group "
                        f"({groups}) or per channel ({C})")
    return _channel_affine(ctx, _normalized(ctx, x, groups, epsilon), scale, bias)


_REDUCE = {"ReduceMean": ("mean", 18), "ReduceSum": ("sum", 13), "ReduceMax": ("max", 18),
           "ReduceMin": ("min", 18)}
# written out in the catalog's reductions; axes an input from opset 18
_COMPOSED_REDUCE = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp")


def reduce_axes(ctx: NodeContext, ins, attrs, axes_input_from: int) -> tuple[int, ...] | None:
    """The reduced axes, sorted; None where an empty list asks for no reduction at all."""
    x = ins[0]
    if ctx.opset >= axes_input_from:
        axes = None if optional_input(ins, 1) is None else ctx.ints(ins[1], "axes")
    else:
        axes = attrs.get("axes")
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        axes = range(len(x.shape))
    return tuple(sorted({ctx.axis(a, len(x.shape)) for a in axes}))


@converts(*_REDUCE)
def _reduce(ctx: NodeContext, ins, attrs):
    op, axes_input_from = _REDUCE[ctx.op_type]
    axes = reduce_axes(ctx, ins, attrs, axes_input_from)
    if axes is None:
        return ins[0]
    return ctx.emit(op, [ins[0]], axis=axes, keepdims=bool(attrs.get("keepdims", 1)))


@converts("ArgMax", "ArgMin")
def _arg_extreme(ctx: NodeContext, ins, attrs):
    x = ins[0]
    index = ctx.emit(ctx.op_type.lower(), [x], axis=ctx.axis(attrs.get("axis", 0), len(x.shape)),
                     keepdims=bool(attrs.get("keepdims", 1)),
                     select_last_index=bool(attrs.get("select_last_index", 0)))
    return ctx.cast(index, "int64")  # ONNX's indices


@converts(*_COMPOSED_REDUCE)
def _composed_reduce(ctx: NodeContext, ins, attrs):
    x, op = ins[0], ctx.op_type
    if np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"input of dtype {x.dtype} (a float type is needed)")
    axes = reduce_axes(ctx, ins, attrs, 18)
    keepdims = bool(attrs.get("keepdims", 1))
    if op == "ReduceLogSumExp":  # log(sum(exp(x - max))) + max: no overflow
        if axes is None:  # no reduction: each element's log of its own exp
            return x
        top = ctx.emit("max", [x], axis=axes, keepdims=True)
        total = ctx.emit("sum", [ctx.emit("exp", [ctx.emit("subtract", [x, top])])], axis=axes, keepdims=True)
        out = ctx.emit("add", [ctx.emit("log", [total]), top])
        return out if keepdims else ctx.reshape(out, tuple(d for k, d in enumerate(x.shape) if k not in axes))
    terms = ctx.emit("abs", [x]) if op == "ReduceL1" else ctx.emit("multiply", [x, x])
    # no reduction: each term is its own sum
    total = terms if axes is None else ctx.emit("sum", [terms], axis=axes, keepdims=keepdims)
    return ctx.emit("sqrt", [total]) if op == "ReduceL2" else total
