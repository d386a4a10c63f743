"""Operators with weights: ``nn.conv2d``, ``nn.conv2d_transpose``, ``nn.dense``,
``nn.batch_matmul``, ``nn.bias_add`` and ``nn.batch_norm`` (inference form).

Convolution, dense and batched products are built from :mod:`compiler.topi`; their references
accumulate in float64 (int64 for integers), as :mod:`compiler.topi.testing` does.
"""

from __future__ import annotations

import numpy as np

from ... import te, topi
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import (
    arity,
    axis_of,
    epsilon,
    fail,
    floating,
    int_tuple,
    numeric,
    pair,
    positive_int,
    same_dtype,
    shape_of,
    wide,
    window_output,
)

__all__: list[str] = []


# ---------------------------------------------------------------------------- nn.conv2d


def _conv_attrs(attrs) -> tuple[tuple[int, int], tuple[int, int, int, int], tuple[int, int], int]:
    """``(strides, padding (top, left, bottom, right), dilation, groups)`` of ``nn.conv2d``."""
    op = "nn.conv2d"
    strides = pair(op, "strides", attrs.get("strides", (1, 1)))
    padding = int_tuple(op, "padding", attrs.get("padding", (0, 0, 0, 0)), 4, 0)
    dilation = pair(op, "dilation", attrs.get("dilation", (1, 1)))
    return strides, padding, dilation, positive_int(op, "groups", attrs.get("groups", 1))


def _conv_operands(op: str, types, weight_layout: str) -> tuple[TensorType, TensorType, str]:
    """``(data, weight, dtype)`` of a convolution's two 4-D inputs of one numeric dtype."""
    arity(op, types, 2)
    data, weight = types
    dtype = same_dtype(op, types, "data and weight")
    numeric(op, data, "data")
    if len(data.shape) != 4 or len(weight.shape) != 4:
        raise fail(op, f"data (NCHW) and weight ({weight_layout}) must be 4-D, "
                       f"got {data.shape} and {weight.shape}")
    return data, weight, dtype


def _conv_infer(types, attrs):
    op = "nn.conv2d"
    data, weight, dtype = _conv_operands(op, types, "OIHW")
    strides, (top, left, bottom, right), (dh, dw), groups = _conv_attrs(attrs)
    N, C, H, W = data.shape
    F, CG, KH, KW = weight.shape
    if C % groups or F % groups:
        raise fail(op, f"groups={groups} must divide the {C} input channels and the {F} filters")
    if CG * groups != C:
        raise fail(op, f"the weight has {CG} input channels per group but data has {C} channels "
                       f"in {groups} group(s)")
    Ho, Wo = window_output(H, W, KH, KW, strides, (top, left, bottom, right), (dh, dw))
    if Ho < 1 or Wo < 1:
        raise fail(op, f"a {KH}x{KW} window (dilation {dh}x{dw}) does not fit the padded input "
                       f"{H + top + bottom}x{W + left + right}")
    return [TensorType((N, F, Ho, Wo), dtype)]


def _conv_evaluate(arrays, attrs):
    x, w = arrays
    strides, padding, dilation, groups = _conv_attrs(attrs)
    return [topi.testing.conv2d_nchw_python(x, w, strides, padding, groups, dilation)]


def _conv_compute(tensors, attrs):
    x, w = tensors
    strides, padding, dilation, groups = _conv_attrs(attrs)
    C, F = shape_of(x)[1], shape_of(w)[0]
    if groups == 1:
        return [topi.nn.conv2d_nchw(x, w, strides, padding, dilation)]
    if groups == C == F:  # weight (C, 1, KH, KW) is the depthwise filter with multiplier 1
        return [topi.nn.depthwise_conv2d_nchw(x, w, strides, padding, dilation)]
    return [_group_conv2d_nchw(x, w, strides, padding, dilation, groups)]


def _group_conv2d_nchw(x, w, strides, padding, dilation, groups: int):
    """A grouped convolution: filter ``f`` reads the input channels of group ``f // (F / groups)``."""
    N, C, H, W = shape_of(x)
    F, CG, KH, KW = shape_of(w)
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    Ho, Wo = window_output(H, W, KH, KW, strides, padding, dilation)
    padded = topi.nn.pad(x, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    per_group = F // groups
    rc = te.reduce_axis((0, CG), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    return te.compute(
        (N, F, Ho, Wo),
        lambda n, f, y, xx: te.sum(
            padded[n, f // per_group * CG + rc, y * sh + ry * dh, xx * sw + rx * dw] * w[f, rc, ry, rx],
            axis=[rc, ry, rx]),
        name="group_conv2d_nchw", tag="group_conv2d_nchw")


register_op(OpDef("nn.conv2d", "out_elemwise_fusable", _conv_infer, _conv_evaluate, _conv_compute,
                  "2-D convolution, NCHW data and (F, C/groups, KH, KW) weight; attrs strides, "
                  "padding (top, left, bottom, right), dilation, groups."))


# ---------------------------------------------------------------------------- nn.conv2d_transpose

_TRANSPOSE = "nn.conv2d_transpose"


def _transpose_attrs(attrs) -> tuple:
    """``(strides, padding, dilation, output_padding, groups)`` of ``nn.conv2d_transpose``."""
    op = _TRANSPOSE
    strides = pair(op, "strides", attrs.get("strides", (1, 1)))
    padding = int_tuple(op, "padding", attrs.get("padding", (0, 0, 0, 0)), 4, 0)
    dilation = pair(op, "dilation", attrs.get("dilation", (1, 1)))
    output_padding = int_tuple(op, "output_padding", attrs.get("output_padding", (0, 0)), 2, 0)
    return strides, padding, dilation, output_padding, positive_int(op, "groups", attrs.get("groups", 1))


def _transpose_infer(types, attrs):
    op = _TRANSPOSE
    data, weight, dtype = _conv_operands(op, types, "IOHW")
    (sh, sw), (top, left, bottom, right), (dh, dw), (oph, opw), groups = _transpose_attrs(attrs)
    N, C, H, W = data.shape
    CW, FG, KH, KW = weight.shape
    if C % groups or CW != C:
        raise fail(op, f"the weight's {CW} input channels must be the data's {C}, in groups={groups}")
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise fail(op, f"output_padding {(oph, opw)} must be below the stride or the dilation")
    size = topi.nn.conv2d_transpose_output_size
    Ho, Wo = size(H, KH, sh, top, bottom, dh, oph), size(W, KW, sw, left, right, dw, opw)
    if Ho < 1 or Wo < 1:
        raise fail(op, f"padding {(top, left, bottom, right)} leaves an output of {Ho}x{Wo}")
    return [TensorType((N, FG * groups, Ho, Wo), dtype)]


def _transpose_evaluate(arrays, attrs):
    x, w = arrays
    strides, padding, dilation, output_padding, groups = _transpose_attrs(attrs)
    reference = topi.testing.conv2d_transpose_nchw_python
    return [reference(x, w, strides, padding, output_padding, dilation, groups)]


def _transpose_compute(tensors, attrs):
    x, w = tensors
    strides, padding, dilation, output_padding, groups = _transpose_attrs(attrs)
    return [topi.nn.conv2d_transpose_nchw(x, w, strides, padding, None, output_padding, dilation, groups)]


# A reduction to fusion: the bias and activation after it join its kernel (it has no template)
register_op(OpDef(_TRANSPOSE, "reduce", _transpose_infer, _transpose_evaluate, _transpose_compute,
                  "2-D transposed convolution, NCHW data and (C, F/groups, KH, KW) weight; attrs "
                  "strides, padding (top, left, bottom, right, taken off the full output), dilation, "
                  "output_padding (bottom, right), groups."))


# ---------------------------------------------------------------------------- nn.dense


def _dense_infer(types, attrs):
    op = "nn.dense"
    arity(op, types, 2)
    x, w = types
    dtype = same_dtype(op, types, "data and weight")
    numeric(op, x, "data")
    if len(x.shape) != 2 or len(w.shape) != 2:
        raise fail(op, f"data (M, K) and weight (N, K) must be 2-D, got {x.shape} and {w.shape}")
    if x.shape[1] != w.shape[1]:
        raise fail(op, f"data has {x.shape[1]} columns but the weight has {w.shape[1]}")
    return [TensorType((x.shape[0], w.shape[0]), dtype)]


register_op(OpDef(
    "nn.dense", "out_elemwise_fusable", _dense_infer,
    lambda arrays, attrs: [(wide(arrays[0]) @ wide(arrays[1]).T).astype(arrays[0].dtype)],
    lambda tensors, attrs: [topi.nn.dense(*tensors)],
    "x @ weight.T: (M, K) and (N, K) give (M, N)."))


# ---------------------------------------------------------------------------- nn.batch_matmul


def _bmm_flags(attrs) -> tuple[bool, bool]:
    flags = attrs.get("transpose_a", False), attrs.get("transpose_b", False)
    if not all(isinstance(f, (bool, np.bool_)) for f in flags):
        raise fail("nn.batch_matmul", f"attributes transpose_a and transpose_b must be bools, got {flags}")
    return bool(flags[0]), bool(flags[1])


def _bmm_infer(types, attrs):
    op = "nn.batch_matmul"
    arity(op, types, 2)
    a, b = types
    dtype = same_dtype(op, types)
    numeric(op, a, "the inputs")
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise fail(op, f"the inputs must be 3-D, got {a.shape} and {b.shape}")
    ta, tb = _bmm_flags(attrs)
    K, M = (a.shape[1], a.shape[2]) if ta else (a.shape[2], a.shape[1])
    N, KB = (b.shape[1], b.shape[2]) if tb else (b.shape[2], b.shape[1])
    if K != KB:
        raise fail(op, f"the reduction lengths differ ({K} and {KB}) for shapes {a.shape} and {b.shape}")
    if a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
        raise fail(op, f"batch sizes {a.shape[0]} and {b.shape[0]} differ and neither is 1")
    return [TensorType((max(a.shape[0], b.shape[0]), M, N), dtype)]


def _bmm_evaluate(arrays, attrs):
    ta, tb = _bmm_flags(attrs)
    return [topi.testing.batch_matmul(*arrays, trans_x=ta, trans_y=tb)]


def _bmm_compute(tensors, attrs):
    ta, tb = _bmm_flags(attrs)
    return [topi.nn.batch_matmul(*tensors, transpose_a=ta, transpose_b=tb)]


register_op(OpDef("nn.batch_matmul", "out_elemwise_fusable", _bmm_infer, _bmm_evaluate, _bmm_compute,
                  "op(a[i]) @ op(b[i]) per batch (attrs transpose_a, transpose_b; False by default); "
                  "a batch of 1 broadcasts."))


# ---------------------------------------------------------------------------- nn.bias_add


def _per_channel(op: str, types, attrs, names: tuple[str, ...]) -> int:
    """The channel axis; GraphError unless every input after the first is a vector of its length
    in the first input's dtype."""
    x = types[0]
    axis = axis_of(op, attrs.get("axis", 1), len(x.shape))
    for name, t in zip(names, types[1:]):
        if t.shape != (x.shape[axis],):
            raise fail(op, f"{name} must have shape ({x.shape[axis]},) (axis {axis} of {x.shape}), "
                           f"got {t.shape}")
    same_dtype(op, types)
    return axis


def _bias_block(types_or_shape, attrs) -> int | None:
    """The channel block of a blocked ``nn.bias_add`` (attr ``block``), or None."""
    block = attrs.get("block")
    return None if block is None else positive_int("nn.bias_add", "block", block)


def _bias_add_infer(types, attrs):
    op = "nn.bias_add"
    arity(op, types, 2)
    numeric(op, types[0])
    block = _bias_block(types, attrs)
    if block is None:
        _per_channel(op, types, attrs, ("bias",))
        return [types[0]]
    x, bias = types
    same_dtype(op, types)
    if len(x.shape) != 5 or x.shape[4] != block or bias.shape != (x.shape[1] * block,):
        raise fail(op, f"with block={block}, x must be (N, C/{block}, H, W, {block}) and bias (C,); got "
                       f"{x.shape} and {bias.shape}")
    return [x]


def _channel_view(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * (ndim - axis - 1))


def _bias_add_evaluate(arrays, attrs):
    x, bias = arrays
    block = _bias_block(None, attrs)
    if block is not None:
        return [(x + bias.reshape(1, -1, 1, 1, block)).astype(x.dtype)]
    axis = attrs.get("axis", 1) % x.ndim
    return [(x + _channel_view(bias, axis, x.ndim)).astype(x.dtype)]


def _bias_add_compute(tensors, attrs):
    x, bias = tensors
    block = _bias_block(None, attrs)
    if block is not None:
        return [te.compute(x.shape, lambda n, c, h, w, b: x[n, c, h, w, b] + bias[c * block + b],
                           name="T_add", tag="broadcast")]
    axis = attrs.get("axis", 1) % len(x.shape)
    return [te.compute(x.shape, lambda *i: x[i] + bias[i[axis]], name="T_add", tag="broadcast")]


register_op(OpDef("nn.bias_add", "broadcast", _bias_add_infer, _bias_add_evaluate, _bias_add_compute,
                  "x plus a vector along attribute axis (1 by default); with attr block, channel-blocked x "
                  "(N, C/block, H, W, block) plus a (C,) vector."))


# ---------------------------------------------------------------------------- nn.batch_norm


def _batch_norm_infer(types, attrs):
    op = "nn.batch_norm"
    arity(op, types, 5)
    floating(op, types[0])
    epsilon(op, attrs)
    _per_channel(op, types, attrs, ("gamma", "beta", "moving_mean", "moving_var"))
    return [types[0]]


def _batch_norm_evaluate(arrays, attrs):
    x, gamma, beta, mean, var = arrays
    axis = attrs.get("axis", 1) % x.ndim
    eps = epsilon("nn.batch_norm", attrs)
    g, b, m, v = (_channel_view(wide(a), axis, x.ndim) for a in (gamma, beta, mean, var))
    return [((wide(x) - m) / np.sqrt(v + eps) * g + b).astype(x.dtype)]


def _batch_norm_compute(tensors, attrs):
    x, gamma, beta, mean, var = tensors
    axis = attrs.get("axis", 1) % len(x.shape)
    eps = te.const(epsilon("nn.batch_norm", attrs), x.dtype)

    def body(*i):
        c = i[axis]
        return (x[i] - mean[c]) / te.sqrt(var[c] + eps) * gamma[c] + beta[c]

    return [te.compute(x.shape, body, name="T_batch_norm", tag="broadcast")]


register_op(OpDef("nn.batch_norm", "broadcast", _batch_norm_infer, _batch_norm_evaluate, _batch_norm_compute,
                  "Inference batch normalisation: (x, gamma, beta, mean, var), attrs epsilon, axis (1)."))
