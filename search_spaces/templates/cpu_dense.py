"""``dense(batch, in_dim, out_dim, dtype, bias=False, epilogue=())``: ``X @ W.T (+ b)``, for CPUs.

X is ``(batch, in_dim)``, W ``(out_dim, in_dim)`` and b ``(out_dim,)``. ``epilogue`` (see
``_epilogue``) maps each output element as the accumulator tile is written out, its bias
indexed by the output column; its inputs come after X, W (and b).

``dense_pack(batch, in_dim, out_dim, nr, dtype, epilogue=())`` is the same product with W
packed before the call (a model's constant weight, packed once when the model is built):
``Wp[jb, k, jr] = W[jb * nr + jr, k]``, zeros past ``out_dim``
(:func:`pack_dense_weight`), ``Wp`` of shape ``(ceil(out_dim / nr), in_dim, nr)``; ``nr`` is
the register tile's width. Its tensors are X, Wp, the epilogue's inputs and the output.
"""

from __future__ import annotations

from compiler import te
from compiler.graph.ops.layout import pack_dense_weight
from search_spaces.template import get_config, template
from search_spaces.templates._common import random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["dense", "dense_reference", "dense_pack", "dense_pack_reference", "pack_dense_weight"]


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


def dense_pack_reference(batch: int, in_dim: int, out_dim: int, nr: int, dtype: str = "float32",
                         epilogue: tuple = (), rng=None):
    """:func:`dense_reference`'s inputs and output, W packed by :func:`pack_dense_weight`."""
    (x, w, *extra), outs = dense_reference(batch, in_dim, out_dim, dtype, False, epilogue, rng)
    return [x, pack_dense_weight(w, nr), *extra], outs


@template("dense_pack", target="cpu", reference=dense_pack_reference)
def dense_pack(batch: int, in_dim: int, out_dim: int, nr: int, dtype: str = "float32", epilogue: tuple = ()):
    """:func:`dense` reading W already packed in micro-panels ``nr`` wide: the GEMM of ``_gemm``
    without its packing stage, its tile ``nr`` wide (ValueError if no microkernel is)."""
    cfg = get_config()
    define_gemm_knobs(cfg, batch, out_dim, in_dim, dtype, nr=nr)  # first: it checks nr
    X = te.placeholder((batch, in_dim), name="X", dtype=dtype)
    Wp = te.placeholder((-(-out_dim // nr), in_dim, nr), name="Wp", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (batch, out_dim), out_dim)
    t = gemm_compute(cfg, lambda i, k: X[i, k], None, (), batch, out_dim, in_dim, dtype,
                     epilogue=(lambda value, i, j: ep.apply(value, j, (i, j))) if ep else None,
                     name="dense_pack", b_rows_are_k=False, b_packed=Wp)
    s = te.create_schedule(t.out.op)
    schedule_gemm(cfg, s, t)
    return s, [X, Wp, *ep.inputs, t.out]
