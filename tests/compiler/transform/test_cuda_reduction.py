"""Reductions across threads: a reduction axis bound to threadIdx.x becomes a per-thread
serial part, a shared buffer of partial results and a log2(n)-step tree with a barrier
after each step. Checked structurally, assembled with ptxas (where it exists) and run on
the CPU simulator against numpy with poisoned outputs; on a GPU too, where there is one."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, gpu_function, simulate
from helpers import assert_written, poisoned

import compiler
from compiler import te
from compiler.errors import LoweringError
from compiler.tir import stmt as S
from compiler.tir.analysis import collect
from compiler.tir.builtin import is_sync

_REDUCERS = {"sum": (te.sum, np.sum), "max": (te.max, np.max), "min": (te.min, np.min)}


def _syncs(kernel) -> int:
    return len(collect(kernel.body, is_sync))


def _shared(kernel) -> list:
    return [a.buffer for a in collect(kernel.body, lambda n: isinstance(n, S.Allocate))
            if a.buffer.scope == "shared"]


def row_reduce(N, K, threads, kind="sum", dtype="float32", split=True, rows_per_block=1):
    """``B[i] = reduce_k A[i, k]``: rows over blocks (and threadIdx.y when ``rows_per_block``
    > 1), ``k`` over ``threads`` threads of threadIdx.x (split: the outer part serial per thread)."""
    A = te.placeholder((N, K), name="A", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    B = te.compute((N,), lambda i: _REDUCERS[kind][0](A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    i = B.op.axis[0]
    if rows_per_block > 1:
        bo, ty = s[B].split(i, factor=rows_per_block)
        s[B].bind(bo, te.thread_axis("blockIdx.x"))
        s[B].bind(ty, te.thread_axis("threadIdx.y"))
    else:
        s[B].bind(i, te.thread_axis("blockIdx.x"))
    if split:
        _, kt = s[B].split(k, factor=threads)
    else:
        assert K == threads
        kt = k
    s[B].bind(kt, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def softmax(M, N, threads, scope="shared"):
    """Stable softmax in one kernel: a block per row; the row max and the row sum are both
    reduced across ``threads`` threads into ``scope`` buffers that every thread then reads."""
    X = te.placeholder((M, N), name="X")
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="row_max")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="row_sum")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
    s = te.create_schedule(out.op)
    s[ex].compute_inline()
    i, j = out.op.axis
    s[out].bind(i, te.thread_axis("blockIdx.x"))
    _, jt = s[out].split(j, factor=threads)
    s[out].bind(jt, te.thread_axis("threadIdx.x"))
    for red in (mx, sm):
        s[red].set_scope(scope)
        s[red].compute_at(s[out], i)
        _, kt = s[red].split(red.op.reduce_axis[0], factor=threads)
        s[red].bind(kt, te.thread_axis("threadIdx.x"))
    return s, [X, out]


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, size=shape).astype(dtype)


ROW_CASES = [  # N, K, threads, kind, dtype, split, rows per block
    (4, 256, 64, "sum", "float32", True, 1),
    (3, 100, 32, "max", "float32", True, 1),   # 100 = 3 x 32 + 4: guarded serial part
    (5, 48, 48, "min", "float32", False, 1),   # 48 threads: a guarded first step
    (4, 70, 16, "sum", "int32", True, 1),
    (4, 33, 8, "max", "int32", True, 1),
    (6, 64, 32, "sum", "float64", True, 2),    # two rows per block on threadIdx.y
    (2, 24, 3, "sum", "float32", True, 1),     # 3 threads
]


@pytest.mark.parametrize("N, K, threads, kind, dtype, split, rows", ROW_CASES)
def test_row_reduction_across_threads_simulated(rng, N, K, threads, kind, dtype, split, rows):
    s, args = row_reduce(N, K, threads, kind, dtype, split, rows)
    gf = gpu_function(s, args)
    (kernel,) = gf.kernels
    (red,) = _shared(kernel)
    assert red.name == "B.red" and red.shape[0].value == threads * rows
    width = 1 << (threads.bit_length() - 1)
    steps = width.bit_length() - 1 + (width < threads)
    assert _syncs(kernel) == 1 + steps
    assert gf.launches[0].block == [threads, rows, 1]
    a = _data(rng, (N, K), dtype)
    b = poisoned((N,), dtype)
    simulate(s, args, [a, b])
    tol = 1e-5 if np.dtype(dtype).kind == "f" else 0
    assert_written(b, _REDUCERS[kind][1](a, axis=1), rtol=tol, atol=tol)


@pytest.mark.parametrize("N, K, threads, kind, dtype, split, rows", ROW_CASES)
def test_row_reduction_across_threads_assembles(N, K, threads, kind, dtype, split, rows):
    s, args = row_reduce(N, K, threads, kind, dtype, split, rows)
    mod = compiler.build(s, args, target="cuda -arch=sm_80")
    ptx = mod.get_source("ptx")
    assert ".shared" in ptx and "bar.sync" in ptx
    assemble(ptx)


def test_lowered_tree_structure():
    s, args = row_reduce(4, 256, 64)
    (kernel,) = gpu_function(s, args).kernels
    text = str(kernel)
    assert "B.red[threadIdx.x] = B.acc[0]" in text
    for step in (32, 16, 8, 4, 2, 1):
        assert f"if threadIdx.x < {step}:" in text
        assert f"B.red[threadIdx.x + {step}]" in text
    assert "if threadIdx.x == 0:" in text and "B[blockIdx.x] = B.red[0]" in text
    assert "for k.outer in range(4)" in text  # the outer part of k stays serial in each thread


@pytest.mark.parametrize("threads, scope", [(32, "shared"), (64, "local"), (32, "local")])
def test_softmax_with_rows_reduced_across_threads(rng, threads, scope):
    M, N = 3, 200
    s, args = softmax(M, N, threads, scope)
    gf = gpu_function(s, args)
    assert len(gf.kernels) == 1 and gf.launches[0].block == [threads, 1, 1]
    (kernel,) = gf.kernels
    trees = sorted(b.name for b in _shared(kernel) if b.name.endswith(".red"))
    assert trees == ["row_max.red", "row_sum.red"]
    x = rng.standard_normal((M, N)).astype("float32")
    y = poisoned((M, N), "float32")
    simulate(s, args, [x, y])
    assert_written(y, _softmax_ref(x), rtol=1e-5, atol=1e-6)
    assemble(compiler.build(s, args, target="cuda -arch=sm_80").get_source("ptx"))


def test_reduction_inside_a_thread_loop_is_an_error():
    A = te.placeholder((32, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    B = te.compute((32,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((32,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    s[B].set_scope("local")
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="'B'.*inside loop 'i', bound to threadIdx.x"):
        compiler.build(s, [A, C], target="cuda -arch=sm_80")


@pytest.mark.cuda
@pytest.mark.parametrize("N, K, threads, kind, dtype, split, rows", ROW_CASES)
def test_row_reduction_across_threads_on_gpu(rng, N, K, threads, kind, dtype, split, rows):
    s, args = row_reduce(N, K, threads, kind, dtype, split, rows)
    mod = compiler.build(s, args, target="cuda")
    a = _data(rng, (N, K), dtype)
    b = poisoned((N,), dtype)
    mod(a, b)
    tol = 1e-5 if np.dtype(dtype).kind == "f" else 0
    assert_written(b, _REDUCERS[kind][1](a, axis=1), rtol=tol, atol=tol)


@pytest.mark.cuda
@pytest.mark.parametrize("threads, scope", [(32, "shared"), (64, "local")])
def test_softmax_across_threads_on_gpu(rng, threads, scope):
    M, N = 64, 1000
    s, args = softmax(M, N, threads, scope)
    mod = compiler.build(s, args, target="cuda")
    x = rng.standard_normal((M, N)).astype("float32")
    y = poisoned((M, N), "float32")
    mod(x, y)
    assert_written(y, _softmax_ref(x), rtol=1e-5, atol=1e-6)


def test_serial_rows_inside_the_thread_loop(rng):
    """Leaves ``k.inner`` (threadIdx.x), then ``i`` (serial): one tree per row, all in one block."""
    N, K = 5, 40
    A = te.placeholder((N, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    B = te.compute((N,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    s[B].reorder(ki, B.op.axis[0], ko)
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    gf = gpu_function(s, [A, B])
    assert gf.launches[0].block == [16, 1, 1] and gf.launches[0].grid == ["1", "1", "1"]
    a, b = rng.standard_normal((N, K)).astype("float32"), poisoned(N, "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    assemble(compiler.build(s, [A, B], target="cuda -arch=sm_80").get_source("ptx"))
