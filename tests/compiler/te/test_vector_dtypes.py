"""TVM's vector dtypes (``"float32x4"``): ``astype`` to one broadcasts, ``tir.Broadcast``/``tir.Ramp``
take TVM's arguments, vector values run in hand-written IR, and ``tvm.nd`` arrays of a vector
dtype keep the lanes as a trailing dimension. Tensors of vector elements are refused clearly."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te, tir
from compiler.errors import CodegenError, CompilerError, DTypeError

N = 32


def test_tensors_of_vector_dtype_are_refused_with_the_alternative():
    with pytest.raises(DTypeError, match="vector dtype 'float32x4'.*trailing dimension of 4"):
        te.placeholder((N,), dtype="float32x4")
    A = te.placeholder((N,), name="A")
    with pytest.raises(CompilerError, match="vector of 4 lanes"):
        te.compute((N,), lambda i: A[i].astype("float32x4"), name="C")
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
