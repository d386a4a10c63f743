"""Operators on channel-blocked tensors: ``NCHW{b}c`` is ``(N, C / b, H, W, b)``, channel
``c`` at ``[:, c // b, :, :, c % b]`` (oneDNN's ``nChw16c``, TVM's ``NCHWc``).

* ``layout_transform``: attrs ``src_layout`` and ``dst_layout``, each ``"NCHW"`` or
  ``"NCHW{b}c"``; injective;
* ``nn.conv2d_nchwc``: blocked data ``(N, C/ib, H, W, ib)`` and a blocked weight
  ``(F/ob, C/ib, KH, KW, ib, ob)`` to ``(N, F/ob, Ho, Wo, ob)``; attrs strides, padding,
  dilation and groups as ``nn.conv2d``'s. With groups, ``ob`` divides a group's ``F/groups``
  filters and the weight is ``(F/ob, Cg/wb, KH, KW, wb, ob)`` over a group's ``Cg = C/groups``
  channels: ``wb = ib`` where the data's blocks divide a group (whole blocks each), else
  ``wb = Cg`` and a data block holds whole groups (:func:`grouped_input`);
* ``nn.conv2d_winograd_nchwc``: the same 3x3 stride-1 convolution by Winograd's ``F(m x m, 3 x 3)``,
  its weight transformed and packed at build time ``((m+2)^2, F/nr, C, nr)``; attrs padding,
  tile_size (``m``), block (the output's channel block) and dilation (one if left out);
* ``nn.depthwise_conv2d_nchwc``: blocked data ``(N, C/b, H, W, b)`` and a blocked weight
  ``(C/b, KH, KW, b)`` (each channel its own filter) to ``(N, C/b, Ho, Wo, b)``; attrs as
  ``nn.conv2d``'s;
* ``nn.pool2d_nchwc``: max or average pooling (attr ``kind``) of blocked data; the other attrs
  as ``nn.max_pool2d``'s and ``nn.avg_pool2d``'s;
* ``nn.dense_pack``: ``x (M, K)`` and a weight packed in micro-panels of ``nr`` columns,
  ``(ceil(N / nr), K, nr)`` (zeros past ``N``), to ``(M, N)``; attr ``units`` (``N``).

``nn.bias_add`` with attr ``block`` adds a ``(C,)`` vector to blocked data (see :mod:`.nn`).
"""

from __future__ import annotations

import re

import numpy as np

from ... import te, topi
from ...topi.nn.winograd import WINOGRAD_TILE_SIZES
from ..ir import TensorType
from ..op import OpDef, get_op, register_op
from ._common import arity, fail, floating, int_tuple, pair, positive_int, same_dtype, shape_of, window_output

__all__ = ["parse_layout", "layout_name", "to_blocks", "from_blocks", "pack_weight", "pack_depthwise_weight",
           "pack_dense_weight", "window_attrs", "grouped_input"]

_BLOCKED = re.compile(r"NCHW(\d+)c")


def parse_layout(op: str, layout) -> int | None:
    """The channel block of ``layout`` (None for ``"NCHW"``)."""
    if layout == "NCHW":
        return None
    m = _BLOCKED.fullmatch(layout) if isinstance(layout, str) else None
    if m is None or int(m.group(1)) < 1:
        raise fail(op, f"layout must be 'NCHW' or 'NCHW<b>c' (e.g. 'NCHW16c'), got {layout!r}")
    return int(m.group(1))


def layout_name(block: int | None) -> str:
    """The layout of channel block ``block``: ``"NCHW{block}c"``, or ``"NCHW"`` for None."""
    return "NCHW" if block is None else f"NCHW{block}c"


def to_blocks(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW ``x`` as ``NCHW{block}c``."""
    N, C, H, W = x.shape
    return np.ascontiguousarray(x.reshape(N, C // block, block, H, W).transpose(0, 1, 3, 4, 2))


def from_blocks(x: np.ndarray) -> np.ndarray:
    """Blocked ``x`` as NCHW."""
    N, Cb, H, W, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(N, Cb * b, H, W))


def pack_weight(w: np.ndarray, ic_bn: int, oc_bn: int) -> np.ndarray:
    """An OIHW weight as ``(F/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn)``."""
    F, C, KH, KW = w.shape
    return np.ascontiguousarray(w.reshape(F // oc_bn, oc_bn, C // ic_bn, ic_bn, KH, KW)
                                .transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise_weight(w: np.ndarray, block: int) -> np.ndarray:
    """A depthwise weight ``(C, 1, KH, KW)`` as ``(C/block, KH, KW, block)``."""
    C, _, KH, KW = w.shape
    return np.ascontiguousarray(w.reshape(C // block, block, KH, KW).transpose(0, 2, 3, 1))


def pack_dense_weight(w: np.ndarray, nr: int) -> np.ndarray:
    """A dense weight ``(N, K)`` in micro-panels: ``(ceil(N / nr), K, nr)``, zeros past ``N``."""
    N, K = w.shape
    panels = -(-N // nr)
    padded = np.zeros((panels * nr, K), dtype=w.dtype)
    padded[:N] = w
    return np.ascontiguousarray(padded.reshape(panels, nr, K).transpose(0, 2, 1))


# ---------------------------------------------------------------------------- layout_transform


def _transform_layouts(attrs) -> tuple[int | None, int | None]:
    op = "layout_transform"
    return parse_layout(op, attrs.get("src_layout")), parse_layout(op, attrs.get("dst_layout"))


def _transform_infer(types, attrs):
    op = "layout_transform"
    arity(op, types, 1)
    (x,) = types
    src, dst = _transform_layouts(attrs)
    if len(x.shape) != (4 if src is None else 5) or (src is not None and x.shape[4] != src):
        raise fail(op, f"the input {x.shape} is not in layout {attrs.get('src_layout')}")
    N, C = x.shape[0], x.shape[1] * (src or 1)
    H, W = x.shape[2:4]
    if dst is None:
        return [TensorType((N, C, H, W), x.dtype)]
    if C % dst:
        raise fail(op, f"blocks of {dst} do not divide {C} channels")
    return [TensorType((N, C // dst, H, W, dst), x.dtype)]


def _transform_evaluate(arrays, attrs):
    (x,) = arrays
    src, dst = _transform_layouts(attrs)
    plain = x if src is None else from_blocks(x)
    return [plain if dst is None else to_blocks(plain, dst)]


def _transform_compute(tensors, attrs):
    (x,) = tensors
    src, dst = _transform_layouts(attrs)
    shape = shape_of(x)
    N, C, H, W = shape[0], shape[1] * (src or 1), shape[2], shape[3]

    def read(n, c, h, w):
        return x[n, c, h, w] if src is None else x[n, c // src, h, w, c % src]

    if dst is None:
        return [te.compute((N, C, H, W), read, name="T_layout_nchw", tag="injective")]
    return [te.compute((N, C // dst, H, W, dst), lambda n, c, h, w, b: read(n, c * dst + b, h, w),
                       name="T_layout_blocks", tag="injective")]


register_op(OpDef("layout_transform", "injective", _transform_infer, _transform_evaluate, _transform_compute,
                  "data from src_layout to dst_layout ('NCHW' or 'NCHW<b>c')."))


# ---------------------------------------------------------------------------- nn.conv2d_nchwc


def window_attrs(attrs) -> dict:
    """The sliding-window attributes (``strides``, ``padding``, ``dilation``) ``attrs`` sets,
    as a convolution of another layout takes them."""
    return {k: attrs[k] for k in ("strides", "padding", "dilation") if k in attrs}


def _conv_attrs(attrs):
    op = "nn.conv2d_nchwc"
    return (pair(op, "strides", attrs.get("strides", (1, 1))),
            int_tuple(op, "padding", attrs.get("padding", (0, 0, 0, 0)), 4, 0),
            pair(op, "dilation", attrs.get("dilation", (1, 1))))


def _groups(attrs) -> int:
    return positive_int("nn.conv2d_nchwc", "groups", attrs.get("groups", 1))


def _output_size(H: int, W: int, KH: int, KW: int, attrs) -> tuple[int, int]:
    """The output rows and columns of a window of ``KH x KW`` (0 or less where it does not fit)."""
    return window_output(H, W, KH, KW, *_conv_attrs(attrs))


def _conv_infer(types, attrs):
    op = "nn.conv2d_nchwc"
    arity(op, types, 2)
    data, weight = types
    dtype = same_dtype(op, types, "data and weight")
    floating(op, data, "data")
    if len(data.shape) != 5 or len(weight.shape) != 6:
        raise fail(op, f"data must be 5-D (N, C/ib, H, W, ib) and weight 6-D (F/ob, C/ib, KH, KW, ib, ob), "
                       f"got {data.shape} and {weight.shape}")
    N, Cc, H, W, ib = data.shape
    Fc, Cgb, KH, KW, wb, ob = weight.shape
    groups = _groups(attrs)
    if Fc % groups:
        raise fail(op, f"groups={groups} must divide the weight's {Fc} output blocks")
    whole_blocks = wb == ib and Cc == groups * Cgb
    whole_groups = Cgb == 1 and ib % wb == 0 and Cc * ib == groups * wb
    if not (whole_blocks or whole_groups):
        raise fail(op, f"the weight's input blocks {(Cgb, wb)} do not match the data's {(Cc, ib)} "
                       f"in {groups} group(s)")
    Ho, Wo = _output_size(H, W, KH, KW, attrs)
    if Ho < 1 or Wo < 1:
        raise fail(op, f"a {KH}x{KW} window does not fit the padded input")
    return [TensorType((N, Fc, Ho, Wo, ob), dtype)]


def _conv_evaluate(arrays, attrs):
    x, w = arrays
    Fc, Cgb, KH, KW, wb, ob = w.shape
    plain_w = w.transpose(0, 5, 1, 4, 2, 3).reshape(Fc * ob, Cgb * wb, KH, KW)
    strides, padding, dilation = _conv_attrs(attrs)
    out = get_op("nn.conv2d").evaluate([from_blocks(x), plain_w], {"strides": strides, "padding": padding,
                                                                   "dilation": dilation,
                                                                   "groups": _groups(attrs)})[0]
    return [to_blocks(out, ob)]


def grouped_input(fc, cc, cb, Fc: int, Cgb: int, wb: int, ib: int, groups: int) -> tuple:
    """``(block, lane)`` of the data (blocks of ``ib``) that output block ``fc`` (of ``Fc``, in
    ``groups`` groups) reads as input channel ``cc * wb + cb`` of its group, whose ``Cgb * wb``
    channels are ``Cgb`` whole data blocks (``wb == ib``) or lie within one (``Cgb == 1``)."""
    if groups == 1:
        return cc, cb
    group = fc // (Fc // groups)
    if wb == ib:
        return group * Cgb + cc, cb
    first = group * wb  # the group's first channel
    return first // ib, first % ib + cb


def _conv_compute(tensors, attrs):
    x, w = tensors
    N, _, H, W, ib = shape_of(x)
    Fc, Cgb, KH, KW, wb, ob = shape_of(w)
    (sh, sw), (top, left, bottom, right), (dh, dw) = _conv_attrs(attrs)
    groups = _groups(attrs)
    Ho, Wo = _output_size(H, W, KH, KW, attrs)
    padded = topi.nn.pad(x, [0, 0, top, left, 0], [0, 0, bottom, right, 0], name="pad_temp") \
        if any((top, left, bottom, right)) else x
    cc = te.reduce_axis((0, Cgb), name="cc")
    cb = te.reduce_axis((0, wb), name="cb")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def conv(n, f, y, xx, b):
        block, lane = grouped_input(f, cc, cb, Fc, Cgb, wb, ib, groups)
        return te.sum(padded[n, block, y * sh + ry * dh, xx * sw + rx * dw, lane] * w[f, cc, ry, rx, cb, b],
                      axis=[cc, ry, rx, cb])

    return [te.compute((N, Fc, Ho, Wo, ob), conv, name="conv2d_nchwc")]


register_op(OpDef("nn.conv2d_nchwc", "out_elemwise_fusable", _conv_infer, _conv_evaluate, _conv_compute,
                  "2-D convolution of channel-blocked data with a blocked weight; attrs as nn.conv2d's."))


# ---------------------------------------------------------------------------- nn.conv2d_winograd_nchwc


def _winograd_attrs(attrs) -> tuple[tuple[int, ...], int, int, int]:
    op = "nn.conv2d_winograd_nchwc"
    m = attrs.get("tile_size")
    if m not in WINOGRAD_TILE_SIZES:
        raise fail(op, f"tile_size must be one of {WINOGRAD_TILE_SIZES}, got {m!r}")
    return (int_tuple(op, "padding", attrs.get("padding", (1, 1, 1, 1)), 4, 0), m,
            positive_int(op, "block", attrs.get("block")),
            positive_int(op, "dilation", attrs.get("dilation", 1)))


def _winograd_infer(types, attrs):
    op = "nn.conv2d_winograd_nchwc"
    arity(op, types, 2)
    data, weight = types
    dtype = same_dtype(op, types, "data and weight")
    floating(op, data, "data")
    padding, m, ob, dilation = _winograd_attrs(attrs)
    if len(data.shape) != 5 or len(weight.shape) != 4:
        raise fail(op, f"data must be 5-D (N, C/ib, H, W, ib) and the transformed weight 4-D "
                       f"((m+2)^2, F/nr, C, nr), got {data.shape} and {weight.shape}")
    N, Cc, H, W, ib = data.shape
    e, Fp, C, nr = weight.shape
    if e != (m + 2) ** 2 or C != Cc * ib:
        raise fail(op, f"the weight {weight.shape} is not a transformed 3x3 kernel of F({m}x{m}, 3x3) "
                       f"over {Cc * ib} channels")
    if (Fp * nr) % ob:
        raise fail(op, f"blocks of {ob} do not divide {Fp * nr} filters")
    Ho, Wo = window_output(H, W, 3, 3, (1, 1), padding, (dilation, dilation))
    if Ho < 1 or Wo < 1:
        raise fail(op, "a 3x3 window does not fit the padded input")
    return [TensorType((N, Fp * nr // ob, Ho, Wo, ob), dtype)]


def _winograd_evaluate(arrays, attrs):
    x, u = arrays
    padding, m, ob, dilation = _winograd_attrs(attrs)
    return [topi.nn.winograd.conv2d_winograd_nchwc_numpy(x, u, padding, m, ob, dilation)]


def _winograd_compute(tensors, attrs):
    x, u = tensors
    padding, m, ob, dilation = _winograd_attrs(attrs)
    return [topi.nn.conv2d_winograd_nchwc(x, u, padding, m, ob, dilation)]


register_op(OpDef("nn.conv2d_winograd_nchwc", "out_elemwise_fusable", _winograd_infer, _winograd_evaluate,
                  _winograd_compute,
                  "3x3 stride-1 convolution of channel-blocked data by Winograd's F(m x m, 3 x 3), the "
                  "weight transformed at build time (topi.nn.conv2d_winograd_weight_transform); attrs "
                  "padding, tile_size (m), block (the output's channel block) and dilation (1 by default: "
                  "a dilated kernel runs as one convolution per phase of the image)."))


# ---------------------------------------------------------------------------- nn.depthwise_conv2d_nchwc


def _depthwise_infer(types, attrs):
    op = "nn.depthwise_conv2d_nchwc"
    arity(op, types, 2)
    data, weight = types
    dtype = same_dtype(op, types, "data and weight")
    floating(op, data, "data")
    if len(data.shape) != 5 or len(weight.shape) != 4:
        raise fail(op, f"data must be 5-D (N, C/b, H, W, b) and weight 4-D (C/b, KH, KW, b), "
                       f"got {data.shape} and {weight.shape}")
    N, Cc, H, W, b = data.shape
    if (weight.shape[0], weight.shape[3]) != (Cc, b):
        raise fail(op, f"the weight {weight.shape} does not match the data's blocks {(Cc, b)}")
    Ho, Wo = _output_size(H, W, weight.shape[1], weight.shape[2], attrs)
    if Ho < 1 or Wo < 1:
        raise fail(op, "the window does not fit the padded input")
    return [TensorType((N, Cc, Ho, Wo, b), dtype)]


def _depthwise_evaluate(arrays, attrs):
    x, w = arrays
    Cc, KH, KW, b = w.shape
    plain_w = w.transpose(0, 3, 1, 2).reshape(Cc * b, 1, KH, KW)
    strides, padding, dilation = _conv_attrs(attrs)
    out = get_op("nn.conv2d").evaluate([from_blocks(x), plain_w], {"strides": strides, "padding": padding,
                                                                   "dilation": dilation, "groups": Cc * b})[0]
    return [to_blocks(out, b)]


def _depthwise_compute(tensors, attrs):
    x, w = tensors
    N, Cc, H, W, b = shape_of(x)
    _, KH, KW, _ = shape_of(w)
    (sh, sw), (top, left, bottom, right), (dh, dw) = _conv_attrs(attrs)
    Ho, Wo = _output_size(H, W, KH, KW, attrs)
    padded = topi.nn.pad(x, [0, 0, top, left, 0], [0, 0, bottom, right, 0], name="pad_temp") \
        if any((top, left, bottom, right)) else x
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    return [te.compute((N, Cc, Ho, Wo, b),
                       lambda n, c, y, xx, k: te.sum(padded[n, c, y * sh + ry * dh, xx * sw + rx * dw, k]
                                                     * w[c, ry, rx, k], axis=[ry, rx]),
                       name="depthwise_conv2d_nchwc")]


register_op(OpDef("nn.depthwise_conv2d_nchwc", "out_elemwise_fusable", _depthwise_infer, _depthwise_evaluate,
                  _depthwise_compute,
                  "depthwise 2-D convolution of channel-blocked data; attrs as nn.conv2d's."))


# ---------------------------------------------------------------------------- nn.pool2d_nchwc


def _pool_kind(attrs) -> str:
    kind = attrs.get("kind")
    if kind not in ("max", "avg"):
        raise fail("nn.pool2d_nchwc", f"attribute kind must be 'max' or 'avg', got {kind!r}")
    return kind


def _pool_infer(types, attrs):
    op = "nn.pool2d_nchwc"
    arity(op, types, 1)
    (x,) = types
    if len(x.shape) != 5:
        raise fail(op, f"the input must be 5-D (N, C/b, H, W, b), got {x.shape}")
    N, Cc, H, W, b = x.shape
    (out,) = get_op(f"nn.{_pool_kind(attrs)}_pool2d").infer([TensorType((N, Cc * b, H, W), x.dtype)], attrs)
    return [TensorType((N, Cc, out.shape[2], out.shape[3], b), x.dtype)]


def _pool_evaluate(arrays, attrs):
    (x,) = arrays
    (out,) = get_op(f"nn.{_pool_kind(attrs)}_pool2d").evaluate([from_blocks(x)], attrs)
    return [to_blocks(out, x.shape[4])]


def _pool_compute(tensors, attrs):
    (x,) = tensors
    N, Cc, H, W, b = shape_of(x)
    kind = _pool_kind(attrs)
    size, strides = pair("nn.pool2d_nchwc", "pool_size", attrs.get("pool_size")), attrs.get("strides", (1, 1))
    padding, dilation = attrs.get("padding", (0, 0, 0, 0)), attrs.get("dilation", (1, 1))
    ceil_mode = bool(attrs.get("ceil_mode", False))
    if kind == "max" and not ceil_mode:
        # One reduction straight into the blocked output, the block innermost: it vectorizes.
        kh, kw = size
        (sh, sw), (top, left, bottom, right), (dh, dw) = _conv_attrs(attrs)
        Ho, Wo = _output_size(H, W, kh, kw, attrs)
        padded = topi.nn.pad(x, [0, 0, top, left, 0], [0, 0, bottom, right, 0], te.min_value(x.dtype),
                             name="pad_temp") if any(padding) else x
        ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")
        return [te.compute((N, Cc, Ho, Wo, b),
                           lambda n, c, y, xx, k: te.max(padded[n, c, y * sh + ry * dh, xx * sw + rx * dw, k],
                                                         axis=[ry, rx]),
                           name="T_max_pool_nchwc")]
    # The blocks as NHWC images: (N * C/b, H, W, b), pooled over H and W.
    images = te.compute((N * Cc, H, W, b), lambda i, h, w, c: x[i // Cc, i % Cc, h, w, c], name="T_images",
                        tag="injective")
    pooled = topi.nn.pool2d(images, size, strides, dilation, padding, kind, ceil_mode, "NHWC",
                            bool(attrs.get("count_include_pad", False)))
    _, Ho, Wo, _ = shape_of(pooled)
    return [te.compute((N, Cc, Ho, Wo, b), lambda n, c, h, w, k: pooled[n * Cc + c, h, w, k],
                       name="T_pool_nchwc", tag="injective")]


register_op(OpDef("nn.pool2d_nchwc", "reduce", _pool_infer, _pool_evaluate, _pool_compute,
                  "max or average (attr kind) pooling of channel-blocked data; attrs as nn.max_pool2d's."))


# ---------------------------------------------------------------------------- nn.dense_pack


def _units(attrs) -> int:
    return positive_int("nn.dense_pack", "units", attrs.get("units"))


def _dense_pack_infer(types, attrs):
    op = "nn.dense_pack"
    arity(op, types, 2)
    x, w = types
    dtype = same_dtype(op, types, "x and weight")
    N = _units(attrs)
    if len(x.shape) != 2 or len(w.shape) != 3 or w.shape[1] != x.shape[1] or w.shape[0] * w.shape[2] < N \
            or (w.shape[0] - 1) * w.shape[2] >= N:
        raise fail(op, f"x must be (M, K) and the weight (ceil({N} / nr), K, nr); got {x.shape} and "
                       f"{w.shape}")
    return [TensorType((x.shape[0], N), dtype)]


def _dense_pack_evaluate(arrays, attrs):
    x, w = arrays
    panels, K, nr = w.shape
    plain = w.transpose(0, 2, 1).reshape(panels * nr, K)[:_units(attrs)]
    return [(x.astype("float64") @ plain.astype("float64").T).astype(x.dtype)]


def _dense_pack_compute(tensors, attrs):
    x, w = tensors
    M, K = shape_of(x)
    nr = shape_of(w)[2]
    k = te.reduce_axis((0, K), name="k")
    return [te.compute((M, _units(attrs)), lambda i, j: te.sum(x[i, k] * w[j // nr, k, j % nr], axis=k),
                       name="T_dense_pack")]


register_op(OpDef("nn.dense_pack", "out_elemwise_fusable", _dense_pack_infer, _dense_pack_evaluate,
                  _dense_pack_compute, "x times a weight packed in micro-panels of nr columns; attr units."))
