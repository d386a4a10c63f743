"""TVM's TE idioms, as its tutorials write them, run here unchanged but for the imports.

Each kernel runs against numpy on random data, into outputs poisoned with NaN or a
sentinel so that unwritten elements fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import bind_cross_thread_rfactor, build_ptx, simulate
from helpers import SENTINEL, assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.errors import CompilerError, ScheduleError
from compiler.topi.utils import get_const_int, get_const_tuple


def test_float_shape_entries_are_cast_as_in_the_gemm_tutorial(rng):
    """opt_gemm packs B with ``(N / bn, K, bn)``: Python 3 makes the first entry a float."""
    M = N = K = 64
    bn = 16
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    packedB = te.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * packedB[y // bn, k, y % bn], axis=k),
                   name="C")
    assert get_const_tuple(packedB.shape) == (4, 64, 16)
    s = te.create_schedule(C.op)
    f = compiler.build(s, [A, B, C], target="llvm", name="mmult")
    a, b = random_array(rng, (M, K), "float32"), random_array(rng, (K, N), "float32")
    c = poisoned((M, N), "float32")
    f(a, b, c)
    assert_written(c, a @ b, rtol=1e-5, atol=1e-4)


def test_a_float_shape_entry_that_is_not_integral_is_refused():
    with pytest.raises(CompilerError, match="integers"):
        te.placeholder((4.5, 2), name="A")


def test_int_of_a_constant_expression():
    A = te.placeholder((8, 16), name="A")
    assert int(A.shape[0]) == 8
    assert int(A.shape[0] * 2 + A.shape[1]) == 32
    assert list(range(A.shape[0])) == list(range(8))
    assert np.zeros(A.shape).shape == (8, 16)


def test_int_of_a_symbolic_expression_says_why_it_has_no_value():
    n = te.var("n")
    with pytest.raises(TypeError, match="constant"):
        int(n * 2)


def test_get_const_tuple_keeps_symbolic_entries():
    n = te.var("n")
    A = te.placeholder((n, 4 * 2, n + 0), name="A")
    dims = get_const_tuple(A.shape)
    assert dims[0] is n and dims[1] == 8 and isinstance(dims[1], int)
    assert get_const_int(A.shape[1] + 1) == 9
    with pytest.raises(ValueError, match="constant"):
        get_const_int(n)


# ----------------------------------------------------------------------------- symbolic extents


def _row_sum(n, m):
    """The reduction tutorial's row sum over symbolic sizes."""
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _check_row_sum(f, rng, sizes=((3, 1), (5, 16), (7, 37))):
    for rows, cols in sizes:
        a = random_array(rng, (rows, cols), "float32")
        b = poisoned((rows,), "float32")
        f(a, b)
        assert_written(b, a.sum(axis=1), rtol=1e-5, atol=1e-5, err_msg=f"{rows}x{cols}")


def test_split_by_nparts_over_a_symbolic_extent(rng):
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], nparts=32)
    f = compiler.build(s, [A, B], target="llvm")
    for size in (1, 31, 32, 100):
        a = random_array(rng, (size,), "float32")
        b = poisoned((size,), "float32")
        f(a, b)
        assert_written(b, a * 2, err_msg=f"m={size}")


@pytest.mark.parametrize("part", ["inner", "outer", "nparts"])
def test_rfactor_over_a_symbolic_reduction_extent(rng, part):
    n, m = te.var("n"), te.var("m")
    A, B = _row_sum(n, m)
    s = te.create_schedule(B.op)
    if part == "nparts":
        ko, ki = s[B].split(B.op.reduce_axis[0], nparts=4)
    else:
        ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki if part == "inner" else ko)
    assert BF.ndim == 2
    _check_row_sum(compiler.build(s, [A, B], target="llvm"), rng)


def test_the_reduction_tutorials_cross_thread_rfactor_over_symbolic_sizes(rng):
    """reduction.py: rfactor over a te.var extent, the factored axis bound to threadIdx.x,
    the partial sums computed at it, one thread storing each row's sum."""
    n, m = te.var("n"), te.var("m")
    A, B = _row_sum(n, m)
    s = te.create_schedule(B.op)
    _, tx = bind_cross_thread_rfactor(s, B)
    s[B].set_store_predicate(tx.var.equal(0))
    a = random_array(rng, (40, 37), "float32")
    b = poisoned((40,), "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    build_ptx(s, [A, B])


# ----------------------------------------------------------------------------- set_store_predicate


def test_store_predicate_on_the_cpu_stores_only_where_it_holds(rng):
    A = te.placeholder((16,), name="A", dtype="int32")
    B = te.compute((16,), lambda i: A[i] * 3, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].set_store_predicate(te.all(xi < 3, B.op.axis[0] > 1))
    f = compiler.build(s, [A, B], target="llvm")
    a = random_array(rng, (16,), "int32")
    b = poisoned((16,), "int32")
    f(a, b)
    i = np.arange(16)
    keep = (i % 4 < 3) & (i > 1)
    assert_written(b, np.where(keep, a * 3, b.dtype.type(SENTINEL)))
    assert (~keep).any()


def test_store_predicate_of_a_reduction_guards_its_initial_value_and_updates(rng):
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    B = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].set_store_predicate(B.op.axis[0] % 2 == 0)
    a = random_array(rng, (6, 5), "float32")
    b = np.full((6,), 7.5, "float32")
    compiler.build(s, [A, B], target="llvm")(a, b)
    np.testing.assert_allclose(b, np.where(np.arange(6) % 2 == 0, a.sum(axis=1), 7.5), rtol=1e-5)


def test_store_predicate_over_a_thread_axis_on_the_gpu(rng):
    """The thread axis in the predicate stands for the loop bound to it."""
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, xi = s[B].split(B.op.axis[0], factor=16)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, tx)
    s[B].set_store_predicate(tx.var < 5)
    a = random_array(rng, (64,), "float32")
    b = np.full((64,), -3.0, "float32")
    simulate(s, [A, B], [a, b])
    np.testing.assert_array_equal(b, np.where(np.arange(64) % 16 < 5, a + 1, -3.0).astype("float32"))
    build_ptx(s, [A, B])


def test_a_store_predicate_must_be_boolean_and_not_use_reduction_axes():
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    B = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="boolean"):
        s[B].set_store_predicate(B.op.axis[0] + 1)
    s[B].set_store_predicate(k < 3)
    with pytest.raises(ScheduleError, match="reduction axis 'k'"):
        compiler.lower(s, [A, B])


def _add_then_scale():
    """``C = (A + 1) * 2`` in two stages, and its schedule."""
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((64,), lambda i: B[i] * 2.0, name="C")
    return te.create_schedule(C.op), A, B, C


def test_a_store_predicate_over_an_unbound_thread_axis_is_refused():
    s, A, B, C = _add_then_scale()
    tx = te.thread_axis("threadIdx.x")
    for T in (B, C):
        bx, xi = s[T].split(T.op.axis[0], factor=16)
        s[T].bind(bx, te.thread_axis("blockIdx.x"))
        if T is C:
            s[T].bind(xi, tx)
    s[B].set_store_predicate(tx.var.equal(0))
    with pytest.raises(ScheduleError, match="no loop around the stage is bound to threadIdx.x"):
        compiler.lower(s, [A, C])


# ----------------------------------------------------------------------------- compute_inline


def _inlined_argument():
    s, A, B, C = _add_then_scale()
    s[B].compute_inline()
    return s, A, B, C


def test_an_inlined_argument_is_left_unwritten_on_the_cpu(rng):
    s, A, B, C = _inlined_argument()
    f = compiler.build(s, [A, B, C], target="llvm")
    a = random_array(rng, (64,), "float32")
    b, c = np.full((64,), 5.0, "float32"), poisoned((64,), "float32")
    f(a, b, c)
    assert_written(c, (a + 1) * 2, rtol=1e-6)
    np.testing.assert_array_equal(b, np.full((64,), 5.0, "float32"))


def test_an_inlined_argument_is_left_unwritten_on_the_gpu(rng):
    s, A, B, C = _inlined_argument()
    bx, tx = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    a = random_array(rng, (64,), "float32")
    b, c = np.full((64,), 5.0, "float32"), poisoned((64,), "float32")
    simulate(s, [A, B, C], [a, b, c])
    assert_written(c, (a + 1) * 2, rtol=1e-6)
    np.testing.assert_array_equal(b, np.full((64,), 5.0, "float32"))
    build_ptx(s, [A, B, C])


# ----------------------------------------------------------------------------- schedule_primitives


def _elementwise_2d():
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B, te.create_schedule(B.op)


def _tile(s, B):
    return s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)


def _split_factor(s, B):
    s[B].split(B.op.axis[0], factor=32)


def _split_nparts(s, B):
    s[B].split(B.op.axis[0], nparts=32)


def _tile_fuse(s, B):
    xo, yo, xi, yi = _tile(s, B)
    s[B].fuse(xi, yi)


def _tile_reorder(s, B):
    xo, yo, xi, yi = _tile(s, B)
    s[B].reorder(xi, yo, xo, yi)


@pytest.mark.parametrize("primitive", [_split_factor, _split_nparts, _tile, _tile_fuse, _tile_reorder])
def test_schedule_primitives_tutorial_over_symbolic_sizes(rng, primitive):
    A, B, s = _elementwise_2d()
    primitive(s, B)
    f = compiler.build(s, [A, B], target="llvm")
    for shape in ((1, 1), (13, 7), (40, 33)):
        a = random_array(rng, shape, "float32")
        b = poisoned(shape, "float32")
        f(a, b)
        assert_written(b, a * 2, err_msg=f"{shape}")


@pytest.mark.parametrize("placement", ["root", "compute_at", "compute_inline", "compute_root"])
def test_schedule_primitives_tutorial_placements(rng, placement):
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    s = te.create_schedule(C.op)
    if placement in ("compute_at", "compute_root"):
        s[B].compute_at(s[C], C.op.axis[0])
    if placement == "compute_root":
        s[B].compute_root()
    if placement == "compute_inline":
        s[B].compute_inline()
    f = compiler.build(s, [A, B, C], target="llvm")
    a = random_array(rng, (37,), "float32")
    b, c = poisoned((37,), "float32"), poisoned((37,), "float32")
    f(a, b, c)
    assert_written(c, (a + 1) * 2)
    if placement == "compute_inline":
        assert np.isnan(b).all()  # the inlined argument is left as it was passed
    else:
        assert_written(b, a + 1)


def test_tir_holds_if_then_else_all_and_any_as_tvm_does(rng):
    from compiler import tir

    assert te.if_then_else is tir.if_then_else and te.all is tir.all and te.any is tir.any
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: tir.if_then_else(tir.all(i >= 2, i < 6), A[i],
                                                    tir.if_then_else(tir.any(i == 0, i == 7), A[i] * 2.0,
                                                                     tir.const(-1.0, "float32"))),
                   name="B")
    f = compiler.build(te.create_schedule(B.op), [A, B], target="llvm")
    a = random_array(rng, 8, "float32")
    b = poisoned(8, "float32")
    f(a, b)
    want = np.where((np.arange(8) >= 2) & (np.arange(8) < 6), a,
                    np.where((np.arange(8) == 0) | (np.arange(8) == 7), a * 2, -1)).astype("float32")
    assert_written(b, want)
