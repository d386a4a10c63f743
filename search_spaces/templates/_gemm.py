"""The CPU GEMM schedule shared by matmul, dense and batch_matmul.

Modelled on the blocked, packed x86 GEMM (TVM's ``dense_pack``, BLIS): the
right-hand operand is packed into ``(M / bn, L, bn)`` panels so the register tile
reads it contiguously; the output is tiled twice (cache block, then a register tile
of ``yi x xi`` accumulators kept in a local buffer); the inner tile row is
vectorized, the reduction split for cache blocking and optionally unrolled; the
outer blocks run in parallel.

Knobs: ``tile_y``/``tile_x`` (3-way splits: block, sub-block, register tile),
``tile_k`` (2-way), ``pack_b``, ``acc_at`` (accumulate per register tile, or per
cache block with the k blocks outermost), ``unroll_k``, ``vec``, ``parallel``.
"""

from __future__ import annotations

from compiler import te
from search_spaces.templates._common import accumulator, parallel_and_vectorize, vector_lanes

__all__ = ["define_gemm_knobs", "schedule_gemm", "MAX_REGISTER_TILE"]

# Accumulators a register tile may hold (32 vector registers of 16 lanes).
MAX_REGISTER_TILE = 512


def define_gemm_knobs(cfg, N: int, L: int, M: int, dtype: str) -> int:
    """Declare the GEMM knobs for an ``N x L @ L x M`` product; returns the panel width ``bn``."""
    lanes = vector_lanes(dtype)
    cfg.define_split("tile_y", N, num_outputs=3, filter=lambda e: e.size[-1] <= 16, default=[-1, 2, 4])
    cfg.define_split("tile_x", M, num_outputs=3, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, 2, lanes])
    cfg.define_split("tile_k", L, num_outputs=2, default=[-1, 16])
    cfg.add_constraint(lambda c: c["tile_y"].size[-1] * c["tile_x"].size[-1] <= MAX_REGISTER_TILE,
                       knobs=["tile_y", "tile_x"], name="register_tile")
    cfg.define_knob("pack_b", [True, False])
    cfg.define_knob("acc_at", ["register", "block"])
    cfg.define_knob("unroll_k", [True, False])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])
    return cfg["tile_x"].size[-1]


def schedule_gemm(cfg, s, C, out, packed=None, nbatch: int = 0) -> None:
    """Schedule reduction ``C`` (``[batch...,] y, x`` with one reduce axis) whose result
    ``out`` is (``C`` itself or an elementwise stage reading it); ``packed`` is the
    packing stage of the right-hand operand, if any."""
    acc = accumulator(s, C, out)
    *batch, y, x = s[out].op.axis
    yo, ym, yi = cfg["tile_y"].apply(s, out, y)
    xo, xm, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(*batch, yo, xo, ym, xm, yi, xi)
    outer = s[out].fuse(*batch, yo, xo)
    parallel_and_vectorize(s, cfg, out, outer, xi)

    *batch_c, yc, xc = s[acc].op.axis
    (kc,) = s[acc].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, acc, kc)
    if cfg["acc_at"].val == "register":
        s[acc].compute_at(s[out], xm)
        s[acc].reorder(*batch_c, ko, ki, yc, xc)
        rows, lanes = yc, xc
    else:  # one accumulator per cache block; the k blocks sweep it outermost
        s[acc].compute_at(s[out], outer)
        ycm, yci = s[acc].split(yc, factor=cfg["tile_y"].size[-1])
        xcm, xci = s[acc].split(xc, factor=cfg["tile_x"].size[-1])
        s[acc].reorder(*batch_c, ko, ycm, xcm, ki, yci, xci)
        rows, lanes = yci, xci
    if cfg["vec"].val:
        s[acc].vectorize(lanes)
    if cfg["unroll_k"].val and cfg["tile_k"].size[-1] <= 16:
        s[acc].unroll(ki)
        s[acc].unroll(rows)

    if packed is not None:
        *pb, pxo, pk, pxi = s[packed].op.axis
        pouter = s[packed].fuse(*pb, pxo)
        parallel_and_vectorize(s, cfg, packed, pouter, pxi)


def gemm_compute(A_at, B_at, shape_out, L: int, dtype: str, name: str = "C"):
    """``C[..., i, j] = sum_k A_at(..., i, k) * B_at(..., k, j)`` over ``k < L``."""
    k = te.reduce_axis((0, L), name="k")

    def body(*idx):
        *b, i, j = idx
        return te.sum(A_at(*b, i, k) * B_at(*b, k, j), axis=k)

    return te.compute(shape_out, body, name=name)
