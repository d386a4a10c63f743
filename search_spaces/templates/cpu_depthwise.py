"""``depthwise_conv2d_nchw(N, C, H, W, KH, KW, stride, padding, dilation, dtype)`` for CPUs.

Input ``(N, C, H, W)``, weights ``(C, 1, KH, KW)`` (channel multiplier 1): each channel
is convolved with its own kernel; ``stride``, ``padding`` and ``dilation`` as
``topi.nn.depthwise_conv2d_nchw`` takes them. NCHW in and out, as users call it; inside, the
channel-blocked layout of the fast CPU libraries (oneDNN's ``nChw16c``, TVM's
``NCHWc``), whose layout transforms are part of the operator (and so of what the
tuner measures):

* **Packing.** Channels go in blocks of ``cb`` (a whole number of vector registers, or
  less than one when all channels fit in it): the input becomes
  ``X_packed[n, c // cb, h, w, c % cb]`` with the padding written in as zeros, the
  weights ``W_packed[c // cb, ky, kx, c % cb]``. Channels past ``C`` in the last block,
  and rows and columns past the output's edge that round it up to whole register
  tiles, are zeros computed and never stored, so the kernel has no tail code.
* **Microkernel.** ``reg_h x reg_w`` output pixels of one channel block live in
  registers (``cb / lanes`` vectors each) while the kernel taps run: per tap one
  vector of weights per ``lanes`` channels, one input vector and one fused
  multiply-add per accumulator. Only tiles whose accumulators and weight vectors fit
  the target's vector registers (:func:`vector_registers`) are in the space.
* **Unpacking.** The blocked output is written back to NCHW, vectorized along the
  channels (``unpack="c"``: a scatter) or along the row (``"x"``: a gather).
* **Where.** ``layout_at="block"`` packs each channel block, computes it and unpacks
  it within one iteration of the parallel loop (the thread that uses a block packs
  it, and it stays in cache); ``"root"`` runs the three steps as separate parallel
  loops over the whole tensors.
* **Threads** take channel blocks (``parallel_axis="blocks"``) or, for layers with
  few channel blocks, blocks of rows as well (``"rows"``).

With ``layout="NCHW"`` the kernel (``topi.nn.depthwise_conv2d_nchw``'s compute) works on
the NCHW tensors directly instead, as oneDNN's plain-layout depthwise kernels do: each
channel's padded input is copied once (contiguous rows, in cache, within the parallel loop
over channels), and a register tile of ``reg_h`` rows x ``vec_w`` columns, vectorized along
the row, accumulates the taps.
Without the transposes of the blocked layout, this wins where rows are long (many vectors
wide) and channels few, as in MobileNet's first layers; the blocked layout wins where rows
are short. The knobs of the other layout are then fixed at their first values.

An ``epilogue`` (see ``_epilogue``: bias, residual, activations) is applied as the NCHW output
is written: in the unpacking of the blocked layout (where no padded channel, row or column
is left), in the stage that stores the register tile of the NCHW one.
"""

from __future__ import annotations

from compiler import te, topi
from compiler.simd import vector_lanes, vector_registers
from compiler.topi.nn.utils import conv_window
from compiler.topi.utils import get_const_tuple
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue

__all__ = ["depthwise_conv2d_nchw", "depthwise_conv2d_nchw_reference", "channel_blocks", "register_tiles"]

MAX_REG_W = 16  # output columns per register tile
MIN_SUB_BLOCK = 4  # the smallest channel block below a vector (for layers with few channels)
ROW_PARTS = 4  # row blocks per channel block under parallel_axis="rows"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def channel_blocks(C: int, lanes: int) -> list[int]:
    """The feasible channel blocks: one or two vectors (no more than the channels, rounded up
    to a vector, need), or a power of two below a vector that holds every channel."""
    blocks = [cb for cb in (lanes, 2 * lanes) if cb <= _cdiv(C, lanes) * lanes]
    sub = lanes // 2
    while sub >= MIN_SUB_BLOCK and sub >= C:
        blocks.append(sub)
        sub //= 2
    return sorted(blocks)


def register_tiles(Wo: int, Ho: int, cb: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The feasible ``(reg_h, reg_w)`` register tiles for channel block ``cb``.

    ``reg_h * reg_w`` accumulators of ``cb / lanes`` vectors each, plus the weight vectors
    of one tap and one input vector, fit ``registers``. Widths divide ``Wo`` or round it
    up by at most an eighth (the extra columns are computed and dropped); two rows only
    where ``Ho`` has two.
    """
    nv = max(1, cb // lanes)
    tiles = []
    for reg_h in (1, 2):
        if reg_h > Ho:
            break
        for reg_w in range(1, min(Wo, MAX_REG_W) + 1):
            if reg_h * reg_w * nv + nv + 1 > registers:
                break
            waste = _cdiv(Wo, reg_w) * reg_w - Wo
            if waste == 0 or (reg_w >= 4 and 8 * waste <= Wo):
                tiles.append((reg_h, reg_w))
    return tiles


def row_tiles(Wo: int, Ho: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The feasible ``(reg_h, vec_w)`` register tiles of the NCHW kernel: ``vec_w`` divides
    ``Wo`` (no tail) and is at most four vectors; ``reg_h`` rows of ``vec_w`` columns plus
    an input vector and a broadcast weight fit ``registers``."""
    widths = [w for w in range(1, min(Wo, 4 * lanes) + 1) if Wo % w == 0 and (w >= min(Wo, 4) or w == Wo)]
    return [(h, w) for h in (1, 2, 4) if h <= Ho for w in widths if h * _cdiv(w, lanes) + 2 <= registers]


def depthwise_conv2d_nchw_reference(N, C, H, W, KH, KW, stride, padding, dilation, dtype="float32",
                                    epilogue=(), rng=None):
    """Random input ``(N, C, H, W)`` and weights ``(C, 1, KH, KW)``, and their depthwise convolution
    (``topi.testing.depthwise_conv2d_python_nchw``) through ``epilogue``."""
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (C, 1, KH, KW), dtype)
    out = topi.testing.depthwise_conv2d_python_nchw(x, w, stride, padding, dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)
    return [x, w, *extra], [out]


def _define_knobs(cfg, C: int, Ho: int, Wo: int, lanes: int, registers: int) -> None:
    """The knobs of the module's docstring, over feasible configs only, and their defaults."""
    blocks = channel_blocks(C, lanes)
    tiles = {cb: register_tiles(Wo, Ho, cb, lanes, registers) for cb in blocks}
    feasible = {(cb, h, w) for cb, ts in tiles.items() for h, w in ts}
    default_cb = min(blocks, key=lambda cb: (_cdiv(C, cb) * cb - C, -cb)) if C < lanes else lanes
    # The widest one-row tile of at most 8 columns: enough accumulators to hide the FMA
    # latency, few enough to leave registers for the loads.
    default_w = max((w for h, w in tiles[default_cb] if h == 1 and w <= 8), default=1)
    cfg.define_knob("cb", blocks, default=default_cb)
    cfg.define_knob("reg_w", sorted({w for ts in tiles.values() for _, w in ts}), default=default_w)
    cfg.define_knob("layout_at", ["block", "root"])
    cfg.define_knob("unpack", ["c", "x"])
    axes = ["blocks", "rows"] if Ho >= 2 * ROW_PARTS else ["blocks"]
    cfg.define_knob("parallel_axis", axes)
    rows = row_tiles(Wo, Ho, lanes, registers)
    widths = sorted({w for _, w in rows})
    long_rows = Wo >= 2 * lanes
    cfg.define_knob("layout", ["NCHWc", "NCHW"], default="NCHW" if long_rows else "NCHWc")
    # Whole vectors (no masked lanes) if a width of one or two divides the row; four rows
    # of them where they fit: each input vector then serves up to KH rows' taps.
    default_vec = max(widths, key=lambda w: (w % lanes == 0 and w <= 2 * lanes, w <= 2 * lanes, w))
    default_h = max((h for h, w in rows if w == default_vec), default=1)
    cfg.define_knob("vec_w", widths, default=default_vec)
    cfg.define_knob("reg_h", sorted({h for ts in tiles.values() for h, _ in ts} | {h for h, _ in rows}),
                    default=default_h if long_rows else 1)
    first = {"cb": blocks[0], "reg_w": 1, "layout_at": "block", "unpack": "c", "parallel_axis": "blocks"}

    def one_layout(c) -> bool:
        """The knobs of the layout not chosen stay at their first values (no duplicate configs)."""
        if c["layout"].val == "NCHWc":
            return c["vec_w"].val == widths[0] and (c["cb"].val, c["reg_h"].val, c["reg_w"].val) in feasible
        return (c["reg_h"].val, c["vec_w"].val) in rows and all(c[k].val == v for k, v in first.items())

    cfg.add_constraint(one_layout, knobs=["layout", "vec_w", "reg_h", *first],
                       name="one layout's knobs")


@template("depthwise_conv2d_nchw", target="cpu", reference=depthwise_conv2d_nchw_reference)
def depthwise_conv2d_nchw(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                          dilation=1, dtype: str = "float32", epilogue: tuple = ()):
    """Depthwise convolution, NCHW in and out, computed in channel blocks (see the module).
    ``epilogue``'s inputs (a bias of ``(C,)``, residuals of ``(N, C, Ho, Wo)``) come after X
    and W."""
    cfg = get_config()
    (sh, sw), (dh, dw), (top, left, bottom, right), (Ho, Wo) = conv_window(H, W, KH, KW, stride, padding,
                                                                          dilation)
    lanes = vector_lanes(dtype)
    _define_knobs(cfg, C, Ho, Wo, lanes, vector_registers())
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((C, 1, KH, KW), name="W", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, C, Ho, Wo), C)
    if cfg["layout"].val == "NCHW":
        return _direct(cfg, X, Wt, ep, stride, padding, dilation)
    # Not topi.nn.depthwise_conv2d_nchw: the blocked kernel computes on packed copies of the
    # input and weights (channels innermost), so its compute is its own.
    cb, reg_h, reg_w = cfg["cb"].val, cfg["reg_h"].val, cfg["reg_w"].val

    Cb, Hop, Wop = _cdiv(C, cb), _cdiv(Ho, reg_h) * reg_h, _cdiv(Wo, reg_w) * reg_w
    Hp, Wp = (Hop - 1) * sh + (KH - 1) * dh + 1, (Wop - 1) * sw + (KW - 1) * dw + 1
    zero = te.const(0, dtype)

    def x_packed(n, co, h, w, ci):
        c = co * cb + ci
        edges = ((c < C, Cb * cb > C), (h >= top, top > 0), (h < H + top, Hp > H + top),
                 (w >= left, left > 0), (w < W + left, Wp > W + left))
        inside = [cond for cond, needed in edges if needed]
        value = X[n, c, h - top, w - left]
        return te.if_then_else(te.all(*inside), value, zero) if inside else value

    def w_packed(co, ky, kx, ci):
        c = co * cb + ci
        value = Wt[c, 0, ky, kx]
        return te.if_then_else(c < C, value, zero) if Cb * cb > C else value

    Xp = te.compute((N, Cb, Hp, Wp, cb), x_packed, name="X_packed")
    Wp_ = te.compute((Cb, KH, KW, cb), w_packed, name="W_packed")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    acc = te.compute((N, Cb, Hop, Wop, cb), lambda n, co, y, x, ci: te.sum(
        Xp[n, co, y * sh + ry * dh, x * sw + rx * dw, ci] * Wp_[co, ry, rx, ci], axis=[ry, rx]), name="acc")
    Yb = te.compute((N, Cb, Hop, Wop, cb), lambda *i: acc[i], name="Y_blocked")
    Y = te.compute((N, C, Ho, Wo), lambda n, c, y, x: ep.apply(Yb[n, c // cb, y, x, c % cb], c, (n, c, y, x)),
                   name="depthwise_conv2d_nchw")

    s = te.create_schedule(Y.op)
    outer = _schedule_unpack(s, cfg, Y, cb, Ho, Wo, lanes)
    _schedule_blocked(s, cfg, Yb, acc, reg_h, reg_w, cb, lanes, s[Y], outer)
    xs = s[Xp]
    xn, xco, *_, xci = xs.op.axis
    xs.vectorize(xci)
    if cfg["layout_at"].val == "block":
        xs.compute_at(s[Y], outer)
    else:
        xs.parallel(xs.fuse(xn, xco))
    s[Wp_].vectorize(s[Wp_].op.axis[-1])
    return s, [X, Wt, *ep.inputs, Y]


def _direct(cfg, X, Wt, ep, stride, padding, dilation):
    """The NCHW kernel (``layout="NCHW"``, see the module): ``topi.nn.depthwise_conv2d_nchw``,
    stored through epilogue ``ep``."""
    conv = topi.nn.depthwise_conv2d_nchw(X, Wt, stride, padding, dilation)
    P = conv.op.input_tensors[0]  # the padded input: a stage even without padding
    padded = get_const_tuple(P.shape) != get_const_tuple(X.shape)
    Y = ep.output(conv, lambda n, c, y, x: c, name="depthwise_conv2d_nchw")
    s = te.create_schedule(Y.op)
    if ep:  # the convolution is the register tile, the epilogue's stage stores it
        acc = conv
        s[acc].set_scope("local")
    else:
        acc = s.cache_write(Y, "local")
    n, c, y, x = s[Y].op.axis
    yo, yi = s[Y].split(y, factor=cfg["reg_h"].val)
    xo, xi = s[Y].split(x, factor=cfg["vec_w"].val)
    s[Y].reorder(n, c, yo, xo, yi, xi)
    channels = s[Y].fuse(n, c)
    s[Y].parallel(channels)
    s[Y].vectorize(xi)
    s[acc].compute_at(s[Y], xo)
    *_, ay, ax = s[acc].op.axis
    ary, arx = s[acc].op.reduce_axis
    s[acc].reorder(ary, arx, ay, ax)
    s[acc].unroll(ary)
    s[acc].unroll(arx)
    s[acc].unroll(ay)
    s[acc].vectorize(ax)
    if padded:
        s[P].compute_at(s[Y], channels)
        s[P].vectorize(s[P].op.axis[-1])
    else:  # an identity copy: read X itself
        s[P].compute_inline()
    return s, [X, Wt, *ep.inputs, Y]


def _schedule_unpack(s, cfg, Y, cb: int, Ho: int, Wo: int, lanes: int):
    """The NCHW output: channel blocks (and row blocks) on threads, the copy out of the
    blocked layout vectorized along the row or the channels. Returns the parallel loop."""
    n, c, y, x = s[Y].op.axis
    co, ci = s[Y].split(c, factor=cb)
    if cfg["parallel_axis"].val == "rows":
        yo, y = s[Y].split(y, factor=_cdiv(Ho, ROW_PARTS))
        blocks = (n, co, yo)
    else:
        blocks = (n, co)
    if cfg["unpack"].val == "x":
        s[Y].reorder(*blocks, y, ci, x)
        if Wo > 4 * lanes:
            x = s[Y].split(x, factor=lanes)[1]
        s[Y].vectorize(x)
    else:
        s[Y].reorder(*blocks, y, x, ci)
        s[Y].vectorize(ci)
    outer = s[Y].fuse(*blocks)
    s[Y].parallel(outer)
    return outer


def _schedule_blocked(s, cfg, Yb, acc, reg_h: int, reg_w: int, cb: int, lanes: int, out, outer) -> None:
    """The blocked output in register tiles (computed within ``out``'s parallel loop
    ``outer`` under ``layout_at="block"``): the taps outermost, the tile unrolled, the
    channels as vectors."""
    b = s[Yb]
    n, co, y, x, ci = b.op.axis
    yo, yi = b.split(y, factor=reg_h)
    xo, xi = b.split(x, factor=reg_w)
    b.reorder(n, co, yo, xo, yi, xi, ci)
    b.vectorize(ci)
    if cfg["layout_at"].val == "block":
        b.compute_at(out, outer)
    else:
        b.parallel(b.fuse(n, co))
    a = s[acc]
    a.set_scope("local")
    a.compute_at(b, xo)
    an, aco, ay, ax, aci = a.op.axis
    ary, arx = a.op.reduce_axis
    a.reorder(an, aco, ary, arx, ay, ax, aci)
    a.unroll(arx)
    a.unroll(ay)
    a.unroll(ax)
    if cb > lanes:
        cv, cl = a.split(aci, factor=lanes)
        a.unroll(cv)
        a.vectorize(cl)
    else:
        a.vectorize(aci)
