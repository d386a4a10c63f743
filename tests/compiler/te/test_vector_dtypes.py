"""TVM's vector dtypes (``"float32x4"``): ``astype`` to one broadcasts, ``tir.Broadcast``/``tir.Ramp``
take TVM's arguments, vector values run in hand-written IR, ``tvm.nd`` arrays of a vector
dtype keep the lanes as a trailing dimension, and tensors of vector elements compute, reduce and
schedule as in TVM (``test_llvm_vadd_pipeline``)."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te, tir
from compiler.dtypes import split_lanes
from compiler.errors import CodegenError, DTypeError, LoweringError, RuntimeArgumentError

N = 32


def test_vector_dtypes_are_refused_where_elements_are_scalars():
    for make in (lambda: te.var("x", "float32x4"), lambda: tir.decl_buffer((4,), "float32x4"),
                 lambda: te.extern((N,), [te.placeholder((N,))], lambda ins, outs: tir.Evaluate(0),
                                   dtype="float32x4")):
        with pytest.raises(DTypeError, match="vector dtype 'float32x4' is not supported here"):
            make()
    with pytest.raises(DTypeError, match="unsupported dtype 'floatx4x'"):
        te.placeholder((N,), dtype="floatx4x")


def test_astype_broadcasts_and_constructors_take_tvm_arguments():
    x = te.var("x", "float32")
    v = x.astype("float32x4")
    assert isinstance(v, tir.Broadcast) and v.lanes == 4 and v.dtype == "float32"
    w = te.var("n").astype("float16x8")
    assert isinstance(w, tir.Broadcast) and w.lanes == 8 and w.dtype == "float16"
    assert isinstance(w.value, tir.Cast)
    r = tir.Ramp(te.var("i"), 2, 8)
    assert r.lanes == 8 and r.dtype == "int32" and tir.expr_lanes(r * 2) == 8
    b = tir.Broadcast(1.5, 4)
    assert b.dtype == "float32" and b.lanes == 4
    # A vector of as many lanes is cast lane by lane; of another width, refused.
    assert isinstance(r.astype("float32x8"), tir.Cast)
    with pytest.raises(DTypeError, match="4 lanes"):
        b.astype("float32x8")


def _vector_kernel(n, lanes, dtype, body):
    """``C[i*lanes : (i+1)*lanes] = body(A-vector, i)`` in hand-written IR, as TVM's ir_builder code."""
    A = te.placeholder((n,), name="A", dtype=dtype)

    def gen(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ins[0], outs[0]
        with ib.for_range(0, n // lanes, name="i") as i:
            idx = tir.Ramp(i * lanes, 1, lanes)
            ib.emit(tir.BufferStore(c, body(tir.BufferLoad(a, (idx,), dtype, lanes), i), (idx,)))
        return ib.get()

    C = te.extern((n,), [A], gen, name="C", dtype=dtype)
    return A, C


@pytest.mark.parametrize("vectorized_loop", [False, True])
def test_vector_values_in_hand_written_ir(vectorized_loop):
    A, C = _vector_kernel(N, 4, "float32",
                          lambda a, i: a * tir.const(2.0).astype("float32x4") + tir.Broadcast(1.0, 4)
                          - i.astype("float32").astype("float32x4"))
    f = tvm.build(te.create_schedule(C.op), [A, C], target="llvm")
    a = np.random.default_rng(0).standard_normal(N).astype("float32")
    c = tvm.nd.array(np.full(N, np.nan, "float32"))
    f(tvm.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + 1 - np.repeat(np.arange(N // 4), 4), rtol=1e-6)


def test_integer_vector_ops_in_hand_written_ir():
    A, C = _vector_kernel(N, 8, "int32", lambda a, i: ((a >> 3) ^ tir.Broadcast(0x55, 8)) % 7
                          + tir.truncmod(a, tir.Broadcast(5, 8)) + tir.popcount(a))
    f = tvm.build(te.create_schedule(C.op), [A, C], target="llvm")
    a = np.random.default_rng(1).integers(-2**31, 2**31, N, dtype="int64").astype("int32")
    c = tvm.nd.array(np.full(N, -1, "int32"))
    f(tvm.nd.array(a), c)
    popcount = np.array([bin(int(v) & 0xFFFFFFFF).count("1") for v in a], "int32")
    want = ((a >> 3) ^ 0x55) % 7 + np.fmod(a, 5) + popcount
    np.testing.assert_array_equal(c.numpy(), want)


def test_storing_a_vector_at_a_scalar_index_is_an_error():
    A = te.placeholder((N,), name="A")

    def gen(ins, outs):
        ib = tir.ir_builder.create()
        ib.emit(tir.BufferStore(outs[0], tir.BufferLoad(ins[0], (tir.Ramp(0, 1, 4),), "float32", 4),
                                (tir.const(0),)))
        return ib.get()

    C = te.extern((N,), [A], gen, name="C")
    with pytest.raises(CodegenError, match="scalar index"):
        tvm.build(te.create_schedule(C.op), [A, C], target="llvm")


def test_nd_arrays_of_vector_dtype_keep_lanes_last():
    a = tvm.nd.empty((3,), "float32x4")
    assert a.shape == (3,) and a.dtype == "float32x4" and a.ndim == 1
    data = np.arange(12, dtype="float32").reshape(3, 4)
    a.copyfrom(data)
    np.testing.assert_array_equal(a.numpy(), data)
    with pytest.raises(ValueError, match="lanes last"):
        a.copyfrom(np.zeros(12, "float32"))
    b = tvm.nd.array(np.arange(16, dtype="int32").reshape(2, 8), dtype="int32x8")
    assert b.shape == (2,) and b.dtype == "int32x8" and b.numpy().shape == (2, 8)
    with pytest.raises(ValueError, match="last dimension is 8"):
        tvm.nd.array(np.zeros((8, 2), "int32"), dtype="int32x8")
    with pytest.raises(DTypeError, match="unsupported dtype"):
        tvm.nd.empty((2,), "foo32x4")


def test_a_vector_array_runs_as_its_trailing_dimension():
    # A kernel over (n, 4) float32 takes a float32x4 array of n elements.
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] * 3.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    f = tvm.build(s, [A, B], target="llvm")
    data = np.random.default_rng(2).standard_normal((8, 4)).astype("float32")
    a = tvm.nd.empty((8,), "float32x4").copyfrom(data)
    b = tvm.nd.empty((8,), "float32x4").copyfrom(np.full((8, 4), np.nan, "float32"))
    f(a, b)
    np.testing.assert_allclose(b.numpy(), data * 3, rtol=1e-6)


def test_datatype_parts_as_tvm_gives_them():
    d = tvm.DataType("float32x4")
    assert (d.bits, d.lanes, d.type_code, str(d)) == (32, 4, tvm.DataType.FLOAT, "float32x4")
    assert d == "float32x4" and d != "float32"
    assert (tvm.DataType("int8").bits, tvm.DataType("uint16").type_code) == (8, tvm.DataType.UINT)
    assert tvm.DataType("bool").bits == 1 and tvm.DataType("bfloat16").type_code == tvm.DataType.BFLOAT
    assert str(tvm.DataType("float")) == "float32"
    with pytest.raises(DTypeError):
        tvm.DataType("complex64")


def _poisoned(shape, dtype):
    base, lanes = split_lanes(dtype)
    fill = np.nan if base.startswith("float") else -7
    return tvm.nd.empty(shape, dtype).copyfrom(np.full((*shape, lanes), fill, base))


@pytest.mark.parametrize("lanes", [2, 4])
def test_llvm_vadd_pipeline(lanes):
    """TVM's test_llvm_vadd_pipeline, with only the imports renamed."""
    n = 64
    A = te.placeholder((n,), name="A", dtype="float32x%d" % lanes)  # noqa: UP031  (as TVM writes it)
    B = te.compute((n,), lambda i: A[i], name="B")
    C = te.compute((n,), lambda i: B[i] + tvm.tir.const(1, A.dtype), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], nparts=2)
    _, xi = s[C].split(xi, factor=2)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    s[B].compute_at(s[C], xo)
    xo, xi = s[B].split(B.op.axis[0], factor=2)
    s[B].vectorize(xi)
    f = tvm.build(s, [A, C], "llvm")
    dev = tvm.cpu(0)
    a = tvm.nd.empty((n,), A.dtype).copyfrom(np.random.uniform(size=(n, lanes)))
    c = tvm.nd.empty((n,), C.dtype, dev).copyfrom(np.full((n, lanes), np.nan, "float32"))
    f(a, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + 1)


def test_tensors_of_vector_dtype_compute_from_nd_and_numpy_arrays():
    A = te.placeholder((N,), name="A", dtype="float32x4")
    B = te.placeholder((N,), name="B", dtype="float32x4")
    C = te.compute(A.shape, lambda i: A[i] + B[i] * 2.0, name="C")
    assert (A.dtype, C.dtype, C.shape[0].value, C.ndim) == ("float32x4", "float32x4", N, 1)
    assert isinstance(A[0], tir.ProducerLoad) and A[0].lanes == 4 and A[0].dtype == "float32"
    f = tvm.build(te.create_schedule(C.op), [A, B, C], target="llvm")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((N, 4)).astype("float32"), rng.standard_normal((N, 4)).astype("float32")
    c = _poisoned((N,), "float32x4")
    f(tvm.nd.array(a, dtype="float32x4"), tvm.nd.empty((N,), "float32x4").copyfrom(b), c)
    np.testing.assert_allclose(c.numpy(), a + b * 2, rtol=1e-6)
    # The arrays' storage (n, 4) float32 is accepted as it is, numpy arrays included.
    out = np.full((N, 4), np.nan, "float32")
    f(a, b, out)
    np.testing.assert_allclose(out, a + b * 2, rtol=1e-6)
    with pytest.raises(RuntimeArgumentError, match="dimension 1 is 2, expected 4"):
        f(tvm.nd.empty((N,), "float32x2"), b, out)


def test_astype_of_a_loaded_scalar_and_integer_vector_tensors():
    X = te.placeholder((N,), name="X")
    A = te.placeholder((N,), name="A", dtype="float32x4")
    D = te.compute((N,), lambda i: X[i].astype("float32x4") * A[i] - tir.Ramp(0, 1, 4).astype("float32x4"),
                   name="D")
    assert D.dtype == "float32x4"
    rng = np.random.default_rng(4)
    x, a = rng.standard_normal(N).astype("float32"), rng.standard_normal((N, 4)).astype("float32")
    d = _poisoned((N,), "float32x4")
    tvm.build(te.create_schedule(D.op), [X, A, D], target="llvm")(x, a, d)
    np.testing.assert_allclose(d.numpy(), x[:, None] * a - np.arange(4), rtol=1e-6)
    Ii = te.placeholder((N,), name="I", dtype="int32x8")
    J = te.compute((N,), lambda i: (Ii[i] >> 2) + Ii[i] % 5 - tir.const(3, "int32x8"), name="J")
    iv = rng.integers(-1000, 1000, (N, 8)).astype("int32")
    j = _poisoned((N,), "int32x8")
    tvm.build(te.create_schedule(J.op), [Ii, J], target="llvm")(iv, j)
    np.testing.assert_array_equal(j.numpy(), (iv >> 2) + iv % 5 - 3)


@pytest.mark.parametrize("schedule", ["inline", "cache_write", "cache_read", "split_parallel_vectorize"])
def test_schedules_of_vector_tensors(schedule):
    A = te.placeholder((N,), name="A", dtype="float32x4")
    B = te.compute((N,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((N,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    if schedule == "inline":
        s[B].compute_inline()
    elif schedule == "cache_write":
        s.cache_write(C, "local")
    elif schedule == "cache_read":
        s.cache_read(A, "local", [B])
    else:
        xo, xi = s[C].split(C.op.axis[0], factor=4)
        s[C].parallel(xo)
        s[C].vectorize(xi)  # over vector elements: kept as a loop of vector operations
        s[B].compute_at(s[C], xo)
        s[B].vectorize(B.op.axis[0])
    f = tvm.build(s, [A, C], target="llvm")
    a = np.random.default_rng(5).standard_normal((N, 4)).astype("float32")
    c = _poisoned((N,), "float32x4")
    f(tvm.nd.array(a, dtype="float32x4"), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + 1, rtol=1e-6)


def test_reductions_over_vector_values():
    K = 8
    M = te.placeholder((N, K), name="M", dtype="float32x4")
    k = te.reduce_axis((0, K), name="k")
    R = te.compute((N,), lambda i: te.sum(M[i, k], axis=k), name="R")
    k2 = te.reduce_axis((0, K), name="k2")
    R2 = te.compute((N,), lambda i: te.max(M[i, k2], axis=k2), name="R2")
    assert R.dtype == "float32x4"
    m = np.random.default_rng(6).standard_normal((N, K, 4)).astype("float32")
    r, r2 = _poisoned((N,), "float32x4"), _poisoned((N,), "float32x4")
    tvm.build(te.create_schedule([R.op, R2.op]), [M, R, R2], target="llvm")(m, r, r2)
    np.testing.assert_allclose(r.numpy(), m.sum(1), rtol=1e-5)
    np.testing.assert_allclose(r2.numpy(), m.max(1))
    s = te.create_schedule(R.op)
    _, ki = s[R].split(k, factor=4)
    s.rfactor(R, ki)
    r = _poisoned((N,), "float32x4")
    tvm.build(s, [M, R], target="llvm")(m, r)
    np.testing.assert_allclose(r.numpy(), m.sum(1), rtol=1e-5)


def test_vector_tensors_refuse_binds():
    A = te.placeholder((N,), name="A", dtype="float32x4")
    C = te.compute((N,), lambda i: A[i] + 1.0, name="C")
    with pytest.raises(LoweringError, match="vector dtype float32x4"):
        tvm.lower(te.create_schedule(C.op), [A, C], binds={A: tir.decl_buffer((N, 4), "float32")})


def test_buffer_vload_and_vstore_of_a_vector_dtype():
    rows, cols = 6, 8
    A = te.placeholder((rows, cols), name="A")

    def gen(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ins[0], outs[0]
        with ib.for_range(0, rows, name="i") as i:
            with ib.for_range(0, cols // 4, name="j") as j:
                v = a.vload((i, j * 4), "float32x4")
                assert v.lanes == 4 and v.dtype == "float32"
                ib.emit(c.vstore((i, j * 4), v * 2.0 + tir.Ramp(0, 1, 4).astype("float32x4")))
        return ib.get()

    C = te.extern((rows, cols), [A], gen, name="C")
    a = np.random.default_rng(7).standard_normal((rows, cols)).astype("float32")
    c = tvm.nd.array(np.full((rows, cols), np.nan, "float32"))
    tvm.build(te.create_schedule(C.op), [A, C], target="llvm")(tvm.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + np.tile(np.arange(4), 2), rtol=1e-6)
    buf = tir.decl_buffer((rows, cols), "float32", "b")
    with pytest.raises(ValueError, match="vload of int32x4 from a float32 buffer"):
        buf.vload((0, 0), "int32x4")


def test_const_of_a_vector_dtype_is_a_broadcast():
    c = tir.const(1, "float32x4")
    assert isinstance(c, tir.Broadcast) and c.lanes == 4 and c.value.dtype == "float32"


def test_vector_tensor_of_symbolic_size_with_a_scalar_operand():
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="float32x4")
    X = te.placeholder((n,), name="X")
    C = te.compute((n,), lambda i: A[i] + X[i], name="C")  # the scalar is broadcast, as in TVM
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(xi)
    f = tvm.build(s, [A, X, C], target="llvm")
    rng = np.random.default_rng(8)
    for m in (13, 16):
        a, x = rng.standard_normal((m, 4)).astype("float32"), rng.standard_normal(m).astype("float32")
        c = _poisoned((m,), "float32x4")
        f(tvm.nd.array(a, dtype="float32x4"), x, c)
        np.testing.assert_allclose(c.numpy(), a + x[:, None], rtol=1e-6)


def test_scan_over_vector_tensors():
    m, n = 6, 5
    X = te.placeholder((m, n), name="X", dtype="float32x2")
    state = te.placeholder((m, n), dtype="float32x2")
    init = te.compute((1, n), lambda _, i: X[0, i])
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i])
    scan = te.scan(init, update, state, inputs=[X])
    f = tvm.build(te.create_schedule(scan.op), [X, scan], target="llvm")
    x = np.random.default_rng(9).standard_normal((m, n, 2)).astype("float32")
    out = _poisoned((m, n), "float32x2")
    f(x, out)
    np.testing.assert_allclose(out.numpy(), np.cumsum(x, axis=0), rtol=1e-5)
