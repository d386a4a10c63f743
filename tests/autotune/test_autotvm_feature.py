"""autotvm.feature: itervar and curve features of a schedule, in AutoTVM's layout, written as AutoTVM's
own feature tests are."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.autotvm import feature
from compiler import te

N = 16


def _gemm(n=N):
    k = te.reduce_axis((0, n), "k")
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    C = te.compute(A.shape, lambda y, x: te.sum(A[y, k] * B[k, x], axis=k), name="C")
    return te.create_schedule(C.op), A, B, C


def test_iter_feature_gemm():
    s, A, B, C = _gemm()
    feas = feature.get_itervar_feature(s, [A, B, C], take_log=False)
    assert [row[0][0] for row in feas] == ["y", "x", "k"]
    assert all(row[0][1].name == row[0][0] for row in feas)  # [name, loop variable]
    expected = [
        # _attr_: extent, nest level, top-down, bottom-up, serial, parallel, vectorized, unrolled
        {"_attr_": [16, 0, 16, 4096, 1, 0, 0, 0],
         # adds, multiplies, divides: per k iteration C[i*16+j] + A[i*16+k] * B[k*16+j] has 4 and 4
         "_arith_": [4 * 4096, 4 * 4096, 0],
         # buffer: stride, bytes touched, reuse
         "C": [16, 1024, 16], "A": [16, 1024, 16], "B": [0, 1024, 16]},
        {"_attr_": [16, 1, 256, 256, 1, 0, 0, 0], "_arith_": [4 * 256, 4 * 256, 0],
         "C": [1, 64, 16], "A": [0, 64, 16], "B": [1, 1024, 1]},
        {"_attr_": [16, 2, 4096, 16, 1, 0, 0, 0], "_arith_": [4 * 16, 4 * 16, 0],
         "C": [0, 4, 16], "A": [1, 64, 1], "B": [16, 64, 1]},
    ]
    for ans, row in zip(expected, feas):
        assert {item[0]: item[1:] for item in row[1:]} == ans


def test_flatten_is_the_rows_numbers_and_keeps_its_length():
    s, A, B, C = _gemm()
    flat = feature.get_itervar_feature_flatten(s, [A, B, C], take_log=True)
    rows = feature.get_itervar_feature(s, [A, B, C], take_log=True)
    assert flat.dtype == np.float32 and flat.ndim == 1
    np.testing.assert_array_equal(flat, feature.flatten_itervar_feature(rows))
    names = feature.get_flatten_name(rows)
    assert len(names) == len(flat) and names[0] == "f0.y._attr_.length"
    assert names[8] == "f8.y._arith_.add" and names[11] == "f11.y.C.stride"
    assert flat[0] == pytest.approx(np.log2(17))


def test_feature_shape():
    """The dimensions of the flattened feature are the same for every order of the loops."""
    rng = np.random.default_rng(0)

    def get_gemm_feature(tile):
        s, A, B, C = _gemm(64)
        y, x = s[C].op.axis
        axes = list(s[C].tile(y, x, tile, tile)) + [s[C].op.reduce_axis[0]]
        perm = rng.permutation(5)
        s[C].reorder(*[axes[i] for i in perm])
        if perm[-1] == 3:  # x.inner innermost
            s[C].vectorize(axes[3])
        return feature.get_itervar_feature_flatten(s, [A, B, C], take_log=True)

    dims = {len(get_gemm_feature(8)) for _ in range(5)}
    assert len(dims) == 1
    assert not np.array_equal(get_gemm_feature(8), get_gemm_feature(4))


def test_vectorized_loop_is_annotated():
    s, A, B, C = _gemm()
    xo, xi = s[C].split(s[C].op.axis[1], 4)
    s[C].reorder(s[C].op.axis[0], xo, s[C].op.reduce_axis[0], xi)
    s[C].vectorize(xi)
    rows = {row[0][0]: row for row in feature.get_itervar_feature(s, [A, B, C])}
    assert rows["x.inner"][1][5:] == [0.0, 0.0, 1.0, 0.0] and rows["x.outer"][1][5:] == [1.0, 0.0, 0.0, 0.0]


def test_curve_feature_gemm():
    s, A, B, C = _gemm()
    feas = feature.get_buffer_curve_sample_flatten(s, [A, B, C], sample_n=30)
    # 4 statements * 4 buffers * 2 curves * sample_n, whatever the schedule
    assert feas.shape == (4 * 4 * 2 * 30,) and feas.dtype == np.float32 and np.isfinite(feas).all()
    s2, A2, B2, C2 = _gemm()
    s2[C2].tile(*s2[C2].op.axis, 4, 4)
    tiled = feature.get_curve_sample_feature_flatten(s2, [A2, B2, C2], sample_n=30)
    assert tiled.shape == feas.shape and not np.array_equal(tiled, feas)
    A3 = te.placeholder((N,), name="A")
    B3 = te.compute((N,), lambda i: A3[i] + 1.0, name="B")
    other = feature.get_buffer_curve_sample_flatten(te.create_schedule(B3.op), [A3, B3], sample_n=30)
    assert other.shape == feas.shape
    with pytest.raises(ValueError, match="sample_n"):
        feature.get_buffer_curve_sample_flatten(s, [A, B, C], sample_n=0)
