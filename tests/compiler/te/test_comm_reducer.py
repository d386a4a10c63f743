"""``te.comm_reducer`` (reductions of your own, tuple reductions) and multi-output
``te.compute``, in the style of TVM's ``reduction`` and ``tuple_inputs`` tutorials.

Every kernel runs against numpy on random data into poisoned outputs: on the CPU, and
for the schedules that bind threads on the GPU simulator, with the PTX assembled.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import build_ptx, simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.errors import CompilerError


def _prod():
    return te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, dtype=t), name="prod")


def _argmax():
    """tuple_inputs.py, as written there: the index and value of the largest value."""
    def fcombine(x, y):
        lhs = tir.Select((x[1] >= y[1]), x[0], y[0])
        rhs = tir.Select((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def _row_product(n, m):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: _prod()(A[i, k], axis=k), name="B")
    return A, B


def _product_data(rng, rows, cols):
    # Values near 1 so that the product stays well inside float32's range.
    return rng.uniform(0.8, 1.25, size=(rows, cols)).astype("float32")


def test_a_product_reduction(rng):
    n, m = te.var("n"), te.var("m")
    A, B = _row_product(n, m)
    s = te.create_schedule(B.op)
    f = compiler.build(s, [A, B], target="llvm")
    a = _product_data(rng, 5, 13)
    b = poisoned((5,), "float32")
    f(a, b)
    assert_written(b, a.prod(axis=1), rtol=1e-5)


def test_a_product_reduction_with_a_condition(rng):
    A = te.placeholder((4, 10), name="A", dtype="int64")
    k = te.reduce_axis((0, 10), "k")
    B = te.compute((4,), lambda i: _prod()(A[i, k], axis=k, where=k % 3 == 0), name="B")
    s = te.create_schedule(B.op)
    a = random_array(rng, (4, 10), "int64")
    b = poisoned((4,), "int64")
    compiler.build(s, [A, B], target="llvm")(a, b)
    assert_written(b, a[:, ::3].prod(axis=1))


@pytest.mark.parametrize("part", ["inner", "outer"])
def test_rfactor_of_a_product(rng, part):
    n, m = te.var("n"), te.var("m")
    A, B = _row_product(n, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=4)
    s.rfactor(B, ki if part == "inner" else ko)
    f = compiler.build(s, [A, B], target="llvm")
    for rows, cols in ((3, 1), (5, 13)):
        a = _product_data(rng, rows, cols)
        b = poisoned((rows,), "float32")
        f(a, b)
        assert_written(b, a.prod(axis=1), rtol=1e-5)


def test_a_product_across_threads(rng):
    A, B = _row_product(8, 37)
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    s[B].bind(ki, tx)
    a = _product_data(rng, 8, 37)
    b = poisoned((8,), "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a.prod(axis=1), rtol=1e-5)
    build_ptx(s, [A, B])


def test_combining_values_directly():
    prod = _prod()
    x = te.var("x", "float32")
    assert str(prod(x, 2.0)) == str(x * 2.0)


# ----------------------------------------------------------------------------- tuple reductions


def _argmax_compute(m, n):
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: _argmax()((idx[i, k], val[i, k]), axis=k), name="T")
    return idx, val, T0, T1


def _argmax_data(rng, rows, cols):
    """Distinct values in each row (no ties), and their column indices."""
    val = np.stack([rng.permutation(cols) - cols // 2 for _ in range(rows)]).astype("int32")
    return np.tile(np.arange(cols, dtype="int32"), (rows, 1)), val


def _check_argmax(run, rng, rows, cols):
    idx, val = _argmax_data(rng, rows, cols)
    t0, t1 = poisoned((rows,), "int32"), poisoned((rows,), "int32")
    run(idx, val, t0, t1)
    assert_written(t0, val.argmax(axis=1).astype("int32"))
    assert_written(t1, val.max(axis=1))


def test_argmax_over_index_and_value(rng):
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1 = _argmax_compute(m, n)
    assert (T0.name, T1.name) == ("T.v0", "T.v1")
    s = te.create_schedule(T0.op)
    assert s[T0] is s[T1]
    f = compiler.build(s, [idx, val, T0, T1], target="llvm")
    _check_argmax(f, rng, 6, 11)


def test_rfactor_of_an_argmax(rng):
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1 = _argmax_compute(m, n)
    s = te.create_schedule(T0.op)
    ko, ki = s[T0].split(T0.op.reduce_axis[0], factor=4)
    rf = s.rfactor(T0, ki)
    assert len(rf) == 2
    f = compiler.build(s, [idx, val, T0, T1], target="llvm")
    _check_argmax(f, rng, 6, 11)


def test_an_argmax_across_threads(rng):
    idx, val, T0, T1 = _argmax_compute(8, 45)
    s = te.create_schedule(T0.op)
    s[T0].bind(T0.op.axis[0], te.thread_axis("blockIdx.x"))
    ko, ki = s[T0].split(T0.op.reduce_axis[0], factor=16)
    s[T0].bind(ki, te.thread_axis("threadIdx.x"))
    args = [idx, val, T0, T1]
    _check_argmax(lambda *arrays: simulate(s, args, list(arrays)), rng, 8, 45)
    build_ptx(s, args)


def test_a_tuple_reduction_must_give_all_its_outputs():
    idx = te.placeholder((4, 5), name="idx", dtype="int32")
    val = te.placeholder((4, 5), name="val", dtype="int32")
    k = te.reduce_axis((0, 5), "k")
    with pytest.raises(CompilerError, match="tuple reduction"):
        te.compute((4,), lambda i: _argmax()((idx[i, k], val[i, k]), axis=k)[0], name="T")


def test_a_reducer_whose_identity_does_not_match_is_refused():
    bad = te.comm_reducer(lambda x, y: x + y, lambda t: (te.const(0, t), te.const(0, t)), name="bad")
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    with pytest.raises(TypeError, match="fidentity returned 2 values"):
        bad(A[0, k], axis=k)


# ----------------------------------------------------------------------------- multi-output compute


def test_multi_output_compute(rng):
    """tuple_inputs.py: two outputs computed in one loop nest."""
    m, n = te.var("m"), te.var("n")
    A0 = te.placeholder((m, n), name="A0")
    A1 = te.placeholder((m, n), name="A1")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    s = te.create_schedule(B0.op)
    text = str(compiler.lower(s, [A0, A1, B0, B1], simple_mode=True))
    assert text.count("for ") == 2  # one nest stores both
    f = compiler.build(s, [A0, A1, B0, B1], target="llvm")
    a0, a1 = random_array(rng, (3, 5), "float32"), random_array(rng, (3, 5), "float32")
    b0, b1 = poisoned((3, 5), "float32"), poisoned((3, 5), "float32")
    f(a0, a1, b0, b1)
    assert_written(b0, a0 + 2)
    assert_written(b1, a1 * 3)


def test_multi_output_stage_computed_at_its_reader(rng):
    """tuple_inputs.py: only B0 is read, at C's rows; B1 is computed with it."""
    m, n = te.var("m"), te.var("n")
    A0 = te.placeholder((m, n), name="A0")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = te.placeholder((m, n), name="A1")
    C = te.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    f = compiler.build(s, [A0, A1, C], target="llvm")
    a0, a1 = random_array(rng, (4, 6), "float32"), random_array(rng, (4, 6), "float32")
    c = poisoned((4, 6), "float32")
    f(a0, a1, c)
    assert_written(c, a1 + (a0 + 2))


def test_multi_output_compute_on_the_gpu_with_cache_write_and_inlining(rng):
    A = te.placeholder((64,), name="A")
    B0, B1 = te.compute((64,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="B")
    C0, C1 = te.compute((64,), lambda i: (B0[i] * B1[i], B0[i] - B1[i]), name="C")
    s = te.create_schedule(C0.op)
    s[B0].compute_inline()
    L0, L1 = s.cache_write([C0, C1], "local")
    bx, tx = s[C0].split(C0.op.axis[0], factor=16)
    s[C0].bind(bx, te.thread_axis("blockIdx.x"))
    s[C0].bind(tx, te.thread_axis("threadIdx.x"))
    s[L0].compute_at(s[C0], tx)
    a = random_array(rng, (64,), "float32")
    c0, c1 = poisoned((64,), "float32"), poisoned((64,), "float32")
    args = [A, C0, C1]
    simulate(s, args, [a, c0, c1])
    assert_written(c0, (a + 1) * (a * 2), rtol=1e-6)
    assert_written(c1, (a + 1) - (a * 2), rtol=1e-6)
    build_ptx(s, args)


def test_cache_read_of_one_output(rng):
    A = te.placeholder((8, 8), name="A")
    B0, B1 = te.compute((8, 8), lambda i, j: (A[i, j] + 1.0, A[i, j] * 2.0), name="B")
    C = te.compute((8, 8), lambda i, j: B0[i, j] + B1[j, i], name="C")
    s = te.create_schedule(C.op)
    BL = s.cache_read(B1, "global", [C])
    s[BL].compute_at(s[C], C.op.axis[0])
    f = compiler.build(s, [A, C], target="llvm")
    a = random_array(rng, (8, 8), "float32")
    c = poisoned((8, 8), "float32")
    f(a, c)
    assert_written(c, (a + 1) + (a * 2).T)


@pytest.mark.parametrize("fcombine,fidentity,role", [
    (None, lambda t: te.const(1, t), "fcombine"),
    (lambda x, y: x * y, 5, "fidentity"),
])
def test_a_reducer_needs_two_functions(fcombine, fidentity, role):
    with pytest.raises(TypeError, match=f"{role} must be a function"):
        te.comm_reducer(fcombine, fidentity, name="prod")
