"""``matmul(N, L, M, dtype)``: ``C = A @ B`` with A ``(N, L)`` and B ``(L, M)``, for CPUs."""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["matmul", "matmul_reference"]


def matmul_reference(N: int, L: int, M: int, dtype: str = "float32", rng=None):
    """Random ``A``, ``B`` and ``A @ B`` (accumulated in float64)."""
    a, b = random_data(rng, (N, L), dtype), random_data(rng, (L, M), dtype)
    return [a, b], [(a.astype("float64") @ b.astype("float64")).astype(dtype)]


@template("matmul", target="cpu", reference=matmul_reference)
def matmul(N: int, L: int, M: int, dtype: str = "float32"):
    """Packed, blocked GEMM with a register-tile microkernel (see ``_gemm``)."""
    cfg = get_config()
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    define_gemm_knobs(cfg, N, M, L, dtype)
    # Not topi.nn.matmul: the GEMM schedule needs its own compute, which reads B through a
    # packed copy (micro-panels) and accumulates in blocks (see _gemm).
    t = gemm_compute(cfg, lambda i, k: A[i, k], lambda k, j: B[k, j], (), N, M, L, dtype)
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, [A, B, t.out]
