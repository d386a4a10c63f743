"""Operators of detection models, with TVM's names and meaning: ``topk`` and ``vision.roi_align``.

``topk`` with ``ret_type="both"`` has two outputs (values, then indices). The fusion pass and
the model build take nodes of one output, so the ONNX importer asks for the indices alone and
gathers the values with them (:mod:`compiler.frontend.onnx.vision`).

Both are ``opaque``: each output element compares or samples many input elements, so a producer
fused into them would be recomputed for each read. The references compute as the tensor
expressions do (:func:`compiler.topi.topk`, :func:`compiler.topi.vision.roi_align`): the same
order of elements, and the region arithmetic in the data's float type.
"""

from __future__ import annotations

import math

import numpy as np

from ... import topi
from ...topi.sort import RET_TYPES
from ...topi.vision import ROI_ALIGN_MODES
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import arity, axis_of, fail, flag, floating, int_attr, int_tuple, numeric, pair, same_dtype

__all__: list[str] = []


# ---------------------------------------------------------------------------- topk


def _topk_attrs(attrs, shape: tuple[int, ...]) -> tuple[int, int, str, bool, str]:
    op = "topk"
    if not shape:
        raise fail(op, "the input must have at least one axis")
    axis = axis_of(op, attrs.get("axis", -1), len(shape))
    n = shape[axis]
    k = int_attr(op, attrs, "k", 1)
    k = n if k < 1 else k  # TVM: k < 1 takes the whole axis
    if n == 0:
        raise fail(op, f"cannot select from an empty axis {axis} of {shape}")
    if k > n:
        raise fail(op, f"attribute k={k} is larger than axis {axis} of {shape}")
    ret_type = attrs.get("ret_type", "both")
    if ret_type not in RET_TYPES:
        raise fail(op, f"attribute ret_type must be one of {', '.join(RET_TYPES)}, got {ret_type!r}")
    dtype = attrs.get("dtype", "int32")
    if dtype not in ("int32", "int64"):
        raise fail(op, f"attribute dtype must be int32 or int64, got {dtype!r}")
    return axis, k, ret_type, flag(op, attrs, "is_ascend", False), dtype


def _topk_infer(types, attrs):
    arity("topk", types, 1)
    (x,) = types
    numeric("topk", x)
    axis, k, ret_type, _, dtype = _topk_attrs(attrs, x.shape)
    shape = (*x.shape[:axis], k, *x.shape[axis + 1:])
    values, indices = TensorType(shape, x.dtype), TensorType(shape, dtype)
    return {"both": [values, indices], "values": [values], "indices": [indices]}[ret_type]


def _topk_evaluate(arrays, attrs):
    (x,) = arrays
    axis, k, ret_type, ascending, dtype = _topk_attrs(attrs, x.shape)
    rows = np.moveaxis(x, axis, -1)
    n = rows.shape[-1]
    if ascending:  # a stable sort keeps ties in index order; NaN sorts last, as the largest
        order = np.argsort(rows, axis=-1, kind="stable")
    else:  # descending, ties in index order: the stable ascending order of the reversed row, reversed
        order = n - 1 - np.argsort(rows[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    order = order[..., :k]
    values = np.take_along_axis(rows, order, axis=-1)
    values, order = (np.ascontiguousarray(np.moveaxis(a, -1, axis)) for a in (values, order))
    order = order.astype(dtype)
    return {"both": [values, order], "values": [values], "indices": [order]}[ret_type]


def _topk_compute(tensors, attrs):
    (x,) = tensors
    shape = tuple(int(d) for d in topi.utils.get_const_tuple(x.shape))
    axis, k, ret_type, ascending, dtype = _topk_attrs(attrs, shape)
    out = topi.topk(x, k, axis, ret_type, ascending, dtype)
    return out if isinstance(out, list) else [out]


register_op(OpDef("topk", "opaque", _topk_infer, _topk_evaluate, _topk_compute,
                  "The attribute k (1; below 1: the whole axis) largest elements along attribute axis (-1), "
                  "the smallest with is_ascend, in order, and their indices in attribute dtype (int32): "
                  "ret_type 'both' (two outputs: values, indices), 'values' or 'indices'. Ties go to the "
                  "lower index, NaN is larger than every number."))


# ---------------------------------------------------------------------------- vision.roi_align

_ROI_ALIGN = "vision.roi_align"


def _roi_align_attrs(attrs) -> dict:
    """The attributes checked, as :func:`topi.vision.roi_align`'s keyword arguments."""
    op = _ROI_ALIGN
    pooled = pair(op, "pooled_size", attrs.get("pooled_size"))
    scale = attrs.get("spatial_scale", 1.0)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.floating)) \
            or not (math.isfinite(scale) and scale > 0):
        raise fail(op, f"attribute spatial_scale must be a positive number, got {scale!r}")
    mode = attrs.get("mode", "avg")
    if mode not in ROI_ALIGN_MODES:
        raise fail(op, f"attribute mode must be one of {', '.join(ROI_ALIGN_MODES)}, got {mode!r}")
    ratio = int_attr(op, attrs, "sample_ratio", -1)
    layout = attrs.get("layout", "NCHW")
    if layout != "NCHW":
        raise fail(op, f"attribute layout must be 'NCHW', got {layout!r}")
    bound = attrs.get("max_samples")
    if ratio <= 0:
        if bound is None:
            raise fail(op, f"an adaptive sample_ratio ({ratio}) needs attribute max_samples, the most "
                           f"samples per bin along (height, width)")
        bound = int_tuple(op, "max_samples", bound, 2, 1)
    return {"pooled_size": pooled, "spatial_scale": float(scale), "mode": mode, "sample_ratio": ratio,
            "aligned": flag(op, attrs, "aligned", False), "layout": layout, "max_samples": bound}


def _roi_align_infer(types, attrs):
    op = _ROI_ALIGN
    arity(op, types, 2)
    data, rois = types
    floating(op, data, "the data")
    same_dtype(op, [data, rois], "the data and the rois")
    if len(data.shape) != 4:
        raise fail(op, f"the data must be 4-D (N, C, H, W), got shape {data.shape}")
    if len(rois.shape) != 2 or rois.shape[1] != 5:
        raise fail(op, f"the rois must have shape (num_rois, 5): [batch_index, x1, y1, x2, y2], "
                       f"got {rois.shape}")
    if 0 in data.shape:
        raise fail(op, f"cannot sample an empty feature map {data.shape}")
    kwargs = _roi_align_attrs(attrs)
    return [TensorType((rois.shape[0], data.shape[1], *kwargs["pooled_size"]), data.dtype)]


def _axis_samples(start, bins: np.ndarray, bin_size, grid: int, size: int, t):
    """Per bin and sample along one axis: the coordinates' two neighbours, their weights and
    whether the coordinate lies within ``[-1, size]``; arrays of ``(bins, grid)``."""
    steps = (np.arange(grid).astype(t) + t(0.5)) * bin_size / t(max(grid, 1))
    v = (start + bins.astype(t)[:, None] * bin_size) + steps[None, :]
    inside = (v >= -1) & (v <= size)
    clamped = np.clip(np.nan_to_num(v, nan=0.0), 0, size - 1).astype(t)
    low = np.floor(clamped).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    frac = (clamped - low).astype(t)
    return low, high, (t(1) - frac).astype(t), frac, inside


def _roi_align_evaluate(arrays, attrs):
    data, rois = arrays
    kw = _roi_align_attrs(attrs)
    (ph_n, pw_n), ratio, aligned = kw["pooled_size"], kw["sample_ratio"], kw["aligned"]
    N, C, H, W = data.shape
    t = data.dtype.type
    out = np.zeros((rois.shape[0], C, ph_n, pw_n), "float64")
    for r, roi in enumerate(rois):
        b = int(np.clip(np.nan_to_num(roi[0], nan=0.0), 0, N - 1))
        offset = t(0.5 if aligned else 0.0)
        x1, y1, x2, y2 = (roi[k] * t(kw["spatial_scale"]) - offset for k in (1, 2, 3, 4))
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, t(1)), max(roi_h, t(1))
        bin_h, bin_w = roi_h / t(ph_n), roi_w / t(pw_n)
        if ratio > 0:
            gh = gw = ratio
        else:
            limit_h, limit_w = kw["max_samples"]
            gh = int(min(max(np.nan_to_num(np.ceil(roi_h / t(ph_n)), nan=0.0), 0), limit_h))
            gw = int(min(max(np.nan_to_num(np.ceil(roi_w / t(pw_n)), nan=0.0), 0), limit_w))
        if gh == 0 or gw == 0:
            continue  # no samples: 0
        yl, yh, hy, ly, in_y = _axis_samples(y1, np.arange(ph_n), bin_h, gh, H, t)
        xl, xh, hx, lx, in_x = _axis_samples(x1, np.arange(pw_n), bin_w, gw, W, t)
        inside = in_y[:, :, None, None] & in_x[None, None, :, :]  # (ph, gh, pw, gw)
        image = data[b].astype("float64")
        terms = []
        for wy, iy in ((hy, yl), (ly, yh)):
            for wx, ix in ((hx, xl), (lx, xh)):
                w = np.where(inside, (wy[:, :, None, None] * wx[None, None, :, :]).astype(t), 0)
                terms.append(w * image[:, iy[:, :, None, None], ix[None, None, :, :]])
        if kw["mode"] == "avg":
            total = (terms[0] + terms[1] + terms[2] + terms[3]).sum(axis=(2, 4))
            out[r] = total / max(gh * gw, 1)
        else:
            largest = np.maximum(np.maximum(terms[0], terms[1]), np.maximum(terms[2], terms[3]))
            out[r] = largest.max(axis=(2, 4))
    return [out.astype(data.dtype)]


def _roi_align_compute(tensors, attrs):
    data, rois = tensors
    kw = _roi_align_attrs(attrs)
    return [topi.vision.roi_align(data, rois, kw.pop("pooled_size"), kw.pop("spatial_scale"), **kw)]


register_op(OpDef(_ROI_ALIGN, "opaque", _roi_align_infer, _roi_align_evaluate, _roi_align_compute,
                  "Each region of rois (num_rois, 5): [batch_index, x1, y1, x2, y2] of the data (NCHW), "
                  "scaled by attribute spatial_scale (1.0), pooled into attribute pooled_size (height, "
                  "width) bins of bilinear samples (ONNX RoiAlign as ONNX Runtime computes it): mode "
                  "'avg' or 'max'; sample_ratio samples per bin and axis, or where <= 0 ceil(region / "
                  "bins) of them, at most attribute max_samples (height, width); aligned takes a half "
                  "pixel off the corners (ONNX's half_pixel) and lets regions be narrower than a pixel."))
