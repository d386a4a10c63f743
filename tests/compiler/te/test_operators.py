"""Whole operators built from tensor expressions and schedules, checked against numpy.

Each operator is built with at least two schedules, on random data, with outputs
poisoned first so that elements a kernel fails to write are caught.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, build_and_check, poisoned, random_array

import compiler
from compiler import te, topi


def _vadd(n):
    A = te.placeholder((n,), name="A", dtype="float32")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def test_seed_vector_add(rng):
    A, B, C = _vadd(1024)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    mod = compiler.lower(s, [A, B, C], name="vadd")
    assert "vadd" in str(mod) and "parallel" in str(mod) and "ramp(" in str(mod)
    f = compiler.build(s, [A, B, C], target="llvm", name="vadd")
    dev = compiler.device("llvm", 0)
    a = compiler.nd.array(random_array(rng, 1024, "float32"), dev)
    b = compiler.nd.array(random_array(rng, 1024, "float32"), dev)
    c = compiler.nd.array(poisoned(1024, "float32"), dev)
    f(a, b, c)
    assert_written(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)
    timing = f.time_evaluator(f.entry_name, dev, number=10, repeat=3)(a, b, c)
    assert timing.median > 0


@pytest.mark.parametrize("size", [1, 7, 8, 1000, 1027])
def test_vector_add_symbolic_size(rng, size):
    n = te.var("n")
    A, B, C = _vadd(n)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    a, b = random_array(rng, size, "float32"), random_array(rng, size, "float32")
    build_and_check(s, [A, B, C], [a, b], [a + b], name="vadd_n")


def _matmul(N, L, M, dtype="float32"):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _matmul_inputs(rng, N, L, M, dtype="float32"):
    a, b = random_array(rng, (N, L), dtype), random_array(rng, (L, M), dtype)
    return a, b, (a.astype("float64") @ b.astype("float64")).astype(dtype)


def test_matmul_default_schedule(rng):
    A, B, C = _matmul(17, 9, 13)
    s = te.create_schedule(C.op)
    a, b, c = _matmul_inputs(rng, 17, 9, 13)
    build_and_check(s, [A, B, C], [a, b], [c], rtol=1e-5)


def test_matmul_tiled_reordered_vectorized_parallel(rng):
    A, B, C = _matmul(64, 48, 80)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    a, b, c = _matmul_inputs(rng, 64, 48, 80)
    build_and_check(s, [A, B, C], [a, b], [c], rtol=1e-5)


def test_matmul_cache_write_accumulator_non_dividing(rng):
    A, B, C = _matmul(50, 37, 45)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    ic, jc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, factor=4)
    s[CC].reorder(ko, ki, ic, jc)
    s[CC].vectorize(jc)
    s[CC].unroll(ki)
    s[C].vectorize(ji)
    a, b, c = _matmul_inputs(rng, 50, 37, 45)
    build_and_check(s, [A, B, C], [a, b], [c], rtol=1e-5)


def test_matmul_packed_operand_via_cache_read(rng):
    A, B, C = _matmul(32, 64, 48)
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "global", [C])
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[BB].compute_at(s[C], ko)
    s[C].vectorize(ji)
    a, b, c = _matmul_inputs(rng, 32, 64, 48)
    build_and_check(s, [A, B, C], [a, b], [c], rtol=1e-5)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_matmul_other_dtypes(rng, dtype):
    A, B, C = _matmul(12, 10, 14, dtype)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=4)
    s[C].vectorize(ji)
    s[C].parallel(i)
    a, b, c = _matmul_inputs(rng, 12, 10, 14, dtype)
    build_and_check(s, [A, B, C], [a, b], [c], rtol=1e-12)


def test_batched_matmul_two_schedules(rng):
    Bn, N, L, M = 3, 10, 7, 12
    A = te.placeholder((Bn, N, L), name="A")
    B = te.placeholder((Bn, L, M), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((Bn, N, M), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    a, b = random_array(rng, (Bn, N, L), "float32"), random_array(rng, (Bn, L, M), "float32")
    want = np.einsum("bik,bkj->bij", a, b)
    s = te.create_schedule(C.op)
    build_and_check(s, [A, B, C], [a, b], [want], rtol=1e-5)
    s = te.create_schedule(C.op)
    bb, i, j = C.op.axis
    fused = s[C].fuse(bb, i)
    s[C].parallel(fused)
    jo, ji = s[C].split(j, factor=8)
    s[C].vectorize(ji)
    build_and_check(s, [A, B, C], [a, b], [want], rtol=1e-5)


def _conv2d_nchw(N, C, H, W, F, K, pad, stride=1):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((F, C, K, K), name="W")
    Ho = (H + 2 * pad - K) // stride + 1
    Wo = (W + 2 * pad - K) // stride + 1
    P = te.compute((N, C, H + 2 * pad, W + 2 * pad),
                   lambda n, c, h, w: te.if_then_else(
                       te.all(h >= pad, h < H + pad, w >= pad, w < W + pad),
                       X[n, c, h - pad, w - pad], 0.0), name="pad")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    Y = te.compute((N, F, Ho, Wo), lambda n, f, y, x: te.sum(
        P[n, rc, y * stride + ry, x * stride + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return X, Wt, P, Y


def test_conv2d_nchw_padding_inline(rng):
    X, Wt, P, Y = _conv2d_nchw(1, 3, 9, 9, 4, 3, pad=1)
    x, w = random_array(rng, (1, 3, 9, 9), "float32"), random_array(rng, (4, 3, 3, 3), "float32")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    build_and_check(s, [X, Wt, Y], [x, w], [topi.testing.conv2d_nchw_python(x, w, 1, 1)],
                    rtol=1e-5, atol=1e-5)


def test_conv2d_nchw_padding_compute_at_tiled(rng):
    X, Wt, P, Y = _conv2d_nchw(2, 4, 10, 11, 6, 3, pad=1, stride=2)
    x, w = random_array(rng, (2, 4, 10, 11), "float32"), random_array(rng, (6, 4, 3, 3), "float32")
    s = te.create_schedule(Y.op)
    n, f, y, xx = Y.op.axis
    rc, ry, rx = Y.op.reduce_axis
    fo, fi = s[Y].split(f, factor=4)
    xo, xi = s[Y].split(xx, factor=4)
    s[Y].reorder(n, fo, y, xo, rc, ry, rx, fi, xi)
    s[Y].vectorize(xi)
    s[Y].parallel(fo)
    s[P].compute_at(s[Y], y)
    build_and_check(s, [X, Wt, Y], [x, w], [topi.testing.conv2d_nchw_python(x, w, 2, 1)],
                    rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_row_reductions(rng, kind):
    M, N = 13, 37
    A = te.placeholder((M, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    R = te.compute((M,), lambda i: getattr(te, kind)(A[i, k], axis=k), name="R")
    a = random_array(rng, (M, N), "float32")
    want = getattr(a, kind)(axis=1)
    s = te.create_schedule(R.op)
    build_and_check(s, [A, R], [a], [want], rtol=1e-5)
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(R.op.reduce_axis[0], factor=8)
    s[R].parallel(R.op.axis[0])
    s[R].unroll(ki)
    build_and_check(s, [A, R], [a], [want], rtol=1e-5)


def test_row_sum_rfactor(rng):
    M, N = 6, 50
    A = te.placeholder((M, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    R = te.compute((M,), lambda i: te.sum(A[i, k], axis=k), name="R")
    a = random_array(rng, (M, N), "float32")
    for which in ("inner", "outer"):
        s = te.create_schedule(R.op)
        ko, ki = s[R].split(R.op.reduce_axis[0], factor=8)
        RF = s.rfactor(R, ki if which == "inner" else ko)
        assert RF.shape[0].value == (8 if which == "inner" else 7)
        build_and_check(s, [A, R], [a], [a.sum(axis=1)], rtol=1e-5)


def test_reduction_with_where_condition(rng):
    M, N = 5, 16
    A = te.placeholder((M, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    R = te.compute((M,), lambda i: te.sum(A[i, k], axis=k, where=k % 2 == 0), name="R")
    a = random_array(rng, (M, N), "float32")
    s = te.create_schedule(R.op)
    build_and_check(s, [A, R], [a], [a[:, ::2].sum(axis=1)], rtol=1e-5)


def _softmax(M, N):
    X = te.placeholder((M, N), name="X")
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="mx")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="out")
    return X, mx, ex, sm, out


def test_softmax_multi_stage_compute_at(rng):
    M, N = 9, 33
    x = random_array(rng, (M, N), "float32")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    X, mx, ex, sm, out = _softmax(M, N)
    s = te.create_schedule(out.op)
    build_and_check(s, [X, out], [x], [want], rtol=1e-5)
    X, mx, ex, sm, out = _softmax(M, N)
    s = te.create_schedule(out.op)
    i, j = out.op.axis
    s[out].parallel(i)
    jo, ji = s[out].split(j, factor=8)
    s[out].vectorize(ji)
    for stage in (mx, ex, sm):
        s[stage].compute_at(s[out], i)
    build_and_check(s, [X, out], [x], [want], rtol=1e-5)


def test_transpose_two_schedules(rng):
    A = te.placeholder((19, 23), name="A")
    T = te.compute((23, 19), lambda i, j: A[j, i], name="T")
    a = random_array(rng, (19, 23), "float32")
    s = te.create_schedule(T.op)
    build_and_check(s, [A, T], [a], [a.T])
    s = te.create_schedule(T.op)
    io, jo, ii, ji = s[T].tile(T.op.axis[0], T.op.axis[1], 8, 8)
    s[T].parallel(io)
    s[T].unroll(ii)
    build_and_check(s, [A, T], [a], [a.T])


def test_broadcast_add_two_schedules(rng):
    A = te.placeholder((7, 1, 5), name="A")
    B = te.placeholder((6, 5), name="B")
    C = te.compute((7, 6, 5), lambda i, j, k: A[i, 0, k] + B[j, k], name="C")
    a, b = random_array(rng, (7, 1, 5), "float32"), random_array(rng, (6, 5), "float32")
    s = te.create_schedule(C.op)
    build_and_check(s, [A, B, C], [a, b], [a + b])
    s = te.create_schedule(C.op)
    fused = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(fused, factor=16)
    s[C].parallel(fo)
    s[C].vectorize(fi)
    build_and_check(s, [A, B, C], [a, b], [a + b])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_elementwise_chain_compute_inline(rng, dtype):
    shape = (11, 13)
    A = te.placeholder(shape, name="A", dtype=dtype)
    B = te.compute(shape, lambda i, j: A[i, j] * 3, name="B")
    C = te.compute(shape, lambda i, j: B[i, j] + A[i, j], name="C")
    D = te.compute(shape, lambda i, j: te.max(C[i, j], te.const(0, dtype)), name="D")
    a = random_array(rng, shape, dtype)
    want = np.maximum(a * 3 + a, 0).astype(dtype)
    s = te.create_schedule(D.op)
    build_and_check(s, [A, D], [a], [want], rtol=1e-6)
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    io, ii = s[D].split(D.op.axis[1], factor=4)
    s[D].vectorize(ii)
    build_and_check(s, [A, D], [a], [want], rtol=1e-6)
    mod = compiler.lower(s, [A, D])
    assert "B[" not in str(mod) and "C[" not in str(mod)


def test_intrinsics_and_casts(rng):
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.sqrt(te.abs(A[i])) + te.tanh(A[i]) * te.exp(A[i] * 0.1)
                   + te.log(te.abs(A[i]) + 1.0) + te.power(te.abs(A[i]), 1.5)
                   + (i % 5).astype("float32") + ((i - 3) // 4).astype("float32"), name="B")
    a = random_array(rng, 64, "float32")
    idx = np.arange(64)
    want = (np.sqrt(np.abs(a)) + np.tanh(a) * np.exp(a * 0.1) + np.log(np.abs(a) + 1)
            + np.abs(a) ** 1.5 + (idx % 5) + (idx - 3) // 4).astype("float32")
    s = te.create_schedule(B.op)
    build_and_check(s, [A, B], [a], [want], rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint8", "int64", "float64"])
def test_small_and_wide_dtypes_through_te(rng, dtype):
    A = te.placeholder((37,), name="A", dtype=dtype)
    B = te.compute((37,), lambda i: A[i] * 2 + A[i], name="B")
    mask = te.compute((37,), lambda i: A[i] > 1, name="mask")
    a = random_array(rng, 37, dtype)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    build_and_check(s, [A, B], [a], [(a * 2 + a).astype(dtype)], rtol=1e-3)
    s = te.create_schedule(mask.op)
    build_and_check(s, [A, mask], [a], [a > 1])


def test_casts_between_dtypes(rng):
    A = te.placeholder((29,), name="A", dtype="float32")
    B = te.compute((29,), lambda i: (A[i] * 10).astype("int8").astype("int32")
                   + (A[i] > 0).astype("int32") + te.abs(A[i]).astype("uint8").astype("int32"), name="B")
    a = random_array(rng, 29, "float32")
    want = ((a * 10).astype("int8").astype("int32") + (a > 0).astype("int32")
            + np.abs(a).astype("uint8").astype("int32"))
    build_and_check(te.create_schedule(B.op), [A, B], [a], [want])


def _extremes(dtype):
    """The smallest and largest values of ``dtype``: infinities for floats."""
    if np.dtype(dtype).kind == "f":
        return -np.inf, np.inf
    return np.iinfo(dtype).min, np.iinfo(dtype).max


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_min_value_and_symbolic_2d(rng, dtype):
    """Elements a condition drops become ``min_value``/``max_value``: a row with none left
    reduces to the dtype's extreme, a row with some to their max/min."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A", dtype=dtype)
    k = te.reduce_axis((0, m), name="k")
    R = te.compute((n,), lambda i: te.max(te.if_then_else(A[i, k] > 0, A[i, k], te.min_value(dtype)),
                                          axis=k), name="R")
    k2 = te.reduce_axis((0, m), name="k2")
    Q = te.compute((n,), lambda i: te.min(te.if_then_else(A[i, k2] < 0, A[i, k2], te.max_value(dtype)),
                                          axis=k2), name="Q")
    a = np.abs(random_array(rng, (5, 9), dtype))
    a[[0, 2, 4], ::2] *= -1  # both signs
    a[1] *= -1  # no positive element; row 3: no negative one
    lowest, highest = _extremes(dtype)
    want_r = np.where(a > 0, a, lowest).max(axis=1).astype(dtype)
    want_q = np.where(a < 0, a, highest).min(axis=1).astype(dtype)
    assert want_r[1] == lowest and want_q[3] == highest and (want_r[[0, 2, 4]] > 0).all()
    build_and_check(te.create_schedule(R.op), [A, R], [a], [want_r])
    build_and_check(te.create_schedule(Q.op), [A, Q], [a], [want_q])
