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

``depthwise_conv2d_nchwc(N, C, H, W, KH, KW, stride, padding, dilation, block, dtype)`` is the
blocked kernel alone, for models whose activations stay channel-blocked (``NCHW{block}c``)
from layer to layer: input ``(N, C/block, H, W, block)``, weights pre-packed as
``(C/block, KH, KW, block)``, output ``(N, C/block, Ho, Wo, block)``, so no layout changes.
The channel block is the caller's; the knobs are the register tile (``reg_h``, ``reg_w``),
the threads (``parallel_axis``: as above, or ``"height"``, a part of the rows of every channel
block, as a convolution by height, ``conv2d_nchwc``'s ``"height"``, writes its output and reads
its input: a depthwise layer between two such layers then reads the rows its own core wrote,
where threads on channel blocks read half their input from the other core's caches) and where
the zero padding comes from (``pad_at``): ``"inline"`` reads the input in place, each load
guarded by a branch on its row and column (the same for the loads of one tap row of a tile,
and taken the same way away from the edges; no copy: the fastest on MobileNetV2's layers where
measured), ``"block"`` reads a padded copy of the channel block (or of its part of the rows,
under ``parallel_axis="rows"`` or ``"height"``) made in the parallel loop, ``"row"`` one of the
input rows of each row of register tiles. The epilogue is applied as the register tile is stored.
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.runtime import num_threads
from compiler.simd import vector_lanes, vector_registers
from compiler.topi.nn.utils import conv_window
from compiler.topi.utils import get_const_tuple
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue

__all__ = ["depthwise_conv2d_nchw", "depthwise_conv2d_nchw_reference", "depthwise_conv2d_nchwc",
           "depthwise_conv2d_nchwc_reference", "channel_blocks", "register_tiles", "schedule_taps"]

MAX_REG_W = 16  # output columns per register tile
MIN_SUB_BLOCK = 4  # the smallest channel block below a vector (for layers with few channels)
ROW_PARTS = 4  # row blocks per channel block under parallel_axis="rows" or "height"


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


def register_tiles(Wo: int, Ho: int, cb: int, lanes: int, registers: int,
                   round_up: int = 8) -> list[tuple[int, int]]:
    """The feasible ``(reg_h, reg_w)`` register tiles for channel block ``cb``.

    ``reg_h * reg_w`` accumulators of ``cb / lanes`` vectors each, plus the weight vectors
    of one tap and one input vector, fit ``registers``. Widths divide ``Wo`` or, from four
    columns, round it up by at most a ``round_up``-th (the extra columns are computed and
    dropped); two rows only where ``Ho`` has two.
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
            if waste == 0 or (reg_w >= 4 and round_up * waste <= Wo):
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
        edges = ((c < C, Cb * cb > C), *_window_edges(h, w, H, W, top, left, Hp, Wp))
        return _guarded(X[n, c, h - top, w - left], edges, zero)

    def w_packed(co, ky, kx, ci):
        c = co * cb + ci
        value = Wt[c, 0, ky, kx]
        return te.if_then_else(c < C, value, zero) if Cb * cb > C else value

    Xp = te.compute((N, Cb, Hp, Wp, cb), x_packed, name="X_packed")
    Wp_ = te.compute((Cb, KH, KW, cb), w_packed, name="W_packed")
    acc = _tap_sum(Xp, Wp_, (N, Cb, Hop, Wop, cb), (sh, sw), (dh, dw))
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
    schedule_taps(s, acc, b, xo, cb, lanes)


def _window_edges(h, w, H: int, W: int, top: int, left: int, Hp: int, Wp: int) -> tuple:
    """``(condition, needed)`` pairs: padded row ``h`` and column ``w`` (of ``Hp x Wp``) fall
    inside the ``H x W`` input placed at (``top``, ``left``); needed where padding is there."""
    return ((h >= top, top > 0), (h < H + top, Hp > H + top),
            (w >= left, left > 0), (w < W + left, Wp > W + left))


def _guarded(value, edges, zero):
    """``value`` where every needed condition of ``edges`` holds, else ``zero``."""
    inside = [cond for cond, needed in edges if needed]
    return te.if_then_else(te.all(*inside), value, zero) if inside else value


def _tap_sum(P, Wb, shape, stride, dilation):
    """``acc[n, co, y, x, ci]``: the depthwise taps of the blocked, padded input ``P``
    ``(N, Cb, Hp, Wp, cb)`` with the blocked weights ``Wb`` ``(Cb, KH, KW, cb)``."""
    (sh, sw), (dh, dw) = stride, dilation
    _, KH, KW, _ = get_const_tuple(Wb.shape)
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    return te.compute(shape, lambda n, co, y, x, ci: te.sum(
        P[n, co, y * sh + ry * dh, x * sw + rx * dw, ci] * Wb[co, ry, rx, ci], axis=[ry, rx]), name="acc")


def _channel_vector(cb: int, lanes: int) -> int:
    """The vector width along a block of ``cb`` channels: the whole block up to a vector, else
    the largest power of two that divides it, up to a vector."""
    if cb <= lanes:
        return cb
    return next(w for w in (lanes >> k for k in range(lanes.bit_length())) if cb % w == 0)


def schedule_taps(s, acc, stage, loop, cb: int, lanes: int) -> None:
    """The microkernel: ``acc`` (local) computed at ``loop`` of ``stage``, one register tile
    per iteration; the taps outermost (the kernel columns unrolled), the tile unrolled, the
    ``cb`` channels as vectors."""
    a = s[acc]
    a.set_scope("local")
    a.compute_at(stage, loop)
    an, aco, ay, ax, aci = a.op.axis
    ary, arx = a.op.reduce_axis
    a.reorder(an, aco, ary, arx, ay, ax, aci)
    a.unroll(arx)
    a.unroll(ay)
    a.unroll(ax)
    _vectorize_channels(a, aci, cb, lanes)


def _vectorize_channels(stage, axis, cb: int, lanes: int) -> None:
    """Vectorize ``axis`` (a block of ``cb`` channels) in vectors of :func:`_channel_vector`."""
    if cb > lanes:
        cv, cl = stage.split(axis, factor=_channel_vector(cb, lanes))
        stage.unroll(cv)
        stage.vectorize(cl)
    else:
        stage.vectorize(axis)


# ---------------------------------------------------------------------------- depthwise_conv2d_nchwc


def _check_block(C: int, block) -> None:
    if not isinstance(block, int) or isinstance(block, bool) or block < 1 or C % block:
        raise ValueError(f"block must be a positive divisor of C ({C}), got {block!r}")


def _loop_rows(Ho: int, reg_h: int, parallel_axis: str) -> int:
    """The output rows the loops of the blocked kernel run over: ``Ho`` rounded up to whole
    register tiles and, under ``parallel_axis="rows"`` or ``"height"``, to whole row parts of
    :func:`_row_part` tiles (the extra rows are computed and never stored)."""
    tiles = _cdiv(Ho, reg_h)
    if parallel_axis in ("rows", "height"):
        part = _row_part(tiles)
        tiles = _cdiv(tiles, part) * part
    return tiles * reg_h


def _row_part(tiles: int) -> int:
    """Register tiles of rows per thread's part under ``parallel_axis="rows"`` or ``"height"``: a
    :data:`ROW_PARTS` th of them."""
    return _cdiv(tiles, ROW_PARTS)


def _define_nchwc_knobs(cfg, N: int, Cb: int, Ho: int, Wo: int, padded: bool, block: int, lanes: int,
                        registers: int) -> None:
    """The knobs of :func:`depthwise_conv2d_nchwc` over feasible configs only, and their defaults."""
    nv = _cdiv(block, _channel_vector(block, lanes))
    # Widths may round short rows up by a quarter: at 7 columns, two-vector blocks on 16
    # registers then have a tile of 4 columns (8 accumulators), not only of 1.
    tiles = register_tiles(Wo, Ho, nv * lanes if block > lanes else block, lanes, registers, round_up=4)
    # One row of at most 8 columns (as in depthwise_conv2d_nchw) and half the registers (more
    # accumulators spill: 12 of AVX2's 16 ran at half the speed of 8); of those, the most
    # useful accumulators (the columns of the row over those computed), then the least rounding.
    default_w = max((w for h, w in tiles if h == 1 and w <= 8 and w * nv <= registers // 2),
                    key=lambda w: (w * Wo / (_cdiv(Wo, w) * w), -(_cdiv(Wo, w) * w)), default=1)
    cfg.define_knob("reg_h", sorted({h for h, _ in tiles}), default=1)
    cfg.define_knob("reg_w", sorted({w for _, w in tiles}), default=default_w)
    threads = num_threads()
    axes = ["blocks", "rows", "height"] if Ho >= 2 * ROW_PARTS else ["blocks"]
    few_blocks = (N * Cb) % threads != 0 and N * Cb < 8 * threads
    cfg.define_knob("parallel_axis", axes, default=axes[-1] if few_blocks else "blocks")
    cfg.define_knob("pad_at", ["inline", "block", "row"])
    feasible = set(tiles)

    def valid(c) -> bool:
        reg_h, reg_w = c["reg_h"].val, c["reg_w"].val
        rounded = _loop_rows(Ho, reg_h, c["parallel_axis"].val) > Ho or Wo % reg_w != 0
        return (reg_h, reg_w) in feasible and (c["pad_at"].val == "inline" or padded or rounded)

    cfg.add_constraint(valid, knobs=["reg_h", "reg_w", "parallel_axis", "pad_at"],
                       name="register tile fits; a padded copy only of something to pad")


def depthwise_conv2d_nchwc_reference(N, C, H, W, KH, KW, stride, padding, dilation, block=16, dtype="float32",
                                     epilogue=(), rng=None):
    """Random blocked input ``(N, C/block, H, W, block)`` and weights ``(C/block, KH, KW, block)``,
    and their depthwise convolution (``topi.testing.depthwise_conv2d_python_nchw``) through
    ``epilogue`` (a bias of ``(C,)``, residuals blocked as the output), blocked."""
    _check_block(C, block)
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (C, 1, KH, KW), dtype)
    out = topi.testing.depthwise_conv2d_python_nchw(x, w, stride, padding, dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)

    def blocked(a):  # (N, C, h, w) as (N, C/block, h, w, block)
        n, c, h, w_ = a.shape
        return np.ascontiguousarray(a.reshape(n, c // block, block, h, w_).transpose(0, 1, 3, 4, 2))

    wb = np.ascontiguousarray(w.reshape(C // block, block, KH, KW).transpose(0, 2, 3, 1))
    return [blocked(x), wb, *(e if e.ndim == 1 else blocked(e) for e in extra)], [blocked(out)]


@template("depthwise_conv2d_nchwc", target="cpu", reference=depthwise_conv2d_nchwc_reference)
def depthwise_conv2d_nchwc(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                           dilation=1, block: int = 16, dtype: str = "float32", epilogue: tuple = ()):
    """Depthwise convolution of channel-blocked data (see the module): input
    ``(N, C/block, H, W, block)``, weights ``(C/block, KH, KW, block)`` (channel ``c``'s tap
    ``(ky, kx)`` at ``[c // block, ky, kx, c % block]``), output ``(N, C/block, Ho, Wo, block)``;
    ``block`` must divide ``C``. ``epilogue``'s inputs (a bias of ``(C,)``, residuals of the
    output's shape) come after X and W; it is applied where the register tile is stored."""
    (sh, sw), (dh, dw), (top, left, bottom, right), (Ho, Wo) = conv_window(H, W, KH, KW, stride, padding,
                                                                          dilation)
    _check_block(C, block)
    cfg = get_config()
    lanes, Cb = vector_lanes(dtype), C // block
    _define_nchwc_knobs(cfg, N, Cb, Ho, Wo, any((top, left, bottom, right)), block, lanes, vector_registers())
    reg_h, reg_w, pad_at = cfg["reg_h"].val, cfg["reg_w"].val, cfg["pad_at"].val
    X = te.placeholder((N, Cb, H, W, block), name="X", dtype=dtype)
    Wt = te.placeholder((Cb, KH, KW, block), name="W", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, Cb, Ho, Wo, block), C)

    Hop, Wop = _loop_rows(Ho, reg_h, cfg["parallel_axis"].val), _cdiv(Wo, reg_w) * reg_w
    Hp, Wp = (Hop - 1) * sh + (KH - 1) * dh + 1, (Wop - 1) * sw + (KW - 1) * dw + 1
    zero = te.const(0, dtype)
    P = te.compute((N, Cb, Hp, Wp, block), lambda n, co, h, w, ci: _guarded(
        X[n, co, h - top, w - left, ci], _window_edges(h, w, H, W, top, left, Hp, Wp), zero), name="X_padded")
    acc = _tap_sum(P, Wt, (N, Cb, Hop, Wop, block), (sh, sw), (dh, dw))
    Y = te.compute((N, Cb, Ho, Wo, block), lambda n, co, y, x, ci: ep.apply(
        acc[n, co, y, x, ci], co * block + ci, (n, co, y, x, ci)), name="depthwise_conv2d_nchwc")

    s = te.create_schedule(Y.op)
    n, co, y, x, ci = s[Y].op.axis
    if cfg["parallel_axis"].val in ("rows", "height"):
        yp, y = s[Y].split(y, factor=_row_part(_cdiv(Ho, reg_h)) * reg_h)
        blocks = (n, co, yp) if cfg["parallel_axis"].val == "rows" else (n, yp, co)
    else:
        blocks = (n, co)
    yo, yi = s[Y].split(y, factor=reg_h)
    xo, xi = s[Y].split(x, factor=reg_w)
    s[Y].reorder(*blocks, yo, xo, yi, xi, ci)
    outer = s[Y].fuse(*blocks)
    s[Y].parallel(outer)
    s[Y].unroll(yi)
    s[Y].unroll(xi)
    _vectorize_channels(s[Y], ci, block, lanes)
    schedule_taps(s, acc, s[Y], xo, block, lanes)
    if pad_at == "inline":
        s[P].compute_inline()
    else:
        s[P].compute_at(s[Y], outer if pad_at == "block" else yo)
        s[P].vectorize(s[P].op.axis[-1])
    return s, [X, Wt, *ep.inputs, Y]
