"""``grid_sample``: an NCHW image sampled at the points of a grid (TVM's ``topi.image.grid_sample``,
with ONNX GridSample's rules as ONNX Runtime computes them).

The grid holds, for each output pixel, a point in normalized coordinates: ``grid[n, 0, h, w]``
is ``x`` (along the width) and ``grid[n, 1, h, w]`` is ``y``, -1 at the first pixel and 1 at the
last. ``align_corners`` maps them onto the centres of the corner pixels (``[-1, 1]`` to
``[0, size - 1]``); otherwise onto the outer edges of the corner pixels (to
``[-0.5, size - 0.5]``). Coordinates are computed in float32 (float64 for a float64 grid):

* ``x = (gx + 1) / 2 * (W - 1)`` with ``align_corners``, else ``x = ((gx + 1) * W - 1) / 2``;
* ``nearest``: the pixel at ``x`` rounded half to even;
* ``bilinear``: the four pixels around ``(y, x)``, weighted by the distances to them;
* ``bicubic``: the sixteen pixels around it, weighted by Keys' cubic kernel (``a = -0.75``).

``padding_mode`` says what a pixel index outside the image reads: ``zeros`` reads 0,
``border`` the nearest border pixel, ``reflection`` the pixel mirrored at the image's edges
(the corner pixels' centres with ``align_corners``, their outer edges without), repeatedly
for points far outside. Every index is clamped into the image before it is read, whatever the
grid holds (NaN or infinities included), so the generated code never reads outside the data.
"""

from __future__ import annotations

from ... import te
from ..utils import get_const_tuple, let
from .resize import keys_weights

__all__ = ["grid_sample", "GRID_SAMPLE_METHODS", "PADDING_MODES", "CUBIC_ALPHA"]

GRID_SAMPLE_METHODS = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
#: The ``a`` of the bicubic kernel (PyTorch's and ONNX Runtime's).
CUBIC_ALPHA = -0.75


def _denormalize(g, size: int, align_corners: bool, dtype: str):
    one, two = te.const(1.0, dtype), te.const(2.0, dtype)
    if align_corners:
        return (g + one) / two * te.const(size - 1, dtype)
    return ((g + one) * te.const(size, dtype) - one) / two


def _reflect_index(c, size: int, align_corners: bool, dtype: str):
    """Integer-valued float coordinate ``c`` mirrored into ``[0, size)``: at the corner pixels'
    outer edges (a period of ``2 size``) or, with ``align_corners``, at their centres (a period of
    ``2 (size - 1)``). ONNX Runtime mirrors the float coordinate at the same edges, which on whole
    numbers picks the same pixel."""
    period = 2 * (size - 1) if align_corners else 2 * size
    if period == 0:  # a one-pixel axis with align_corners: every point is that pixel
        return te.const(0.0, dtype)
    p = te.const(period, dtype)
    m = c - p * te.floor(c / p)
    back = p - m if align_corners else p - te.const(1.0, dtype) - m
    return te.if_then_else(m < te.const(size, dtype), m, back)


def _index(c, size: int, padding_mode: str, align_corners: bool, dtype: str):
    """Integer-valued float coordinate ``c`` as an int32 pixel index: inside ``[0, size)`` for
    ``border`` and ``reflection``; for ``zeros`` inside ``[-1, size]``, the ends standing for every
    point outside (see :func:`_read`)."""
    if padding_mode == "reflection":
        c = _reflect_index(c, size, align_corners, dtype)
    # clamped as floats before the cast: max(NaN, lo) is lo, and no value overflows the cast
    low, high = (-1.0, size) if padding_mode == "zeros" else (0.0, size - 1)
    return te.min(te.max(c, te.const(low, dtype)), te.const(high, dtype)).astype("int32")


def _read(i, size: int, padding_mode: str):
    """The index to read for pixel index ``i`` (of :func:`_index`), inside ``[0, size)``, and for
    ``zeros`` whether ``i`` lies inside the image (else None)."""
    if padding_mode != "zeros":
        return i, None
    return te.min(te.max(i, 0), size - 1), te.all(i >= 0, i < size)


def grid_sample(data: te.Tensor, grid: te.Tensor, method: str = "bilinear", layout: str = "NCHW",
                padding_mode: str = "zeros", align_corners: bool = True) -> te.Tensor:
    """``data`` (NCHW) sampled at the points of ``grid`` ``(N, 2, H_out, W_out)``: an output of
    ``(N, C, H_out, W_out)``. ``method`` is one of :data:`GRID_SAMPLE_METHODS`, ``padding_mode``
    one of :data:`PADDING_MODES` (see the module's docstring)."""
    if layout != "NCHW":
        raise ValueError(f"grid_sample: layout must be 'NCHW', got {layout!r}")
    if method not in GRID_SAMPLE_METHODS:
        raise ValueError(f"grid_sample: method must be one of {', '.join(GRID_SAMPLE_METHODS)}, "
                         f"got {method!r}")
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"grid_sample: padding_mode must be one of {', '.join(PADDING_MODES)}, "
                         f"got {padding_mode!r}")
    dshape = tuple(int(d) for d in get_const_tuple(data.shape))
    gshape = tuple(int(d) for d in get_const_tuple(grid.shape))
    if len(dshape) != 4 or len(gshape) != 4 or gshape[:2] != (dshape[0], 2):
        raise ValueError(f"grid_sample: data (N, C, H, W) and grid (N, 2, H_out, W_out) do not fit: "
                         f"{dshape} and {gshape}")
    if not data.dtype.startswith("float") or not grid.dtype.startswith("float"):
        raise ValueError(f"grid_sample: data and grid must be float tensors, got {data.dtype} and "
                         f"{grid.dtype}")
    N, C, H, W = dshape
    dtype = "float64" if grid.dtype == "float64" else "float32"  # coordinates; float16 in float32
    acc = "float64" if data.dtype == "float64" else "float32"
    zero = te.const(0.0, acc)

    def weighted(n, c, rows: list, cols: list):
        """The sum of ``weight_y * weight_x * pixel`` over the ``(coordinate, weight)`` pairs of
        ``rows`` and ``cols``, each pixel padded by ``padding_mode``; each row's and column's
        index is computed once."""
        ys = [_index(v, H, padding_mode, align_corners, dtype) for v, _ in rows]
        xs = [_index(v, W, padding_mode, align_corners, dtype) for v, _ in cols]

        def total(iys: list, ixs: list):
            out = None
            for (_, wy), i in zip(rows, iys):
                iy, in_y = _read(i, H, padding_mode)
                line = None
                for (_, wx), j in zip(cols, ixs):
                    ix, in_x = _read(j, W, padding_mode)
                    value = data[n, c, iy, ix].astype(acc)
                    if in_y is not None:
                        value = te.if_then_else(te.all(in_y, in_x), value, zero)
                    term = value if wx is None else wx * value
                    line = term if line is None else line + term
                line = line if wy is None else wy * line
                out = line if out is None else out + line
            return out.astype(data.dtype)

        # each row and column index named once: a pixel index is read by every weight of its row
        return let(ys, "iy", lambda iys: let(xs, "ix", lambda ixs: total(iys, ixs)))

    def body(n, c, h, w):
        x = _denormalize(grid[n, 0, h, w].astype(dtype), W, align_corners, dtype)
        y = _denormalize(grid[n, 1, h, w].astype(dtype), H, align_corners, dtype)
        return let([x, y], "xy", lambda xy: sample(n, c, xy[1], xy[0]))

    def sample(n, c, y, x):
        if method == "nearest":
            return weighted(n, c, [(te.nearbyint(y), None)], [(te.nearbyint(x), None)])
        x1, y1 = te.floor(x), te.floor(y)
        one = te.const(1.0, dtype)
        if method == "bilinear":
            x2, y2 = x1 + one, y1 + one
            dx2, dx1, dy2, dy1 = ((v - u).astype(acc) for u, v in ((x, x2), (x1, x), (y, y2), (y1, y)))
            return weighted(n, c, [(y1, dy2), (y2, dy1)], [(x1, dx2), (x2, dx1)])
        wx = [v.astype(acc) for v in keys_weights(te.abs(x - x1), CUBIC_ALPHA, dtype)]
        wy = [v.astype(acc) for v in keys_weights(te.abs(y - y1), CUBIC_ALPHA, dtype)]
        offsets = [te.const(k - 1.0, dtype) for k in range(4)]
        return weighted(n, c, [(y1 + o, v) for o, v in zip(offsets, wy)],
                        [(x1 + o, v) for o, v in zip(offsets, wx)])

    return te.compute((N, C, gshape[2], gshape[3]), body, name="T_grid_sample", tag="injective")
