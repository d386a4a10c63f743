"""CUDA templates for ``elementwise``, ``softmax``, ``conv2d_nchw`` and
``depthwise_conv2d_nchw`` (target "cuda"), with the CPU templates' numpy references.

* ``elementwise``: the chain inlined into one kernel over the flattened output, split
  into blocks, threads and a per-thread run of consecutive elements (unrolled).
* ``softmax``: the two row reductions (max, sum) either keep one row per thread of a
  block (``row_threads`` = 0) or give each row a block whose ``row_threads`` threads
  reduce it together (a shared-memory tree); 2-D thread blocks for the elementwise
  stages; the row statistics live in global workspaces between the kernels.
* convolutions: the output tiled into blocks (``blockIdx.z/y/x`` over batch x channels,
  rows, columns), virtual threads, threads and a per-thread register tile accumulated in
  a ``local`` buffer. The reduction (input channels, window rows, window columns) is
  split in two; at each step of its outer loops (fused into one) the block's threads
  load the input window (padding computed on the fly) and the weights it needs into
  shared memory together, consecutive threads reading consecutive elements, optionally
  double-buffered; the window taps of the inner loops may be unrolled.

Constraints keep every config within 1024 threads per block and 48 KiB of shared
memory, and its register tile within the registers a thread can have; the loops over
the register tile are unrolled so that the accumulators can live in registers.
"""

from __future__ import annotations

import math

import numpy as np

from compiler import te, topi
from compiler.topi.nn.utils import as_pair
from compiler.topi.utils import get_const_tuple
from search_spaces.template import get_config, template
from search_spaces.templates._common import float_dtype_check
from search_spaces.templates._cuda_limits import MAX_SHARED_BYTES, MAX_THREADS, register_tile_fits
from search_spaces.templates.cpu_conv2d import conv2d_nchw_reference
from search_spaces.templates.cpu_depthwise import depthwise_conv2d_nchw_reference
from search_spaces.templates.cpu_elementwise import chain_compute, elementwise_reference, parse_chain
from search_spaces.templates.cpu_norm import softmax_reference

__all__ = ["elementwise_cuda", "softmax_cuda", "conv2d_nchw_cuda", "depthwise_conv2d_nchw_cuda"]


def _bind_flat(cfg, s, out, name: str = "tile") -> None:
    fused = s[out].fuse(*s[out].op.axis)
    bx, tx, inner = cfg[name].apply(s, out, fused)
    s[out].bind(bx, te.thread_axis("blockIdx.x"))
    s[out].bind(tx, te.thread_axis("threadIdx.x"))
    if cfg["unroll"].val:
        s[out].unroll(inner)


@template("elementwise", target="cuda", reference=elementwise_reference)
def elementwise_cuda(M: int, N: int, ops: str, dtype: str = "float32"):
    """The chain fused into one kernel; ``tile`` = (blocks, threads, elements per thread)."""
    chain = parse_chain(ops, dtype)
    cfg = get_config()
    cfg.define_split("tile", M * N, num_outputs=3, policy="verbose",
                     filter=lambda e: e.size[1] <= MAX_THREADS and e.size[2] <= 8)
    cfg.define_knob("unroll", [1, 0])
    inputs, stages = chain_compute(M, N, chain, dtype)
    out = stages[-1]
    s = te.create_schedule(out.op)
    for st in stages[:-1]:
        s[st].compute_inline()
    _bind_flat(cfg, s, out)
    return s, inputs + [out]


@template("softmax", target="cuda", reference=softmax_reference)
def softmax_cuda(M: int, N: int, dtype: str = "float32"):
    """Stable softmax (``topi.nn.softmax``) in four kernels: row max, ``exp(x - max)``, row
    sum, divide."""
    float_dtype_check(dtype, "softmax")
    cfg = get_config()
    cfg.define_split("rows", M, num_outputs=2, filter=lambda e: e.size[1] <= MAX_THREADS)
    cfg.define_knob("row_threads", [0, 32, 64, 256])  # 0: a row per thread; else threads per row
    cfg.define_split("tile_n", N, num_outputs=2, policy="verbose", filter=lambda e: e.size[1] <= 256)
    cfg.define_split("tile_m", M, num_outputs=2, filter=lambda e: e.size[1] <= 16)
    cfg.add_constraint(lambda c: c["tile_n"].size[1] * c["tile_m"].size[1] <= MAX_THREADS,
                       knobs=["tile_n", "tile_m"], name="threads per block")
    X = te.placeholder((M, N), name="X", dtype=dtype)
    out = topi.nn.softmax(X)
    ex, sm = out.op.input_tensors
    mx = ex.op.input_tensors[1]
    s = te.create_schedule(out.op)
    for red in (mx, sm):
        if cfg["row_threads"].val:  # a block per row, reduced across its threads
            s[red].bind(red.op.axis[0], te.thread_axis("blockIdx.x"))
            _, kt = s[red].split(red.op.reduce_axis[0], factor=cfg["row_threads"].val)
            s[red].bind(kt, te.thread_axis("threadIdx.x"))
            continue
        bo, ti = cfg["rows"].apply(s, red, red.op.axis[0])
        s[red].bind(bo, te.thread_axis("blockIdx.x"))
        s[red].bind(ti, te.thread_axis("threadIdx.x"))
    for st in (ex, out):
        i, j = st.op.axis
        io, ii = cfg["tile_m"].apply(s, st, i)
        jo, ji = cfg["tile_n"].apply(s, st, j)
        s[st].reorder(io, jo, ii, ji)
        s[st].bind(io, te.thread_axis("blockIdx.y"))
        s[st].bind(jo, te.thread_axis("blockIdx.x"))
        s[st].bind(ii, te.thread_axis("threadIdx.y"))
        s[st].bind(ji, te.thread_axis("threadIdx.x"))
    return s, [X, out]


def _conv_knobs(cfg, F: int, Ho: int, Wo: int, reduce_extents: dict, window: tuple, itemsize: int,
                per_channel: bool) -> None:
    """Knobs and constraints of :func:`_schedule_conv`.

    ``reduce_extents`` maps the reduction axes (``rc``, ``ry``, ``rx``) to their extents;
    ``window`` is ``(stride_h, stride_w, dilation_h, dilation_w)``; ``per_channel``
    (depthwise) means that each output channel reads its own input channel.
    """
    cfg.define_split("tile_f", F, num_outputs=4, filter=lambda e: e.size[1] <= 4)
    cfg.define_split("tile_y", Ho, num_outputs=4, filter=lambda e: e.size[1] <= 2)
    cfg.define_split("tile_x", Wo, num_outputs=4, filter=lambda e: e.size[1] <= 2)
    for name, extent in reduce_extents.items():
        cfg.define_split(f"tile_{name}", extent, num_outputs=2)
    cfg.define_knob("unroll_inner", [1, 0])
    cfg.define_knob("double_buffer", [0, 1])  # load the next reduction step while computing this one
    sh, sw, dh, dw = window

    def threads(c):
        return c["tile_f"].size[2] * c["tile_y"].size[2] * c["tile_x"].size[2]

    def inner(c, name):
        return c[f"tile_{name}"].size[1] if name in reduce_extents else 1

    def shared_bytes(c):
        f_block = math.prod(c["tile_f"].size[1:])
        y_block = math.prod(c["tile_y"].size[1:])
        x_block = math.prod(c["tile_x"].size[1:])
        ry, rx = inner(c, "ry"), inner(c, "rx")
        channels = f_block if per_channel else inner(c, "rc")
        rows = (y_block - 1) * sh + (ry - 1) * dh + 1
        cols = (x_block - 1) * sw + (rx - 1) * dw + 1
        weights = f_block * inner(c, "rc") * ry * rx
        return itemsize * (channels * rows * cols + weights)

    tiles = ["tile_f", "tile_y", "tile_x"]
    warp = min(32, F * Ho * Wo)  # fewer threads than a warp leave its lanes idle
    cfg.add_constraint(lambda c: warp <= threads(c) <= MAX_THREADS, knobs=tiles, name="threads per block")
    cfg.add_constraint(lambda c: c["tile_f"].size[2] <= 64, knobs=["tile_f"], name="threadIdx.z extent")
    def pixels(c):  # per thread: virtual threads x register tile, over rows and columns
        return math.prod(c["tile_y"].size[1::2]) * math.prod(c["tile_x"].size[1::2])

    cfg.add_constraint(lambda c: register_tile_fits(math.prod(c["tile_f"].size[1::2]), pixels(c), threads(c)),
                       knobs=tiles, name="register tile")
    cfg.add_constraint(lambda c: (1 + c["double_buffer"].val) * shared_bytes(c) <= MAX_SHARED_BYTES,
                       knobs=tiles + [f"tile_{n}" for n in reduce_extents] + ["double_buffer"],
                       name="shared memory")


def _schedule_conv(cfg, s, Y, reduce_knobs: list[str]) -> None:
    """Block tiles of the output; at each step of the outer reduction loops the block
    stages its window of the (padded) input and of the weights in shared memory, loaded
    by all its threads together; each thread accumulates a register tile in ``local``.

    ``Y`` is a topi convolution: it reads the padded input and the weights, in that
    order; ``reduce_knobs`` names the split knob of each of its reduce axes, in order."""
    P, Wt = Y.op.input_tensors
    acc = s.cache_write(Y, "local")
    data_shared = s.cache_read(P, "shared", [acc])
    weights_shared = s.cache_read(Wt, "shared", [acc])
    if P.op.input_tensors:  # the padding is computed while the tile is loaded
        s[P].compute_inline()
    n, f, y, x = s[Y].op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, Y, f)
    by, vy, ty, yi = cfg["tile_y"].apply(s, Y, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    s[Y].bind(s[Y].fuse(n, bf), te.thread_axis("blockIdx.z"))
    s[Y].bind(by, te.thread_axis("blockIdx.y"))
    s[Y].bind(bx, te.thread_axis("blockIdx.x"))
    s[Y].bind(vf, te.thread_axis("vthread", name="vf"))
    s[Y].bind(vy, te.thread_axis("vthread", name="vy"))
    s[Y].bind(vx, te.thread_axis("vthread", name="vx"))
    s[Y].bind(tf, te.thread_axis("threadIdx.z"))
    s[Y].bind(ty, te.thread_axis("threadIdx.y"))
    s[Y].bind(tx, te.thread_axis("threadIdx.x"))
    for axis in (fi, yi, xi):
        s[Y].unroll(axis)
    s[acc].compute_at(s[Y], tx)
    for axis in s[acc].op.axis:  # constant indices keep the accumulators in registers
        s[acc].unroll(axis)
    outer, inner = [], []
    for name, axis in zip(reduce_knobs, s[acc].op.reduce_axis, strict=True):
        o, i = cfg[f"tile_{name}"].apply(s, acc, axis)
        outer.append(o)
        inner.append(i)
    s[acc].reorder(*outer, *inner, *s[acc].op.axis)
    step = s[acc].fuse(*outer) if len(outer) > 1 else outer[0]  # one loop over the reduction steps
    if cfg["unroll_inner"].val:
        for axis in inner[-2:]:  # the window taps
            s[acc].unroll(axis)
    threads = [(cfg["tile_x"].size[2], "threadIdx.x"), (cfg["tile_y"].size[2], "threadIdx.y"),
               (cfg["tile_f"].size[2], "threadIdx.z")]
    for load in (data_shared, weights_shared):
        s[load].compute_at(s[acc], step)
        if cfg["double_buffer"].val:
            s[load].double_buffer()
        rest = s[load].fuse(*s[load].op.axis)
        for count, tag in threads:  # consecutive threads read consecutive elements
            rest, t = s[load].split(rest, factor=count)
            s[load].bind(t, te.thread_axis(tag))


def _conv_window(stride, dilation) -> tuple[int, int, int, int]:
    return (*as_pair(stride, "stride"), *as_pair(dilation, "dilation"))


@template("conv2d_nchw", target="cuda", reference=conv2d_nchw_reference)
def conv2d_nchw_cuda(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                     dilation=1, dtype: str = "float32"):
    """Direct NCHW convolution (``topi.nn.conv2d_nchw``): shared-memory tiles of input and
    weights, register tiles of outputs (see the module doc)."""
    cfg = get_config()
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((F, C, KH, KW), name="W", dtype=dtype)
    Y = topi.nn.conv2d_nchw(X, Wt, stride, padding, dilation)
    _, _, Ho, Wo = get_const_tuple(Y.shape)
    _conv_knobs(cfg, F, Ho, Wo, {"rc": C, "ry": KH, "rx": KW}, _conv_window(stride, dilation),
                np.dtype(dtype).itemsize, per_channel=False)
    s = te.create_schedule(Y.op)
    _schedule_conv(cfg, s, Y, ["rc", "ry", "rx"])
    return s, [X, Wt, Y]


@template("depthwise_conv2d_nchw", target="cuda", reference=depthwise_conv2d_nchw_reference)
def depthwise_conv2d_nchw_cuda(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                               dilation=1, dtype: str = "float32"):
    """Depthwise convolution (``topi.nn.depthwise_conv2d_nchw``, channel multiplier 1) with
    the same shared-memory and register tiling, each block's channels staging their own
    input windows."""
    cfg = get_config()
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((C, 1, KH, KW), name="W", dtype=dtype)
    Y = topi.nn.depthwise_conv2d_nchw(X, Wt, stride, padding, dilation)
    _, _, Ho, Wo = get_const_tuple(Y.shape)
    _conv_knobs(cfg, C, Ho, Wo, {"ry": KH, "rx": KW}, _conv_window(stride, dilation),
                np.dtype(dtype).itemsize, per_channel=True)
    s = te.create_schedule(Y.op)
    _schedule_conv(cfg, s, Y, ["ry", "rx"])
    return s, [X, Wt, Y]
