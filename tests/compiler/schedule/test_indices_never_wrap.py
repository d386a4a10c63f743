"""Index arithmetic that cannot wrap, in the corners the schedule primitives reach:
casts to 64 bits of unbounded sizes, cache_read copies of big tensors, fused reduction
axes. The loops are checked in the lowered IR (running 2**31 iterations would be slow);
small versions of the same schedules run against numpy."""

from __future__ import annotations

import numpy as np
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.arith import Analyzer
from compiler.tir import stmt as S
from compiler.tir.analysis import collect
from compiler.tir.expr import Cast, Var


def _loops(func) -> dict:
    """``{loop variable name: (dtype, extent)}`` of a lowered function."""
    return {f.loop_var.name: (f.loop_var.dtype, f.extent)
            for f in collect(func.body, lambda n: isinstance(n, S.For))}


def test_a_64_bit_cast_of_an_unbounded_value_stays_unbounded():
    m = Var("m", "int32")
    assert Analyzer().const_int_bound(Cast("int64", m)) == (None, None)
    assert Analyzer().const_int_bound(Cast("int32", Var("n", "int64")))[1] == 2**31 - 1


def test_a_buffer_over_mixed_int64_and_int32_sizes_is_sized_by_them(rng):
    n, m = te.var("n", "int64"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    func = compiler.lower(s, [A, C])["main"]
    (alloc,) = collect(func.body, lambda x: isinstance(x, S.Allocate))
    assert "m" in str(alloc.buffer.shape[0])  # not a constant bound such as 2**63
    a = random_array(rng, (3, 5), "float32")
    c = poisoned((3, 5), "float32")
    compiler.build(s, [A, C], target="llvm")(a, c)
    assert_written(c, (a + 1) * 2)


def _cache_read_copy(shape):
    A = te.placeholder(shape, name="A", dtype="int8")
    B = te.compute(A.shape, lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "global", [B])
    s[AA].fuse(*s[AA].op.axis)
    return s, [A, B]


def test_cache_read_of_a_big_constant_shape_counts_in_int64():
    s, args = _cache_read_copy((2**16, 2**15))
    dtype, extent = _loops(compiler.lower(s, args, simple_mode=True)["main"])["ax0.ax1.fused"]
    assert dtype == "int64" and extent.value == 2**31


def test_cache_read_of_a_small_shape_keeps_int32_and_computes(rng):
    s, args = _cache_read_copy((6, 7))
    dtype, _ = _loops(compiler.lower(s, args, simple_mode=True)["main"])["ax0.ax1.fused"]
    assert dtype == "int32"
    a = random_array(rng, (6, 7), "int8")
    b = poisoned((6, 7), "int8")
    compiler.build(s, args, target="llvm")(a, b)
    assert_written(b, a + np.int8(1))


def _fused_sum(rows, cols):
    A = te.placeholder((rows, cols), name="A", dtype="int8")
    k1, k2 = te.reduce_axis((0, rows), "k1"), te.reduce_axis((0, cols), "k2")
    B = te.compute((1,), lambda i: te.sum(A[k1, k2].astype("int32"), axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(k1, k2)
    return s, [A, B]


def test_fused_reduction_axes_of_2_to_the_31_points_count_in_int64():
    s, args = _fused_sum(2**16, 2**15)
    dtype, extent = _loops(compiler.lower(s, args, simple_mode=True)["main"])["k1.k2.fused"]
    assert dtype == "int64" and extent.value == 2**31


def test_fused_split_reduction_axes_count_in_int64():
    A = te.placeholder((2**16, 2**15), name="A", dtype="int8")
    k1, k2 = te.reduce_axis((0, 2**16), "k1"), te.reduce_axis((0, 2**15), "k2")
    B = te.compute((1,), lambda i: te.sum(A[k1, k2].astype("int32"), axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    k1o, k1i = s[B].split(k1, nparts=2)
    s[B].reorder(k1o, k1i, k2)
    fused = s[B].fuse(k1i, k2)
    assert fused.var.dtype == "int64"
    dtype, extent = _loops(compiler.lower(s, [A, B], simple_mode=True)["main"])[fused.var.name]
    assert dtype == "int64" and extent.value == 2**30


def test_fused_small_reduction_axes_keep_int32_and_compute(rng):
    s, args = _fused_sum(6, 7)
    dtype, _ = _loops(compiler.lower(s, args, simple_mode=True)["main"])["k1.k2.fused"]
    assert dtype == "int32"
    a = random_array(rng, (6, 7), "int8")
    b = poisoned((1,), "int32")
    compiler.build(s, args, target="llvm")(a, b)
    assert_written(b, np.array([a.astype("int32").sum()], "int32"))
