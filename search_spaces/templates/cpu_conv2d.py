"""2-D convolutions for CPUs: ``conv2d_nchw`` and ``conv2d_nhwc``.

Both follow the direct-convolution schedule of TVM's x86 templates: the output is
tiled into register tiles (output channels x rows x columns) accumulated in a local
buffer across the whole reduction, the reduction over input channels is split for
cache blocking, the innermost tile axis is vectorized (output columns in NCHW,
output channels in NHWC), kernel taps may be unrolled and the outer tiles run in
parallel. In NCHW the weights may be packed so the register tile's channels are
contiguous.

``stride``, ``padding`` and ``dilation`` take an int or a pair ``(h, w)``;
``padding`` also takes ``(top, left, bottom, right)``.
"""

from __future__ import annotations

import numpy as np

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

__all__ = ["conv2d_nchw", "conv2d_nhwc", "conv2d_nchw_reference", "conv2d_nhwc_reference"]

# Accumulators a register tile may hold (32 vector registers of 16 lanes).
_MAX_REGISTER_TILE = 512


def _geometry(H, W, KH, KW, stride, padding, dilation):
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    pads = padding4(padding)
    Ho = conv_out_size(H, KH, sh, pads[0], pads[2], dh)
    Wo = conv_out_size(W, KW, sw, pads[1], pads[3], dw)
    return (sh, sw), (dh, dw), pads, Ho, Wo


# ---------------------------------------------------------------------------- NCHW


def conv2d_nchw_reference(N, C, H, W, F, KH, KW, stride, padding, dilation, dtype="float32", rng=None):
    """Random input ``(N, C, H, W)`` and weights ``(F, C, KH, KW)``, and their convolution."""
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (F, C, KH, KW), dtype)
    out = conv2d_nchw_np(x, w, pair(stride, "stride"), padding4(padding), pair(dilation, "dilation"))
    return [x, w], [out.astype(dtype)]


@template("conv2d_nchw", target="cpu", reference=conv2d_nchw_reference)
def conv2d_nchw(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                dilation=1, dtype: str = "float32"):
    """Direct NCHW convolution; register tile ``tile_f x tile_y x tile_x`` vectorized along x."""
    cfg = get_config()
    (sh, sw), (dh, dw), pads, Ho, Wo = _geometry(H, W, KH, KW, stride, padding, dilation)
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((F, C, KH, KW), name="W", dtype=dtype)

    lanes = vector_lanes(dtype)
    cfg.define_split("tile_f", F, num_outputs=2, filter=lambda e: e.size[-1] <= 32, default=[-1, 4])
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 2])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, lanes])
    cfg.define_split("tile_rc", C, num_outputs=2, default=[-1, 8])
    cfg.add_constraint(lambda c: c["tile_f"].size[-1] * c["tile_y"].size[-1] * c["tile_x"].size[-1]
                       <= _MAX_REGISTER_TILE, knobs=["tile_f", "tile_y", "tile_x"], name="register_tile")
    cfg.define_knob("pack_w", [True, False])
    if any(pads):
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    P = pad_nchw_like(X, 2, pads, 0.0, name="X_pad")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    bf = cfg["tile_f"].size[-1]
    if cfg["pack_w"].val:
        Wp = te.compute((F // bf, C, KH, KW, bf), lambda fo, c, y, x, fi: Wt[fo * bf + fi, c, y, x],
                        name="W_packed")
        w_at = lambda f, c, y, x: Wp[f // bf, c, y, x, f % bf]
    else:
        Wp = None
        w_at = lambda f, c, y, x: Wt[f, c, y, x]
    Y = te.compute((N, F, Ho, Wo), lambda n, f, y, x: te.sum(
        P[n, rc, y * sh + ry * dh, x * sw + rx * dw] * w_at(f, rc, ry, rx), axis=[rc, ry, rx]),
        name="conv2d_nchw")

    s = te.create_schedule(Y.op)
    acc = accumulator(s, Y, Y)
    n, f, y, x = s[Y].op.axis
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, fo, yo, xo, fi, yi, xi)
    outer = s[Y].fuse(n, fo, yo)
    parallel_and_vectorize(s, cfg, Y, outer, xi)

    s[acc].compute_at(s[Y], xo)
    nc, fc, yc, xc = s[acc].op.axis
    rc_, ry_, rx_ = s[acc].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, acc, rc_)
    s[acc].reorder(nc, rco, ry_, rci, rx_, fc, yc, xc)
    if cfg["unroll_kw"].val:
        s[acc].unroll(rx_)
    if cfg["vec"].val:
        s[acc].vectorize(xc)

    place_padding(s, cfg, P, X, Y, outer)
    if Wp is not None:
        wfo, *_, wfi = s[Wp].op.axis
        parallel_and_vectorize(s, cfg, Wp, wfo, wfi)
    return s, [X, Wt, Y]


# ---------------------------------------------------------------------------- NHWC


def conv2d_nhwc_reference(N, H, W, C, F, KH, KW, stride, padding, dilation, dtype="float32", rng=None):
    """Random input ``(N, H, W, C)`` and weights ``(KH, KW, C, F)``, and their convolution."""
    x, w = random_data(rng, (N, H, W, C), dtype), random_data(rng, (KH, KW, C, F), dtype)
    out = conv2d_nchw_np(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), pair(stride, "stride"),
                         padding4(padding), pair(dilation, "dilation"))
    return [x, w], [np.ascontiguousarray(out.transpose(0, 2, 3, 1)).astype(dtype)]


@template("conv2d_nhwc", target="cpu", reference=conv2d_nhwc_reference)
def conv2d_nhwc(N: int, H: int, W: int, C: int, F: int, KH: int, KW: int, stride=1, padding=0,
                dilation=1, dtype: str = "float32"):
    """Direct NHWC convolution; register tile ``tile_y x tile_x x tile_f`` vectorized along f."""
    cfg = get_config()
    (sh, sw), (dh, dw), pads, Ho, Wo = _geometry(H, W, KH, KW, stride, padding, dilation)
    X = te.placeholder((N, H, W, C), name="X", dtype=dtype)
    Wt = te.placeholder((KH, KW, C, F), name="W", dtype=dtype)

    lanes = vector_lanes(dtype)
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 1])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 16, default=[-1, 4])
    cfg.define_split("tile_f", F, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, 2 * lanes])
    cfg.define_split("tile_rc", C, num_outputs=2, default=[-1, 8])
    cfg.add_constraint(lambda c: c["tile_f"].size[-1] * c["tile_y"].size[-1] * c["tile_x"].size[-1]
                       <= _MAX_REGISTER_TILE, knobs=["tile_y", "tile_x", "tile_f"], name="register_tile")
    if any(pads):
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    P = pad_nchw_like(X, 1, pads, 0.0, name="X_pad")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, C), name="rc")
    Y = te.compute((N, Ho, Wo, F), lambda n, y, x, f: te.sum(
        P[n, y * sh + ry * dh, x * sw + rx * dw, rc] * Wt[ry, rx, rc, f], axis=[ry, rx, rc]),
        name="conv2d_nhwc")

    s = te.create_schedule(Y.op)
    acc = accumulator(s, Y, Y)
    n, y, x, f = s[Y].op.axis
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    s[Y].reorder(n, yo, xo, fo, yi, xi, fi)
    outer = s[Y].fuse(n, yo)
    parallel_and_vectorize(s, cfg, Y, outer, fi)

    s[acc].compute_at(s[Y], fo)
    nc, yc, xc, fc = s[acc].op.axis
    ry_, rx_, rc_ = s[acc].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, acc, rc_)
    s[acc].reorder(nc, rco, ry_, rx_, rci, yc, xc, fc)
    if cfg["unroll_kw"].val:
        s[acc].unroll(rx_)
    if cfg["vec"].val:
        s[acc].vectorize(fc)

    place_padding(s, cfg, P, X, Y, outer)
    return s, [X, Wt, Y]
