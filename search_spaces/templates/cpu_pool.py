"""``pool2d(N, C, H, W, KH, KW, stride, padding, pool_type, dtype)`` for CPUs (NCHW).

``pool_type`` is ``"max"`` (padding never wins) or ``"avg"`` (padding counts as
zeros and the sum is divided by ``KH * KW``, PyTorch's ``count_include_pad=True``).
The output is tiled into rows x columns tiles vectorized along columns; the window
taps may be unrolled; channel blocks run in parallel.
"""

from __future__ import annotations

import numpy as np

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    accumulator,
    conv_out_size,
    float_dtype_check,
    pad_nchw_like,
    padding4,
    pair,
    parallel_and_vectorize,
    place_padding,
    random_data,
    vector_lanes,
)
from search_spaces.templates._conv_ref import window_views

__all__ = ["pool2d", "pool2d_reference"]


def pool2d_reference(N, C, H, W, KH, KW, stride, padding, pool_type, dtype="float32", rng=None):
    """Random input ``(N, C, H, W)`` and its pooled output.

    The output size is read off the padded input here, not taken from the template's
    arithmetic, so that the reference checks the template's sizes too.
    """
    x = random_data(rng, (N, C, H, W), dtype)
    top, left, bottom, right = padding4(padding)
    fill = -np.inf if pool_type == "max" else 0.0
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    sh, sw = pair(stride, "stride")
    Hp, Wp = xp.shape[2:]
    if Hp < KH or Wp < KW:
        raise ValueError(f"pool2d: a {KH}x{KW} window does not fit the padded {Hp}x{Wp} input")
    Ho, Wo = (Hp - KH) // sh + 1, (Wp - KW) // sw + 1
    views = [v for _, _, v in window_views(xp, KH, KW, (sh, sw), (1, 1), Ho, Wo)]
    out = np.max(views, axis=0) if pool_type == "max" else np.sum(views, axis=0) / (KH * KW)
    return [x], [out.astype(dtype)]


@template("pool2d", target="cpu", reference=pool2d_reference)
def pool2d(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
           pool_type: str = "max", dtype: str = "float32"):
    """Max or average pooling over ``KH x KW`` windows."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    float_dtype_check(dtype, "pool2d")
    cfg = get_config()
    sh, sw = pair(stride, "stride")
    pads = padding4(padding)
    Ho = conv_out_size(H, KH, sh, pads[0], pads[2])
    Wo = conv_out_size(W, KW, sw, pads[1], pads[3])
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)

    lanes = vector_lanes(dtype)
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 1])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, lanes])
    if any(pads):
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_annotate("unroll_kernel", [0, 1], policy="try_unroll", default=["none", "unroll"])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    fill = te.min_value(dtype).value if pool_type == "max" else 0.0
    P = pad_nchw_like(X, 2, pads, fill, name="X_pad")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    reducer = te.max if pool_type == "max" else te.sum
    R = te.compute((N, C, Ho, Wo), lambda n, c, y, x: reducer(P[n, c, y * sh + ry, x * sw + rx],
                                                              axis=[ry, rx]), name=f"pool_{pool_type}")
    out = R
    if pool_type == "avg":
        out = te.compute((N, C, Ho, Wo), lambda n, c, y, x: R[n, c, y, x] * (1.0 / (KH * KW)),
                         name="pool_avg_scaled")

    s = te.create_schedule(out.op)
    acc = accumulator(s, R, out)
    n, c, y, x = s[out].op.axis
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, c, yo, xo, yi, xi)
    outer = s[out].fuse(n, c)
    parallel_and_vectorize(s, cfg, out, outer, xi)
    s[acc].compute_at(s[out], xo)
    nc, cc, yc, xc = s[acc].op.axis
    ry_, rx_ = s[acc].op.reduce_axis
    s[acc].reorder(nc, cc, ry_, rx_, yc, xc)
    cfg["unroll_kernel"].apply(s, acc, [ry_, rx_])
    if cfg["vec"].val:
        s[acc].vectorize(xc)
    place_padding(s, cfg, P, X, out, outer)
    return s, [X, out]
