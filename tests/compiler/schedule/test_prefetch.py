"""``Stage.prefetch``: what it asks the caches for, that the kernels stay right, and its errors."""

import re

import numpy as np
import pytest

import compiler
from compiler import te, tir
from compiler.errors import LoweringError, ScheduleError
from compiler.tir import interpreter
from compiler.tir.builtin import PREFETCH, PREFETCH_SCOPE
from compiler.transform.inject_prefetch import inject_prefetch


def _row_sums(n=64, m=256):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _prefetches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "prefetch(" in line]


def _run(f, arrays, out_shape):
    out = np.full(out_shape, np.nan, dtype="float32")
    f(*arrays, out)
    return out


def test_a_row_is_asked_for_one_iteration_ahead_line_by_line(rng):
    A, B = _row_sums()
    s = te.create_schedule(B.op)
    i = s[B].op.axis[0]
    s[B].prefetch(A, i, 1)
    attrs = s[B].iter_var_attrs[i]
    assert attrs.prefetch_data == (A,) and attrs.prefetch_offset[0].value == 1
    text = str(compiler.lower(s, [A, B], simple_mode=True))
    # The next row: 256 floats from (i + 1) * 256, in 16 lines of 16 floats.
    assert "for prefetch_A_line in range(16):" in text
    (call,) = _prefetches(text)
    assert re.search(r"i \* 256 \+ prefetch_A_line \* 16 \+ 256", call), call
    f = compiler.build(s, [A, B], "llvm")
    assert "@llvm.prefetch" in f.get_source()
    a = rng.uniform(-1, 1, (64, 256)).astype("float32")
    np.testing.assert_allclose(_run(f, [a], (64,)), a.sum(axis=1), rtol=1e-4, atol=1e-5)


def test_the_region_of_a_stage_computed_inside_the_loop_moves_with_it(rng):
    # C is computed at B's outer loop: its loops' bounds follow that loop's variable.
    A = te.placeholder((32, 64), name="A")
    C = te.compute((32, 64), lambda i, j: A[i, j] * 2, name="C")
    B = te.compute((32, 64), lambda i, j: C[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[C].compute_at(s[B], io)
    s[B].prefetch(A, io, 2)
    text = str(compiler.lower(s, [A, B], simple_mode=True))
    # Four whole rows are one run of 256 floats: 16 lines, starting 2 x 4 rows on.
    assert "for prefetch_A_line in range(16):" in text
    (call,) = _prefetches(text)
    assert re.search(r"i.outer \* 256 \+ prefetch_A_line \* 16 \+ 512", call), call
    a = rng.uniform(-1, 1, (32, 64)).astype("float32")
    np.testing.assert_allclose(_run(compiler.build(s, [A, B], "llvm"), [a], (32, 64)), a * 2 + 1, rtol=1e-6)


def test_a_tile_of_a_wider_tensor_is_asked_for_row_by_row(rng):
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] * 3, name="B")
    s = te.create_schedule(B.op)
    io, jo, ii, ji = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 16)
    s[B].prefetch(A, jo, 1)
    text = str(compiler.lower(s, [A, B], simple_mode=True))
    # The next tile: 8 rows of 16 floats, each row's run one line (its loop simplified away).
    assert "for prefetch_A_0 in range(8):" in text and "prefetch_A_line" not in text
    (call,) = _prefetches(text)
    assert "prefetch_A_0 * 64" in call and "j.outer * 16 + 16" in call, call
    a = rng.uniform(-1, 1, (64, 64)).astype("float32")
    np.testing.assert_allclose(_run(compiler.build(s, [A, B], "llvm"), [a], (64, 64)), a * 3, rtol=1e-6)


def test_the_reference_interpreter_runs_past_a_prefetch(rng):
    A, B = _row_sums(8, 32)
    s = te.create_schedule(B.op)
    s[B].prefetch(A, s[B].op.axis[0], 1)
    func = compiler.lower(s, [A, B], simple_mode=True)["main"]
    assert PREFETCH in str(func)
    a = rng.uniform(-1, 1, (8, 32)).astype("float32")
    got = interpreter.run(func, {"A": a, "B": np.full(8, np.nan, "float32")})["B"]
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("offset", [0, -1, 1.5, "1"])
def test_an_offset_that_is_not_a_positive_int_is_refused(offset):
    A, B = _row_sums()
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="prefetch offset must be a positive int"):
        s[B].prefetch(A, s[B].op.axis[0], offset)


def test_a_tensor_the_stage_does_not_read_is_named():
    A, B = _row_sums()
    other = te.placeholder((64, 256), name="Other")
    s = te.create_schedule(B.op)
    s[B].prefetch(other, s[B].op.axis[0], 1)
    with pytest.raises(LoweringError, match="prefetch of tensor 'Other', which the stage does not read"):
        compiler.lower(s, [A, other, B])


def test_a_prefetch_at_a_vectorized_loop_is_refused():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    s[B].prefetch(A, xi, 1)
    with pytest.raises(LoweringError, match="prefetch at the vectorized loop"):
        compiler.lower(s, [A, B])


def test_inside_gpu_threads_the_prefetch_is_dropped():
    a = tir.decl_buffer((64,), "float32", "a")
    b = tir.decl_buffer((64,), "float32", "b")
    tx, k = tir.Var("tx", "int32"), tir.Var("k", "int32")
    load = tir.BufferLoad(a, (tx,), "float32")
    body = tir.AttrStmt(a.data, PREFETCH_SCOPE, tir.const(1), tir.BufferStore(b, load, (tx,)))
    inner = tir.For(k, tir.const(0), tir.const(1), tir.ForKind.SERIAL, body)
    kernel = tir.For(tx, tir.const(0), tir.const(64), tir.ForKind.THREAD_BINDING, inner, "threadIdx.x")
    assert PREFETCH not in str(inject_prefetch(kernel))
    cpu = tir.For(tx, tir.const(0), tir.const(64), tir.ForKind.SERIAL, body)
    assert PREFETCH in str(inject_prefetch(cpu))
