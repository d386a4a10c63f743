"""``resize2d``: an NCHW image resized by nearest neighbour, bilinear or bicubic interpolation
(TVM's ``topi.image.resize2d``, with ONNX Resize's coordinate modes).

Each output pixel ``y`` (and likewise ``x``) maps to a source coordinate in float32, by the
same formula and in the same order of operations as ONNX Runtime, so that ties in the
nearest-neighbour rounding fall the same way:

* ``half_pixel``: ``(y + 0.5) / scale - 0.5``;
* ``pytorch_half_pixel``: the same, but 0 where the output axis has one pixel;
* ``align_corners``: ``y * (in - 1) / (out - 1)`` (0 where the output axis has one pixel);
* ``asymmetric``: ``y / scale``;
* ``tf_half_pixel_for_nn``: ``(y + 0.5) / scale``, but ``y`` where ``scale`` is 1 (an axis not
  resized keeps its pixels, as ONNX Runtime and TensorFlow keep them);
* ``half_pixel_symmetric``: ``half_pixel`` shifted so that the image's centre stays in place
  where ``scale`` is not output over input: by ``in / 2 * (1 - out / (scale * in))``.

``scale`` is the output size over the input size unless given (ONNX's ``scales``, which may
not be that ratio exactly). Nearest neighbour rounds the coordinate (``round``: half away from
zero; ``round_prefer_floor``, ``round_prefer_ceil``, ``floor``, ``ceil``) and clamps it into
the image; bilinear clamps the coordinate into the image and mixes the two pixels around it on
each axis, first along the height (a stage of its own, ``ROWS_TAG``: the two source rows of each
output row mixed, the input's width of them) and then along the width; each axis's source
pixels and weights are tables (``TABLE_TAG``). Bicubic mixes the four pixels around the
(unclamped) coordinate on each axis, by Keys' cubic convolution with coefficient
``bicubic_alpha`` (-0.75 in ONNX and PyTorch, -0.5 in TVM and TensorFlow): pixels past the edge
repeat the edge, or with ``bicubic_exclude`` weigh nothing (the others' weights then scaled to
sum to one).

With ``antialias`` (ONNX Resize's, as ONNX Runtime and Pillow compute it), bilinear and bicubic
stretch their filter by the factor an axis shrinks (by 1 where it grows): each output pixel mixes
every source pixel within the stretched filter's reach of its coordinate, weighted by the filter
and scaled to sum to one (pixels past the edge repeat the edge, or with ``bicubic_exclude`` weigh
nothing), first along the height (the ``ROWS_TAG`` stage) and then along the width.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ... import te
from ..utils import get_const_tuple, let

__all__ = ["resize2d", "keys_weights", "METHODS", "COORDINATE_MODES", "ROUNDING_METHODS", "ROWS_TAG",
           "TABLE_TAG"]

METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                    "half_pixel_symmetric")
ROUNDING_METHODS = ("round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: The tag of bilinear resizing's stage of source rows mixed for each output row (computed best
#: once per output row, where the output's row is computed).
ROWS_TAG = "resize2d_rows"
#: The tag of bilinear resizing's tables: an axis's source pixel and weight per output index.
TABLE_TAG = "resize2d_table"


def _is_blocked(layout: str) -> bool:
    """Whether ``layout`` (``"NCHW"`` or ``"NCHW{b}c"``, ValueError for others) is channel-blocked."""
    if layout == "NCHW":
        return False
    if re.fullmatch(r"NCHW[1-9][0-9]*c", layout or ""):
        return True
    raise ValueError(f"resize2d: layout must be 'NCHW' or 'NCHW{{b}}c', got {layout!r}")


def _check(data, roi, size, layout, method, mode, rounding_method, scale, antialias) -> tuple:
    rank = 5 if _is_blocked(layout) else 4
    if not isinstance(data, te.Tensor) or len(data.shape) != rank:
        raise ValueError(f"resize2d: data must be a {rank}-D te.Tensor for layout {layout}, got {data!r}")
    if rank == 5 and int(get_const_tuple(data.shape)[4]) != int(layout[4:-1]):
        raise ValueError(f"resize2d: data of shape {get_const_tuple(data.shape)} is not in blocks of "
                         f"layout {layout}")
    if roi is not None:
        raise ValueError("resize2d: roi (tf_crop_and_resize) is not supported; pass roi=None")
    if method not in METHODS:
        raise ValueError(f"resize2d: method must be one of {', '.join(METHODS)}, got {method!r}")
    if mode not in COORDINATE_MODES:
        raise ValueError(f"resize2d: coordinate_transformation_mode must be one of "
                         f"{', '.join(COORDINATE_MODES)}, got {mode!r}")
    if rounding_method not in ("", *ROUNDING_METHODS):
        raise ValueError(f"resize2d: rounding_method must be one of {', '.join(ROUNDING_METHODS)}, "
                         f"got {rounding_method!r}")
    if antialias and method == "nearest_neighbor":
        raise ValueError("resize2d: antialias takes the linear or cubic method, got nearest_neighbor")
    if not isinstance(size, Sequence) or len(size) != 2 or any(int(s) < 1 for s in size):
        raise ValueError(f"resize2d: size must be (height, width) of positive ints, got {size!r}")
    in_hw = tuple(int(d) for d in get_const_tuple(data.shape)[2:4])
    out_hw = tuple(int(s) for s in size)
    if scale is None:
        scale = tuple(o / i for o, i in zip(out_hw, in_hw))
    elif len(scale) != 2 or any(not float(s) > 0 for s in scale):
        raise ValueError(f"resize2d: scale must be (height, width) of positive numbers, got {scale!r}")
    return in_hw, out_hw, tuple(float(s) for s in scale)


def _source(i, n_in: int, n_out: int, scale: float, mode: str):
    """Output index ``i`` on one axis as a float32 source coordinate."""
    f32 = "float32"
    y = i.astype(f32)
    half, s = te.const(0.5, f32), te.const(scale, f32)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        coord = (y + half) / s - half
        return te.const(0.0, f32) if mode == "pytorch_half_pixel" and n_out == 1 else coord
    if mode == "align_corners":
        return te.const(0.0, f32) if n_out == 1 else y * te.const(n_in - 1, f32) / te.const(n_out - 1, f32)
    if mode == "asymmetric":
        return y / s
    if mode == "half_pixel_symmetric":
        # in float64 after the offset, as ONNX Runtime computes it, so that ties round alike
        offset = _symmetric_offset(n_in, n_out, scale)
        f64 = "float64"
        wide = (y.astype(f64) + te.const(0.5, f64)) / te.const(float(np.float32(scale)), f64)
        return (te.const(offset, f64) + wide - te.const(0.5, f64)).astype(f32)
    if float(np.float32(scale)) == 1:  # tf_half_pixel_for_nn, an axis not resized
        return y
    return (y + half) / s


def _symmetric_offset(n_in: int, n_out: int, scale: float) -> float:
    """``half_pixel_symmetric``'s shift of one axis's source coordinates, in float32."""
    f32 = np.float32
    adjustment = f32(n_out) / (f32(scale) * f32(n_in))
    return float(f32(n_in) / f32(2) * (f32(1) - adjustment))


def _nearest(coord, n_in: int, rounding_method: str):
    f32 = "float32"
    half = te.const(0.5, f32)
    if rounding_method == "round_prefer_floor":  # ties down: the coordinate minus a half, up
        rounded = te.ceil(coord - half)
    elif rounding_method == "round_prefer_ceil":
        rounded = te.floor(coord + half)
    elif rounding_method == "floor":
        rounded = te.floor(coord)
    elif rounding_method == "ceil":
        rounded = te.ceil(coord)
    else:  # round: halves away from zero
        rounded = te.round(coord)
    # clamped as a float first: a coordinate far outside the image must not overflow the cast
    clamped = te.min(te.max(rounded, te.const(0.0, f32)), te.const(n_in - 1, f32))
    return clamped.astype("int32")


def _linear(coord, n_in: int):
    """The two source pixels around ``coord`` and the weight of the second."""
    f32 = "float32"
    c = te.min(te.max(coord, te.const(0.0, f32)), te.const(n_in - 1, f32))
    low = te.floor(c).astype("int32")
    high = te.min(low + 1, n_in - 1)
    return low, high, c - low.astype(f32)


def keys_weights(t, alpha: float, dtype: str) -> list:
    """Keys' cubic kernel (coefficient ``alpha``) at the distances from ``t``, in ``[0, 1)``, of the
    four pixels around it (at -1, 0, 1 and 2), in ONNX Runtime's order of operations."""
    a, one, two = te.const(alpha, dtype), te.const(1.0, dtype), te.const(2.0, dtype)

    def near(d):  # |d| <= 1
        return ((a + two) * d - (a + te.const(3.0, dtype))) * d * d + one

    def far(d):  # 1 < |d| < 2
        five, eight, four = (te.const(v, dtype) for v in (5.0, 8.0, 4.0))
        return ((a * d - five * a) * d + eight * a) * d - four * a

    return [far(t + one), near(t), near(one - t), far(two - t)]


def _cubic(coord, low, n_in: int, alpha: float, exclude: bool, acc: str):
    """The four source pixels around ``coord`` (clamped into the image), their Keys weights, and
    with ``exclude`` whether each lies inside the image (else None); ``low`` is ``floor(coord)``."""
    f32 = "float32"
    weights = keys_weights((coord - low).astype(acc), alpha, acc)
    # clamped as a float first: a coordinate far outside the image must not overflow the cast
    base = te.min(te.max(low, te.const(-2.0, f32)), te.const(n_in, f32)).astype("int32")
    taps = [base + k for k in (-1, 0, 1, 2)]
    inside = [te.all(j >= 0, j < n_in) for j in taps] if exclude else None
    return [te.min(te.max(j, 0), n_in - 1) for j in taps], weights, inside


def _excluded(weights: list, inside: list | None, acc: str) -> list:
    """``weights`` with those of the pixels outside the image zeroed and the rest renormalised
    (``bicubic_exclude``), or as they are."""
    if inside is None:
        return weights
    zero = te.const(0.0, acc)
    kept = [te.if_then_else(ok, w, zero) for ok, w in zip(inside, weights)]
    total = kept[0] + kept[1] + kept[2] + kept[3]
    return [w / total for w in kept]


def resize2d(data, roi, size, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, out_dtype=None, scale=None,
             antialias: bool = False):
    """``data`` (NCHW, or channel-blocked ``NCHW{b}c``) resized to ``size`` = ``(height, width)``.

    ``method`` is ``"nearest_neighbor"``, ``"linear"`` or ``"cubic"``; ``rounding_method``
    applies to the first (``""``: ``"round"``), ``bicubic_alpha`` and ``bicubic_exclude`` to the
    last (see the module). ``scale`` = ``(height, width)`` is what the coordinate modes divide by
    (default: the output size over the input size). ``antialias`` stretches bilinear and
    bicubic filters where the image shrinks (see the module). ``roi`` must be None. Integer data
    takes nearest neighbour only."""
    in_hw, out_hw, scale = _check(data, roi, size, layout, method, coordinate_transformation_mode,
                                  rounding_method, scale, antialias)
    dtype = out_dtype or data.dtype
    shape = get_const_tuple(data.shape)
    out_shape = (*shape[:2], *out_hw, *shape[4:])  # a block's lanes last, where blocked
    mode = coordinate_transformation_mode
    axes = list(zip(in_hw, out_hw, scale))
    if method == "nearest_neighbor":
        rounding = rounding_method or "round"

        def body(n, c, y, x, *lane):
            iy, ix = (_nearest(_source(i, *axis, mode), axis[0], rounding) for i, axis in zip((y, x), axes))
            return data[(n, c, iy, ix, *lane)].astype(dtype)

        return te.compute(out_shape, body, name="T_resize2d", tag="injective")
    if not data.dtype.startswith("float"):
        raise ValueError(f"resize2d: {method} interpolation takes float data, got {data.dtype}")

    acc = "float64" if data.dtype == "float64" else "float32"  # float16 mixes in float32
    if antialias:
        return _antialiased(data, axes, shape, out_shape, method, mode, bicubic_alpha, bool(bicubic_exclude),
                            acc, dtype)
    if method == "cubic":
        # Each coordinate and each weight is named once (let), the weights before and after their
        # renormalisation: a coordinate gives four taps and four weights, sixteen products use the
        # weights, and the renormalised weights use each other.
        def cubic_body(n, c, y, x, *lane):
            return let([_source(i, *axis, mode) for i, axis in zip((y, x), axes)], "c", lambda coords: let(
                [te.floor(coord) for coord in coords], "f", lambda lows: weighted(n, c, lane, coords, lows)))

        def weighted(n, c, lane, coords: list, lows: list):
            exclude = bool(bicubic_exclude)
            (ys, wys, in_y), (xs, wxs, in_x) = (_cubic(coord, low, axis[0], bicubic_alpha, exclude, acc)
                                                for coord, low, axis in zip(coords, lows, axes))

            def products(w: list):
                rows = [sum((data[(n, c, iy, ix, *lane)].astype(acc) * wx for ix, wx in zip(xs, w[4:])),
                            te.const(0.0, acc)) for iy in ys]
                return sum((r * wy for r, wy in zip(rows, w[:4])), te.const(0.0, acc)).astype(dtype)

            return let([*wys, *wxs], "k", lambda k: let(
                [*_excluded(k[:4], in_y, acc), *_excluded(k[4:], in_x, acc)], "w", products))

        return te.compute(out_shape, cubic_body, name="T_resize2d", tag="injective")

    # Separable: each output row first mixes its two source rows along the input's width (the
    # ROWS stage: that many values an output row), then each output pixel mixes two of those.
    # The source pixel and the weight of each output row and column are tables of their own.
    (in_h, in_w), out_h = in_hw, out_hw[0]
    (ylo, yw), (xlo, xw) = (_linear_table(axis, mode, acc, name) for axis, name in zip(axes, "yx"))
    one = te.const(1.0, acc)

    def mixed(a, b, w):
        return a * (one - w) + b * w

    def source_rows(n, c, y, xi, *lane):
        y0 = ylo[y]
        y1 = te.min(y0 + 1, in_h - 1)
        return mixed(data[(n, c, y0, xi, *lane)].astype(acc), data[(n, c, y1, xi, *lane)].astype(acc), yw[y])

    rows = te.compute((*shape[:2], out_h, in_w, *shape[4:]), source_rows, name="T_resize2d_rows",
                      tag=ROWS_TAG)

    def body(n, c, y, x, *lane):
        x0 = xlo[x]
        x1 = te.min(x0 + 1, in_w - 1)
        return mixed(rows[(n, c, y, x0, *lane)], rows[(n, c, y, x1, *lane)], xw[x]).astype(dtype)

    return te.compute(out_shape, body, name="T_resize2d", tag="injective")


def _linear_table(axis: tuple, mode: str, acc: str, name: str) -> tuple:
    """The first source pixel of each output index on one axis and the second one's weight:
    two stages of the output's length (tagged :data:`TABLE_TAG`)."""
    n_in, n_out, _ = axis
    low = te.compute((n_out,), lambda i: _linear(_source(i, *axis, mode), n_in)[0],
                     name=f"T_resize2d_{name}0", tag=TABLE_TAG)
    weight = te.compute((n_out,), lambda i: _linear(_source(i, *axis, mode), n_in)[2].astype(acc),
                        name=f"T_resize2d_{name}w", tag=TABLE_TAG)
    return low, weight


def _antialias_window(scale: float, method: str) -> tuple[float, int, float]:
    """One axis's antialiased filter at ``scale`` (output over input size), in float32 as ONNX
    Runtime sizes it: its reach on either side of a coordinate (in source pixels), the most source
    pixels it covers, and the factor a distance in source pixels is multiplied by before the
    filter weighs it (1 where the image grows)."""
    f32 = np.float32
    shrink = f32(1) / f32(scale)
    reach = f32(1.0 if method == "linear" else 2.0)
    support = reach * shrink if shrink >= 1 else reach
    return float(support), int(np.ceil(support)) * 2 + 1, float(f32(1) / shrink if shrink >= 1 else f32(1))


def _filter(d, method: str, alpha: float):
    """The triangle (``linear``) or Keys cubic filter at float32 distance ``d``."""
    f32 = "float32"
    zero, one, two = te.const(0.0, f32), te.const(1.0, f32), te.const(2.0, f32)
    d = te.abs(d)
    if method == "linear":
        return te.if_then_else(d < one, one - d, zero)
    a = te.const(alpha, f32)
    near = ((a + two) * d - (a + te.const(3.0, f32))) * d * d + one
    far = (((d - te.const(5.0, f32)) * d + te.const(8.0, f32)) * d - te.const(4.0, f32)) * a
    return te.if_then_else(d < one, near, te.if_then_else(d < two, far, zero))


def _antialias_tables(axis: tuple, mode: str, method: str, alpha: float, exclude: bool, acc: str,
                      name: str) -> tuple:
    """One axis's first source pixel per output index and the normalised weights of the window's
    pixels from it (stages tagged :data:`TABLE_TAG`)."""
    n_in, n_out, scale = axis
    support, window, stretch = _antialias_window(scale, method)
    same = np.float32(1) / np.float32(scale) == 1  # the coordinates are the indices
    f32 = "float32"
    half = te.const(0.5, f32)

    def centre(i):
        return half + (i.astype(f32) if same else _source(i, n_in, n_out, scale, mode))

    def first(i):
        return te.floor(centre(i) - te.const(support, f32) + half).astype("int32")

    low = te.compute((n_out,), first, name=f"T_resize2d_{name}0", tag=TABLE_TAG)

    def raw(i, k):
        # the pixels from floor(centre - support + 1/2) up to floor(centre + support + 1/2)
        c = centre(i)
        count = te.floor(c + te.const(support, f32) + half).astype("int32") - low[i]
        pixel = low[i] + k
        taken = te.all(k < count, pixel >= 0, pixel < n_in) if exclude else k < count
        weight = _filter((pixel.astype(f32) - c + half) * te.const(stretch, f32), method, alpha)
        return te.if_then_else(taken, weight, te.const(0.0, f32))

    total = te.compute((n_out,), lambda i: sum((raw(i, k) for k in range(window)), te.const(0.0, f32)),
                       name=f"T_resize2d_{name}sum", tag=TABLE_TAG)
    one = te.const(1.0, f32)
    weight = te.compute(
        (n_out, window),
        lambda i, k: (raw(i, k) * te.if_then_else(total[i] == te.const(0.0, f32), one, one / total[i]))
        .astype(acc),
        name=f"T_resize2d_{name}w", tag=TABLE_TAG)
    return low, weight, window


def _antialiased(data, axes: list, shape: tuple, out_shape: tuple, method: str, mode: str, alpha: float,
                 exclude: bool, acc: str, dtype: str):
    """``data`` resized with antialiasing: each output row mixes its window of source rows (the
    ROWS stage), each output pixel its window of those rows' pixels."""
    (in_h, in_w), out_h = (axis[0] for axis in axes), axes[0][1]
    (ylo, yw, ny), (xlo, xw, nx) = (_antialias_tables(axis, mode, method, alpha, exclude, acc, name)
                                    for axis, name in zip(axes, "yx"))

    def inside(j, n: int):
        return te.min(te.max(j, 0), n - 1)

    def source_rows(n, c, y, xi, *lane):
        taps = (data[(n, c, inside(ylo[y] + k, in_h), xi, *lane)].astype(acc) * yw[y, k] for k in range(ny))
        return sum(taps, te.const(0.0, acc))

    rows = te.compute((*shape[:2], out_h, in_w, *shape[4:]), source_rows, name="T_resize2d_rows",
                      tag=ROWS_TAG)

    def body(n, c, y, x, *lane):
        return sum((rows[(n, c, y, inside(xlo[x] + k, in_w), *lane)] * xw[x, k] for k in range(nx)),
                   te.const(0.0, acc)).astype(dtype)

    return te.compute(out_shape, body, name="T_resize2d", tag="injective")
