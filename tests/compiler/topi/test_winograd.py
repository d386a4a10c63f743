"""Winograd's F(m x m, 3 x 3) (compiler.topi.nn.winograd): its transforms are a convolution's,
in numpy and as tensor expressions, with partial tiles and uneven padding; bad arguments named."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned

import compiler
from compiler import te, topi
from compiler.graph.ops.layout import from_blocks, to_blocks
from compiler.topi.nn.winograd import (
    WINOGRAD_TILE_SIZES,
    conv2d_winograd_nchwc_numpy,
    conv2d_winograd_weight_transform,
    winograd_input_transform,
    winograd_matrices,
    winograd_tiles,
)


@pytest.mark.parametrize("m", WINOGRAD_TILE_SIZES)
def test_the_transforms_compute_a_1d_correlation(m):
    AT, G, BT = winograd_matrices(m)
    assert AT.shape == (m, m + 2) and G.shape == (m + 2, 3) and BT.shape == (m + 2, m + 2)
    rng = np.random.default_rng(m)
    d, g = rng.standard_normal(m + 2), rng.standard_normal(3)
    np.testing.assert_allclose(AT @ ((G @ g) * (BT @ d)), [d[i:i + 3] @ g for i in range(m)], rtol=1e-12)


@pytest.mark.parametrize("m, shape, padding", [(4, (2, 8, 9, 11), (1, 1, 1, 1)),
                                               (2, (1, 4, 7, 6), (1, 0, 2, 1)),
                                               (4, (1, 4, 6, 6), (0, 0, 0, 0))])
def test_numpy_winograd_is_the_direct_convolution(m, shape, padding):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((8, shape[1], 3, 3))
    u = conv2d_winograd_weight_transform(w, m, nr=4)
    assert u.shape == ((m + 2) ** 2, 2, shape[1], 4) and u.dtype == w.dtype
    got = conv2d_winograd_nchwc_numpy(to_blocks(x, 2), u, padding, m, oc_bn=8)
    want = topi.testing.conv2d_nchw_python(x, w, (1, 1), padding)
    np.testing.assert_allclose(from_blocks(got), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("m, shape, padding, dilation", [(2, (1, 4, 14, 14), (2, 2, 2, 2), 2),
                                                         (4, (2, 4, 13, 10), (2, 1, 3, 2), 2),
                                                         (2, (1, 4, 11, 12), (3, 3, 3, 3), 3)])
def test_numpy_winograd_of_a_dilated_kernel_is_the_direct_convolution(m, shape, padding, dilation):
    rng = np.random.default_rng(dilation)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((8, shape[1], 3, 3))
    u = conv2d_winograd_weight_transform(w, m, nr=4)
    got = conv2d_winograd_nchwc_numpy(to_blocks(x, 2), u, padding, m, oc_bn=8, dilation=dilation)
    want = topi.testing.conv2d_nchw_python(x, w, (1, 1), padding, dilation=dilation)
    assert got.shape[2:4] == want.shape[2:]
    np.testing.assert_allclose(from_blocks(got), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("m, size, padding, dilation", [(2, (14, 14), (2, 2, 2, 2), 2),
                                                        (4, (13, 10), (2, 1, 3, 2), 2),
                                                        (2, (11, 12), (3, 3, 3, 3), 3)])
def test_the_tensor_expression_of_a_dilated_kernel_computes_the_convolution(m, size, padding, dilation):
    rng = np.random.default_rng(m + dilation)
    H, W = size
    x = rng.uniform(-1, 1, (2, 8, H, W)).astype("float32")
    w = rng.uniform(-1, 1, (8, 8, 3, 3)).astype("float32")
    X = te.placeholder((2, 2, H, W, 4), name="X")
    U = te.placeholder(((m + 2) ** 2, 1, 8, 8), name="U")
    Y = topi.nn.conv2d_winograd_nchwc(X, U, padding, m, 4, dilation=dilation)
    want = to_blocks(topi.testing.conv2d_nchw_python(x, w, (1, 1), padding, dilation=dilation), 4)
    assert tuple(int(d.value) for d in Y.shape) == want.shape
    f = compiler.build(te.create_schedule(Y.op), [X, U, Y], target="llvm")
    out = poisoned(want.shape, "float32")
    f(to_blocks(x, 4), conv2d_winograd_weight_transform(w, m, nr=8), out)
    assert_written(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m", WINOGRAD_TILE_SIZES)
def test_the_tensor_expression_computes_the_convolution(m):
    rng = np.random.default_rng(m)
    x = rng.uniform(-1, 1, (1, 8, 10, 7)).astype("float32")
    w = rng.uniform(-1, 1, (8, 8, 3, 3)).astype("float32")
    padding = (1, 1, 1, 1)
    X = te.placeholder((1, 2, 10, 7, 4), name="X")
    U = te.placeholder(((m + 2) ** 2, 1, 8, 8), name="U")
    Y = topi.nn.conv2d_winograd_nchwc(X, U, padding, m, 4)
    assert tuple(int(d.value) for d in Y.shape) == (1, 2, 10, 7, 4)
    f = compiler.build(te.create_schedule(Y.op), [X, U, Y], target="llvm")
    out = poisoned((1, 2, 10, 7, 4), "float32")
    f(to_blocks(x, 4), conv2d_winograd_weight_transform(w, m, nr=8), out)
    want = to_blocks(topi.testing.conv2d_nchw_python(x, w, (1, 1), padding), 4)
    assert_written(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m, padding", [(4, (1, 1, 1, 1)), (2, (1, 0, 2, 1))])
def test_the_input_transform_loads_each_tile_once_then_transforms_rows_then_columns(m, padding):
    rng = np.random.default_rng(m)
    X = te.placeholder((1, 2, 7, 6, 4), name="X")
    Ho, Wo = 7 + padding[0] + padding[2] - 2, 6 + padding[1] + padding[3] - 2
    V = winograd_input_transform(X, m, padding, (Ho, Wo))
    (rows,) = V.op.input_tensors
    (tile,) = rows.op.input_tensors
    assert (rows.op.name, tile.op.name) == ("winograd_V_rows", "winograd_V_tile")
    assert tile.op.input_tensors == [X]  # the one stage that reads the input, borders tested
    a = m + 2
    th, tw = winograd_tiles(Ho, Wo, m)
    assert tuple(int(d.value) for d in tile.shape) == (th * tw, a, a, 8)
    f = compiler.build(te.create_schedule(V.op), [X, V], target="llvm")
    x = rng.uniform(-1, 1, (1, 8, 7, 6)).astype("float32")
    out = poisoned((a * a, th * tw, 8), "float32")
    f(to_blocks(x, 4), out)
    _, _, BT = winograd_matrices(m)
    top, left = padding[:2]
    padded = np.zeros((8, th * m + 2, tw * m + 2), "float32")
    padded[:, top:top + 7, left:left + 6] = x[0, :, :th * m + 2 - top, :tw * m + 2 - left]
    d = np.stack([padded[:, i * m:i * m + a, j * m:j * m + a] for i in range(th) for j in range(tw)])
    want = np.einsum("ai,pcij,bj->abpc", BT, d, BT).reshape(a * a, th * tw, 8)
    assert_written(out, want, rtol=1e-5, atol=1e-5)


def test_tiles_cover_the_output():
    assert winograd_tiles(56, 56, 4) == (14, 14) and winograd_tiles(7, 9, 2) == (4, 5)
    # dilated: the tiles of each phase, every d-th row and column (14 rows in two phases of 7)
    assert winograd_tiles(14, 14, 2, dilation=2) == (4, 4) and winograd_tiles(13, 10, 4, dilation=3) == (2, 1)


def test_bad_arguments_are_named():
    w = np.ones((8, 4, 3, 3), "float32")
    with pytest.raises(ValueError, match="tile size m"):
        winograd_matrices(3)
    with pytest.raises(ValueError, match="3, 3"):
        conv2d_winograd_weight_transform(np.ones((8, 4, 5, 5), "float32"), 4, 4)
    with pytest.raises(ValueError, match="nr must divide"):
        conv2d_winograd_weight_transform(w, 4, 3)
