"""TVM's ``reduction`` tutorial (v0.8-v0.12), section by section, with TVM's names mapped to ours:

    tvm.te, tvm.lower, tvm.build, tvm.cuda, tvm.nd -> compiler.te, compiler.lower, compiler.build, ...
    tvm.tir.const                                  -> compiler.tir.const
    tvm.testing.assert_allclose                    -> compiler.testing.assert_allclose

The cross-thread reduction (``rfactor``, the reduction axis bound to ``threadIdx.x``,
``set_store_predicate``) is built for CUDA as the tutorial does; its PTX goes through ptxas and
the tutorial's numerical check (128x128, ``rtol=1e-4``) runs on the GPU simulator, and on a GPU
in the test marked ``cuda``. The other sections only print their lowered code in the tutorial;
here they are also built (for the CPU, or CUDA where the tutorial binds threads) and checked
against numpy, on sizes the split factors do not divide. Outputs start poisoned (NaN) where the
tutorial fills them with ``np.zeros``. Nothing of the tutorial is left out.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import assert_written, poisoned

import compiler as tvm
import compiler.testing
from compiler import te

ROWS, COLS = 37, 50  # the split factors (32 rows, 16 columns) divide neither


def row_sum():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _check_row_sum_on_cpu(s, A, B):
    f = tvm.build(s, [A, B], "llvm")
    a = np.random.uniform(size=(ROWS, COLS)).astype(A.dtype)
    b = poisoned(ROWS, B.dtype)
    f(a, b)
    assert_written(b, np.sum(a, axis=1), rtol=1e-5)


def test_default_and_split_schedules():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    print(tvm.lower(s, [A, B], simple_mode=True))
    _check_row_sum_on_cpu(s, A, B)

    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    print(tvm.lower(s, [A, B], simple_mode=True))
    _check_row_sum_on_cpu(s, A, B)


def rows_on_gpu_threads():
    """The split schedule with the rows of B bound to GPU blocks and threads."""
    A, B = row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    print(tvm.lower(s, [A, B], simple_mode=True))
    return s, [A, B]


def test_rows_bound_to_threads():
    s, args = rows_on_gpu_threads()
    f = tvm.build(s, args, "cuda")
    assemble(f.get_source("ptx"), f.imported_modules[0].arch)
    a = np.random.uniform(size=(ROWS, COLS)).astype("float32")
    b = poisoned(ROWS, "float32")
    simulate(s, args, [a, b])
    assert_written(b, np.sum(a, axis=1), rtol=1e-5)


def test_rfactor():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    print(tvm.lower(s, [A, B], simple_mode=True))
    print(s[B].op.body)
    assert BF.op.name == "B.rf" and BF.ndim == 2  # the factored axis comes first: (16, n)
    assert "B.rf" in str(s[B].op.body)  # B is now the sum of B.rf over its first axis
    _check_row_sum_on_cpu(s, A, B)


def cross_thread_reduction():
    """The tutorial's cross-thread reduction, up to its build."""
    A, B = row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    return s, [A, B]


def test_cross_thread_reduction_builds_for_cuda():
    s, args = cross_thread_reduction()
    fcuda = tvm.build(s, args, "cuda")
    print(fcuda.imported_modules[0].get_source())
    assemble(fcuda.get_source("ptx"), fcuda.imported_modules[0].arch)


def test_cross_thread_reduction_check_on_the_simulator():
    s, args = cross_thread_reduction()
    nn = 128
    a = np.random.uniform(size=(nn, nn)).astype("float32")
    b = poisoned(nn, "float32")
    simulate(s, args, [a, b])
    compiler.testing.assert_allclose(b, np.sum(a, axis=1), rtol=1e-4)


@pytest.mark.cuda
def test_cross_thread_reduction_runs_on_a_gpu():
    s, args = cross_thread_reduction()
    fcuda = tvm.build(s, args, "cuda")
    nn = 128
    dev = tvm.cuda(0)
    a = tvm.nd.array(np.random.uniform(size=(nn, nn)).astype("float32"), dev)
    b = tvm.nd.array(poisoned(nn, "float32"), dev)
    fcuda(a, b)
    compiler.testing.assert_allclose(b.numpy(), np.sum(a.numpy(), axis=1), rtol=1e-4)


def test_convolution_as_a_2d_reduction():
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute(
        (n - 2, n - 2),
        lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
        name="Output",
    )
    s = te.create_schedule(Output.op)
    print(tvm.lower(s, [Input, Filter, Output], simple_mode=True))
    f = tvm.build(s, [Input, Filter, Output], "llvm")
    size = 11
    x = np.random.uniform(size=(size, size)).astype("float32")
    w = np.random.uniform(size=(3, 3)).astype("float32")
    out = poisoned((size - 2, size - 2), "float32")
    f(x, w, out)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3))
    assert_written(out, np.einsum("ijkl,kl->ij", windows, w), rtol=1e-5)


def test_custom_commutative_reduction():
    n = te.var("n")
    m = te.var("m")
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t), name="product")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    print(tvm.lower(s, [A, B], simple_mode=True))
    f = tvm.build(s, [A, B], "llvm")
    a = np.random.uniform(0.5, 1.5, size=(ROWS, 9)).astype("float32")
    b = poisoned(ROWS, "float32")
    f(a, b)
    assert_written(b, np.prod(a, axis=1), rtol=1e-5)
