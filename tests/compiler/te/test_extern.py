"""``te.extern``: stages computed by registered Python functions (``call_packed``), C functions
(``call_extern``) and BLAS (``contrib.cblas``), mixed with scheduled stages."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.contrib import cblas
from compiler.errors import CompilerError, LoweringError, ScheduleError
from compiler.runtime.ndarray import NDArray
from compiler.tir import call_packed


@pytest.fixture
def registered():
    """Register Python functions for one test: ``registered(name, f)``; removed afterwards."""
    names = []

    def register(name, f):
        compiler.register_func(name, f)
        names.append(name)
        return f

    yield register
    for name in names:
        compiler.runtime.packed.remove_global_func(name)


def add_one_extern(A, func_name):
    return te.extern(A.shape, [A], lambda ins, outs: call_packed(func_name, ins[0], outs[0]), name="C")


def test_packed_function_gets_views_and_scalars(rng, registered):
    seen = {}

    def fill(x, y, k, scale, flag, label):
        seen.update(types=(type(x), type(y)), scalars=(k, scale, flag, label), shape=x.shape)
        y.host_array[...] = x.numpy() * scale + k  # in place, through the view

    registered("test.extern.fill", fill)
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    C = te.extern((n, 3), [A], lambda ins, outs: call_packed("test.extern.fill", ins[0], outs[0], n + 1,
                                                              2.5, True, "tag"), name="C")
    f = compiler.build(te.create_schedule(C.op), [A, C])
    a = random_array(rng, (5, 3), "float32")
    c = poisoned((5, 3), "float32")
    f(a, c)
    assert_written(c, a * np.float32(2.5) + 6)
    assert seen == {"types": (NDArray, NDArray), "scalars": (6, 2.5, True, "tag"), "shape": (5, 3)}


def test_extern_between_scheduled_stages(rng, registered):
    registered("test.extern.copyto", lambda x, y: compiler.nd.array(x.numpy() + 1).copyto(y))
    A = te.placeholder((40,), name="A", dtype="float64")
    P = te.compute(A.shape, lambda i: A[i] * 2, name="P")
    C = add_one_extern(P, "test.extern.copyto")
    D = te.compute(C.shape, lambda i: C[i] - 3, name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], factor=8)
    s[D].vectorize(xi)
    text = str(compiler.lower(s, [A, D]))
    assert "allocate P" in text and "allocate C" in text
    f = compiler.build(s, [A, D])
    a = random_array(rng, 40, "float64")
    d = poisoned(40, "float64")
    f(a, d)
    assert_written(d, a * 2 + 1 - 3)


def test_extern_with_two_outputs(rng, registered):
    def split(x, lo, hi):
        lo.copyfrom(np.minimum(x.numpy(), 0))
        hi.copyfrom(np.maximum(x.numpy(), 0))

    registered("test.extern.split", split)
    A = te.placeholder((6,), name="A", dtype="int32")
    lo, hi = te.extern([(6,), (6,)], [A], lambda ins, outs: call_packed("test.extern.split", ins[0], *outs),
                       name="parts")
    assert (lo.name, hi.name) == ("parts.v0", "parts.v1")
    f = compiler.build(te.create_schedule(lo.op), [A, lo, hi])
    assert f.function_info(f.entry_name).written == [1, 2]  # the outputs, not the input
    a = random_array(rng, 6, "int32")
    # Unaligned outputs: the runtime passes aligned copies, and copies back what is written.
    got_lo, got_hi = (poisoned(7, "int32")[1:] for _ in range(2))
    assert got_lo.ctypes.data % 64 and got_hi.ctypes.data % 64
    f(a, got_lo, got_hi)
    assert_written(got_lo, np.minimum(a, 0))
    assert_written(got_hi, np.maximum(a, 0))


def test_exception_in_packed_function_surfaces(rng, registered):
    calls = []

    def fail(x, y):
        calls.append(1)
        raise ValueError("no luck")

    registered("test.extern.fail", fail)
    A = te.placeholder((8,), name="A")
    C = add_one_extern(A, "test.extern.fail")
    D = add_one_extern(C, "test.extern.fail")  # skipped once the first call failed
    f = compiler.build(te.create_schedule(D.op), [A, D])
    a = random_array(rng, 8, "float32")
    with pytest.raises(ValueError, match="no luck"):
        f(a, poisoned(8, "float32"))
    assert calls == [1]
    with pytest.raises(ValueError, match="no luck"):  # nothing left over: the next call fails afresh
        f(a, poisoned(8, "float32"))
    assert calls == [1, 1]


def test_unregistered_function_is_an_error_at_call_time(rng):
    A = te.placeholder((8,), name="A")
    C = add_one_extern(A, "test.extern.nobody")
    f = compiler.build(te.create_schedule(C.op), [A, C])
    with pytest.raises(CompilerError, match="no function is registered under that name"):
        f(random_array(rng, 8, "float32"), poisoned(8, "float32"))


def test_exported_library_calls_packed_functions(rng, registered, tmp_path):
    registered("test.extern.negate", lambda x, y: y.copyfrom(-x.numpy()))
    A = te.placeholder((16,), name="A")
    C = add_one_extern(A, "test.extern.negate")
    path = tmp_path / "negate.so"
    compiler.build(te.create_schedule(C.op), [A, C]).export_library(path)
    g = compiler.runtime.load_module(path)
    a = random_array(rng, 16, "float32")
    c = poisoned(16, "float32")
    g(a, c)
    assert_written(c, -a)


def test_call_extern_in_an_extern_body(rng):
    """A C function on the buffers' pointers (memcpy), as TVM's extern ops call C libraries."""
    A = te.placeholder((20,), name="A", dtype="int64")
    C = te.extern(A.shape, [A], lambda ins, outs: te.call_extern(
        "handle", "memcpy", outs[0].data, ins[0].data, te.const(20 * 8, "int64")), name="C")
    f = compiler.build(te.create_schedule(C.op), [A, C])
    a = random_array(rng, 20, "int64")
    c = poisoned(20, "int64")
    f(a, c)
    assert_written(c, a)


@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cblas_matmul(rng, transa, transb, dtype):
    n, l, m = 7, 5, 9
    A = te.placeholder((l, n) if transa else (n, l), name="A", dtype=dtype)
    B = te.placeholder((m, l) if transb else (l, m), name="B", dtype=dtype)
    bias = te.var("bias", dtype=dtype)
    C = cblas.matmul(A, B, transa, transb)
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = compiler.build(te.create_schedule(D.op), [A, B, D, bias])
    a = random_array(rng, A.shape, dtype)
    b = random_array(rng, B.shape, dtype)
    d = poisoned((n, m), dtype)
    f(a, b, d, 0.25)
    want = (a.T if transa else a) @ (b.T if transb else b) + 0.25
    assert_written(d, want.astype(dtype), rtol=1e-5, atol=1e-5)


def test_cblas_refuses_mismatched_arrays():
    A = te.placeholder((4, 3), name="A", dtype="int32")
    B = te.placeholder((3, 2), name="B", dtype="int32")
    C = cblas.matmul(A, B)
    f = compiler.build(te.create_schedule(C.op), [A, B, C])
    with pytest.raises(CompilerError, match="float32 or float64"):
        f(np.ones((4, 3), "int32"), np.ones((3, 2), "int32"), np.zeros((4, 2), "int32"))
    with pytest.raises(CompilerError, match="two matrices"):
        cblas.matmul(te.placeholder((3,)), B)


def test_bad_externs_are_refused():
    A = te.placeholder((8,), name="A")
    with pytest.raises(CompilerError, match="must return a statement or a call"):
        te.extern(A.shape, [A], lambda ins, outs: None)
    with pytest.raises(CompilerError, match="2 dtypes for 1 outputs"):
        te.extern(A.shape, [A], lambda ins, outs: call_packed("f", ins[0]), dtype=["float32", "int32"])
    with pytest.raises(CompilerError, match="give dtype="):
        te.extern((8,), [], lambda ins, outs: call_packed("f", outs[0]))
    with pytest.raises(ValueError, match="non-empty string"):
        call_packed("")
    with pytest.raises(CompilerError, match="already registered"):
        compiler.register_func("compiler.contrib.cblas.matmul", lambda: None)


def test_bad_extern_schedules_are_refused():
    A = te.placeholder((8,), name="A")
    P = te.compute(A.shape, lambda i: A[i] + 1, name="P")
    C = add_one_extern(P, "test.extern.any")
    D = te.compute(C.shape, lambda i: C[i] * P[i], name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="cannot compute_at an extern stage"):
        s[C].compute_at(s[D], D.op.axis[0])
    with pytest.raises(ScheduleError, match="reads the stored result"):
        s[P].compute_inline()
    s[P].compute_at(s[D], D.op.axis[0])  # P must be whole when the extern reads it
    with pytest.raises(LoweringError, match="must be whole, in global memory"):
        compiler.lower(s, [A, D])


def test_extern_inputs_may_be_shared_and_read_only(rng):
    A = te.placeholder((6, 6), name="A")
    B = te.placeholder((6, 6), name="B")
    C = cblas.matmul(A, B)
    f = compiler.build(te.create_schedule(C.op), [A, B, C])
    a = random_array(rng, (6, 6), "float32")
    a.setflags(write=False)
    c = poisoned((6, 6), "float32")
    f(a, a, c)  # the same read-only array for both inputs
    assert_written(c, a @ a, rtol=1e-5, atol=1e-5)


def test_given_buffers_are_the_ones_fcompute_sees(rng, registered):
    registered("test.extern.double", lambda x, y: y.copyfrom(x.numpy() * 2))
    A = te.placeholder((5,), name="A", dtype="int32")
    a_buf = compiler.tir.decl_buffer((5,), "int32", "a_buf")
    out_buf = compiler.tir.decl_buffer((5,), "int32", "out_buf")
    seen = []

    def body(ins, outs):
        seen.extend([ins[0], outs[0]])
        return call_packed("test.extern.double", ins[0], outs[0])

    C = te.extern((5,), [A], body, in_buffers=[a_buf], out_buffers=[out_buf])
    assert seen == [a_buf, out_buf] and C.op.input_placeholders == (a_buf,)
    f = compiler.build(te.create_schedule(C.op), [A, C])
    a = random_array(rng, 5, "int32")
    c = poisoned(5, "int32")
    f(a, c)
    assert_written(c, a * 2)
    with pytest.raises(CompilerError, match="does not match tensor 'A'"):
        te.extern((5,), [A], body, in_buffers=[compiler.tir.decl_buffer((5,), "float32")])


def test_packed_calls_from_a_parallel_loop(registered):
    """Worker threads of a parallel loop call Python too; the call's value is 0 on success, and
    an exception raised in a worker surfaces from the compiled call."""
    seen = []

    def record(i):
        seen.append(i)
        if i == 37 and fail:
            raise KeyError("thirty-seven")

    registered("test.extern.record", record)
    B = te.compute((64,), lambda i: call_packed("test.extern.record", i), name="B")
    s = te.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    f = compiler.build(s, [B])
    fail = False
    b = poisoned(64, "int32")
    f(b)
    assert_written(b, np.zeros(64, "int32"))
    assert sorted(seen) == list(range(64))
    fail = True
    with pytest.raises(KeyError, match="thirty-seven"):
        f(poisoned(64, "int32"))


def test_extern_stage_in_a_cuda_function_is_refused():
    A = te.placeholder((4, 4), name="A")
    C = cblas.matmul(A, A)
    with pytest.raises(LoweringError, match="extern stages run only in CPU functions"):
        compiler.build(te.create_schedule(C.op), [A, C], "cuda")
