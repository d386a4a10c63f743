"""``conv2d_depthwise_nchwc``: a pointwise convolution and the depthwise convolution that reads
it, in one kernel (the expansion and depthwise layers of an inverted residual block, as in
MobileNetV2).

Apart, the pointwise layer writes its whole output (six times its input's channels, at the
block's full resolution) to memory and the depthwise layer reads it back: at 112 x 112 pixels
and 96 channels, 4.8 MB each way, more than a core's L2 holds. Here the depthwise output is
computed in *bands*: each iteration of the parallel loop takes ``band`` output rows of
``oc_tile`` channel blocks, first computes the rows of the pointwise output that those rows read
(their window, ``(band - 1) * stride + KH`` rows, including the zero padding around them) into a
buffer of its own, which stays in the core's caches, then the depthwise taps from that buffer.
A band's window overlaps the next one's by ``KH - stride`` rows, computed twice: with stride 2
and 3 x 3 taps, one row in ``2 * band``; with stride 1, two in ``band``, which is why a model
fuses only where the pointwise output is large (:func:`compiler.graph.fuse_expansions`).

Blocked tensors as ``conv2d_nchwc`` and ``depthwise_conv2d_nchwc`` take them: input
``(N, C/ic_bn, H, W, ic_bn)``, pointwise kernel ``(F/block, C/ic_bn, 1, 1, ic_bn, block)``, its
``mid_epilogue``'s inputs (a bias of ``(F,)``; ``"add"`` is not allowed there), depthwise kernel
``(F/block, KH, KW, block)``, the ``epilogue``'s inputs, output ``(N, F/block, Ho, Wo, block)``.

Knobs:

* ``band``: depthwise output rows per iteration (rows past the output's end are computed and
  dropped); default: the most, of those that divide the rows, whose pointwise buffer fits half
  of ``L2_BYTES``, leaving every thread at least two iterations;
* ``oc_tile``: channel blocks per iteration (the pointwise register tile's blocks);
* ``reg_n``: pointwise output pixels per register tile (``reg_n x oc_tile`` accumulators of a
  block each, one broadcast input value per pixel and input channel);
* ``reg_w``: depthwise output columns per register tile.

The pointwise layer reads its input at clamped coordinates over the whole padded window, then
writes zeros where the window is padding: no branch in the register tiles, and every read in
bounds.
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.runtime import num_threads
from compiler.simd import vector_lanes, vector_registers
from compiler.topi.nn.utils import conv_window
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import L2_BYTES
from search_spaces.templates.cpu_depthwise import schedule_taps

__all__ = ["conv2d_depthwise_nchwc", "conv2d_depthwise_nchwc_reference", "MID_EPILOGUE_OPS"]

#: What the pointwise layer's own epilogue may hold (its output is only the depthwise layer's input).
MID_EPILOGUE_OPS = ("bias", "relu", "relu6", "sigmoid", "gelu", "silu", "hardswish")
BANDS = (1, 2, 4, 7, 8, 14, 16, 28, 32, 56)  # candidate output rows per iteration
MAX_REG_N = 16
MAX_REG_W = 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _check(C: int, F: int, ic_bn, block, mid_epilogue) -> None:
    for name, value, total in (("ic_bn", ic_bn, C), ("block", block, F)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1 or total % value:
            raise ValueError(f"{name} must be a positive divisor of {total}, got {value!r}")
    bad = [op for op in mid_epilogue if op not in MID_EPILOGUE_OPS]
    if bad:
        raise ValueError(f"mid_epilogue may hold {', '.join(MID_EPILOGUE_OPS)}, got {bad[0]!r}")


def conv2d_depthwise_nchwc_reference(N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, block,
                                     dtype="float32", mid_epilogue=(), epilogue=(), rng=None):
    """Random blocked input, kernels and epilogue inputs, and the pointwise convolution's output
    through ``mid_epilogue``, convolved depthwise through ``epilogue``, blocked."""
    _check(C, F, ic_bn, block, mid_epilogue)
    rng = np.random.default_rng(0) if rng is None else rng
    x, w1 = random_data(rng, (N, C, H, W), dtype), random_data(rng, (F, C, 1, 1), dtype)
    w2 = random_data(rng, (F, 1, KH, KW), dtype)
    mid = topi.testing.conv2d_nchw_python(x, w1, 1, 0)
    mid_extra, mid = reference_epilogue(mid_epilogue, mid, 1, dtype, rng)
    out = topi.testing.depthwise_conv2d_python_nchw(mid, w2, stride, padding, dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)

    def blocked(a, b):  # (N, C, h, w) as (N, C/b, h, w, b)
        n, c, h, w_ = a.shape
        return np.ascontiguousarray(a.reshape(n, c // b, b, h, w_).transpose(0, 1, 3, 4, 2))

    w1b = w1.reshape(F // block, block, C // ic_bn, ic_bn, 1, 1).transpose(0, 2, 4, 5, 3, 1)
    w2b = w2.reshape(F // block, block, KH, KW).transpose(0, 2, 3, 1)
    ins = [blocked(x, ic_bn), np.ascontiguousarray(w1b), *mid_extra, np.ascontiguousarray(w2b),
           *(e if e.ndim == 1 else blocked(e, block) for e in extra)]
    return ins, [blocked(out, block)]


def _band_rows(band: int, sh: int, dh: int, KH: int) -> int:
    """Rows of the pointwise output that ``band`` depthwise output rows read."""
    return (band - 1) * sh + (KH - 1) * dh + 1


def _define_knobs(cfg, Cb: int, Ho: int, Wo: int, Wp: int, block: int, window, KH: int, itemsize: int,
                  lanes: int, registers: int) -> None:
    """The knobs of the module's docstring over feasible configs only, and their defaults."""
    nv = _cdiv(block, lanes)  # vectors per channel block
    (sh, _), (dh, _) = window
    tiles = [t for t in range(1, Cb + 1) if Cb % t == 0 and t * nv <= 4]
    reg_ns = [r for r in range(1, MAX_REG_N + 1) if r * nv + nv + 1 <= registers]
    widths = [w for w in range(1, min(Wo, MAX_REG_W) + 1)
              if (w * nv + nv + 1 <= registers) and (Wo % w == 0 or 4 * (_cdiv(Wo, w) * w - Wo) <= Wo)]
    divisors = {d for d in range(1, min(Ho, max(BANDS)) + 1) if Ho % d == 0}
    bands = sorted({b for b in BANDS if b < Ho} | divisors)
    threads = num_threads()

    def buffer_bytes(band: int) -> int:  # of one channel block
        return _band_rows(band, sh, dh, KH) * Wp * block * itemsize

    fits = [b for b in bands
            if buffer_bytes(b) <= L2_BYTES // 2 and Cb * _cdiv(Ho, b) >= 2 * threads] or bands[:1]
    # Bands that cover the rows exactly first (no rows computed to be dropped), then the tallest.
    cfg.define_knob("band", bands, default=max(fits, key=lambda b: (Ho % b == 0, b)))
    cfg.define_knob("oc_tile", tiles, default=1)
    cfg.define_knob("reg_n", reg_ns, default=max(r for r in reg_ns if r <= 14))
    cfg.define_knob("reg_w", widths, default=max(w for w in widths if w <= 4))

    def tile_fits(c) -> bool:
        vectors = c["oc_tile"].val * nv  # a tile's weight vectors, and its accumulators per pixel
        return c["reg_n"].val * vectors + vectors + 1 <= registers

    cfg.add_constraint(tile_fits, knobs=["reg_n", "oc_tile"], name="the pointwise register tile fits")


@template("conv2d_depthwise_nchwc", target="cpu", reference=conv2d_depthwise_nchwc_reference)
def conv2d_depthwise_nchwc(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                           dilation=1, ic_bn: int = 16, block: int = 16, dtype: str = "float32",
                           mid_epilogue: tuple = (), epilogue: tuple = ()):
    """A 1 x 1 convolution (``C`` to ``F`` channels, stride 1) through ``mid_epilogue``, then a
    ``KH x KW`` depthwise convolution of its output with ``stride``, ``padding`` and ``dilation``
    through ``epilogue``, in bands of output rows (see the module). Tensors: X, the pointwise
    kernel, ``mid_epilogue``'s inputs, the depthwise kernel, ``epilogue``'s inputs, the output."""
    mid_epilogue = tuple(mid_epilogue)
    _check(C, F, ic_bn, block, mid_epilogue)
    (sh, sw), (dh, dw), (top, left, _, _), (Ho, Wo) = conv_window(H, W, KH, KW, stride, padding, dilation)
    cfg = get_config()
    lanes, Cb = vector_lanes(dtype), F // block
    itemsize = np.dtype(dtype).itemsize
    Wp_min = (Wo - 1) * sw + (KW - 1) * dw + 1
    _define_knobs(cfg, Cb, Ho, Wo, Wp_min, block, ((sh, sw), (dh, dw)), KH, itemsize, lanes,
                  vector_registers())
    band, oc_tile, reg_n, reg_w = (cfg[k].val for k in ("band", "oc_tile", "reg_n", "reg_w"))

    X = te.placeholder((N, C // ic_bn, H, W, ic_bn), name="X", dtype=dtype)
    W1 = te.placeholder((Cb, C // ic_bn, 1, 1, ic_bn, block), name="W_pointwise", dtype=dtype)
    mid_ep = Epilogue.declare(mid_epilogue, dtype, (N, Cb, H, W, block), F, prefix="pointwise_")
    W2 = te.placeholder((Cb, KH, KW, block), name="W_depthwise", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, Cb, Ho, Wo, block), F)

    # The loops run over whole bands and register tiles; the pointwise output over their window.
    Hop, Wop = _cdiv(Ho, band) * band, _cdiv(Wo, reg_w) * reg_w
    Hp, Wp = _band_rows(Hop, sh, dh, KH), (Wop - 1) * sw + (KW - 1) * dw + 1
    zero = te.const(0, dtype)
    ic = te.reduce_axis((0, C), name="ic")

    def clamped(v, top_or_left, size):
        return te.max(te.min(v - top_or_left, size - 1), 0)

    mid_acc = te.compute((N, Cb, Hp, Wp, block), lambda n, co, h, w, c: te.sum(
        X[n, ic // ic_bn, clamped(h, top, H), clamped(w, left, W), ic % ic_bn]
        * W1[co, ic // ic_bn, 0, 0, ic % ic_bn, c], axis=ic), name="pointwise_acc")

    def mid_value(n, co, h, w, c):
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        value = mid_ep.apply(mid_acc[n, co, h, w, c], co * block + c, (n, co, h - top, w - left, c))
        return te.if_then_else(inside, value, zero)

    mid = te.compute((N, Cb, Hp, Wp, block), mid_value, name="pointwise")
    ry, rx = te.reduce_axis((0, KH), name="ry"), te.reduce_axis((0, KW), name="rx")
    acc = te.compute((N, Cb, Hop, Wop, block), lambda n, co, y, x, c: te.sum(
        mid[n, co, y * sh + ry * dh, x * sw + rx * dw, c] * W2[co, ry, rx, c], axis=[ry, rx]), name="acc")
    Y = te.compute((N, Cb, Ho, Wo, block), lambda n, co, y, x, c: ep.apply(
        acc[n, co, y, x, c], co * block + c, (n, co, y, x, c)), name="conv2d_depthwise_nchwc")

    s = te.create_schedule(Y.op)
    n, co, y, x, c = s[Y].op.axis
    yb, yi = s[Y].split(y, factor=band)
    cot, coi = s[Y].split(co, factor=oc_tile)
    xo, xi = s[Y].split(x, factor=reg_w)
    # Bands outermost: consecutive iterations (a thread's) share the band's input rows.
    s[Y].reorder(n, yb, cot, coi, yi, xo, xi, c)
    outer = s[Y].fuse(n, yb, cot)
    s[Y].parallel(outer)
    s[Y].unroll(xi)
    s[Y].vectorize(c)
    schedule_taps(s, acc, s[Y], xo, block, lanes)

    m = s[mid]
    m.compute_at(s[Y], outer)
    mn, mco, mh, mw, mc = m.op.axis
    mwo, mwi = m.split(mw, factor=reg_n)
    m.reorder(mn, mh, mwo, mco, mwi, mc)
    m.unroll(mco)
    m.unroll(mwi)
    m.vectorize(mc)
    p = s[mid_acc]
    p.set_scope("local")
    p.compute_at(m, mwo)
    pn, pco, ph, pw, pc = p.op.axis
    (pic,) = p.op.reduce_axis
    pio, pii = p.split(pic, factor=ic_bn)
    p.reorder(pn, ph, pio, pii, pco, pw, pc)
    p.unroll(pco)
    p.unroll(pw)
    p.vectorize(pc)
    return s, [X, W1, *mid_ep.inputs, W2, *ep.inputs, Y]
