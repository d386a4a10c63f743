"""Image operators: ``image.resize2d``, an NCHW image resized by nearest neighbour, bilinear or bicubic
interpolation (:func:`compiler.topi.image.resize2d`; its reference ``topi.testing.resize2d_python``),
and ``image.grid_sample``, an NCHW image sampled at the points of a grid
(:func:`compiler.topi.image.grid_sample`; its reference here, computing the coordinates in the
grid's float type as the tensor expressions do, and mixing the pixels in float64)."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes, topi
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import arity, fail, flag, floating, int_tuple, numeric
from .layout import from_blocks, layout_name, parse_layout, to_blocks

__all__: list[str] = []

_OP = "image.resize2d"


def _attrs(x: TensorType, attrs) -> dict:
    """The attributes checked, as :func:`topi.image.resize2d`'s keyword arguments."""
    block = parse_layout(_OP, attrs.get("layout", "NCHW"))
    if len(x.shape) != (4 if block is None else 5) or (block is not None and x.shape[4] != block):
        raise fail(_OP, f"takes a 4-D NCHW tensor or a 5-D one in blocks of its layout, got shape {x.shape} "
                        f"for layout {layout_name(block)}")
    size = int_tuple(_OP, "size", attrs.get("size"), 2, 1)
    method = attrs.get("method", "linear")
    mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    rounding = attrs.get("rounding_method", "")
    image = topi.image
    if method not in image.METHODS:
        raise fail(_OP, f"attribute method must be one of {', '.join(image.METHODS)}, got {method!r}")
    if mode not in image.COORDINATE_MODES:
        raise fail(_OP, f"attribute coordinate_transformation_mode must be one of "
                        f"{', '.join(image.COORDINATE_MODES)}, got {mode!r}")
    if rounding not in ("", *image.ROUNDING_METHODS):
        raise fail(_OP, f"attribute rounding_method must be one of {', '.join(image.ROUNDING_METHODS)}, "
                        f"got {rounding!r}")
    if method != "nearest_neighbor" and not dtypes.is_float(x.dtype):
        raise fail(_OP, f"{method} interpolation takes a float tensor, got {x.dtype}")
    antialias = flag(_OP, attrs, "antialias", False)
    if antialias and method == "nearest_neighbor":
        raise fail(_OP, "attribute antialias takes method 'linear' or 'cubic', got 'nearest_neighbor'")
    alpha = attrs.get("cubic_alpha", -0.5)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise fail(_OP, f"attribute cubic_alpha must be a finite number, got {alpha!r}")
    scale = attrs.get("scale")
    positive = all(isinstance(s, (int, float)) and s > 0 for s in scale or ())
    if scale is not None and (len(scale) != 2 or not positive):
        raise fail(_OP, f"attribute scale must be (height, width) of positive numbers, got {scale!r}")
    return {"size": size, "layout": layout_name(block), "method": method,
            "coordinate_transformation_mode": mode, "rounding_method": rounding,
            "bicubic_alpha": float(alpha), "bicubic_exclude": int(flag(_OP, attrs, "cubic_exclude", False)),
            "scale": None if scale is None else tuple(float(s) for s in scale), "antialias": antialias}


def _infer(types, attrs):
    arity(_OP, types, 1)
    (x,) = types
    numeric(_OP, x)
    size = _attrs(x, attrs)["size"]
    return [TensorType((*x.shape[:2], *size, *x.shape[4:]), x.dtype)]


def _evaluate(arrays, attrs):
    (x,) = arrays
    kwargs = _attrs(TensorType(x.shape, str(x.dtype)), attrs)
    block = parse_layout(_OP, kwargs.pop("layout"))
    plain = x if block is None else from_blocks(x)
    out = topi.testing.resize2d_python(plain, kwargs.pop("size"), **kwargs)
    return [out if block is None else to_blocks(out, block)]


def _compute(tensors, attrs):
    (x,) = tensors
    kwargs = _attrs(TensorType(topi.utils.get_const_tuple(x.shape), x.dtype), attrs)
    return [topi.image.resize2d(x, None, kwargs.pop("size"), **kwargs)]


register_op(OpDef(_OP, "injective", _infer, _evaluate, _compute,
                  "x (NCHW, or NCHW<b>c by attribute layout) resized to attribute size (height, width): "
                  "method 'nearest_neighbor', 'linear' or 'cubic', ONNX Resize's "
                  "coordinate_transformation_mode and rounding_method, cubic_alpha (-0.5) and cubic_exclude "
                  "(0); scale (height, width), what the coordinates divide by, defaults to output over input "
                  "size; antialias (0) stretches the linear and cubic filters where the image shrinks."))


# ---------------------------------------------------------------------------- image.grid_sample

_GRID_SAMPLE = "image.grid_sample"


def _grid_sample_attrs(attrs) -> dict:
    """The attributes checked, as :func:`topi.image.grid_sample`'s keyword arguments."""
    op, image = _GRID_SAMPLE, topi.image
    method = attrs.get("method", "bilinear")
    if method not in image.GRID_SAMPLE_METHODS:
        raise fail(op, f"attribute method must be one of {', '.join(image.GRID_SAMPLE_METHODS)}, "
                       f"got {method!r}")
    padding = attrs.get("padding_mode", "zeros")
    if padding not in image.PADDING_MODES:
        raise fail(op, f"attribute padding_mode must be one of {', '.join(image.PADDING_MODES)}, "
                       f"got {padding!r}")
    layout = attrs.get("layout", "NCHW")
    if layout != "NCHW":
        raise fail(op, f"attribute layout must be 'NCHW', got {layout!r}")
    return {"method": method, "layout": layout, "padding_mode": padding,
            "align_corners": flag(op, attrs, "align_corners", True)}


def _grid_sample_infer(types, attrs):
    op = _GRID_SAMPLE
    arity(op, types, 2)
    data, grid = types
    floating(op, data, "the data")
    floating(op, grid, "the grid")
    if len(data.shape) != 4 or len(grid.shape) != 4 or grid.shape[:2] != (data.shape[0], 2):
        raise fail(op, f"takes data (N, C, H, W) and a grid (N, 2, H_out, W_out) of points (x, y), got "
                       f"{data.shape} and {grid.shape}")
    if 0 in data.shape[2:]:
        raise fail(op, f"cannot sample an empty image {data.shape}")
    _grid_sample_attrs(attrs)
    return [TensorType((*data.shape[:2], *grid.shape[2:]), data.dtype)]


def _denormalized(g: np.ndarray, size: int, align_corners: bool, t) -> np.ndarray:
    one, two = t(1), t(2)
    if align_corners:
        return ((g + one) / two * t(size - 1)).astype(t)
    return (((g + one) * t(size) - one) / two).astype(t)


def _reflected(x: np.ndarray, low: float, high: float, t) -> np.ndarray:
    span = t(high - low)
    lo, hi = t(low), t(high)
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, x - hi)
    turns = np.floor(d / span)
    r = d - turns * span
    even = turns - t(2) * np.floor(turns / t(2)) == 0
    return np.where(below, np.where(even, lo + r, hi - r), np.where(above, np.where(even, hi - r, lo + r), x))


def _pixels(data: np.ndarray, iy: np.ndarray, ix: np.ndarray, padding: str, lows, highs, t) -> np.ndarray:
    """``data`` (N, C, H, W) at integer-valued coordinates ``iy``, ``ix`` (N, H_out, W_out), padded
    by ``padding``: (N, C, H_out, W_out) in float64."""
    inside = None
    picks = []
    for c, size, lo, hi in zip((iy, ix), data.shape[2:], lows, highs):
        if padding == "reflection":
            c = _reflected(c, lo, hi, t)
        # as the clamps of the compiled code take them: NaN to the low end
        c = np.nan_to_num(c, nan=-1.0 if padding == "zeros" else 0.0, posinf=size, neginf=-1.0)
        if padding == "zeros":
            ok = (c >= 0) & (c < size)
            inside = ok if inside is None else inside & ok
        picks.append(np.clip(c, 0, size - 1).astype(np.int64))
    n = np.arange(data.shape[0])[:, None, None]
    values = np.moveaxis(data[n, :, picks[0], picks[1]], -1, 1).astype("float64")
    return values if inside is None else np.where(inside[:, None], values, 0.0)


def _cubic_weights(s: np.ndarray, t) -> list[np.ndarray]:
    a = t(topi.image.CUBIC_ALPHA)
    one, two = t(1), t(2)
    s = np.abs(s)

    def far(u):
        return ((a * u - t(5) * a) * u + t(8) * a) * u - t(4) * a

    def near(u):
        return ((a + two) * u - (a + t(3))) * u * u + one

    return [w.astype("float64") for w in (far(s + one), near(s), near(one - s), far(two - s))]


def _grid_sample_evaluate(arrays, attrs):
    data, grid = arrays
    kw = _grid_sample_attrs(attrs)
    align, padding = kw["align_corners"], kw["padding_mode"]
    t = np.float64 if grid.dtype == np.float64 else np.float32
    H, W = data.shape[2:]
    lows = (0.0, 0.0) if align else (-0.5, -0.5)
    highs = (H - 1.0, W - 1.0) if align else (H - 0.5, W - 0.5)
    with np.errstate(invalid="ignore", over="ignore"):
        x = _denormalized(grid[:, 0].astype(t), W, align, t)
        y = _denormalized(grid[:, 1].astype(t), H, align, t)

        def at(iy, ix):
            return _pixels(data, iy, ix, padding, lows, highs, t)

        if kw["method"] == "nearest":
            out = at(np.rint(y), np.rint(x))
        elif kw["method"] == "bilinear":
            x1, y1 = np.floor(x), np.floor(y)
            x2, y2 = x1 + t(1), y1 + t(1)
            dx2, dx1, dy2, dy1 = ((v - u).astype("float64")[:, None]
                                  for u, v in ((x, x2), (x1, x), (y, y2), (y1, y)))
            out = (dy2 * (dx2 * at(y1, x1) + dx1 * at(y1, x2)) + dy1 * (dx2 * at(y2, x1) + dx1 * at(y2, x2)))
        else:
            x1, y1 = np.floor(x), np.floor(y)
            wx = [w[:, None] for w in _cubic_weights((x - x1).astype(t), t)]
            wy = [w[:, None] for w in _cubic_weights((y - y1).astype(t), t)]
            out = 0.0
            for i in range(4):
                row = sum(wx[j] * at(y1 + t(i - 1), x1 + t(j - 1)) for j in range(4))
                out = out + wy[i] * row
    return [np.ascontiguousarray(out).astype(data.dtype)]


def _grid_sample_compute(tensors, attrs):
    data, grid = tensors
    return [topi.image.grid_sample(data, grid, **_grid_sample_attrs(attrs))]


register_op(OpDef(_GRID_SAMPLE, "injective", _grid_sample_infer, _grid_sample_evaluate, _grid_sample_compute,
                  "data (NCHW) sampled at the points of grid (N, 2, H_out, W_out), x then y in [-1, 1] "
                  "(ONNX GridSample's grid transposed): method 'bilinear', 'nearest' or 'bicubic'; "
                  "padding_mode 'zeros', 'border' or 'reflection' for pixels outside the image; "
                  "align_corners maps -1 and 1 onto the corner pixels' centres rather than their outer "
                  "edges."))
