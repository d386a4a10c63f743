"""Reductions: ``sum``, ``prod``, ``mean``, ``max``, ``min`` over axes, ``argmax``, ``argmin``,
``nn.softmax``, ``nn.layer_norm`` and the NCHW pools (``nn.max_pool2d``, ``nn.avg_pool2d``,
``nn.global_avg_pool2d``).

The references reduce in float64 (int64 for integer sums and products) and round once to the dtype.
"""

from __future__ import annotations

import numpy as np

from ... import te, topi
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import (
    arity,
    axis_of,
    broadcast_index,
    epsilon,
    fail,
    floating,
    int_tuple,
    is_int,
    numeric,
    pair,
    shape_of,
    wide,
)

__all__ = ["reduced_axes"]


# ---------------------------------------------------------------------------- sum, prod, mean, max, min


def _axes(op: str, attrs, ndim: int) -> tuple[int, ...]:
    """The reduced axes, sorted (all of them where attribute axis is None; an int is one axis)."""
    axis = attrs.get("axis")
    if axis is None:
        return tuple(range(ndim))
    if is_int(axis):
        axis = (axis,)
    axes = tuple(sorted(axis_of(op, a, ndim) for a in int_tuple(op, "axis", axis)))
    if not axes or len(set(axes)) != len(axes):
        raise fail(op, f"attribute axis must name distinct axes, at least one, got {axis!r}")
    return axes


def reduced_axes(node) -> tuple[int, ...]:
    """The axes reduction ``node`` (``sum``, ``prod``, ``mean``, ``max``, ``min``) reduces over,
    sorted and counted from the front, as the operator reads its attribute ``axis``."""
    return _axes(node.op, node.attrs, len(node.inputs[0].shape))


def _keepdims(op: str, attrs) -> bool:
    keep = attrs.get("keepdims", False)
    if not isinstance(keep, (bool, np.bool_)):
        raise fail(op, f"attribute keepdims must be a bool, got {keep!r}")
    return bool(keep)


def _reduced_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def _reduction(name: str, ref, reducer, *, mean: bool = False, float_only: bool = False,
               empty_ok: bool = False) -> OpDef:
    """Operator ``name`` reducing with ``reducer``; ``empty_ok``: an empty axis gives the reducer's
    identity (a sum's 0, a product's 1) rather than an error."""
    def infer(types, attrs):
        arity(name, types, 1)
        (x,) = types
        (floating if float_only else numeric)(name, x)
        axes = _axes(name, attrs, len(x.shape))
        if not mean and not empty_ok and any(x.shape[a] == 0 for a in axes):
            raise fail(name, f"cannot reduce an empty axis of {x.shape}")
        return [TensorType(_reduced_shape(x.shape, axes, _keepdims(name, attrs)), x.dtype)]

    def evaluate(arrays, attrs):
        (x,) = arrays
        axes = _axes(name, attrs, x.ndim)
        return [np.asarray(ref(wide(x), axis=axes, keepdims=_keepdims(name, attrs))).astype(x.dtype)]

    def compute(tensors, attrs):
        (x,) = tensors
        shape = shape_of(x)
        axes = _axes(name, attrs, len(shape))
        keep = _keepdims(name, attrs)
        rs = [te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes]

        def source(i):  # the input index at output index i and the reduce axes
            kept = iter([k for pos, k in enumerate(i) if pos not in axes] if keep else i)
            red = iter(rs)
            return tuple(next(red) if k in axes else next(kept) for k in range(len(shape)))

        out_shape = _reduced_shape(shape, axes, keep)
        tag = name.split(".")[-1]
        total = te.compute(out_shape, lambda *i: reducer(x[source(i)], axis=rs), name=f"T_{tag}_red"
                           if mean else f"T_{tag}")
        if not mean:
            return [total]
        count = te.const(int(np.prod([shape[a] for a in axes])), x.dtype)
        return [te.compute(out_shape, lambda *i: total[i] / count, name=f"T_{tag}", tag="elemwise")]

    return register_op(OpDef(name, "reduce", infer, evaluate, compute,
                             f"{name} over attribute axis (a tuple; None for all), keepdims."))


_prod = te.comm_reducer(lambda x, y: x * y, lambda dtype: te.const(1, dtype), name="prod")

_reduction("sum", np.sum, te.sum, empty_ok=True)
_reduction("prod", np.prod, _prod, empty_ok=True)
_reduction("mean", np.mean, te.sum, mean=True, float_only=True)
_reduction("max", np.max, te.max)
_reduction("min", np.min, te.min)


# ---------------------------------------------------------------------------- argmax, argmin


def _arg_reducer(largest: bool, last: bool):
    """An index-and-value reducer: the extreme value, and on ties the lowest index (the highest
    with ``last``) whatever order the values are combined in."""
    def fcombine(x, y):
        better = x[1] > y[1] if largest else x[1] < y[1]
        tie_won = x[0] > y[0] if last else x[0] < y[0]
        keep = te.any(better, te.all(x[1] == y[1], tie_won))
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(index_dtype, value_dtype):
        worst = te.min_value(value_dtype) if largest else te.max_value(value_dtype)
        return te.const(-1, index_dtype), worst

    return te.comm_reducer(fcombine, fidentity, name="argmax" if largest else "argmin")


def _arg_attrs(op: str, attrs, ndim: int) -> tuple[int, bool, bool]:
    axis = attrs.get("axis", 0)
    if isinstance(axis, (tuple, list)):
        if len(axis) != 1:
            raise fail(op, f"reduces one axis, got axis={axis!r}")
        axis = axis[0]
    return axis_of(op, axis, ndim), _keepdims(op, attrs), bool(attrs.get("select_last_index", False))


def _arg_op(name: str, largest: bool) -> OpDef:
    def infer(types, attrs):
        arity(name, types, 1)
        (x,) = types
        numeric(name, x)
        axis, keep, _ = _arg_attrs(name, attrs, len(x.shape))
        if x.shape[axis] == 0:
            raise fail(name, f"cannot reduce an empty axis of {x.shape}")
        return [TensorType(_reduced_shape(x.shape, (axis,), keep), "int32")]

    def evaluate(arrays, attrs):
        (x,) = arrays
        axis, keep, last = _arg_attrs(name, attrs, x.ndim)
        pick = np.argmax if largest else np.argmin
        if last:  # the last of the ties: the first one of the reversed axis
            index = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
        else:
            index = pick(x, axis=axis)
        return [np.asarray(np.expand_dims(index, axis) if keep else index).astype("int32")]

    def compute(tensors, attrs):
        (x,) = tensors
        shape = shape_of(x)
        axis, keep, last = _arg_attrs(name, attrs, len(shape))
        k = te.reduce_axis((0, shape[axis]), name="k")
        reducer = _arg_reducer(largest, last)

        def body(*i):
            outer = i[:axis] + (i[axis + 1:] if keep else i[axis:])
            return reducer((k.var.astype("int32"), x[(*outer[:axis], k, *outer[axis:])]), axis=k)

        index, _ = te.compute(_reduced_shape(shape, (axis,), keep), body, name=f"T_{name}")
        return [index]

    return register_op(OpDef(name, "reduce", infer, evaluate, compute,
                             f"The int32 index of the {'largest' if largest else 'smallest'} value along "
                             "attribute axis (0), keepdims, select_last_index (ties: the first, or the "
                             "last)."))


_arg_op("argmax", largest=True)
_arg_op("argmin", largest=False)


# ---------------------------------------------------------------------------- nn.softmax


def _softmax_infer(types, attrs):
    arity("nn.softmax", types, 1)
    floating("nn.softmax", types[0])
    axis_of("nn.softmax", attrs.get("axis", -1), len(types[0].shape))
    return [types[0]]


register_op(OpDef(
    "nn.softmax", "reduce", _softmax_infer,
    lambda arrays, attrs: [topi.testing.softmax_python(arrays[0], attrs.get("axis", -1))],
    lambda tensors, attrs: [topi.nn.softmax(tensors[0], attrs.get("axis", -1) % len(tensors[0].shape))],
    "exp(x - max) / sum(exp(x - max)) along attribute axis."))


# ---------------------------------------------------------------------------- nn.layer_norm


def _layer_norm_infer(types, attrs):
    op = "nn.layer_norm"
    arity(op, types, 3)
    x = types[0]
    floating(op, x)
    epsilon(op, attrs)
    axis = axis_of(op, attrs.get("axis", -1), len(x.shape))
    norm = x.shape[axis:]
    for what, t in zip(("gamma", "beta"), types[1:]):
        if t.dtype != x.dtype:
            raise fail(op, f"{what} must be {x.dtype}, got {t.dtype}")
        lead = len(norm) - len(t.shape)
        if lead < 0 or any(d not in (1, norm[lead + k]) for k, d in enumerate(t.shape)):
            raise fail(op, f"{what} of shape {t.shape} does not broadcast to the normalised shape {norm}")
    return [x]


def _layer_norm_evaluate(arrays, attrs):
    x, gamma, beta = arrays
    axis = attrs.get("axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    wx = wide(x)
    mean = wx.mean(axis=axes, keepdims=True)
    var = ((wx - mean) ** 2).mean(axis=axes, keepdims=True)
    eps = epsilon("nn.layer_norm", attrs)
    return [((wx - mean) / np.sqrt(var + eps) * wide(gamma) + wide(beta)).astype(x.dtype)]


def _layer_norm_compute(tensors, attrs):
    x, gamma, beta = tensors
    shape = shape_of(x)
    axis = attrs.get("axis", -1) % len(shape)
    norm = shape[axis:]
    eps = te.const(epsilon("nn.layer_norm", attrs), x.dtype)
    count = te.const(int(np.prod(norm)), x.dtype)
    outer = shape[:axis]
    r1 = [te.reduce_axis((0, d), name=f"k{k}") for k, d in enumerate(norm)]
    total = te.compute(outer, lambda *i: te.sum(x[(*i, *r1)], axis=r1), name="T_layer_norm_sum")
    r2 = [te.reduce_axis((0, d), name=f"k{k}") for k, d in enumerate(norm)]

    def squares(*i):
        d = x[(*i, *r2)] - total[i] / count
        return te.sum(d * d, axis=r2)

    sq = te.compute(outer, squares, name="T_layer_norm_sqsum")
    gs, bs = shape_of(gamma), shape_of(beta)

    def body(*i):
        o, n = i[:axis], i[axis:]
        normed = (x[i] - total[o] / count) / te.sqrt(sq[o] / count + eps)
        return normed * gamma[broadcast_index(n, gs, norm)] + beta[broadcast_index(n, bs, norm)]

    return [te.compute(shape, body, name="T_layer_norm", tag="layer_norm")]


register_op(OpDef("nn.layer_norm", "reduce", _layer_norm_infer, _layer_norm_evaluate, _layer_norm_compute,
                  "(x - mean) / sqrt(var + epsilon) * gamma + beta over the axes from attribute axis "
                  "to the last (ONNX LayerNormalization)."))


# ---------------------------------------------------------------------------- pools


def _pool_attrs(op: str, attrs):
    """``(pool_size, strides, padding, dilation, ceil_mode)`` of a 2-D pool."""
    size = pair(op, "pool_size", attrs.get("pool_size"))
    strides = pair(op, "strides", attrs.get("strides", (1, 1)))
    padding = int_tuple(op, "padding", attrs.get("padding", (0, 0, 0, 0)), 4, 0)
    dilation = pair(op, "dilation", attrs.get("dilation", (1, 1)))
    ceil_mode = attrs.get("ceil_mode", False)
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise fail(op, f"attribute ceil_mode must be a bool, got {ceil_mode!r}")
    return size, strides, padding, dilation, bool(ceil_mode)


def _pool_out(size: int, k: int, s: int, lo: int, hi: int, d: int, ceil_mode: bool) -> int:
    span = size + lo + hi - (k - 1) * d - 1
    return (-(-span // s) if ceil_mode else span // s) + 1


def _pool(kind: str) -> OpDef:
    op = f"nn.{kind}_pool2d"

    def infer(types, attrs):
        arity(op, types, 1)
        (x,) = types
        (numeric if kind == "max" else floating)(op, x)  # a quantized model pools its integers
        if len(x.shape) != 4:
            raise fail(op, f"the input must be 4-D (NCHW), got {x.shape}")
        (kh, kw), (sh, sw), (top, left, bottom, right), (dh, dw), ceil_mode = _pool_attrs(op, attrs)
        N, C, H, W = x.shape
        if H + top + bottom < (kh - 1) * dh + 1 or W + left + right < (kw - 1) * dw + 1:
            raise fail(op, f"a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the padded input "
                           f"{H + top + bottom}x{W + left + right}")
        Ho = _pool_out(H, kh, sh, top, bottom, dh, ceil_mode)
        Wo = _pool_out(W, kw, sw, left, right, dw, ceil_mode)
        return [TensorType((N, C, Ho, Wo), x.dtype)]

    def evaluate(arrays, attrs):
        (x,) = arrays
        (kh, kw), (sh, sw), (top, left, bottom, right), (dh, dw), ceil_mode = _pool_attrs(op, attrs)
        H, W = x.shape[2:]
        Ho = _pool_out(H, kh, sh, top, bottom, dh, ceil_mode)
        Wo = _pool_out(W, kw, sw, left, right, dw, ceil_mode)
        # pad far enough for every window; the taps past the padding never count
        eh = max(0, (Ho - 1) * sh + (kh - 1) * dh + 1 - (H + top + bottom))
        ew = max(0, (Wo - 1) * sw + (kw - 1) * dw + 1 - (W + left + right))
        widths = ((0, 0), (0, 0), (top, bottom + eh), (left, right + ew))
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(wide(x), widths, constant_values=lowest if kind == "max" else 0)
        counted = np.zeros(xp.shape[2:])
        if attrs.get("count_include_pad", False):
            counted[:H + top + bottom, :W + left + right] = 1
        else:
            counted[top:top + H, left:left + W] = 1
        out = np.full(x.shape[:2] + (Ho, Wo), lowest if kind == "max" else 0.0, xp.dtype)
        taps = np.zeros((Ho, Wo))
        for ry in range(kh):
            for rx in range(kw):
                rows = slice(ry * dh, ry * dh + (Ho - 1) * sh + 1, sh)
                cols = slice(rx * dw, rx * dw + (Wo - 1) * sw + 1, sw)
                if kind == "max":
                    np.maximum(out, xp[:, :, rows, cols], out=out)
                else:
                    out += xp[:, :, rows, cols]
                    taps += counted[rows, cols]
        if kind == "avg":
            out /= np.maximum(taps, 1)
        return [out.astype(x.dtype)]

    def compute(tensors, attrs):
        (x,) = tensors
        size, strides, padding, dilation, ceil_mode = _pool_attrs(op, attrs)
        return [topi.nn.pool2d(x, size, strides, dilation, padding, kind, ceil_mode, "NCHW",
                               bool(attrs.get("count_include_pad", False)))]

    extra = ", count_include_pad (False)" if kind == "avg" else ""
    return register_op(OpDef(op, "reduce", infer, evaluate, compute,
                             f"{kind} pooling over NCHW; attrs pool_size, strides, padding (top, left, "
                             f"bottom, right), dilation, ceil_mode{extra}."))


_pool("max")
_pool("avg")


def _global_infer(types, attrs):
    op = "nn.global_avg_pool2d"
    arity(op, types, 1)
    (x,) = types
    floating(op, x)
    if len(x.shape) != 4:
        raise fail(op, f"the input must be 4-D (NCHW), got {x.shape}")
    return [TensorType(x.shape[:2] + (1, 1), x.dtype)]


def _global_compute(tensors, attrs):
    (x,) = tensors
    N, C, H, W = shape_of(x)
    ry, rx = te.reduce_axis((0, H), name="ry"), te.reduce_axis((0, W), name="rx")
    total = te.compute((N, C, 1, 1), lambda n, c, i, j: te.sum(x[n, c, ry, rx], axis=[ry, rx]),
                       name="T_global_sum")
    count = te.const(H * W, x.dtype)
    return [te.compute((N, C, 1, 1), lambda *i: total[i] / count, name="T_global_avg_pool2d",
                       tag="elemwise")]


register_op(OpDef(
    "nn.global_avg_pool2d", "reduce", _global_infer,
    lambda arrays, attrs: [wide(arrays[0]).mean(axis=(2, 3), keepdims=True).astype(arrays[0].dtype)],
    _global_compute, "The mean over H and W of NCHW data: (N, C, 1, 1)."))

