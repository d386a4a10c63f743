"""``dense(batch, in_dim, out_dim, dtype, bias=False)``: ``X @ W.T (+ b)``, for CPUs.

X is ``(batch, in_dim)``, W ``(out_dim, in_dim)`` and b ``(out_dim,)``.
"""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["dense", "dense_reference"]


def dense_reference(batch: int, in_dim: int, out_dim: int, dtype: str = "float32", bias: bool = False,
                    rng=None):
    """Random inputs and ``X @ W.T (+ b)`` (accumulated in float64)."""
    x, w = random_data(rng, (batch, in_dim), dtype), random_data(rng, (out_dim, in_dim), dtype)
    out = x.astype("float64") @ w.astype("float64").T
    inputs = [x, w]
    if bias:
        b = random_data(rng, (out_dim,), dtype)
        out = out + b
        inputs.append(b)
    return inputs, [out.astype(dtype)]


@template("dense", target="cpu", reference=dense_reference)
def dense(batch: int, in_dim: int, out_dim: int, dtype: str = "float32", bias: bool = False):
    """The GEMM of ``_gemm`` with W packed into column panels; the bias is added as the
    accumulator tile is written out."""
    cfg = get_config()
    X = te.placeholder((batch, in_dim), name="X", dtype=dtype)
    W = te.placeholder((out_dim, in_dim), name="W", dtype=dtype)
    tensors = [X, W]
    epilogue = None
    if bias:
        b = te.placeholder((out_dim,), name="b", dtype=dtype)
        tensors.append(b)
        epilogue = lambda value, i, j: value + b[j]  # noqa: E731
    define_gemm_knobs(cfg, batch, out_dim, in_dim, dtype)
    t = gemm_compute(cfg, lambda i, k: X[i, k], lambda k, j: W[j, k], (), batch, out_dim, in_dim, dtype,
                     epilogue=epilogue, name="dense", b_rows_are_k=False)
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, tensors + [t.out]
