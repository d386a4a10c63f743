"""``depthwise_conv2d_nchw(N, C, H, W, KH, KW, stride, padding, dilation, dtype)`` for CPUs.

Input ``(N, C, H, W)``, weights ``(C, 1, KH, KW)`` (channel multiplier 1). Each
channel is convolved with its own kernel: the output is tiled into channels x rows x
columns register tiles accumulated locally, vectorized along output columns; kernel
taps may be unrolled and channel blocks run in parallel.
"""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    accumulator,
    conv_out_size,
    pad_nchw_like,
    padding4,
    pair,
    parallel_and_vectorize,
    place_padding,
    random_data,
    vector_lanes,
)
from search_spaces.templates._conv_ref import conv2d_nchw_np

__all__ = ["depthwise_conv2d_nchw", "depthwise_conv2d_nchw_reference"]


def depthwise_conv2d_nchw_reference(N, C, H, W, KH, KW, stride, padding, dilation, dtype="float32",
                                    rng=None):
    """Random input ``(N, C, H, W)`` and weights ``(C, 1, KH, KW)``, and their depthwise convolution."""
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (C, 1, KH, KW), dtype)
    out = conv2d_nchw_np(x, w, pair(stride, "stride"), padding4(padding), pair(dilation, "dilation"),
                         groups_depthwise=True)
    return [x, w], [out.astype(dtype)]


@template("depthwise_conv2d_nchw", target="cpu", reference=depthwise_conv2d_nchw_reference)
def depthwise_conv2d_nchw(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                          dilation=1, dtype: str = "float32"):
    """Depthwise convolution; register tile ``tile_c x tile_y x tile_x`` vectorized along x."""
    cfg = get_config()
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    pads = padding4(padding)
    Ho = conv_out_size(H, KH, sh, pads[0], pads[2], dh)
    Wo = conv_out_size(W, KW, sw, pads[1], pads[3], dw)
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((C, 1, KH, KW), name="W", dtype=dtype)

    lanes = vector_lanes(dtype)
    cfg.define_split("tile_c", C, num_outputs=2, filter=lambda e: e.size[-1] <= 16, default=[-1, 1])
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 2])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, lanes])
    cfg.add_constraint(lambda c: c["tile_c"].size[-1] * c["tile_y"].size[-1] * c["tile_x"].size[-1] <= 512,
                       knobs=["tile_c", "tile_y", "tile_x"], name="register_tile")
    if any(pads):
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_annotate("unroll_kernel", [0, 1], policy="try_unroll", default=["none", "unroll"])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    P = pad_nchw_like(X, 2, pads, 0.0, name="X_pad")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    Y = te.compute((N, C, Ho, Wo), lambda n, c, y, x: te.sum(
        P[n, c, y * sh + ry * dh, x * sw + rx * dw] * Wt[c, 0, ry, rx], axis=[ry, rx]),
        name="depthwise_conv2d_nchw")

    s = te.create_schedule(Y.op)
    acc = accumulator(s, Y, Y)
    n, c, y, x = s[Y].op.axis
    co, ci = cfg["tile_c"].apply(s, Y, c)
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, co, yo, xo, ci, yi, xi)
    outer = s[Y].fuse(n, co)
    parallel_and_vectorize(s, cfg, Y, outer, xi)

    s[acc].compute_at(s[Y], xo)
    nc, cc, yc, xc = s[acc].op.axis
    ry_, rx_ = s[acc].op.reduce_axis
    s[acc].reorder(nc, ry_, rx_, cc, yc, xc)
    cfg["unroll_kernel"].apply(s, acc, [ry_, rx_])
    if cfg["vec"].val:
        s[acc].vectorize(xc)
    place_padding(s, cfg, P, X, Y, outer)
    return s, [X, Wt, Y]
