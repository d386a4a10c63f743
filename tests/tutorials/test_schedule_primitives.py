"""TVM's ``schedule_primitives`` tutorial (v0.8-v0.12), primitive by primitive, with TVM's names
mapped to ours (``tvm.te``, ``tvm.lower`` -> ``compiler.te``, ``compiler.lower``).

The tutorial only prints each lowered schedule; here each is also built and checked against numpy
on sizes its split factors do not divide (its ``m`` and ``n`` are symbolic), every output
poisoned first. The ``bind`` section is built for CUDA, its PTX goes through ptxas and its check
runs on the GPU simulator. ``compute_inline`` of ``B``, which is also an argument, leaves ``B``
unwritten, as in TVM. Nothing of the tutorial is left out.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import assert_written, poisoned, random_array

import compiler as tvm
from compiler import te

SIZE_M, SIZE_N = 37, 23  # not multiples of the tutorial's factors (32, 10, 5)


def test_default_schedule(rng):
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((m, n), name="A")
    B = te.placeholder((m, n), name="B")
    C = te.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
    s = te.create_schedule([C.op])
    print(tvm.lower(s, [A, B, C], simple_mode=True))
    f = tvm.build(s, [A, B, C], "llvm")
    a, b = (random_array(rng, (SIZE_M, SIZE_N), "float32") for _ in range(2))
    c = poisoned((SIZE_M, SIZE_N), "float32")
    f(a, b, c)
    assert_written(c, a * b)


def _copy_1d(fcompute):
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: fcompute(A[i]), name="B")
    return A, B


def _check_1d(s, A, B, expected, rng):
    print(tvm.lower(s, [A, B], simple_mode=True))
    f = tvm.build(s, [A, B], "llvm")
    a = random_array(rng, SIZE_M, "float32")
    b = poisoned(SIZE_M, "float32")
    f(a, b)
    assert_written(b, expected(a))


def test_split_by_factor(rng):
    A, B = _copy_1d(lambda x: x * 2)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    _check_1d(s, A, B, lambda a: a * 2, rng)


def test_split_by_nparts(rng):
    A, B = _copy_1d(lambda x: x)
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], nparts=32)
    _check_1d(s, A, B, lambda a: a, rng)


def _copy_2d():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j], name="B")
    return A, B


def _check_2d(s, A, B, rng):
    print(tvm.lower(s, [A, B], simple_mode=True))
    f = tvm.build(s, [A, B], "llvm")
    a = random_array(rng, (SIZE_M, SIZE_N), "float32")
    b = poisoned((SIZE_M, SIZE_N), "float32")
    f(a, b)
    assert_written(b, a)


def test_tile(rng):
    A, B = _copy_2d()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    _check_2d(s, A, B, rng)


def test_fuse(rng):
    A, B = _copy_2d()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    fused = s[B].fuse(xi, yi)
    assert f"for {fused.var.name} " in str(tvm.lower(s, [A, B], simple_mode=True))
    assert fused.var.name == "i.inner.j.inner.fused"
    _check_2d(s, A, B, rng)


def test_reorder(rng):
    A, B = _copy_2d()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].reorder(xi, yo, xo, yi)
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    loops = [name for name in ("i.inner", "j.outer", "i.outer", "j.inner") if f"for {name} " in text]
    assert sorted(loops, key=lambda name: text.index(f"for {name} ")) == ["i.inner", "j.outer", "i.outer",
                                                                           "j.inner"]
    _check_2d(s, A, B, rng)


def _bind_schedule():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    print(tvm.lower(s, [A, B], simple_mode=True))
    return s, [A, B]


def test_bind_builds_for_cuda():
    s, args = _bind_schedule()
    f = tvm.build(s, args, "cuda")
    assemble(f.get_source("ptx"), f.imported_modules[0].arch)


def test_bind_check_on_the_simulator(rng):
    s, args = _bind_schedule()
    a = random_array(rng, 150, "float32")
    b = poisoned(150, "float32")
    simulate(s, args, [a, b])
    assert_written(b, a * 2)


def _chain():
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    return A, B, C


def _run_chain(s, A, B, C, rng):
    print(tvm.lower(s, [A, B, C], simple_mode=True))
    f = tvm.build(s, [A, B, C], "llvm")
    a = random_array(rng, SIZE_M, "float32")
    b = poisoned(SIZE_M, "float32")
    c = poisoned(SIZE_M, "float32")
    f(a, b, c)
    assert_written(c, (a + 1) * 2)
    return a, b


@pytest.mark.parametrize("where", ["root", "compute_at", "compute_at then compute_root"])
def test_compute_at_and_compute_root(rng, where):
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    if where != "root":
        s[B].compute_at(s[C], C.op.axis[0])
    if where == "compute_at then compute_root":
        s[B].compute_root()
    a, b = _run_chain(s, A, B, C, rng)
    assert_written(b, a + 1)


def test_compute_inline(rng):
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    assert "B[" not in str(tvm.lower(s, [A, B, C], simple_mode=True))  # no store to B, no load
    _, b = _run_chain(s, A, B, C, rng)
    assert np.isnan(b).all()  # B is inlined into C: its buffer is left unwritten, as in TVM
