"""Channel-blocked 2-D convolution for CPUs: ``conv2d_nchwc`` and the schedule that
``conv2d_nchw`` runs inside.

In the spirit of TVM's ``conv2d_NCHWc`` x86 schedule (and oneDNN's ``nChw16c``), channels
are grouped into blocks so that the innermost axis of the output is a whole number of
vector registers:

* data ``(N, C / ic_bn, H, W, ic_bn)``, kernel ``(F / oc_bn, C / ic_bn, KH, KW, ic_bn, oc_bn)``,
  output ``(N, F / oc_bn, Ho, Wo, oc_bn)``. A grouped convolution (``conv2d_nchwc``'s ``groups``)
  has a kernel of ``C / groups / ic_bn`` input blocks, each output block reading those of its
  own group, or where a data block holds whole groups, of one block of a group's channels
  (``grouped_input``); a register tile's output blocks are of one group (:func:`_tile_blocks`).
* **Microkernel.** A register tile of ``reg_n`` output columns by ``oc_bn`` output channels
  (``oc_bn / lanes`` vectors) accumulates over the whole reduction: per input channel and
  kernel tap, ``reg_n`` broadcasts of the data, ``oc_bn / lanes`` vector loads of the kernel
  and ``reg_n * oc_bn / lanes`` fused multiply-adds. The knobs allow only tiles whose
  accumulators, kernel operands and one broadcast fit the target's vector registers
  (:func:`vector_registers`) and that fill at least half of them (or all output columns);
  ``reg_n`` divides the output width, or is the largest such tile (:func:`register_tiles`).
* ``oc_tile`` (``conv2d_nchwc``): a register tile spans that many output-channel blocks, up to
  :data:`MAX_VECTORS` vectors of channels: the kernel vectors of its blocks stay in registers
  while each column's broadcast feeds them all, so the data is read once per tile of blocks,
  not once per block. Inside a model a kernel's input sits in the caches of the cores that
  wrote it, not of the one that reads it, and a layer with more data than kernel (a 1x1 layer
  that reduces the channels) spends its time reading it: ResNet-50's 256 to 64 channels at
  56x56 ran 0.73 ms a call inside the model in tiles of one 32-channel block, 0.38 in tiles of
  two. The default takes the most blocks whose tile still hides the FMA latency.
* ``unroll_kw`` unrolls the kernel-width taps inside the input-channel block (TVM's
  ``unroll_kw``), else they run outside it.
* ``plane`` (``conv2d_nchwc``, where the best register tile leaves a part at the end of each
  row): the register tiles run along the whole output plane, its rows one after the other, so
  that only the plane's last tile is partial: a 7-wide row of 6 + 1 columns spends a seventh of
  its work at a fifth of the FMA rate, the 49 pixels of a 7x7 plane in 8 tiles of 6 and one
  pixel. A tile's pixels may span two rows: each reads the input where its own row and column
  say (:func:`blocked_conv`), and the output is written back as rows (:func:`blocked_epilogue`).
* ``ic_chunk`` (``conv2d_nchwc``, where the kernel is larger than half a core's L2 and a tile of
  blocks' whole output fits :data:`MAX_PASS_OUTPUT_BYTES`; threads on channel blocks): the
  reduction runs in passes of that many input-channel blocks, each pass over every register
  tile of the thread's tile of blocks, their accumulators kept in memory between passes (the
  last choice, all blocks, is the reduction whole in each tile). A kernel of megabytes streams
  from memory every run: whole in each tile, a block's part of it is read at the block's first
  tile, with the cores waiting on memory, and from L2 for the others; in passes, the stream is
  spread over all of them. ResNet-50's 2048 to 512 channels at 7x7 ran 0.52 ms a call so and
  0.41 in passes of one block, its stride-2 3x3 layer of 512 channels 1.12 and 0.96 ms.
* ``parallel_axis``: threads take rows of the output (``"rows"``: batch, channel block and
  output row fused; where that makes few rows, as a pointwise layer run as one row of its
  plane does, also pieces of each row, see :func:`_row_pieces`) or whole output-channel
  blocks (``"oc"``; each thread then reads only its own blocks' part of the kernel, which it
  packed itself in ``conv2d_nchw``), or, in ``conv2d_nchwc`` where the tiles run along rows,
  a range of the output's height, every channel block of each of its rows (``"height"``; a
  pointwise layer run as one row of its plane: pieces of the row, which are ranges of the
  height, each piece's channel blocks in turn): each thread then reads only the input rows its
  output rows need, and pads them itself (the padding stage is split by input rows alike), but
  reads the whole kernel. Where the kernel is small and the plane large (ResNet's stride-2 3x3
  layers at 56x56, the 7x7 stem, MobileNetV2's expansions at 112x112), threads on channel
  blocks or on ``"rows"`` (channel block outer) each read all of the input, half of it written
  (or padded) by the other core: ResNet-50's 128-channel stride-2 layer at 56x56 took
  0.91-1.03 ms so and 0.76-0.89 by height, its 256 to 128 channels at 56x56 0.77 and 0.67; with
  a kernel of megabytes (512 channels) by height took twice as long.

``conv2d_nchw`` (see ``cpu_conv2d``) transforms its NCHW data into blocks and packs its
kernel, then runs this schedule and writes NCHW rows from each blocked output row: all of it
part of the compiled operator. Each of the three is a transpose (channels by columns, or
filters by taps); where the sizes allow, they run in tiles of up to 16 x 16 transposed in
vector registers (``te.transpose_intrin``, :func:`kernel_block_intrin`):
:func:`schedule_data_blocks`, :func:`schedule_kernel_blocks`, :func:`schedule_unpack`. With
``parallel_axis="oc"`` each thread packs the kernel blocks it uses just before it uses them.
There ``ic_bn`` (a divisor
of ``C``) and ``oc_bn`` (whole vectors where they divide ``F``) are knobs; in
``conv2d_nchwc`` the layout is the caller's, given as arguments.

An ``epilogue`` (see ``_epilogue``: bias, residual, activations) is applied as the register
tile is stored: the blocked output is then a stage of its own (:func:`blocked_epilogue`) over
the local accumulators, at the same place in the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te, topi
from compiler.codegen.llvm_transpose import MAX_TILE, transpose_call
from compiler.graph.ops.layout import grouped_input
from compiler.runtime import num_threads
from compiler.simd import vector_lanes, vector_registers
from compiler.te.tensor_intrin import TRANSPOSE_TILE, transpose_columns, transpose_rows
from compiler.tir import decl_buffer, ir_builder
from compiler.topi.nn.utils import as_pair, conv_output_size
from search_spaces.template import get_config, template
from search_spaces.templates._common import defaulted_argument, random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import L2_BYTES

__all__ = ["conv2d_nchwc", "conv2d_nchwc_reference", "ConvGeometry", "register_tiles",
           "define_blocked_knobs", "blocked_conv", "blocked_epilogue", "schedule_blocked_conv", "pad_blocks",
           "nchw_to_blocks", "schedule_data_blocks", "schedule_unpack", "schedule_kernel_blocks",
           "nchw_from_blocks", "blocks_from_nchw", "kernel_block_intrin"]

MAX_IC_BN = 64  # input-channel blocks beyond this gain nothing (the inner loop is long enough)
MAX_VECTORS = 4  # oc_bn is at most 4 vector registers wide
FMA_IN_FLIGHT = 10  # FMA latency x FMA ports (as in _gemm)
MIN_PARALLEL_ROWS = 32  # fewer output rows than this are split into pieces for the threads
HEIGHT_ROWS_PER_THREAD = 4  # threads take the output's height by default only with this many rows each
IC_CHUNKS = (1, 2, 4, 8)  # input-channel blocks per pass over the output (besides all of them)
MAX_PASS_OUTPUT_BYTES = 128 * 1024  # a pass's output (a tile of blocks' whole plane) stays in L2
MIN_CHUNK_SLICE_BYTES = 4096  # the default pass reads at least this much of the kernel


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ConvGeometry:
    """A convolution's sizes: input ``N x C x H x W``, ``F`` filters of ``KH x KW`` in
    ``groups`` groups (each filter reads the ``C / groups`` channels of its group), and the output
    size that ``stride``, ``pads`` (top, left, bottom, right) and ``dilation`` give."""

    N: int
    C: int
    H: int
    W: int
    F: int
    KH: int
    KW: int
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilation: tuple[int, int]
    groups: int = 1

    @classmethod
    def of(cls, N, C, H, W, F, KH, KW, stride, padding, dilation, groups=1) -> ConvGeometry:
        """The geometry of a template's arguments (ValueError on bad ones)."""
        for name, v in (("N", N), ("C", C), ("H", H), ("W", W), ("F", F), ("KH", KH), ("KW", KW),
                        ("groups", groups)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if C % groups or F % groups:
            raise ValueError(f"groups={groups} must divide the {C} input channels and the {F} filters")
        dilation = as_pair(dilation, "dilation")
        window = ((KH - 1) * dilation[0] + 1, (KW - 1) * dilation[1] + 1)
        pads = topi.nn.get_pad_tuple(padding, window)
        g = cls(int(N), int(C), int(H), int(W), int(F), int(KH), int(KW), as_pair(stride, "stride"),
                pads, dilation, int(groups))
        _ = g.Ho, g.Wo  # raises if the window does not fit
        return g

    @property
    def Ho(self) -> int:
        return conv_output_size(self.H, self.KH, self.stride[0], self.pads[0], self.pads[2], self.dilation[0])

    @property
    def group_channels(self) -> int:
        """The input channels each filter reads: a group's."""
        return self.C // self.groups

    def kernel_block(self, ic_bn: int) -> int:
        """The kernel's input block on data in blocks of ``ic_bn``: ``ic_bn``, or a group's
        channels where a data block holds several groups."""
        return min(ic_bn, self.group_channels)

    def kernel_bytes(self, itemsize: int) -> int:
        """The kernel's size in bytes, ``itemsize`` bytes an element."""
        return self.F * self.group_channels * self.KH * self.KW * itemsize

    @property
    def Wo(self) -> int:
        return conv_output_size(self.W, self.KW, self.stride[1], self.pads[1], self.pads[3], self.dilation[1])


def register_tiles(Wo: int, oc_bn: int, lanes: int, registers: int, blocks: int = 1) -> list[int]:
    """The feasible ``reg_n`` for ``blocks`` output blocks ``oc_bn`` wide: ``reg_n * blocks * nv``
    accumulators (``nv = ceil(oc_bn / lanes)`` vectors), the ``blocks * nv`` kernel operands and
    one broadcast fit ``registers``, and the accumulators fill at least half of what is left
    (or all ``Wo``). Of the others only the largest: a tail tile doubles the unrolled code (and
    the build time), worth it only for the most accumulators."""
    nv = _cdiv(oc_bn, lanes)
    budget = registers - blocks * nv - 1
    top = min(budget // (blocks * nv), Wo)
    low = min(top, _cdiv(budget, 2 * blocks * nv))
    tiles = list(range(max(1, low), top + 1))
    return [r for r in tiles if Wo % r == 0 or r == top]


def _ic_blocks(C: int) -> list[int]:
    """``ic_bn`` choices: divisors of ``C`` up to :data:`MAX_IC_BN`, the smallest ones left out
    where larger ones exist (a short inner loop only adds loop overhead)."""
    divisors = [d for d in range(1, min(C, MAX_IC_BN) + 1) if C % d == 0]
    return [d for d in divisors if d >= min(8, divisors[-1])]


def _oc_blocks(F: int, lanes: int) -> list[int]:
    """``oc_bn`` choices: whole vectors (1 to :data:`MAX_VECTORS`) that divide ``F``; where
    none does, the divisors of ``F`` from half a vector to :data:`MAX_VECTORS` vectors (or the
    largest below). Blocks never pad ``F``: padded channels would cost work and count as
    flops of the task."""
    whole = [nv * lanes for nv in range(1, MAX_VECTORS + 1) if F % (nv * lanes) == 0]
    if whole:
        return whole
    divisors = [d for d in range(1, min(F, MAX_VECTORS * lanes) + 1) if F % d == 0]
    return [d for d in divisors if d >= lanes // 2] or divisors[-1:]


def _default_tile(Wo: int, oc_bn: int, lanes: int, registers: int, spans=(1,)) -> tuple[int, int]:
    """The register tile a model ranks first, as ``(blocks, reg_n)``: enough accumulators to
    hide the FMA latency, little padding in the last tile of a row, then the most blocks (the
    fewest reads of the data), then the most accumulators."""
    nv = _cdiv(oc_bn, lanes)

    def key(tile):
        k, r = tile
        used = Wo / (_cdiv(Wo, r) * r)
        speed = min(1.0, r * k * nv / FMA_IN_FLIGHT) * used * (1.0 if Wo % r == 0 else 0.98)
        return round(speed, 3), k, r
    return max(((k, r) for k in spans for r in register_tiles(Wo, oc_bn, lanes, registers, k)), key=key)


def _default_parallel_axis(g: ConvGeometry, oc_bn: int, span: int = 1, by_height: bool = False,
                           itemsize: int = 4, ic_bn: int | None = None) -> str:
    """With ``by_height``, threads on the output's height where the kernel fits a core's L2 and
    each thread gets several rows; else threads on whole output-channel blocks (tiles of
    ``span`` of them) when they split evenly over the threads (each thread then reads only its
    part of the kernel) and no data block holds several groups (``ic_bn`` wider than a group's
    channels), else on output rows. ``itemsize``: bytes per kernel element."""
    threads = num_threads()
    kernel_bytes = g.kernel_bytes(itemsize)
    if by_height and g.N * g.Ho >= HEIGHT_ROWS_PER_THREAD * threads and kernel_bytes <= L2_BYTES:
        return "height"
    if ic_bn is not None and ic_bn > g.group_channels:
        # Threads on channel blocks would each read their groups' part of every data block, the
        # rest of its cache lines the other thread's: a grouped 3x3 layer of 16 groups of 8
        # channels at 56x56 on blocks of 32 took 0.49-0.55 ms so, 0.31-0.32 on rows.
        return "rows"
    blocks = g.N * _cdiv(g.F, oc_bn) // span
    return "oc" if blocks % threads == 0 or blocks >= 8 * threads else "rows"


def define_blocked_knobs(cfg, g: ConvGeometry, dtype: str, ic_bn: int | None = None,
                         oc_bn: int | None = None, tile_blocks: bool = False, by_height: bool = False) -> int:
    """Declare the knobs of the blocked schedule (see the module's docstring). ``ic_bn`` and
    ``oc_bn`` given fix the layout; else they are knobs too. With ``tile_blocks`` (and
    ``oc_bn`` given) the ``oc_tile`` knob says how many output-channel blocks a register tile
    spans (:func:`_tile_blocks`); returns the config's choice (1 without it). With
    ``by_height`` threads may take the output's height (``parallel_axis="height"``)."""
    lanes, registers = vector_lanes(dtype), vector_registers()
    ocs = [oc_bn] if oc_bn is not None else _oc_blocks(g.F, lanes)
    spans = _tile_blocks(g, oc_bn, lanes) if tile_blocks and oc_bn is not None else [1]
    tiles = {(o, r) for o in ocs for r in register_tiles(g.Wo, o, lanes, registers)}
    spanned = {(k, r) for k in spans for r in register_tiles(g.Wo, oc_bn, lanes, registers, k)} \
        if len(spans) > 1 else set()
    default_oc = oc_bn if oc_bn is not None else min(ocs, key=lambda o: (abs(o - 2 * lanes), o))
    default_span, default_reg_n = _default_tile(g.Wo, default_oc, lanes, registers, spans)
    if ic_bn is None:
        ics = _ic_blocks(g.C)
        cfg.define_knob("ic_bn", ics, default=min(ics, key=lambda d: (abs(d - lanes), -d)))
    if oc_bn is None:
        cfg.define_knob("oc_bn", ocs, default=default_oc)
    cfg.define_knob("reg_n", sorted({r for _, r in tiles | spanned}), default=default_reg_n)
    # Unrolled taps let LLVM keep the broadcasts that neighbouring taps share (stride 1) live
    # together, which spills the tile's accumulators: not the default.
    cfg.define_knob("unroll_kw", [False, True], default=False)
    cfg.define_knob("parallel_axis", ["rows", "oc", "height"] if by_height else ["rows", "oc"],
                    default=_default_parallel_axis(g, default_oc, default_span, by_height,
                                                   np.dtype(dtype).itemsize, ic_bn))
    if spanned:
        # Logged before the knob existed: one block a tile.
        cfg.define_knob("oc_tile", spans, default=default_span, absent=1)
        cfg.add_constraint(lambda c: (c["oc_tile"].val, c["reg_n"].val) in spanned,
                           knobs=["oc_tile", "reg_n"], name="register tile fits the register file")
        groups = g.N * (g.F // oc_bn)
        cfg.add_constraint(lambda c: c["parallel_axis"].val != "oc" or c["oc_tile"].val == 1
                           or groups // c["oc_tile"].val >= num_threads(), knobs=["oc_tile", "parallel_axis"],
                           name="threads on channel blocks have a tile of blocks each")
        return cfg["oc_tile"].val
    if oc_bn is None:
        cfg.add_constraint(lambda c: (c["oc_bn"].val, c["reg_n"].val) in tiles, knobs=["oc_bn", "reg_n"],
                           name="register tile fits the register file")
    else:
        cfg.add_constraint(lambda c: (oc_bn, c["reg_n"].val) in tiles, knobs=["reg_n"],
                           name="register tile fits the register file")
    return 1


def _tile_blocks(g: ConvGeometry, oc_bn: int, lanes: int) -> list[int]:
    """How many output-channel blocks a register tile may span: divisors of the blocks that
    keep the tile within :data:`MAX_VECTORS` vectors of channels. Each broadcast of the data
    then feeds that many blocks, so the data is read once per tile of blocks, not per block:
    what a layer whose input is much larger than its kernel (a 1x1 layer that reduces the
    channels) spends its time on inside a model, where its input is not in this core's cache.
    A tile's blocks are of one group (they read the same data)."""
    blocks = g.F // g.groups // oc_bn
    nv = _cdiv(oc_bn, lanes)
    return [k for k in range(1, blocks + 1) if blocks % k == 0 and k * nv <= MAX_VECTORS]


def _taps_in_image(g: ConvGeometry, y, x, ry, rx, tile: int) -> list:
    """Whether kernel tap (ry, rx) reads the image, not only its padding, for output row ``y``
    and any column of the register tile of ``tile`` columns holding ``x``: conjuncts of the
    tile's first column (``x - x % tile``, which the lowering turns into the tile's index), so
    the test moves out of the tile to the tap's loops (``hoist_if``) and becomes their bounds
    (``loop_partition``)."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, left = g.pads[0], g.pads[1]
    row = y * sh + ry * dh - top
    first = (x - x % tile) * sw + rx * dw - left
    return [row >= 0, row < g.H, first < g.W, first + (tile - 1) * sw >= 0]


def blocked_conv(P, Wb, g: ConvGeometry, name: str = "conv2d_nchwc", plane: bool = False,
                 tile: int | None = None):
    """``Y[n, fc, y, x, fb]``: the convolution of padded blocked data ``P`` (N, C/ic_bn,
    Hp, Wp, ic_bn) with the blocked kernel ``Wb`` (F/oc_bn, Cg/wb, KH, KW, wb, oc_bn), ``Cg`` a
    group's channels, ``wb`` ``ic_bn`` or ``Cg``: output block ``fc`` reads its group's channels
    (``grouped_input``). With ``plane`` its pixels are one row of the plane,
    ``Y[n, fc, 0, y * Wo + x, fb]`` (:func:`blocked_epilogue` writes them back as rows).

    A padded convolution along rows of register tiles of ``tile`` columns skips the kernel taps
    that read only padding for a tile (:func:`_taps_in_image`). DeepLab's pyramid of dilations 6,
    12 and 18 on a 28 x 28 map reads the image in 78%, 51% and 33% of its taps, and with each
    tile's dead taps skipped its 256 to 128 channel layers took 1.61, 1.17 and 0.79 ms against
    2.12, 2.35 and 2.34; a 3x3 layer of 512 channels at 7x7, whose first and last rows read only
    padding with a third of their taps, 0.93-1.03 ms against 1.02-1.06 (2-13%), one of 256 at
    14x14 4-5% faster (Zen 4, 2 threads, the default and six other configs each)."""
    ic_bn = int(P.shape[-1].value)
    Fc, Cgb, KH, KW, wb, oc_bn = (int(d.value) for d in Wb.shape)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    cc = te.reduce_axis((0, Cgb), name="cc")
    cb = te.reduce_axis((0, wb), name="cb")
    ry = te.reduce_axis((0, g.KH), name="ry")
    rx = te.reduce_axis((0, g.KW), name="rx")
    skips = tile is not None and not plane and any(g.pads)

    def conv(n, fc, y, x, fb):
        block, lane = grouped_input(fc, cc, cb, Fc, Cgb, wb, ic_bn, g.groups)
        where = _taps_in_image(g, y, x, ry, rx, tile) if skips else None
        return te.sum(P[n, block, y * sh + ry * dh, x * sw + rx * dw, lane] * Wb[fc, cc, ry, rx, cb, fb],
                      axis=[cc, ry, rx, cb], where=where)

    if plane:
        return te.compute((g.N, Fc, 1, g.Ho * g.Wo, oc_bn),
                          lambda n, fc, _, p, fb: conv(n, fc, p // g.Wo, p % g.Wo, fb), name=name)
    return te.compute((g.N, Fc, g.Ho, g.Wo, oc_bn), conv, name=name)


def blocked_epilogue(Y, ep: Epilogue, nchw_residual: bool = False, name: str = "conv2d_nchwc",
                     plane: ConvGeometry | None = None):
    """The blocked convolution ``Y`` (N, F/oc_bn, Ho, Wo, oc_bn) through epilogue ``ep``
    (``Y`` itself without one): its bias is indexed by the output channel ``fc * oc_bn + fb``,
    its residual by the blocked index, or with ``nchw_residual`` by the NCHW one. Where ``Y``
    is the plane of convolution ``plane`` (``blocked_conv(..., plane=True)``), the stage writes
    it back as rows, with or without an epilogue."""
    if not ep and plane is None:
        return Y
    oc_bn = int(Y.shape[-1].value)

    def body(n, fc, y, x, fb):
        f = fc * oc_bn + fb
        value = Y[n, fc, y, x, fb] if plane is None else Y[n, fc, 0, y * plane.Wo + x, fb]
        if not ep:
            return value
        return ep.apply(value, f, (n, f, y, x) if nchw_residual else (n, fc, y, x, fb))

    shape = Y.shape if plane is None else (plane.N, Y.shape[1], plane.Ho, plane.Wo, oc_bn)
    return te.compute(shape, body, name=name)


def pad_blocks(X, pads, dtype: str, name: str = "data_pad"):
    """Blocked data ``X`` (N, Cc, H, W, cb) padded in H and W (X itself without padding)."""
    top, left, bottom, right = pads
    if not any(pads):
        return X
    return topi.nn.pad(X, [0, 0, top, left, 0], [0, 0, bottom, right, 0], te.const(0, dtype), name=name)


def nchw_to_blocks(X, ic_bn: int, pads, dtype: str, name: str = "data_vec"):
    """NCHW data ``X`` as padded blocks ``(N, C/ic_bn, H + pads, Wb, ic_bn)``: ``Wb`` is the
    padded width, rounded up to whole transpose tiles where :func:`transpose_rows` allows them
    (the extra columns are zeros no output reads). Then the blocks are a pure transpose of a
    padded NCHW stage (``data_pad``), which :func:`schedule_data_blocks` does in vector
    registers; else one stage pads and gathers."""
    top, left, bottom, right = pads
    N, C, H, W = (int(d.value) for d in X.shape)
    Hp, Wp = H + top + bottom, W + left + right
    transposed = transpose_rows(ic_bn) is not None
    Wb = _cdiv(Wp, TRANSPOSE_TILE) * TRANSPOSE_TILE if transposed else Wp

    def padded(n, c, h, w):
        if not any(pads) and Wb == Wp:
            return X[n, c, h, w]
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        return te.if_then_else(inside, X[n, c, h - top, w - left], te.const(0, dtype))

    if not transposed:
        return te.compute((N, C // ic_bn, Hp, Wb, ic_bn),
                          lambda n, c, h, w, b: padded(n, c * ic_bn + b, h, w), name=name)
    # Rows outside channels, so that a row's channels by columns are the transposes' tiles.
    P = te.compute((N, Hp, C, Wb), lambda n, h, c, w: padded(n, c, h, w), name="data_pad")
    return te.compute((N, C // ic_bn, Hp, Wb, ic_bn), lambda n, c, h, w, b: P[n, h, c * ic_bn + b, w],
                      name=name)


def schedule_data_blocks(s, D) -> None:
    """Threads on the rows of the data blocks ``D`` (:func:`nchw_to_blocks`). Where they are
    transposed, each row's padded channels are made just before (vectorized along the row), then
    transposed in tiles of :func:`transpose_rows` channels by :data:`TRANSPOSE_TILE` columns."""
    n, c, h, w, b = s[D].op.axis
    row = s[D].fuse(n, c, h)
    s[D].parallel(row)
    rows = transpose_rows(int(D.shape[-1].value))
    if rows is None:
        return
    P = D.op.input_tensors[0]  # the padded rows (nchw_to_blocks)
    wo, wi = s[D].split(w, factor=TRANSPOSE_TILE)
    bo, bi = s[D].split(b, factor=rows)
    s[D].reorder(row, wo, bo, wi, bi)
    s[D].tensorize(wi, te.transpose_intrin(rows, TRANSPOSE_TILE, D.dtype))
    s[P].compute_at(s[D], row)
    s[P].vectorize(s[P].op.axis[-1])


def blocks_from_nchw(Wt, ic_bn: int, oc_bn: int, dtype: str, name: str = "kernel_vec"):
    """The kernel ``(F, C, KH, KW)`` packed as ``(ceil(F/oc_bn), C/ic_bn, KH, KW, ic_bn, oc_bn)``,
    zero past ``F``; :func:`schedule_kernel_blocks` says how."""
    F, C, KH, KW = (int(d.value) for d in Wt.shape)
    Fc = _cdiv(F, oc_bn)

    def body(fc, c, ry, rx, b, fb):
        value = Wt[fc * oc_bn + fb, c * ic_bn + b, ry, rx]
        if Fc * oc_bn == F:
            return value
        return te.if_then_else(fc * oc_bn + fb < F, value, te.const(0, dtype))

    return te.compute((Fc, C // ic_bn, KH, KW, ic_bn, oc_bn), body, name=name)


def _block_tiles_fit(oc_bn: int, taps: int) -> bool:
    """Whether :func:`kernel_block_intrin` packs ``oc_bn``-wide blocks of ``taps`` taps: a block is
    a whole number of transposed tiles (:func:`transpose_rows`) of 2 to
    :data:`~compiler.codegen.llvm_transpose.MAX_TILE` taps."""
    return transpose_rows(oc_bn) is not None and 2 <= taps <= MAX_TILE


def kernel_block_intrin(C: int, KH: int, KW: int, ic_bn: int, oc_bn: int, dtype: str) -> te.TensorIntrin:
    """The packing of one output-channel block of the kernel (:func:`blocks_from_nchw`) as a
    tensor intrinsic: per input channel, the taps of :func:`transpose_rows` filters (a row of
    ``KH * KW`` values each in W) transposed in vector registers into one ``oc_bn``-wide row
    per tap. A scalar copy reads one value per filter and tap, a vectorized one gathers them.
    ValueError where ``ic_bn`` does not divide ``C`` or the block is no whole number of tiles."""
    for name, v in (("C", C), ("KH", KH), ("KW", KW), ("ic_bn", ic_bn), ("oc_bn", oc_bn)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"kernel_block_intrin: {name} must be a positive int, got {v!r}")
    if C % ic_bn:
        raise ValueError(f"kernel_block_intrin: ic_bn {ic_bn} does not divide C {C}")
    if not _block_tiles_fit(oc_bn, KH * KW):
        raise ValueError(f"kernel_block_intrin: blocks of {oc_bn} filters by {KH * KW} taps are no whole "
                         f"number of transposed tiles (oc_bn a multiple of 4, 2 to {MAX_TILE} taps)")
    rows, taps, Cc = transpose_rows(oc_bn), KH * KW, C // ic_bn
    src = te.placeholder((oc_bn, C, KH, KW), dtype=dtype, name="W")
    dst = te.compute((Cc, KH, KW, ic_bn, oc_bn), lambda cc, ry, rx, cb, fb: src[fb, cc * ic_bn + cb, ry, rx],
                     name="block")
    # Whole blocks of the kernel and of its packed copy: compact, anywhere in their arrays.
    binds = {t: decl_buffer(t.shape, dtype, t.op.name, offset_factor=1) for t in (src, dst)}

    def pack(ins, outs):
        (w,), (block,) = ins, outs
        ib = ir_builder.create()
        with ib.for_range(0, Cc, name="cc") as cc, ib.for_range(0, ic_bn, name="cb") as cb, \
                ib.for_range(0, oc_bn // rows, name="fo") as fo:
            first = (fo * rows * C + cc * ic_bn + cb) * taps
            at = (cc * taps * ic_bn + cb) * oc_bn + fo * rows  # at the first tap
            ib.emit(transpose_call(block.access_ptr("w", offset=at), ic_bn * oc_bn,
                                   w.access_ptr("r", offset=first), C * taps, rows, taps))
        return ib.get()

    return te.decl_tensor_intrin(dst.op, pack, name=f"kernel_block_{C}x{KH}x{KW}_{ic_bn}_{oc_bn}_{dtype}",
                                 binds=binds)


def schedule_kernel_blocks(s, Wb, at=None) -> None:
    """Pack the kernel blocks ``Wb`` (:func:`blocks_from_nchw`) at loop ``at`` (a pair: stage and
    loop; a thread then packs the blocks it uses, just before, in its own cache), else on threads
    over the output-channel blocks. A block packs by :func:`kernel_block_intrin` where no block
    reaches past ``F`` and its tiles fit, else element by element in the order it reads W: an
    input channel's taps of the whole output block before the next channel's."""
    F, C, KH, KW = (int(d.value) for d in Wb.op.input_tensors[0].shape)
    Fc, _, _, _, ic_bn, oc_bn = (int(d.value) for d in Wb.shape)
    fc, cc, ry, rx, cb, fb = s[Wb].op.axis
    if Fc * oc_bn == F and _block_tiles_fit(oc_bn, KH * KW):
        s[Wb].tensorize(cc, kernel_block_intrin(C, KH, KW, ic_bn, oc_bn, Wb.dtype))
        if oc_bn % vector_lanes(Wb.dtype):
            # The convolution's last vector reads past such a block: packed where it is used,
            # it would be a larger region than the intrinsic's tile.
            at = None
    else:
        s[Wb].reorder(fc, cc, cb, ry, rx, fb)
    if at is None:
        s[Wb].parallel(fc)
    else:
        s[Wb].compute_at(*at)


def nchw_from_blocks(Y, F: int, name: str = "conv2d_nchw"):
    """The blocked output ``Y`` (N, F/oc_bn, Ho, Wo, oc_bn) as NCHW ``(N, F, Ho, Wo)``."""
    N, _, Ho, Wo, oc_bn = (int(d.value) for d in Y.shape)
    return te.compute((N, F, Ho, Wo), lambda n, f, y, x: Y[n, f // oc_bn, y, x, f % oc_bn], name=name)


def schedule_unpack(s, out, fi, x) -> None:
    """Unpack the blocked output into ``out`` (:func:`nchw_from_blocks`) in transposed tiles:
    ``fi`` (the channels of a block) and ``x`` (the output columns, contiguous in ``out``) are
    ``out``'s two innermost loops. Where no tile fits the sizes, the copy stays element by element."""
    channels = transpose_rows(int(s[out].op.input_tensors[0].shape[-1].value))
    columns = transpose_columns(int(out.shape[-1].value))
    if channels is None or columns is None:
        return
    fo, fi = s[out].split(fi, factor=channels)
    xo, xi = s[out].split(x, factor=columns)
    s[out].reorder(fo, xo, fi, xi)
    s[out].tensorize(fi, te.transpose_intrin(columns, channels, out.dtype, out_ndim=3))  # (f, y, x)


def _schedule_tile(cfg, s, Y, acc, at, ic_chunk: int | None = None) -> None:
    """The register tile: ``acc`` (Y's local accumulators) computed at loop ``at`` of Y, the
    reduction outside the tile of ``reg_n`` columns by its output blocks, columns and blocks
    unrolled, channels vectorized. With ``ic_chunk``, ``at`` is a tile of output blocks (its
    accumulators span the whole output) and the reduction runs in passes over every tile of
    the output, ``ic_chunk`` input-channel blocks each."""
    lanes = vector_lanes(Y.dtype)
    s[acc].compute_at(s[Y], at)
    _, afc, ay, ax, af = s[acc].op.axis
    cc, ry, rx, cb = s[acc].op.reduce_axis
    passes = []
    if ic_chunk:
        cco, cc = s[acc].split(cc, factor=ic_chunk)
        axo, ax = s[acc].split(ax, factor=cfg["reg_n"].val)
        passes = [cco, ay, axo]
    # The kernel vectors of the tile's blocks stay in registers while each column's broadcast
    # feeds them all.
    if cfg["unroll_kw"].val:
        s[acc].reorder(*passes, cc, ry, cb, rx, ax, afc, af)
        s[acc].unroll(rx)
    else:
        s[acc].reorder(*passes, cc, ry, rx, cb, ax, afc, af)
    s[acc].unroll(afc)
    s[acc].unroll(ax)
    afo, afi = s[acc].split(af, factor=lanes)
    s[acc].unroll(afo)
    s[acc].vectorize(afi)


def _accumulators(s, Y):
    """The local accumulators of the blocked output ``Y``: a cache of ``Y`` where it is the
    convolution, else the convolution it reads (:func:`blocked_epilogue`)."""
    if Y.op.reduce_axis:
        return s.cache_write(Y, "local")
    acc = next(t for t in Y.op.input_tensors if getattr(t.op, "reduce_axis", ()))
    s[acc].set_scope("local")
    return acc


def schedule_blocked_conv(cfg, s, Y, out_is_y: bool, oc_tile: int = 1, ic_chunk: int | None = None):
    """Schedule the blocked output ``Y`` (the convolution, or :func:`blocked_epilogue`'s stage
    over it): register tiles of ``reg_n`` columns along each output row by ``oc_tile`` output
    channel blocks. When ``Y`` is the output its loops get the threads (``parallel_axis``);
    else the caller computes it at an output row and places the threads. With ``ic_chunk``
    (``Y`` the output, threads on channel blocks) the reduction runs in passes of that many
    input-channel blocks over each tile of blocks' whole output (:func:`_schedule_tile`)."""
    acc = _accumulators(s, Y)
    lanes = vector_lanes(Y.dtype)
    n, fc, y, x, fb = s[Y].op.axis
    N, Fc, Ho, Wo, _ = (int(d.value) for d in Y.shape)
    row = [y]
    if int(acc.shape[2].value) != Ho:  # the accumulators are a plane: so are the tiles
        row, x, Ho, Wo = [], s[Y].fuse(y, x), 1, Ho * Wo
    xo, xi = s[Y].split(x, factor=cfg["reg_n"].val)
    fbo, fbi = s[Y].split(fb, factor=lanes)
    fc, fci = s[Y].split(fc, factor=oc_tile)
    if out_is_y and cfg["parallel_axis"].val == "oc":
        s[Y].reorder(fc, n, *row, xo, fci, xi, fbo, fbi)
        blocks = s[Y].fuse(fc, n)
        s[Y].parallel(blocks)
    else:
        # By height, each output row's channel blocks one after the other.
        rows = [n, *row, fc] if cfg["parallel_axis"].val == "height" else [n, fc, *row]
        s[Y].reorder(*rows, xo, fci, xi, fbo, fbi)
        if out_is_y:
            pieces = _row_pieces(N * (Fc // oc_tile) * Ho, _cdiv(Wo, cfg["reg_n"].val))
            if pieces > 1:  # too few rows to share: threads take pieces of rows too
                xoo, xo = s[Y].split(xo, nparts=pieces)
                if cfg["parallel_axis"].val == "height":  # a piece's channel blocks in turn
                    s[Y].reorder(*rows[:-1], xoo, fc, xo)
                    rows = [*rows[:-1], xoo, fc]
                else:
                    rows.append(xoo)
            s[Y].parallel(s[Y].fuse(*rows))
    s[Y].unroll(fci)
    s[Y].unroll(xi)
    s[Y].unroll(fbo)
    s[Y].vectorize(fbi)
    if ic_chunk and out_is_y and cfg["parallel_axis"].val == "oc":
        _schedule_tile(cfg, s, Y, acc, blocks, ic_chunk)
    else:
        _schedule_tile(cfg, s, Y, acc, xo)


def _ic_chunk_knob(cfg, g: ConvGeometry, ic_bn: int, oc_bn: int, dtype: str) -> int | None:
    """Declare ``ic_chunk`` where the kernel is larger than half a core's L2 (so it streams from
    memory) and the output of a tile of the widest span of blocks fits
    :data:`MAX_PASS_OUTPUT_BYTES`: how many input-channel blocks each pass of the reduction over
    that output takes, with threads on channel blocks (the knob's last choice, all of them, is
    the reduction whole in each register tile). Returns the config's passes (None: whole)."""
    wb = g.kernel_block(ic_bn)
    Cc, itemsize = g.group_channels // wb, np.dtype(dtype).itemsize
    kernel_bytes = g.kernel_bytes(itemsize)
    widest = max(_tile_blocks(g, oc_bn, vector_lanes(dtype))) * oc_bn
    chunks = [d for d in IC_CHUNKS if d < Cc and Cc % d == 0]
    if not chunks or 2 * kernel_bytes <= L2_BYTES or g.Ho * g.Wo * widest * itemsize > MAX_PASS_OUTPUT_BYTES:
        return None
    # A kernel beyond a core's L2 streams from memory: in passes, its stream is spread over all
    # of the output's tiles, not read at the first tile of each block and reused from L2 after.
    slice_bytes = g.KH * g.KW * wb * oc_bn * itemsize
    default = Cc
    if kernel_bytes > L2_BYTES and cfg["parallel_axis"].val == "oc":
        default = next((d for d in chunks if d * slice_bytes >= MIN_CHUNK_SLICE_BYTES), chunks[-1])
    cfg.define_knob("ic_chunk", [*chunks, Cc], default=default, absent=Cc)  # logged before it: whole
    cfg.add_constraint(lambda c: c["ic_chunk"].val == Cc or c["parallel_axis"].val == "oc",
                       knobs=["ic_chunk", "parallel_axis"], name="passes over the output by channel blocks")
    return None if cfg["ic_chunk"].val == Cc else cfg["ic_chunk"].val


def _rows_end_in_partial_tiles(g: ConvGeometry, oc_bn: int, dtype: str) -> bool:
    """Whether the output has several rows and the widest register tile leaves a part at the end
    of each: then the tiles may run along the whole plane (the ``plane`` knob)."""
    widest = max(register_tiles(g.Wo, oc_bn, vector_lanes(dtype), vector_registers()))
    return g.Ho > 1 and g.Wo % widest != 0


def _row_pieces(rows: int, tiles: int) -> int:
    """Into how many pieces threads on rows split each output row of ``tiles`` register tiles.

    One where there are :data:`MIN_PARALLEL_ROWS` rows or more; else the fewest pieces that
    make at least that many in all, or else as many as can be, where the pieces divide the
    tiles evenly and hold two tiles or more each: an uneven split, or pieces of one tile, would
    leave a bounds test around every tile where the row ends in a partial tile. A pointwise
    convolution runs as one row of its plane: a few channel blocks of that row would leave
    threads idle."""
    if rows >= MIN_PARALLEL_ROWS:
        return 1
    fits = [d for d in range(2, tiles // 2 + 1) if tiles % d == 0]
    want = _cdiv(MIN_PARALLEL_ROWS, rows)
    return next((d for d in fits if d >= want), max(fits, default=1))


def _parallel_rows(s, T, rows: int) -> None:
    """Threads on the first ``rows`` axes of stage ``T`` (fused)."""
    axes = s[T].op.axis
    s[T].parallel(s[T].fuse(*axes[:rows]) if rows > 1 else axes[0])


def _pad_by_height(s, P) -> None:
    """Threads on the rows of the padded data ``P`` (N, C/ic_bn, Hp, Wp, ic_bn), each row's
    channel blocks one after the other, vectorized along a block: split so, a thread pads the
    input rows that its share of the output's height reads (``parallel_axis="height"``)."""
    n, c, h, w, b = s[P].op.axis
    s[P].reorder(n, h, c, w, b)
    s[P].parallel(s[P].fuse(n, h, c))
    s[P].vectorize(b)


# ---------------------------------------------------------------------------- conv2d_nchwc


def _groups(groups) -> int:
    """``conv2d_nchwc``'s ``groups`` argument as a number; ValueError for anything but ``()`` or
    a positive int."""
    return int(defaulted_argument(groups, 1, lambda g: isinstance(g, (int, np.integer)) and g >= 1,
                                  "conv2d_nchwc: groups", "a positive int"))


def conv2d_nchwc_reference(N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, oc_bn,
                           dtype="float32", epilogue=(), groups=(), rng=None):
    """Random blocked data ``(N, C/ic_bn, H, W, ic_bn)`` and kernel
    ``(F/oc_bn, Cg/wb, KH, KW, wb, oc_bn)`` (``Cg = C/groups``, ``wb`` the smaller of ``ic_bn``
    and ``Cg``), and their blocked convolution through ``epilogue`` (a bias of ``(F,)``,
    residuals blocked as the output)."""
    g = ConvGeometry.of(N, C, H, W, F, KH, KW, stride, padding, dilation, _groups(groups))
    Cg, wb = g.group_channels, g.kernel_block(ic_bn)
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (F, Cg, KH, KW), dtype)
    out = topi.testing.conv2d_nchw_python(x, w, g.stride, g.pads, groups=g.groups, dilation=g.dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)

    def blocked(a):  # NCHW output-shaped data in (N, F/oc_bn, Ho, Wo, oc_bn)
        return np.ascontiguousarray(a.reshape(N, F // oc_bn, oc_bn, g.Ho, g.Wo).transpose(0, 1, 3, 4, 2))

    xb = x.reshape(N, C // ic_bn, ic_bn, H, W).transpose(0, 1, 3, 4, 2)
    wblocks = w.reshape(F // oc_bn, oc_bn, Cg // wb, wb, KH, KW).transpose(0, 2, 4, 5, 3, 1)
    extra = [e if e.ndim == 1 else blocked(e) for e in extra]
    return [np.ascontiguousarray(xb), np.ascontiguousarray(wblocks), *extra], [blocked(out)]


@template("conv2d_nchwc", target="cpu", reference=conv2d_nchwc_reference)
def conv2d_nchwc(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                 dilation=1, ic_bn: int = 16, oc_bn: int = 16, dtype: str = "float32", epilogue: tuple = (),
                 groups=()):
    """Convolution of channel-blocked data: ``C`` input channels in blocks of ``ic_bn``,
    ``F`` output channels in blocks of ``oc_bn``; see the module's docstring. ``groups``: ``()``
    for one (left out of the workload, as an empty option is: the key the template's logs have
    always had), else how many groups the channels are in (ResNeXt's 3 x 3 layers), each filter
    reading its group's ``C / groups`` channels; ``oc_bn`` must divide a group's filters, and
    ``ic_bn`` its input channels, or be a multiple of them (a data block of whole groups).
    ``epilogue``'s inputs (a bias of ``(F,)``, residuals of the blocked output's shape) come
    after X and W."""
    g = ConvGeometry.of(N, C, H, W, F, KH, KW, stride, padding, dilation, _groups(groups))
    Cg = g.group_channels
    for name, blocks in (("ic_bn", ic_bn), ("oc_bn", oc_bn)):
        if not isinstance(blocks, int) or blocks < 1:
            raise ValueError(f"{name} must be a positive int, got {blocks!r}")
    if F // g.groups % oc_bn:
        raise ValueError(f"oc_bn must be a positive divisor of {F // g.groups}, got {oc_bn!r}")
    if Cg % ic_bn and (g.groups == 1 or ic_bn % Cg or C % ic_bn):
        also = f", or a multiple of it that divides {C}" if g.groups > 1 else ""
        raise ValueError(f"ic_bn must be a positive divisor of {Cg}{also}, got {ic_bn!r}")
    cfg = get_config()
    rows_end_in_partial_tiles = _rows_end_in_partial_tiles(g, oc_bn, dtype)
    # By height only where the tiles run along rows (not along the plane).
    oc_tile = define_blocked_knobs(cfg, g, dtype, ic_bn=ic_bn, oc_bn=oc_bn, tile_blocks=True,
                                   by_height=not rows_end_in_partial_tiles)
    plane = False
    if rows_end_in_partial_tiles:
        # Threads on rows of few channel blocks take pieces of the plane (_row_pieces), through an
        # index that bound inference cannot follow back to a tile: each tile's accumulators
        # would span whole rows. There the plane is for threads on channel blocks only.
        pieces = N * (F // oc_bn) < MIN_PARALLEL_ROWS
        lanes = vector_lanes(dtype)
        span = _default_tile(g.Wo, oc_bn, lanes, vector_registers(), _tile_blocks(g, oc_bn, lanes))[0]
        default = not pieces or _default_parallel_axis(g, oc_bn, span, ic_bn=ic_bn) == "oc"
        cfg.define_knob("plane", [False, True], default=default, absent=False)  # logged before it: rows
        if pieces:
            cfg.add_constraint(lambda c: not c["plane"].val or c["parallel_axis"].val == "oc",
                               knobs=["plane", "parallel_axis"],
                               name="threads share a plane by channel blocks")
        plane = cfg["plane"].val
    ic_chunk = None if rows_end_in_partial_tiles else _ic_chunk_knob(cfg, g, ic_bn, oc_bn, dtype)
    X = te.placeholder((N, C // ic_bn, H, W, ic_bn), name="X", dtype=dtype)
    wb = g.kernel_block(ic_bn)
    Wb = te.placeholder((F // oc_bn, Cg // wb, KH, KW, wb, oc_bn), name="W", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, F // oc_bn, g.Ho, g.Wo, oc_bn), F)
    P = pad_blocks(X, g.pads, dtype)
    acc = blocked_conv(P, Wb, g, name="conv2d_nchwc_acc" if ep or plane else "conv2d_nchwc", plane=plane,
                       tile=cfg["reg_n"].val)
    Y = blocked_epilogue(acc, ep, plane=g if plane else None)
    s = te.create_schedule(Y.op)
    schedule_blocked_conv(cfg, s, Y, out_is_y=True, oc_tile=oc_tile, ic_chunk=ic_chunk)
    if P is not X and cfg["parallel_axis"].val == "height":
        _pad_by_height(s, P)
    elif P is not X:
        _parallel_rows(s, P, 3)
    return s, [X, Wb, *ep.inputs, Y]
