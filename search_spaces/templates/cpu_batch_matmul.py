"""``batch_matmul(B, N, L, M, dtype)``: ``C[b] = A[b] @ B[b]``, for CPUs.

A is ``(B, N, L)``, B ``(B, L, M)`` and C ``(B, N, M)``.
"""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["batch_matmul", "batch_matmul_reference"]


def batch_matmul_reference(B: int, N: int, L: int, M: int, dtype: str = "float32", rng=None):
    """Random ``A``, ``B`` and their batched product (accumulated in float64)."""
    a, b = random_data(rng, (B, N, L), dtype), random_data(rng, (B, L, M), dtype)
    return [a, b], [np_matmul(a, b).astype(dtype)]


def np_matmul(a, b):
    return a.astype("float64") @ b.astype("float64")


@template("batch_matmul", target="cpu", reference=batch_matmul_reference)
def batch_matmul(B: int, N: int, L: int, M: int, dtype: str = "float32"):
    """The GEMM schedule per batch, with the batch fused into the parallel outer loop."""
    cfg = get_config()
    A = te.placeholder((B, N, L), name="A", dtype=dtype)
    Bt = te.placeholder((B, L, M), name="B", dtype=dtype)
    bn = define_gemm_knobs(cfg, N, L, M, dtype)
    if cfg["pack_b"].val:
        packed = te.compute((B, M // bn, L, bn), lambda b, xo, k, xi: Bt[b, k, xo * bn + xi],
                            name="B_packed")
        C = gemm_compute(lambda b, i, k: A[b, i, k], lambda b, k, j: packed[b, j // bn, k, j % bn],
                         (B, N, M), L, dtype)
    else:
        packed = None
        C = gemm_compute(lambda b, i, k: A[b, i, k], lambda b, k, j: Bt[b, k, j], (B, N, M), L, dtype)
    s = te.create_schedule(C.op)
    schedule_gemm(cfg, s, C, C, packed, nbatch=1)
    return s, [A, Bt, C]
