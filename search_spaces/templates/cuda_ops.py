"""CUDA templates for ``elementwise``, ``softmax``, ``conv2d_nchw`` and
``depthwise_conv2d_nchw`` (target "cuda"), with the CPU templates' numpy references.

* ``elementwise``: the chain inlined into one kernel over the flattened output, split
  into blocks, threads and a per-thread run of consecutive elements (unrolled).
* ``softmax``: the two row reductions (max, sum) either keep one row per thread of a
  block (``row_threads`` = 0) or give each row a block whose ``row_threads`` threads
  reduce it together (a shared-memory tree); 2-D thread blocks for the elementwise
  stages; the row statistics live in global workspaces between the kernels.
* convolutions: the output tiled into blocks (``blockIdx.z/y/x`` over batch x channels,
  rows, columns), threads and a per-thread register tile accumulated in a ``local``
  buffer, with virtual threads over channels; inputs are read through the read-only
  cache (no shared-memory staging yet), kernel taps optionally unrolled.

Constraints keep every config within 1024 threads per block and a bounded register tile.
"""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    conv_out_size,
    float_dtype_check,
    pad_nchw_like,
    padding4,
    pair,
)
from search_spaces.templates.cpu_conv2d import conv2d_nchw_reference
from search_spaces.templates.cpu_depthwise import depthwise_conv2d_nchw_reference
from search_spaces.templates.cpu_elementwise import (
    BINARY_OPS,
    _operand_shape,
    _parse,
    _stage_body,
    elementwise_reference,
)
from search_spaces.templates.cpu_norm import softmax_reference

__all__ = ["elementwise_cuda", "softmax_cuda", "conv2d_nchw_cuda", "depthwise_conv2d_nchw_cuda"]

MAX_THREADS = 1024
MAX_REGISTER_TILE = 128


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
    chain = _parse(ops, dtype)
    cfg = get_config()
    cfg.define_split("tile", M * N, num_outputs=3, policy="verbose",
                     filter=lambda e: e.size[1] <= MAX_THREADS and e.size[2] <= 8)
    cfg.define_knob("unroll", [1, 0])
    X = te.placeholder((M, N), name="X", dtype=dtype)
    inputs = [X]
    stages = []
    cur = X
    k = 0
    for pos, o in enumerate(chain):
        operand = None
        if o in BINARY_OPS:
            operand = te.placeholder(_operand_shape(k, M, N), name=f"B{k}", dtype=dtype)
            inputs.append(operand)
            k += 1
        cur = te.compute((M, N), _stage_body(o, cur, operand, dtype), name=f"{o}{pos}")
        stages.append(cur)
    out = cur
    s = te.create_schedule(out.op)
    for st in stages[:-1]:
        s[st].compute_inline()
    _bind_flat(cfg, s, out)
    return s, inputs + [out]


@template("softmax", target="cuda", reference=softmax_reference)
def softmax_cuda(M: int, N: int, dtype: str = "float32"):
    """Stable softmax in four kernels: row max, ``exp(x - max)``, row sum, divide."""
    float_dtype_check(dtype, "softmax")
    cfg = get_config()
    cfg.define_split("rows", M, num_outputs=2, filter=lambda e: e.size[1] <= MAX_THREADS)
    cfg.define_knob("row_threads", [0, 32, 64, 256])  # 0: a row per thread; else threads per row
    cfg.define_split("tile_n", N, num_outputs=2, policy="verbose", filter=lambda e: e.size[1] <= 256)
    cfg.define_split("tile_m", M, num_outputs=2, filter=lambda e: e.size[1] <= 16)
    cfg.add_constraint(lambda c: c["tile_n"].size[1] * c["tile_m"].size[1] <= MAX_THREADS,
                       knobs=["tile_n", "tile_m"], name="threads per block")
    X = te.placeholder((M, N), name="X", dtype=dtype)
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="row_max")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="row_sum")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
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


def _conv_knobs(cfg, F: int, Ho: int, Wo: int) -> None:
    cfg.define_split("tile_f", F, num_outputs=4, filter=lambda e: e.size[1] <= 4)
    cfg.define_split("tile_y", Ho, num_outputs=3)
    cfg.define_split("tile_x", Wo, num_outputs=3)
    cfg.define_knob("unroll_kw", [1, 0])

    def threads(c):
        return c["tile_f"].size[2] * c["tile_y"].size[1] * c["tile_x"].size[1]

    cfg.add_constraint(lambda c: threads(c) <= MAX_THREADS, knobs=["tile_f", "tile_y", "tile_x"],
                       name="threads per block")
    cfg.add_constraint(lambda c: c["tile_f"].size[1] * c["tile_f"].size[3] * c["tile_y"].size[2]
                       * c["tile_x"].size[2] <= MAX_REGISTER_TILE, knobs=["tile_f", "tile_y", "tile_x"],
                       name="register tile")


def _schedule_conv(cfg, s, Y, P, kw_axis) -> None:
    if P is not None:
        s[P].compute_inline()
    acc = s.cache_write(Y, "local")
    n, f, y, x = s[Y].op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, Y, f)
    by, ty, yi = cfg["tile_y"].apply(s, Y, y)
    bx, tx, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, bf, by, bx, vf, tf, ty, tx, fi, yi, xi)
    s[Y].bind(s[Y].fuse(n, bf), te.thread_axis("blockIdx.z"))
    s[Y].bind(by, te.thread_axis("blockIdx.y"))
    s[Y].bind(bx, te.thread_axis("blockIdx.x"))
    s[Y].bind(vf, te.thread_axis("vthread", name="vf"))
    s[Y].bind(tf, te.thread_axis("threadIdx.z"))
    s[Y].bind(ty, te.thread_axis("threadIdx.y"))
    s[Y].bind(tx, te.thread_axis("threadIdx.x"))
    s[acc].compute_at(s[Y], tx)
    reduce_axes = list(s[acc].op.reduce_axis)
    s[acc].reorder(*reduce_axes, *s[acc].op.axis)
    if cfg["unroll_kw"].val:
        s[acc].unroll(reduce_axes[kw_axis])


def _thread_z_ok(cfg) -> None:
    cfg.add_constraint(lambda c: c["tile_f"].size[2] <= 64, knobs=["tile_f"], name="threadIdx.z extent")


@template("conv2d_nchw", target="cuda", reference=conv2d_nchw_reference)
def conv2d_nchw_cuda(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride=1, padding=0,
                     dilation=1, dtype: str = "float32"):
    """Direct NCHW convolution with thread and register tiling (see the module doc)."""
    cfg = get_config()
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    pads = padding4(padding)
    Ho = conv_out_size(H, KH, sh, pads[0], pads[2], dh)
    Wo = conv_out_size(W, KW, sw, pads[1], pads[3], dw)
    _conv_knobs(cfg, F, Ho, Wo)
    _thread_z_ok(cfg)
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((F, C, KH, KW), name="W", dtype=dtype)
    P = pad_nchw_like(X, 2, pads, 0.0, name="X_pad")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    Y = te.compute((N, F, Ho, Wo), lambda n, f, y, x: te.sum(
        P[n, rc, y * sh + ry * dh, x * sw + rx * dw] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv2d_nchw")
    s = te.create_schedule(Y.op)
    _schedule_conv(cfg, s, Y, P if P is not X else None, 2)
    return s, [X, Wt, Y]


@template("depthwise_conv2d_nchw", target="cuda", reference=depthwise_conv2d_nchw_reference)
def depthwise_conv2d_nchw_cuda(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                               dilation=1, dtype: str = "float32"):
    """Depthwise convolution with thread and register tiling over channels, rows, columns."""
    cfg = get_config()
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    pads = padding4(padding)
    Ho = conv_out_size(H, KH, sh, pads[0], pads[2], dh)
    Wo = conv_out_size(W, KW, sw, pads[1], pads[3], dw)
    _conv_knobs(cfg, C, Ho, Wo)
    _thread_z_ok(cfg)
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    Wt = te.placeholder((C, 1, KH, KW), name="W", dtype=dtype)
    P = pad_nchw_like(X, 2, pads, 0.0, name="X_pad")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    Y = te.compute((N, C, Ho, Wo), lambda n, c, y, x: te.sum(
        P[n, c, y * sh + ry * dh, x * sw + rx * dw] * Wt[c, 0, ry, rx], axis=[ry, rx]),
        name="depthwise_conv2d_nchw")
    s = te.create_schedule(Y.op)
    _schedule_conv(cfg, s, Y, P if P is not X else None, 1)
    return s, [X, Wt, Y]
