"""bfloat16 as TVM lowers it (BF16Legalize): storage of 16 bits, loads widened to float32,
arithmetic in float32, stores rounded to nearest even; ``tvm.nd`` arrays of bfloat16 hold their
bits as uint16. The reference here emulates the rounding with numpy on its own."""

import numpy as np
import pytest
from cuda_helpers import build_ptx, simulate

import compiler as tvm
from compiler import te, tir

N = 64
SENTINEL = 0xDEAD  # bits no result here has: unwritten elements show


def np_float2np_bf16(arr: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits (uint16), to nearest even (TVM's test helper)."""
    orig = np.asarray(arr, "float32").view("<u4").astype("uint64")
    bias = ((orig >> 16) & 1) + 0x7FFF
    return ((orig + bias) >> 16).astype("uint16")


def np_bf162np_float(arr: np.ndarray) -> np.ndarray:
    return (arr.astype("uint32") << 16).view("float32")


def bf16_round(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the nearest bfloat16, as float32."""
    return np_bf162np_float(np_float2np_bf16(x))


def _random(rng, shape=(N,), scale=4.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype("float32")


def _bf16_array(values: np.ndarray):
    return tvm.nd.empty(values.shape, "bfloat16").copyfrom(np_float2np_bf16(values))


def _poisoned(shape, dtype="bfloat16"):
    if dtype == "bfloat16":
        return tvm.nd.empty(shape, "bfloat16").copyfrom(np.full(shape, SENTINEL, "uint16"))
    return tvm.nd.array(np.full(shape, np.nan, dtype))


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_llvm_bf16_add_as_tvm_tests_it(vectorize):
    A = te.placeholder((N,), dtype="bfloat16", name="A")
    B = te.placeholder((N,), dtype="bfloat16", name="B")
    D = te.compute((N,), lambda x: A[x] + B[x], name="D")
    s = te.create_schedule(D.op)
    if vectorize:
        _, xi = s[D].split(D.op.axis[0], factor=16)
        s[D].vectorize(xi)
    module = tvm.build(s, [A, B, D], target="llvm")
    rng = np.random.default_rng(1)
    npa, npb = _random(rng), _random(rng)
    va, vb = bf16_round(npa), bf16_round(npb)
    d = _poisoned((N,))
    module(_bf16_array(npa), _bf16_array(npb), d)
    assert d.dtype == "bfloat16" and d.numpy().dtype == np.uint16
    np.testing.assert_array_equal(np_bf162np_float(d.numpy()), bf16_round(va + vb))


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_arithmetic_is_float32_and_only_stores_round(vectorize):
    A = te.placeholder((N,), dtype="bfloat16", name="A")
    B = te.placeholder((N,), dtype="bfloat16", name="B")
    X = te.placeholder((N,), dtype="float32", name="X")
    outs = [
        te.compute((N,), lambda i: A[i] * B[i] + A[i] * 0.5 - B[i], name="chain"),   # one rounding
        te.compute((N,), lambda i: X[i].astype("bfloat16"), name="narrow"),
        te.compute((N,), lambda i: A[i].astype("float32") * 3.0, name="widen"),
        te.compute((N,), lambda i: te.exp(A[i] * 0.25), name="exp"),
        te.compute((N,), lambda i: te.max(A[i], B[i]), name="max"),
        te.compute((N,), lambda i: A[i] + X[i], name="mixed"),  # promotes to float32
        te.compute((N,), lambda i: te.if_then_else(A[i] > B[i], A[i], -B[i]), name="select"),
        te.compute((N,), lambda i: (A[i] * 10.0).astype("int32"), name="to_int"),
    ]
    assert [o.dtype for o in outs] == ["bfloat16", "bfloat16", "float32", "bfloat16", "bfloat16", "float32",
                                       "bfloat16", "int32"]
    s = te.create_schedule([o.op for o in outs])
    if vectorize:
        for o in outs:
            _, xi = s[o].split(o.op.axis[0], factor=8)
            s[o].vectorize(xi)
    f = tvm.build(s, [A, B, X, *outs], target="llvm")
    rng = np.random.default_rng(2)
    npa, npb, x = _random(rng), _random(rng), _random(rng)
    x[:4] = [1.00390625, 1.01171875, -1.00390625, 3.4e38]  # ties to even, overflow to infinity
    va, vb = bf16_round(npa), bf16_round(npb)
    results = [_poisoned((N,), o.dtype) if o.dtype != "int32" else tvm.nd.array(np.full(N, -99, "int32"))
               for o in outs]
    f(_bf16_array(npa), _bf16_array(npb), tvm.nd.array(x), *results)
    got = [np_bf162np_float(r.numpy()) if r.dtype == "bfloat16" else r.numpy() for r in results]
    with np.errstate(over="ignore"):
        want = [bf16_round(va * vb + va * np.float32(0.5) - vb), bf16_round(x), va * np.float32(3.0),
                bf16_round(np.exp(va * np.float32(0.25))), bf16_round(np.maximum(va, vb)), va + x,
                bf16_round(np.where(va > vb, va, -vb)), (va * np.float32(10.0)).astype("int32")]
    for o, g, w in zip(outs, got, want):
        if o.name == "exp":  # float32 exp may differ from numpy's by an ulp, moving one rounding
            np.testing.assert_allclose(g, w, rtol=2**-7, err_msg=o.name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=o.name)
    assert np.isinf(got[1][3])


def test_reduction_rounds_its_accumulator_at_every_step():
    # The reduction's accumulator is a bfloat16 buffer: every partial sum is stored, so rounded.
    M, K = 8, 16
    A = te.placeholder((M, K), dtype="bfloat16", name="A")
    k = te.reduce_axis((0, K), name="k")
    S = te.compute((M,), lambda i: te.sum(A[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    f = tvm.build(s, [A, S], target="llvm")
    a = np.random.default_rng(3).uniform(0.5, 3.0, (M, K)).astype("float32")
    out = _poisoned((M,))
    f(_bf16_array(a), out)
    va = bf16_round(a)
    want = np.zeros(M, "float32")
    for j in range(K):
        want = bf16_round(want + va[:, j])
    np.testing.assert_array_equal(np_bf162np_float(out.numpy()), want)


def test_nd_arrays_of_bfloat16_hold_uint16_bits():
    x = np.array([1.0, -2.5, 1.00390625, np.nan, np.inf], "float32")
    bits = np_float2np_bf16(x[:3])
    a = tvm.nd.empty((3,), "bfloat16")
    assert a.dtype == "bfloat16" and a.shape == (3,)
    a.copyfrom(bits)
    np.testing.assert_array_equal(a.numpy(), bits)
    assert a.numpy().dtype == np.uint16
    b = tvm.nd.array(x, dtype="bfloat16")  # floats are rounded to nearest even
    assert b.dtype == "bfloat16"
    np.testing.assert_array_equal(b.numpy()[:3], bits)
    assert np.isnan(np_bf162np_float(b.numpy())[3]) and np.isinf(np_bf162np_float(b.numpy())[4])
    c = tvm.nd.array(b)
    assert c.dtype == "bfloat16"
    np.testing.assert_array_equal(c.numpy(), b.numpy())
    with pytest.raises(TypeError, match="bfloat16"):
        a.copyfrom(np.array(["a", "b", "c"]))


def test_kernel_refuses_float32_arrays_for_bfloat16_parameters():
    A = te.placeholder((N,), dtype="bfloat16", name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target="llvm")
    with pytest.raises(tvm.errors.RuntimeArgumentError, match="dtype float32"):
        f(tvm.nd.array(np.ones(N, "float32")), _poisoned((N,)))


def test_constants_and_limits():
    assert tir.const(1.5, "bfloat16").dtype == "bfloat16"
    assert te.max_value("bfloat16").dtype == "bfloat16"
    assert (te.placeholder((2,), dtype="bfloat16")[0] + 1.0).dtype == "bfloat16"


def test_cuda_kernel_of_bfloat16_assembles():
    from cuda_helpers import build_ptx

    A = te.placeholder((N,), dtype="bfloat16", name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    build_ptx(s, [A, B])


def test_cuda_bf16_kernel_on_the_simulator_and_through_ptxas():
    A = te.placeholder((N,), dtype="bfloat16", name="A")
    B = te.placeholder((N,), dtype="bfloat16", name="B")
    D = te.compute((N,), lambda x: A[x] * B[x], name="D")
    s = te.create_schedule(D.op)
    bx, tx = s[D].split(D.op.axis[0], factor=16)
    s[D].bind(bx, te.thread_axis("blockIdx.x"))
    s[D].bind(tx, te.thread_axis("threadIdx.x"))
    rng = np.random.default_rng(3)
    a, b = np_float2np_bf16(_random(rng)), np_float2np_bf16(_random(rng))
    d = np.full((N,), SENTINEL, "uint16")
    simulate(s, [A, B, D], [a, b, d])
    # The product of two bfloat16 values is exact in float32; the store rounds it.
    np.testing.assert_array_equal(d, np_float2np_bf16(np_bf162np_float(a) * np_bf162np_float(b)))
    build_ptx(s, [A, B, D])
