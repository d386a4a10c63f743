"""``dense(batch, in_dim, out_dim, dtype, bias=False, epilogue=())``: ``X @ W.T (+ b)``, for CPUs.

X is ``(batch, in_dim)``, W ``(out_dim, in_dim)`` and b ``(out_dim,)``. ``epilogue`` (see
``_epilogue``) maps each output element as the accumulator tile is written out, its bias
indexed by the output column; its inputs come after X, W (and b).
"""

from __future__ import annotations

from compiler import te
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["dense", "dense_reference"]


def dense_reference(batch: int, in_dim: int, out_dim: int, dtype: str = "float32", bias: bool = False,
                    epilogue: tuple = (), rng=None):
    """Random inputs and ``X @ W.T (+ b)`` (accumulated in float64), through ``epilogue``."""
    x, w = random_data(rng, (batch, in_dim), dtype), random_data(rng, (out_dim, in_dim), dtype)
    out = x.astype("float64") @ w.astype("float64").T
    inputs = [x, w]
    if bias:
        b = random_data(rng, (out_dim,), dtype)
        out = out + b
        inputs.append(b)
    extra, out = reference_epilogue(epilogue, out.astype(dtype), -1, dtype, rng)
    return inputs + extra, [out]


@template("dense", target="cpu", reference=dense_reference)
def dense(batch: int, in_dim: int, out_dim: int, dtype: str = "float32", bias: bool = False,
          epilogue: tuple = ()):
    """The GEMM of ``_gemm`` with W packed into column panels; the bias and the epilogue are
    applied as the accumulator tile is written out."""
    cfg = get_config()
    X = te.placeholder((batch, in_dim), name="X", dtype=dtype)
    W = te.placeholder((out_dim, in_dim), name="W", dtype=dtype)
    tensors = [X, W]
    b = None
    if bias:
        b = te.placeholder((out_dim,), name="b", dtype=dtype)
        tensors.append(b)
    ep = Epilogue.declare(epilogue, dtype, (batch, out_dim), out_dim)

    def write(value, i, j):
        return ep.apply(value if b is None else value + b[j], j, (i, j))

    define_gemm_knobs(cfg, batch, out_dim, in_dim, dtype)
    t = gemm_compute(cfg, lambda i, k: X[i, k], lambda k, j: W[j, k], (), batch, out_dim, in_dim, dtype,
                     epilogue=write if b is not None or ep else None, name="dense", b_rows_are_k=False)
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, [*tensors, *ep.inputs, t.out]
