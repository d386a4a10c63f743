"""ONNX's ``Resize`` and ``Upsample``: ``image.resize2d`` on an NCHW image, and twice (height and
width, then depth) on an NCDHW volume.
"""

from __future__ import annotations

import math

import numpy as np

from ...graph import Value
from ...topi.image import COORDINATE_MODES
from .importer import NodeContext, converts, optional_input

__all__: list[str] = []

_RESIZE_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _resize_input(ctx: NodeContext, v: Value | None, what: str) -> np.ndarray | None:
    """A constant ``scales`` or ``sizes`` input (None where absent or empty, as opset 11 writes
    the one not given)."""
    if v is None:
        return None
    data = ctx.array(v, what).reshape(-1)
    return data if data.size else None


@converts("Resize", "Upsample")
def _resize(ctx: NodeContext, ins, attrs):
    x = ins[0]
    mode = attrs.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode  # Upsample's older name
    if mode not in _RESIZE_METHODS:
        raise ctx.unsupported(f"mode={mode!r}")
    if len(x.shape) not in (4, 5):
        raise ctx.unsupported(f"a {len(x.shape)}-D input (an NCHW image or an NCDHW volume is resized)")
    rank = len(x.shape)
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        # Upsample and Resize-10: scales only (an attribute before opset 9), asymmetric coordinates,
        # nearest rounding down when enlarging and up when shrinking (ONNX Runtime's "simple")
        given = attrs["scales"] if "scales" in attrs else ctx.array(optional_input(ins, 1), "scales")
        scales = np.asarray(given)
        if ctx.op_type == "Upsample" and (scales < 1).any():
            raise ctx.error(f"Upsample's scales must be at least 1, got {scales.tolist()}")
        return _resized(ctx, x, range(rank), scales.reshape(-1), None, mode, "asymmetric", None)
    coordinates = attrs.get("coordinate_transformation_mode", "half_pixel")
    if coordinates not in COORDINATE_MODES:
        raise ctx.unsupported(f"coordinate_transformation_mode={coordinates!r}")
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy not in _POLICIES:
        raise ctx.error(f"keep_aspect_ratio_policy must be one of {', '.join(_POLICIES)}, got {policy!r}")
    antialias = bool(attrs.get("antialias", 0))
    if antialias and mode == "nearest":
        raise ctx.error("antialias takes mode 'linear' or 'cubic', got 'nearest'")
    rounding = attrs.get("nearest_mode", "round_prefer_floor")
    if rounding not in _NEAREST_MODES:
        raise ctx.unsupported(f"nearest_mode={rounding!r}")
    axes = [ctx.axis(a, rank) for a in attrs.get("axes", range(rank))]
    scales = _resize_input(ctx, optional_input(ins, 2), "scales")
    sizes = _resize_input(ctx, optional_input(ins, 3), "sizes")
    filtering = {"cubic_alpha": float(attrs.get("cubic_coeff_a", -0.75)),
                 "cubic_exclude": int(attrs.get("exclude_outside", 0)), "antialias": int(antialias)}
    return _resized(ctx, x, axes, scales, sizes, mode, coordinates, rounding, filtering, policy)


def _resized(ctx: NodeContext, x: Value, axes, scales, sizes, mode: str, coordinates: str,
             rounding: str | None, filtering: dict | None = None, policy: str = "stretch") -> Value:
    """``x`` resized on ``axes`` by ``scales`` or to ``sizes`` (one of them None); ``rounding``
    None: down where the image grows, up where it shrinks; ``filtering``: the cubic filter's and
    antialiasing's attributes; ``policy``: ONNX's ``keep_aspect_ratio_policy`` for ``sizes``."""
    axes = list(axes)
    if (scales is None) == (sizes is None):
        raise ctx.error("Resize takes one of scales and sizes")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise ctx.error(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} must have one entry "
                        f"per resized axis ({len(axes)})")
    # Each axis's output size and the scale its coordinates divide by, in float32 as ONNX Runtime
    # computes them: from sizes, size / input; from scales, the scale as given, the size floor(input *
    # scale).
    out, scale = list(x.shape), [np.float32(1.0)] * len(x.shape)
    for a, g in zip(axes, given):
        if sizes is not None:
            out[a] = int(g)
            scale[a] = np.float32(out[a]) / np.float32(x.shape[a])
        else:
            scale[a] = np.float32(g)
            out[a] = int(np.floor(np.float32(x.shape[a]) * scale[a]))
    if sizes is not None and policy != "stretch":
        # one scale for every resized axis: the smallest (no size past the one given) or the
        # largest (none short of it); each size that scale times the input's, rounded
        kept = (min if policy == "not_larger" else max)(scale[a] for a in axes)
        for a in axes:
            scale[a] = kept
            out[a] = math.floor(float(kept * np.float32(x.shape[a])) + 0.5)  # halves up, in float32's product
    if any(d < 0 for d in out) or any(s <= 0 for s in scale):
        raise ctx.error(f"Resize of {x.shape} to {tuple(out)} (scales {[float(s) for s in scale]}): "
                        "every size and scale must be positive")
    if 0 in out:  # a scale that leaves no pixel: an empty image, as ONNX Runtime gives
        return ctx.const(np.zeros(out, x.dtype))
    if tuple(out[:2]) != x.shape[:2] or scale[0] != 1 or scale[1] != 1:
        raise ctx.unsupported(f"resizing the batch or channel axis ({x.shape} to {tuple(out)})")
    if tuple(out) == x.shape and all(s == 1 for s in scale[2:]):
        return x
    method = _RESIZE_METHODS[mode]
    filtering = dict(filtering or {})
    if method != "cubic":
        filtering.pop("cubic_alpha", None)
        if not filtering.get("antialias"):
            filtering.pop("cubic_exclude", None)
    if method != "nearest_neighbor":
        rounding = ""
    elif rounding is None:
        directions = {s > 1 for s in scale[2:] if s != 1}
        if len(directions) > 1:
            raise ctx.unsupported(f"nearest-neighbour scales {[float(s) for s in scale]} that enlarge one "
                                  "axis and shrink the other before opset 11")
        rounding = "floor" if directions == {True} else "ceil"
    attrs = {"method": method, "coordinate_transformation_mode": coordinates, "rounding_method": rounding,
             **filtering}
    if len(x.shape) == 4:
        return ctx.emit("image.resize2d", [x], size=tuple(out[2:]), scale=(float(scale[2]), float(scale[3])),
                        **attrs)
    return _resized_volume(ctx, x, out, scale, attrs)


def _resized_volume(ctx: NodeContext, x: Value, out: list, scale: list, attrs: dict) -> Value:
    """An NCDHW volume resized as two images: each depth slice's height and width, then the depth
    over the resized pixels (as one row of them, which keeps its size at scale 1, where every
    coordinate mode maps it onto itself)."""
    n, c, depth, h, w = x.shape
    out_depth, out_h, out_w = out[2:]
    pixels = ctx.reshape(x, (n, c * depth, h, w))
    if (out_h, out_w) != (h, w) or scale[3] != 1 or scale[4] != 1:
        pixels = ctx.emit("image.resize2d", [pixels], size=(out_h, out_w),
                          scale=(float(scale[3]), float(scale[4])), **attrs)
    volume = ctx.reshape(pixels, (n, c, depth, out_h * out_w))
    if out_depth != depth or scale[2] != 1:
        volume = ctx.emit("image.resize2d", [volume], size=(out_depth, out_h * out_w),
                          scale=(float(scale[2]), 1.0), **attrs)
    return ctx.reshape(volume, (n, c, out_depth, out_h, out_w))
