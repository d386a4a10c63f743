"""GEMMs for NVIDIA GPUs: ``matmul``, ``dense`` and ``batch_matmul`` (target "cuda").

In the style of the best known GPU GEMM schedules: the output is tiled into
block tiles (``blockIdx``), each split over virtual threads (against shared-memory bank
conflicts), threads (``threadIdx``) and a per-thread register tile accumulated in a
``local`` buffer over the whole reduction. The reduction is split into tiles of
``tile_k``; each tile of both operands is staged in shared memory by a cooperative load
of all threads of the block (vectorized by ``vec`` elements per thread), and from there
into registers per step of the inner reduction loop, which may be unrolled. Register
reads of contiguous columns are vector loads; with the ``k_major`` knob, operands whose
rows run along k (``A`` of a matmul, both of a dense) are stored transposed in shared
memory so that their reads are vector loads too. With ``double_buffer`` the shared
tiles are doubled: the next k tile is loaded while the current one is used, with one
barrier per k step instead of two.

Constraints keep every config launchable and its register tile in registers: at most
1024 threads per block, at most 48 KiB of static shared memory, and a register tile
that fits the registers a thread can have (255, and the block's 64 K shared by its
threads). The loops over the register tile are unrolled, so that the accumulators are
indexed by constants and can live in registers at all.
"""

from __future__ import annotations

import math

import numpy as np

from compiler import te, topi
from search_spaces.template import get_config, template
from search_spaces.templates._cuda_limits import MAX_SHARED_BYTES, MAX_THREADS, register_tile_fits
from search_spaces.templates.cpu_batch_matmul import batch_matmul_reference
from search_spaces.templates.cpu_dense import dense_reference
from search_spaces.templates.cpu_matmul import matmul_reference

__all__ = ["matmul_cuda", "dense_cuda", "batch_matmul_cuda", "schedule_gemm_cuda", "define_gemm_cuda_knobs",
           "k_major_view"]


def define_gemm_cuda_knobs(cfg, N: int, L: int, M: int, dtype: str) -> None:
    """The knobs of :func:`schedule_gemm_cuda` for an ``N x L`` by ``L x M`` product."""
    cfg.define_split("tile_y", N, num_outputs=4, policy="factors")
    cfg.define_split("tile_x", M, num_outputs=4, policy="factors")
    cfg.define_split("tile_k", L, num_outputs=2, policy="factors")
    cfg.define_knob("unroll_k", [1, 0])
    cfg.define_knob("vec", [1, 2, 4])
    cfg.define_knob("k_major", [0, 1])  # operands whose rows run along k staged transposed
    cfg.define_knob("double_buffer", [0, 1])  # load the next k tile while computing this one
    itemsize = np.dtype(dtype).itemsize

    def threads(c):
        return c["tile_y"].size[2] * c["tile_x"].size[2]

    cfg.add_constraint(lambda c: 32 <= threads(c) <= MAX_THREADS or threads(c) == N * M,
                       knobs=["tile_y", "tile_x"], name="threads per block")
    cfg.add_constraint(lambda c: register_tile_fits(c["tile_y"].size[1] * c["tile_y"].size[3],
                                                    c["tile_x"].size[1] * c["tile_x"].size[3], threads(c)),
                       knobs=["tile_y", "tile_x"], name="register tile")
    cfg.add_constraint(lambda c: (1 + c["double_buffer"].val) * itemsize * c["tile_k"].size[1] * (
        math.prod(c["tile_y"].size[1:]) + math.prod(c["tile_x"].size[1:])) <= MAX_SHARED_BYTES,
        knobs=["tile_y", "tile_x", "tile_k", "double_buffer"], name="shared memory")


def k_major_view(cfg, operand):
    """``(tensor, transposed)``: what the GEMM reads of ``operand`` (``[..., rows, k]``, k
    contiguous): the operand itself, or with the ``k_major`` knob a transposed view
    ``[..., k, rows]`` (``transposed`` is then True, to pass as topi's ``transpose_a``).
    The view is inlined by :func:`schedule_gemm_cuda`, so only its shared-memory copy
    exists, laid out so that each thread reads its rows of one k step with vector loads."""
    if not cfg["k_major"].val:
        return operand, False
    *batch, rows, k = operand.shape
    view = te.compute((*batch, k, rows), lambda *i: operand[(*i[:-2], i[-1], i[-2])],
                      name=f"{operand.op.name}_T")
    return view, True


def schedule_gemm_cuda(cfg, s, out, acc, operands, batch_axis=None) -> None:
    """Schedule ``out`` (2-D, or 3-D with ``batch_axis``) whose values come from the
    reduction ``acc`` (a ``local`` stage computed per thread) reading ``operands``
    (placeholders, or views made by :func:`k_major_view`)."""
    y, x = out.op.axis[-2:]
    tx, ty = te.thread_axis("threadIdx.x"), te.thread_axis("threadIdx.y")
    by, vy, ty_, yi = cfg["tile_y"].apply(s, out, y)
    bx, vx, tx_, xi = cfg["tile_x"].apply(s, out, x)
    outer = [batch_axis] if batch_axis is not None else []
    s[out].reorder(*outer, by, bx, vy, vx, ty_, tx_, yi, xi)
    if batch_axis is not None:
        s[out].bind(batch_axis, te.thread_axis("blockIdx.z"))
    s[out].bind(by, te.thread_axis("blockIdx.y"))
    s[out].bind(bx, te.thread_axis("blockIdx.x"))
    s[out].bind(vy, te.thread_axis("vthread", name="vy"))
    s[out].bind(vx, te.thread_axis("vthread", name="vx"))
    s[out].bind(ty_, ty)
    s[out].bind(tx_, tx)
    s[out].vectorize(xi)  # each thread's row of results leaves in vector stores
    s[acc].compute_at(s[out], tx_)
    ko, ki = cfg["tile_k"].apply(s, acc, acc.op.reduce_axis[0])
    s[acc].reorder(ko, ki, *acc.op.axis)
    # The register tile is indexed by constants only once its loops are unrolled;
    # otherwise the accumulators live in (slow) local memory instead of registers.
    for axis in acc.op.axis:
        s[acc].unroll(axis)
    s[out].unroll(yi)
    if cfg["unroll_k"].val:
        s[acc].unroll(ki)
    nty, ntx = cfg["tile_y"].size[2], cfg["tile_x"].size[2]
    vec = cfg["vec"].val
    for operand in operands:
        shared = s.cache_read(operand, "shared", [acc])
        local = s.cache_read(shared, "local", [acc])
        s[shared].compute_at(s[acc], ko)
        if cfg["double_buffer"].val:
            s[shared].double_buffer()
        s[local].compute_at(s[acc], ki)
        for axis in s[local].op.axis[:-1]:
            s[local].unroll(axis)
        s[local].vectorize(s[local].op.axis[-1])
        axes = list(s[shared].op.axis)
        if operand.op.input_tensors:  # a transposed view: copy along the source's rows
            s[operand].compute_inline()
            axes[-2:] = axes[-1], axes[-2]
            s[shared].reorder(*axes)
        fused = s[shared].fuse(*axes)
        rest, v = s[shared].split(fused, factor=vec)
        rest, t_x = s[shared].split(rest, factor=ntx)
        _, t_y = s[shared].split(rest, factor=nty)
        s[shared].bind(t_x, tx)
        s[shared].bind(t_y, ty)
        if vec > 1:
            s[shared].vectorize(v)


@template("matmul", target="cuda", reference=matmul_reference)
def matmul_cuda(N: int, L: int, M: int, dtype: str = "float32"):
    """``C = A @ B``: shared-memory block tiles and register tiles (see the module doc)."""
    cfg = get_config()
    define_gemm_cuda_knobs(cfg, N, L, M, dtype)
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    A_view, a_t = k_major_view(cfg, A)
    C = topi.nn.matmul(A_view, B, transpose_a=a_t)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    schedule_gemm_cuda(cfg, s, C, CC, [A_view, B])
    return s, [A, B, C]


@template("dense", target="cuda", reference=dense_reference)
def dense_cuda(batch: int, in_dim: int, out_dim: int, dtype: str = "float32", bias: bool = False):
    """``X @ W.T (+ b)`` with the GEMM schedule; the bias is added as results leave registers."""
    cfg = get_config()
    define_gemm_cuda_knobs(cfg, batch, in_dim, out_dim, dtype)
    X = te.placeholder((batch, in_dim), name="X", dtype=dtype)
    W = te.placeholder((out_dim, in_dim), name="W", dtype=dtype)
    (X_view, x_t), (W_view, w_t) = k_major_view(cfg, X), k_major_view(cfg, W)
    b = te.placeholder((out_dim,), name="b", dtype=dtype) if bias else None
    tensors = [X, W] + ([b] if bias else [])
    # topi.nn.dense(X, W, b) is matmul(X, W, b, transpose_b=True); matmul also reads the views
    out = topi.nn.matmul(X_view, W_view, b, transpose_a=x_t, transpose_b=not w_t)
    s = te.create_schedule(out.op)
    if bias:  # the product is accumulated in registers, the bias added as they leave
        D = out.op.input_tensors[0]
        s[D].set_scope("local")
        schedule_gemm_cuda(cfg, s, out, D, [X_view, W_view])
    else:
        schedule_gemm_cuda(cfg, s, out, s.cache_write(out, "local"), [X_view, W_view])
    return s, tensors + [out]


@template("batch_matmul", target="cuda", reference=batch_matmul_reference)
def batch_matmul_cuda(B: int, N: int, L: int, M: int, dtype: str = "float32"):
    """One GEMM per batch element, the batch on ``blockIdx.z``."""
    cfg = get_config()
    define_gemm_cuda_knobs(cfg, N, L, M, dtype)
    A = te.placeholder((B, N, L), name="A", dtype=dtype)
    Bt = te.placeholder((B, L, M), name="B", dtype=dtype)
    A_view, a_t = k_major_view(cfg, A)
    C = topi.nn.batch_matmul(A_view, Bt, transpose_a=a_t, transpose_b=False)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    schedule_gemm_cuda(cfg, s, C, CC, [A_view, Bt], batch_axis=C.op.axis[0])
    return s, [A, Bt, C]
