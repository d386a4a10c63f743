"""``pool2d``: max and average pooling (TVM's ``topi.nn.pool2d``)."""

from __future__ import annotations

from ... import te
from .pad import pad
from .utils import as_pair, check_tensor, get_pad_tuple

__all__ = ["pool2d"]

_LAYOUTS = {"NCHW": (2, 3), "NHWC": (1, 2)}


def _out_size(size: int, k: int, stride: int, lo: int, hi: int, dilation: int, ceil_mode: bool):
    """The output size and the padding added after ``hi`` so that ``ceil_mode`` windows fit."""
    span = size + lo + hi - ((k - 1) * dilation + 1)
    if span < 0:
        raise ValueError(f"pool2d: a window of {k} taps (dilation {dilation}) does not fit the padded "
                         f"input ({size} + {lo} + {hi})")
    out = -(-span // stride) + 1 if ceil_mode else span // stride + 1
    extra = max(0, (out - 1) * stride + (k - 1) * dilation + 1 - (size + lo + hi))
    return out, extra


def _taps(start, k: int, dilation: int, lo, hi):
    """How many of the taps ``start + t * dilation`` (``t < k``) lie in ``[lo, hi]``."""
    if dilation == 1:
        first, last = te.max(lo - start, 0), te.min(hi - start, k - 1)
    else:
        first = te.max(te.floordiv(lo - start + dilation - 1, dilation), 0)
        last = te.min(te.floordiv(hi - start, dilation), k - 1)
    return te.max(last - first + 1, 0)


def pool2d(data, kernel, stride, dilation, padding, pool_type: str, ceil_mode: bool = False,
           layout: str = "NCHW", count_include_pad: bool = True):
    """Max or average pooling over the height and width axes of ``data`` (``layout``
    ``"NCHW"`` or ``"NHWC"``).

    ``kernel``, ``stride`` and ``dilation`` are an int or ``(h, w)``; ``padding`` is
    ``(top, left, bottom, right)`` as in TVM (an int or ``(h, w)`` also do). Max pooling
    pads with the dtype's smallest value, so padding never wins. Average pooling sums
    the window, then divides by the taps inside the padded input
    (``count_include_pad``, the default) or inside the input only; ``ceil_mode``
    rounds the output size up, the extra windows reaching past the padding. Stages:
    ``[pad_temp ->] pool_max``, or ``[pad_temp ->] pool_sum -> pool_avg``.
    """
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if layout not in _LAYOUTS:
        raise ValueError(f"pool2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    shape = list(check_tensor(data, 4, "pool2d: data", layout))
    h_ax, w_ax = _LAYOUTS[layout]
    H, W = shape[h_ax], shape[w_ax]
    if not (isinstance(H, int) and isinstance(W, int)):
        raise ValueError("pool2d: the height and width must be constants")
    kh, kw = as_pair(kernel, "kernel")
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    top, left, bottom, right = get_pad_tuple(padding, (kh, kw))
    Ho, extra_h = _out_size(H, kh, sh, top, bottom, dh, ceil_mode)
    Wo, extra_w = _out_size(W, kw, sw, left, right, dw, ceil_mode)
    before, after = [0] * 4, [0] * 4
    before[h_ax], before[w_ax] = top, left
    after[h_ax], after[w_ax] = bottom + extra_h, right + extra_w
    fill = te.min_value(data.dtype) if pool_type == "max" else te.const(0, data.dtype)
    src = pad(data, before, after, fill, name="pad_temp") if any(before + after) else data
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out_shape = list(shape)
    out_shape[h_ax], out_shape[w_ax] = Ho, Wo

    def window(idx):
        idx = list(idx)
        idx[h_ax] = idx[h_ax] * sh + ry * dh
        idx[w_ax] = idx[w_ax] * sw + rx * dw
        return src[tuple(idx)]

    if pool_type == "max":
        return te.compute(tuple(out_shape), lambda *i: te.max(window(i), axis=[ry, rx]), name="pool_max",
                          tag="pool_max")
    total = te.compute(tuple(out_shape), lambda *i: te.sum(window(i), axis=[ry, rx]), name="pool_sum",
                       tag="pool_sum")
    if count_include_pad and not (extra_h or extra_w):
        return te.compute(tuple(out_shape), lambda *i: total[i] / te.const(kh * kw, data.dtype),
                          name="pool_avg", tag="pool_avg")
    # the windows at the border cover fewer taps: count those inside the region that counts
    lo_h, hi_h = (-top, H + bottom - 1) if count_include_pad else (0, H - 1)
    lo_w, hi_w = (-left, W + right - 1) if count_include_pad else (0, W - 1)

    def average(*i):
        taps = (_taps(i[h_ax] * sh - top, kh, dh, lo_h, hi_h)
                * _taps(i[w_ax] * sw - left, kw, dw, lo_w, hi_w))
        return total[i] / te.max(taps, 1).astype(data.dtype)

    return te.compute(tuple(out_shape), average, name="pool_avg", tag="pool_avg")
