"""Numpy reference for pooling: TVM's ``topi.testing.poolnd_python`` (and ``pool2d_python``)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..nn.utils import as_pair, get_pad_tuple

__all__ = ["poolnd_python", "pool2d_python"]


def poolnd_python(np_data, kernel, strides, dilation, padding_before, padding_after, pool_type: str,
                  count_include_pad: bool = True, ceil_mode: bool = False, dtype: str = "float32",
                  layout: str | None = None):
    """Max or average pooling over the spatial axes (all but the first two, or those
    ``layout`` names ``D``/``H``/``W``) of ``np_data``, window by window.

    Max pooling ignores the padding; average pooling divides the sum of the window by
    its taps inside the padded input (``count_include_pad``) or inside the input only.
    ``ceil_mode`` rounds the output size up; taps past the padding never count.
    """
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    data = np.asarray(np_data)
    perm = list(range(data.ndim))
    if layout is not None:  # move the spatial axes last, in order
        spatial = [layout.index(c) for c in "DHW" if c in layout]
        perm = [i for i in range(data.ndim) if i not in spatial] + spatial
        data = data.transpose(perm)
    nsp = len(kernel)
    sizes = data.shape[-nsp:]
    out_sizes = []
    windows = zip(sizes, kernel, strides, dilation, padding_before, padding_after, strict=True)
    for n, k, s, d, lo, hi in windows:
        span = (n + lo + hi - (k - 1) * d - 1) / s
        if span < 0:
            raise ValueError(f"a window of {k} taps (dilation {d}) does not fit the padded input "
                             f"({n} + {lo} + {hi})")
        out_sizes.append(int(math.ceil(span) if ceil_mode else math.floor(span)) + 1)
    wide = data.astype("float64")
    out = np.zeros(data.shape[:-nsp] + tuple(out_sizes))
    for pos in itertools.product(*(range(o) for o in out_sizes)):
        values, taps = [], 0
        for tap in itertools.product(*(range(k) for k in kernel)):
            idx = [p * s - lo + t * d for p, s, lo, t, d in zip(pos, strides, padding_before, tap, dilation)]
            inside_pad = all(-lo <= i < n + hi
                             for i, n, lo, hi in zip(idx, sizes, padding_before, padding_after))
            inside = all(0 <= i < n for i, n in zip(idx, sizes))
            if inside:
                values.append(wide[(..., *idx)])
            if inside if not count_include_pad else inside_pad:
                taps += 1
        if pool_type == "max":
            out[(..., *pos)] = np.max(values, axis=0) if values else -np.inf
        else:
            out[(..., *pos)] = np.sum(values, axis=0) / taps if taps else 0.0
    out = out.astype(dtype)
    return out.transpose(np.argsort(perm)) if layout is not None else out


def pool2d_python(np_data, kernel, stride, dilation, padding, pool_type: str, ceil_mode: bool = False,
                  layout: str = "NCHW", count_include_pad: bool = True, dtype=None):
    """:func:`poolnd_python` with ``topi.nn.pool2d``'s arguments (``padding`` as
    ``(top, left, bottom, right)``), in ``np_data``'s dtype."""
    kernel = as_pair(kernel, "kernel")
    top, left, bottom, right = get_pad_tuple(padding, kernel)
    return poolnd_python(np_data, kernel, as_pair(stride, "stride"), as_pair(dilation, "dilation"),
                         (top, left), (bottom, right), pool_type, count_include_pad, ceil_mode,
                         dtype or np.asarray(np_data).dtype, layout)
