"""TVM's TE idioms, as its tutorials write them, run here unchanged but for the imports.

Each kernel runs against numpy on random data, into outputs poisoned with NaN or a
sentinel so that unwritten elements fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.errors import CompilerError
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
