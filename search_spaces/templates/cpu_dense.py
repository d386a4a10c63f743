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
    """Blocked GEMM with W packed into ``(out_dim / bn, in_dim, bn)`` panels (TVM's dense_pack)."""
    cfg = get_config()
    X = te.placeholder((batch, in_dim), name="X", dtype=dtype)
    W = te.placeholder((out_dim, in_dim), name="W", dtype=dtype)
    bn = define_gemm_knobs(cfg, batch, in_dim, out_dim, dtype)
    if cfg["pack_b"].val:
        packed = te.compute((out_dim // bn, in_dim, bn), lambda xo, k, xi: W[xo * bn + xi, k],
                            name="W_packed")
        C = gemm_compute(lambda i, k: X[i, k], lambda k, j: packed[j // bn, k, j % bn],
                         (batch, out_dim), in_dim, dtype, name="dense")
    else:
        packed = None
        C = gemm_compute(lambda i, k: X[i, k], lambda k, j: W[j, k], (batch, out_dim), in_dim, dtype,
                         name="dense")
    tensors = [X, W]
    out = C
    if bias:
        b = te.placeholder((out_dim,), name="b", dtype=dtype)
        out = te.compute((batch, out_dim), lambda i, j: C[i, j] + b[j], name="dense_bias")
        tensors.append(b)
    s = te.create_schedule(out.op)
    schedule_gemm(cfg, s, C, out, packed)
    return s, tensors + [out]
