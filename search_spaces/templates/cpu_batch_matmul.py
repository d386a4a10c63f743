"""``batch_matmul(B, N, L, M, dtype, epilogue=())``: ``C[b] = A[b] @ B[b]``, for CPUs.

A is ``(B, N, L)``, B ``(B, L, M)`` and C ``(B, N, M)``. ``epilogue`` (see ``_epilogue``)
maps each element of C as the accumulator tile is written out, its bias indexed by the last
axis; its inputs come after A and B.
"""

from __future__ import annotations

from compiler import te, topi
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["batch_matmul", "batch_matmul_reference"]


def batch_matmul_reference(B: int, N: int, L: int, M: int, dtype: str = "float32", epilogue: tuple = (),
                           rng=None):
    """Random ``A``, ``B`` and their batched product (``topi.testing.batch_matmul``, B not
    transposed), through ``epilogue``."""
    a, b = random_data(rng, (B, N, L), dtype), random_data(rng, (B, L, M), dtype)
    extra, out = reference_epilogue(epilogue, topi.testing.batch_matmul(a, b, trans_y=False), -1, dtype, rng)
    return [a, b, *extra], [out]


@template("batch_matmul", target="cpu", reference=batch_matmul_reference)
def batch_matmul(B: int, N: int, L: int, M: int, dtype: str = "float32", epilogue: tuple = ()):
    """The GEMM of ``_gemm`` per batch; threads that take row blocks take batches too."""
    cfg = get_config()
    A = te.placeholder((B, N, L), name="A", dtype=dtype)
    Bt = te.placeholder((B, L, M), name="B", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (B, N, M), M)
    define_gemm_knobs(cfg, N, M, L, dtype, batch=B)
    # Not topi.nn.batch_matmul: the GEMM schedule needs its own compute, which reads B
    # through a packed copy (micro-panels) and accumulates in blocks (see _gemm).
    t = gemm_compute(cfg, lambda b, i, k: A[b, i, k], lambda b, k, j: Bt[b, k, j], (B,), N, M, L, dtype,
                     epilogue=(lambda value, *idx: ep.apply(value, idx[-1], idx)) if ep else None)
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, [A, Bt, *ep.inputs, t.out]
