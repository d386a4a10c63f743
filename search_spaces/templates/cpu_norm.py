"""Row-wise normalisations for CPUs: ``softmax(M, N, dtype)`` and ``layer_norm(M, N, dtype)``.

Both reduce over the last axis. Rows are blocked (``tile_m``) and the blocks run in
parallel; the per-row statistics are computed inside the row loop (or, as a knob,
in loops of their own), and the final elementwise pass is split into vector-width
pieces (``tile_n``) and vectorized.

``vec_stats`` (where whole vectors tile a row) accumulates each statistic in vector lanes
(``rfactor``): two vectors' lanes of partial results a row (one vector's where two do not tile
it), each over every 16th element (with 8 lanes), then their own reduction. Reduced one element
at a time, a row of 128 waits on 128 dependent additions; in two vectors of 8 lanes, on 8.
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.simd import vector_lanes
from compiler.topi.utils import vectorize_reduction
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    defaulted_argument,
    float_dtype_check,
    parallel_and_vectorize,
    random_data,
)

__all__ = ["softmax", "layer_norm", "softmax_reference", "layer_norm_reference", "LAYER_NORM_EPS"]

LAYER_NORM_EPS = 1e-5


def _row_knobs(cfg, M: int, N: int, dtype: str) -> None:
    lanes = vector_lanes(dtype)
    cfg.define_split("tile_m", M, num_outputs=2, filter=lambda e: e.size[-1] <= 64, default=[-1, 1])
    cfg.define_split("tile_n", N, policy="verbose", num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, lanes])
    cfg.define_knob("stats_at", ["row", "root"])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])
    cfg.define_knob("vec_stats", [True, False] if _stat_width(N, dtype) else [False])


def _stat_width(N: int, dtype: str) -> int | None:
    """How many partial results a vectorized row statistic keeps: two vectors' lanes where
    they tile the row, else one vector's, else none (``vec_stats`` is then off)."""
    lanes = vector_lanes(dtype)
    return next((w for w in (2 * lanes, lanes) if N % w == 0), None)


def _schedule_rows(cfg, s, out, row_stages, elem_stages) -> None:
    """Tile ``out``'s rows and columns; compute the per-row reductions ``row_stages`` and
    the elementwise ``elem_stages`` inside its row loop (or at the root)."""
    i, j = s[out].op.axis
    io, ii = cfg["tile_m"].apply(s, out, i)
    jo, ji = cfg["tile_n"].apply(s, out, j)
    s[out].reorder(io, ii, jo, ji)
    parallel_and_vectorize(s, cfg, out, io, ji)
    at_row = cfg["stats_at"].val == "row"
    if cfg["vec_stats"].val:
        width = _stat_width(int(out.shape[1].value), out.dtype)
        partials = [vectorize_reduction(s, red, width) for red in row_stages]
        row_stages = [st for pair in zip(partials, row_stages) for st in pair]
    for st in row_stages + elem_stages:
        if at_row:
            s[st].compute_at(s[out], ii)
        elif cfg["parallel"].val:
            s[st].parallel(s[st].op.axis[0])
    for st in elem_stages:  # elementwise (M, N) stages get the same vector split
        _, je = s[st].op.axis
        _, jei = s[st].split(je, factor=cfg["tile_n"].size[-1])
        if cfg["vec"].val:
            s[st].vectorize(jei)


# ---------------------------------------------------------------------------- softmax


def softmax_reference(M: int, N: int, dtype: str = "float32", rng=None):
    """Random ``X`` and its softmax over the last axis (``topi.testing.softmax_python``)."""
    x = random_data(rng, (M, N), dtype)
    return [x], [topi.testing.softmax_python(x)]


@template("softmax", target="cpu", reference=softmax_reference)
def softmax(M: int, N: int, dtype: str = "float32"):
    """Stable softmax (``topi.nn.softmax``): row max, ``exp(x - max)`` (stored, or recomputed
    where used), row sum, divide."""
    float_dtype_check(dtype, "softmax")
    cfg = get_config()
    _row_knobs(cfg, M, N, dtype)
    cfg.define_knob("inline_exp", [False, True])
    X = te.placeholder((M, N), name="X", dtype=dtype)
    out = topi.nn.softmax(X)
    ex, sm = out.op.input_tensors
    mx = ex.op.input_tensors[1]
    s = te.create_schedule(out.op)
    if cfg["inline_exp"].val:
        s[ex].compute_inline()
        _schedule_rows(cfg, s, out, [mx, sm], [])
    else:
        _schedule_rows(cfg, s, out, [mx, sm], [ex])
    return s, [X, out]


# ---------------------------------------------------------------------------- layer norm


def layer_norm_reference(M: int, N: int, dtype: str = "float32", epsilon=(), rng=None):
    """Random ``X``, ``gamma``, ``beta`` and the layer norm of ``X`` over its last axis."""
    epsilon = _epsilon(epsilon)
    x = random_data(rng, (M, N), dtype)
    gamma, beta = random_data(rng, (N,), dtype), random_data(rng, (N,), dtype)
    x64 = x.astype("float64")
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    out = (x64 - mean) / np.sqrt(var + epsilon) * gamma + beta
    return [x, gamma, beta], [out.astype(dtype)]


def _epsilon(epsilon) -> float:
    """``layer_norm``'s ``epsilon`` argument as a number; ValueError for anything but ``()`` or a
    number in (0, 1)."""
    def valid(e) -> bool:
        return isinstance(e, (int, float)) and 0 < e < 1

    return float(defaulted_argument(epsilon, LAYER_NORM_EPS, valid, "layer_norm: epsilon",
                                    "a number in (0, 1)"))


# compiler.topi has no layer_norm (TVM added one after v0.8), so the template keeps its own computation.
@template("layer_norm", target="cpu", reference=layer_norm_reference)
def layer_norm(M: int, N: int, dtype: str = "float32", epsilon=()):
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` per row; two passes (mean, then
    variance). ``epsilon``: ``()`` for torch's default, :data:`LAYER_NORM_EPS` (left out of the
    workload, as an empty option is: the key the template's logs have always had), else a
    number (ViTs: 1e-6)."""
    float_dtype_check(dtype, "layer_norm")
    epsilon = _epsilon(epsilon)
    cfg = get_config()
    _row_knobs(cfg, M, N, dtype)
    X = te.placeholder((M, N), name="X", dtype=dtype)
    gamma = te.placeholder((N,), name="gamma", dtype=dtype)
    beta = te.placeholder((N,), name="beta", dtype=dtype)
    inv_n = 1.0 / N
    k = te.reduce_axis((0, N), name="k")
    total = te.compute((M,), lambda i: te.sum(X[i, k], axis=k), name="row_sum")
    k2 = te.reduce_axis((0, N), name="k2")
    sq = te.compute((M,), lambda i: te.sum((X[i, k2] - total[i] * inv_n) * (X[i, k2] - total[i] * inv_n),
                                           axis=k2), name="row_sqdev")
    out = te.compute((M, N), lambda i, j: (X[i, j] - total[i] * inv_n)
                     * te.rsqrt(sq[i] * inv_n + epsilon) * gamma[j] + beta[j], name="layer_norm")
    s = te.create_schedule(out.op)
    _schedule_rows(cfg, s, out, [total, sq], [])
    return s, [X, gamma, beta, out]
