"""2-D convolutions for CPUs: ``conv2d_nchw`` and ``conv2d_nhwc``.

``conv2d_nchw`` takes and returns NCHW arrays but computes in channel blocks, as
oneDNN and TVM's ``conv2d_NCHWc`` do (see ``cpu_conv2d_nchwc``): inside the operator
the data is padded and blocked, the kernel packed, and the blocked output unpacked.
1x1 convolutions without padding are GEMMs and run through ``_gemm``'s schedule.
Its ``epilogue`` (see ``_epilogue``: bias, residual, activations) is applied where the
register tile is stored: into the blocked output row, or as the GEMM writes its output.

``conv2d_nhwc`` follows the direct-convolution schedule of TVM's x86 templates: the
output is tiled into register tiles (rows x columns x output channels) accumulated in
a local buffer across the whole reduction, the reduction over input channels is split
for cache blocking, the output channels are vectorized, kernel taps may be unrolled
and the outer tiles run in parallel.

``stride``, ``padding`` and ``dilation`` take an int or a pair ``(h, w)``;
``padding`` also takes ``(top, left, bottom, right)``, ``"SAME"`` or ``"VALID"``
(``topi.nn.get_pad_tuple``).
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.simd import vector_lanes
from compiler.topi.utils import get_const_tuple
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    accumulator,
    parallel_and_vectorize,
    place_padding,
    random_data,
)
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm
from search_spaces.templates.cpu_conv2d_nchwc import (
    ConvGeometry,
    blocked_conv,
    blocked_epilogue,
    blocks_from_nchw,
    define_blocked_knobs,
    nchw_from_blocks,
    nchw_to_blocks,
    schedule_blocked_conv,
    schedule_data_blocks,
    schedule_kernel_blocks,
    schedule_unpack,
)

__all__ = ["conv2d_nchw", "conv2d_nhwc", "conv2d_nchw_reference", "conv2d_nhwc_reference"]

# Accumulators a register tile may hold (32 vector registers of 16 lanes).
_MAX_REGISTER_TILE = 512


# ---------------------------------------------------------------------------- NCHW


def conv2d_nchw_reference(N, C, H, W, F, KH, KW, stride, padding, dilation, dtype="float32", epilogue=(),
                          rng=None):
    """Random input ``(N, C, H, W)`` and weights ``(F, C, KH, KW)``, and their convolution
    through ``epilogue``."""
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (F, C, KH, KW), dtype)
    out = topi.testing.conv2d_nchw_python(x, w, stride, padding, dilation=dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)
    return [x, w, *extra], [out]


# Output columns below which the blocked register tile is too narrow to beat the GEMM.
_MIN_BLOCKED_WIDTH = 7


def _as_gemm(g, dtype: str) -> bool:
    """Whether to run the convolution as a GEMM rather than in channel blocks.

    A 1x1 layer without padding is one (its windows are the image itself). So is a layer
    of small images, with fewer than half as many output pixels as filters
    (``2 * N * Ho * Wo < F``, the deepest layers), whose few windows cost less to gather
    than its large kernel costs to pack into blocks; unless its pixels leave the GEMM's
    last vector part empty while the blocked tile has room. The GEMM vectorizes over the
    pixels and computes whole vectors, the blocked schedule over output channels, with a
    register tile of up to ``Wo`` columns. Tuned on 2 threads of a Zen 4 (ms):

    ========================  =====  =======  ===================================
    layer                     GEMM   blocked
    ========================  =====  =======  ===================================
    512 x 7 x 7 (49 pixels)   1.40   1.20     the GEMM computes 64 pixels for 49
    256 x 4 x 4 to 256        0.101  0.135    16 pixels: one whole vector
    512 x 3 x 3               0.373  0.456    a 3-column tile, against 16 for 9
    256 x 2 x 2 to 512        0.120  0.124
    ========================  =====  =======  ===================================
    """
    if g.KH == g.KW == 1 and not any(g.pads):
        return True
    pixels = g.N * g.Ho * g.Wo
    if 2 * pixels >= g.F:
        return False
    return pixels % vector_lanes(dtype) == 0 or g.Wo < _MIN_BLOCKED_WIDTH


@template("conv2d_nchw", target="cpu", reference=conv2d_nchw_reference)
def conv2d_nchw(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                dilation=1, dtype: str = "float32", epilogue: tuple = ()):
    """NCHW convolution through channel blocks (see ``cpu_conv2d_nchwc``): the data is
    padded and blocked and the kernel packed inside the operator, the blocked output
    unpacked row by row. 1x1 layers and small images run as GEMMs (:func:`_as_gemm`).
    ``epilogue``'s inputs (a bias of ``(F,)``, residuals of ``(N, F, Ho, Wo)``) come after X
    and W; it is applied to the blocked output row, before the row is unpacked."""
    cfg = get_config()
    g = ConvGeometry.of(N, C, H, W, F, KH, KW, stride, padding, dilation)
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((F, C, KH, KW), name="W", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, F, g.Ho, g.Wo), F)
    if _as_gemm(g, dtype):
        return _conv2d_gemm(cfg, g, X, Wt, ep, dtype)
    define_blocked_knobs(cfg, g, dtype)
    ic_bn, oc_bn = cfg["ic_bn"].val, cfg["oc_bn"].val
    D = nchw_to_blocks(X, ic_bn, g.pads, dtype)
    Wb = blocks_from_nchw(Wt, ic_bn, oc_bn, dtype)
    Y = blocked_conv(D, Wb, g, name="conv2d_nchwc_acc" if ep else "conv2d_nchwc", tile=cfg["reg_n"].val)
    Y = blocked_epilogue(Y, ep, nchw_residual=True)
    out = nchw_from_blocks(Y, F)
    s = te.create_schedule(out.op)
    schedule_blocked_conv(cfg, s, Y, out_is_y=False)
    n, f, y, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=oc_bn)
    if cfg["parallel_axis"].val == "oc":  # each thread packs the kernel of its channel blocks
        s[out].reorder(fo, n, y, fi, x)
        outer = s[out].fuse(fo, n)
        schedule_kernel_blocks(s, Wb, at=(s[out], outer))
        s[Y].compute_at(s[out], y)
    else:
        s[out].reorder(n, fo, y, fi, x)
        outer = s[out].fuse(n, fo, y)
        s[Y].compute_at(s[out], outer)
        schedule_kernel_blocks(s, Wb)
    s[out].parallel(outer)
    schedule_unpack(s, out, fi, x)
    schedule_data_blocks(s, D)
    return s, [X, Wt, *ep.inputs, out]


def _conv2d_gemm(cfg, g, X, Wt, ep, dtype):
    """The convolution as the GEMM ``W (F x C*KH*KW) @ windows (C*KH*KW x Ho*Wo)`` per image,
    through ``_gemm``'s schedule. The kernel is read in place (its rows are the GEMM's rows);
    packing B's micro-panels gathers the image's windows (im2col), applying stride, padding
    and dilation on the way; the output is NCHW as the GEMM writes it, through epilogue ``ep``."""
    Ho, Wo = g.Ho, g.Wo
    (sh, sw), (dh, dw), (top, left, _, _) = g.stride, g.dilation, g.pads
    taps = g.KH * g.KW
    define_gemm_knobs(cfg, g.F, Ho * Wo, g.C * taps, dtype, batch=g.N)

    def b_at(n, k, j):
        c, ry, rx = k // taps, k // g.KW % g.KH, k % g.KW
        h, w = j // Wo * sh + ry * dh - top, j % Wo * sw + rx * dw - left
        if not any(g.pads):
            return X[n, c, h, w]
        inside = te.all(h >= 0, h < g.H, w >= 0, w < g.W)
        return te.if_then_else(inside, X[n, c, h, w], te.const(0, dtype))

    def a_at(n, i, k):
        return Wt[i, k // taps, k // g.KW % g.KH, k % g.KW]

    def write(value, n, f, y, x):
        return ep.apply(value, f, (n, f, y, x))

    t = gemm_compute(cfg, a_at, b_at, (g.N,), g.F, Ho * Wo, g.C * taps, dtype,
                     epilogue=write if ep else None, name="conv2d_nchw", out_cols=(Ho, Wo))
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, [X, Wt, *ep.inputs, t.out]


# ---------------------------------------------------------------------------- NHWC


def conv2d_nhwc_reference(N, H, W, C, F, KH, KW, stride, padding, dilation, dtype="float32", rng=None):
    """Random input ``(N, H, W, C)`` and weights ``(KH, KW, C, F)``, and their convolution."""
    x, w = random_data(rng, (N, H, W, C), dtype), random_data(rng, (KH, KW, C, F), dtype)
    out = topi.testing.conv2d_nhwc_python(x, w, stride, padding, dilation=dilation)
    return [x, w], [np.ascontiguousarray(out)]


@template("conv2d_nhwc", target="cpu", reference=conv2d_nhwc_reference)
def conv2d_nhwc(N: int, H: int, W: int, C: int, F: int, KH: int, KW: int, stride=1, padding=0,
                dilation=1, dtype: str = "float32"):
    """Direct NHWC convolution (``topi.nn.conv2d_nhwc``); register tile
    ``tile_y x tile_x x tile_f`` vectorized along f."""
    cfg = get_config()
    X = te.placeholder((N, H, W, C), name="X", dtype=dtype)
    Wt = te.placeholder((KH, KW, C, F), name="W", dtype=dtype)
    Y = topi.nn.conv2d_nhwc(X, Wt, stride, padding, dilation)
    P = Y.op.input_tensors[0]  # the padded input: a stage even without padding
    _, Ho, Wo, _ = get_const_tuple(Y.shape)
    padded = get_const_tuple(P.shape)[1:3] != (H, W)

    lanes = vector_lanes(dtype)
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 1])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 16, default=[-1, 4])
    cfg.define_split("tile_f", F, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, 2 * lanes])
    cfg.define_split("tile_rc", C, num_outputs=2, default=[-1, 8])
    cfg.add_constraint(lambda c: c["tile_f"].size[-1] * c["tile_y"].size[-1] * c["tile_x"].size[-1]
                       <= _MAX_REGISTER_TILE, knobs=["tile_y", "tile_x", "tile_f"], name="register_tile")
    if padded:
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])


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

    if padded:
        place_padding(s, cfg, P, X, Y, outer)
    else:  # an identity copy: read X itself
        s[P].compute_inline()
    return s, [X, Wt, Y]
