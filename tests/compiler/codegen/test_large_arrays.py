"""Arrays of 2**31 elements or more: 64-bit index arithmetic, or a clear error; never a
kernel that wraps its indices and returns with elements unwritten.

The refusals are checked on np.zeros arrays, which the kernel never touches (their
pages are mapped lazily, so they cost no memory); the slow tests run real kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.errors import RuntimeArgumentError
from compiler.tir import (
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    PrimFunc,
    Var,
    decl_buffer,
    post_order_visit,
)
from compiler.tir.indexing import INT32_INDEX_LIMIT

BIG = 2**31 + 64


def _vadd(*shape, factor: int = 64):
    """int8 C = A + B over ``shape``, its axes fused, split by ``factor`` and vectorized."""
    A = te.placeholder(shape, name="A", dtype="int8")
    B = te.placeholder(shape, name="B", dtype="int8")
    C = te.compute(A.shape, lambda *i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(s[C].fuse(*C.op.axis), factor=factor)
    s[C].vectorize(xi)
    return compiler.build(s, [A, B, C], name="vadd")


def _zeros(n: int) -> np.ndarray:
    """A 64-byte aligned int8 array of zeros, mapped lazily (so it costs no memory untouched)."""
    raw = np.zeros(n + 64, "int8")
    offset = (-raw.ctypes.data) % 64
    return raw[offset:offset + n]


@pytest.mark.parametrize("n", [BIG, 2**32 + 64])
def test_int32_sizes_refuse_sizes_they_would_truncate(n):
    f = _vadd(te.var("n"))  # int32, the default
    with pytest.raises(RuntimeArgumentError, match=r"n = \d+ .*does not fit its dtype int32.*'int64'"):
        f(_zeros(n), _zeros(n), _zeros(n))


def test_int32_sizes_refuse_arrays_their_arithmetic_cannot_index():
    # n fits int32, but a loop split by 64 runs up to 63 past n before its guard: with n near
    # 2**31 that wraps. So int32 sizes stop at INT32_INDEX_LIMIT elements.
    f = _vadd(te.var("n"))
    n = INT32_INDEX_LIMIT
    with pytest.raises(RuntimeArgumentError, match=r"too many for the 32-bit index arithmetic.*n is int32"):
        f(_zeros(n), _zeros(n), _zeros(n))


def test_a_product_of_int32_sizes_is_bounded_too():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A", dtype="int8")
    B = te.compute(A.shape, lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    f = compiler.build(s, [A, B], name="inc")
    a, b = _zeros(2**31).reshape(2**16, 2**15), _zeros(2**31).reshape(2**16, 2**15)
    with pytest.raises(RuntimeArgumentError, match=r"too many for the 32-bit .*m is int32, n is int32"):
        f(a, b)


def test_int32_loop_variables_written_in_the_loop_ir_are_guarded_too():
    n, i = Var("n"), Var("i")
    A, B = (decl_buffer((n,), "int8", x) for x in "AB")
    body = For(i, IntImm(0), n, ForKind.SERIAL, BufferStore(B, BufferLoad(A, (i,), "int8"), (i,)))
    f = compiler.build(PrimFunc((A, B), body, "copy"))
    with pytest.raises(RuntimeArgumentError, match="does not fit its dtype int32"):
        f(_zeros(BIG), _zeros(BIG))


def _loop_dtypes(mod) -> set:
    found = set()
    post_order_visit(next(iter(mod.functions.values())).body,
                     lambda node: found.add(node.loop_var.dtype) if isinstance(node, For) else None)
    return found


def test_constant_shapes_of_2_to_the_31_count_in_int64():
    # Fused, the two axes of a 65536 x 32768 array count to 2**31: in int32 the loop's extent
    # wrapped to a negative number, and the kernel did nothing.
    A = te.placeholder((65536, 32768), name="A", dtype="int8")
    B = te.compute(A.shape, lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    mod = compiler.lower(s, [A, B], name="inc", simple_mode=True)
    loops = []
    post_order_visit(mod["inc"].body, lambda node: loops.append(node) if isinstance(node, For) else None)
    assert [(loop.loop_var.dtype, loop.extent.value) for loop in loops] == [("int64", 2**31)]


def test_small_shapes_keep_int32_loops():
    A = te.placeholder((1024, 1024), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    assert _loop_dtypes(compiler.lower(s, [A, B], simple_mode=True)) == {"int32"}


def _window_check(f, shape: tuple, rng) -> None:
    """Run an int8 add over ``shape`` with random data at the start, before element 2**31 (where
    int32 indices wrap) and after it, and check every element of the poisoned output."""
    n = int(np.prod(shape))
    a, b = _zeros(n), _zeros(n)
    windows = [slice(0, 4096), slice(2**31 - 4096, 2**31), slice(2**31, n)]  # n > 2**31
    for w in windows:
        a[w] = rng.integers(-60, 60, w.stop - w.start, dtype="int8")
        b[w] = rng.integers(-60, 60, w.stop - w.start, dtype="int8")
    c = _zeros(n)
    c.fill(-77)  # a value a + b never takes outside the windows, where it is 0
    f(a.reshape(shape), b.reshape(shape), c.reshape(shape))
    expected_nonzero = 0
    for w in windows:
        np.testing.assert_array_equal(c[w], a[w] + b[w])
        expected_nonzero += np.count_nonzero(a[w] + b[w])
    assert np.count_nonzero(c) == expected_nonzero  # everything outside the windows was written 0


@pytest.mark.slow
def test_an_int8_add_over_2_to_the_31_plus_64_elements_with_an_int64_size(rng):
    _window_check(_vadd(te.var("n", "int64")), (BIG,), rng)


@pytest.mark.slow
def test_an_int8_add_over_a_constant_shape_of_more_than_2_to_the_31_elements(rng):
    shape = (2**16, 2**15 + 1)
    _window_check(_vadd(*shape), shape, rng)
