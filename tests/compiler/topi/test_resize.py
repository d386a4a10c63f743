"""topi.image.resize2d against topi.testing.resize2d_python and against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import build_and_check

import compiler
from compiler import te, topi
from compiler.tir import expr as E
from compiler.tir.functor import post_order_visit

# half_pixel_symmetric shifts half_pixel's coordinates by a constant: its own test below
MODES = [m for m in topi.image.COORDINATE_MODES if m != "half_pixel_symmetric"]
ROUNDING = topi.image.ROUNDING_METHODS


def _check(x: np.ndarray, size, expected=None, **kwargs):
    X = te.placeholder(x.shape, name="X", dtype=str(x.dtype))
    out = topi.image.resize2d(X, None, size, **kwargs)
    if expected is None:
        expected = topi.testing.resize2d_python(x, size, **kwargs)
    s = te.create_schedule(out.op)
    build_and_check(s, [X, out], [x], [expected], rtol=1e-5, atol=1e-5)


# (input height and width, output size, scale): up and down, by whole and odd factors, to one pixel
SHAPES = [((4, 5), (8, 10), None), ((6, 9), (3, 4), None), ((5, 4), (7, 11), (1.5, 2.75)),
          ((3, 3), (1, 1), None), ((1, 6), (3, 3), None)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rounding", ROUNDING)
def test_nearest(rng, mode, rounding):
    for (h, w), size, scale in SHAPES:
        x = rng.uniform(-1, 1, (2, 3, h, w)).astype("float32")
        _check(x, size, method="nearest_neighbor", coordinate_transformation_mode=mode,
               rounding_method=rounding, scale=scale)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear(rng, mode, dtype):
    for (h, w), size, scale in SHAPES:
        x = rng.uniform(-1, 1, (1, 2, h, w)).astype(dtype)
        _check(x, size, method="linear", coordinate_transformation_mode=mode, scale=scale)


@pytest.mark.parametrize("mode, dtype, alpha, exclude", [
    ("half_pixel", "float32", -0.5, 0), ("align_corners", "float64", -0.75, 0),
    ("asymmetric", "float32", -0.75, 1), ("pytorch_half_pixel", "float32", -0.5, 1)])
def test_cubic(rng, mode, dtype, alpha, exclude):
    for (h, w), size, scale in SHAPES:
        x = rng.uniform(-1, 1, (1, 2, h, w)).astype(dtype)
        _check(x, size, method="cubic", coordinate_transformation_mode=mode, scale=scale, bicubic_alpha=alpha,
               bicubic_exclude=exclude)


@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("mode", ["half_pixel", "asymmetric"])
def test_antialias(rng, method, mode):
    # down by 2.6 and 3, by a scale that is not output over input, up, and down on one axis only;
    # the pixels past the edge repeated or left out
    for (h, w), size, scale, exclude in [((13, 9), (5, 3), None, 0), ((7, 10), (3, 4), (0.45, 0.35), 1),
                                         ((4, 5), (7, 9), None, 1), ((6, 12), (6, 5), None, 0)]:
        x = rng.uniform(-1, 1, (1, 2, h, w)).astype("float32")
        _check(x, size, method=method, coordinate_transformation_mode=mode, scale=scale, antialias=True,
               bicubic_alpha=-0.75, bicubic_exclude=exclude)


def test_antialias_values_worked_out_by_hand():
    # 0 1 2 3 halved: half pixel puts output 0 at source 0.5 and output 1 at 2.5; the triangle filter
    # stretched to reach 2 pixels either side weighs the pixels 1.5 and 0.5 away 0.25 and 0.75
    # (in halves of their sum); the pixel past the edge repeats the edge, or is left out
    line = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    _check(line, (1, 2), np.array([[[[0.625, 2.375]]]], np.float32), method="linear", antialias=True)
    _check(line, (1, 2), np.array([[[[1.25 / 1.75, 4.0 / 1.75]]]], np.float32), method="linear",
           antialias=True, bicubic_exclude=1)
    # growing, antialiasing changes nothing
    x = np.array([[[[1.0, 3.0], [2.0, -1.0]]]], np.float32)
    plain = topi.testing.resize2d_python(x, (3, 5), method="cubic", bicubic_alpha=-0.75)
    _check(x, (3, 5), plain, method="cubic", antialias=True, bicubic_alpha=-0.75)


def test_half_pixel_symmetric_keeps_the_centre_in_place():
    # 4 pixels by a scale of 0.6 is 2.4, cut to 2: half pixel puts the outputs at 1/3 and 2, off
    # the centre (1.5); half_pixel_symmetric shifts them by 4 / 2 * (1 - 2 / 2.4) = 1/3, to 2/3 and
    # 7/3, either side of it
    line = np.array([[[[0.0, 1.0, 2.0, 3.0]]]], np.float32)
    _check(line, (1, 2), np.array([[[[1 / 3, 2.0]]]], np.float32), method="linear", scale=(1.0, 0.6))
    _check(line, (1, 2), np.array([[[[2 / 3, 7 / 3]]]], np.float32), method="linear",
           coordinate_transformation_mode="half_pixel_symmetric", scale=(1.0, 0.6))


def test_cubic_computes_each_weight_once():
    """The lowered kernel divides once per coordinate and once per renormalised weight (four per
    axis), not wherever a coordinate or weight is used: in each of sixteen products."""
    X = te.placeholder((1, 2, 5, 4), name="X")
    out = topi.image.resize2d(X, None, (7, 11), method="cubic", bicubic_exclude=1)
    body = compiler.lower(te.create_schedule(out.op), [X, out])["main"].body
    divisions = []
    post_order_visit(body, lambda e: divisions.append(e) if isinstance(e, E.Div) else None)
    assert len(divisions) == 10  # and one per coordinate


def test_cubic_keeps_a_linear_ramp_and_pixels_on_the_grid():
    """Keys' kernel with alpha -0.5 (the one of third order) reproduces a linear ramp away from the
    edges, and with any alpha, at whole source coordinates (align_corners doubling 3 pixels to 5),
    returns the pixels themselves."""
    ramp = np.tile(np.arange(8, dtype="float64"), (1, 1, 8, 1))  # x[.., i, j] = j
    coord = (np.arange(16) + 0.5) / 2 - 0.5
    inner = (coord >= 1) & (coord <= 6)  # all four taps inside the image
    _check(ramp, (8, 16), None, method="cubic", bicubic_alpha=-0.5)
    out = topi.testing.resize2d_python(ramp, (8, 16), method="cubic", bicubic_alpha=-0.5)
    np.testing.assert_allclose(out[0, 0, 3, inner], coord[inner], atol=1e-12)
    x = np.array([[[[1.0, -2.0, 4.0]]]], "float32").repeat(3, axis=2)
    corners = {"method": "cubic", "coordinate_transformation_mode": "align_corners", "bicubic_alpha": -0.75}
    expected = topi.testing.resize2d_python(x, (5, 5), **corners)
    np.testing.assert_allclose(expected[0, 0, 0, ::2], [1.0, -2.0, 4.0], atol=1e-6)
    _check(x, (5, 5), expected, **corners)


def test_values_worked_out_by_hand():
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    # 2x nearest, asymmetric floor: each pixel repeated
    _check(x, (4, 4), np.repeat(np.repeat(x, 2, axis=2), 2, axis=3), method="nearest_neighbor",
           coordinate_transformation_mode="asymmetric", rounding_method="floor")
    # bilinear, align corners, 1 -> 2 -> 3 along a row: the midpoints between the corners
    want = np.array([[[[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]]]], np.float32)
    _check(x, (3, 3), want, method="linear", coordinate_transformation_mode="align_corners")
    # half pixel, 2x: a quarter of the way between neighbours, edges held
    row = np.array([[[[1.0, 3.0]]]], np.float32)
    _check(row, (1, 4), np.array([[[[1.0, 1.5, 2.5, 3.0]]]], np.float32), method="linear")
    # ties: half-pixel 3 -> 2 puts output 0 at source 0.25 and output 1 at 1.75; asymmetric 4 -> 8 at
    # k / 2, where round_prefer_floor and round_prefer_ceil differ
    line = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    for rounding, picks in (("round_prefer_floor", [0, 0, 1, 1, 2, 2, 3, 3]),
                            ("round_prefer_ceil", [0, 1, 1, 2, 2, 3, 3, 3])):
        _check(line, (1, 8), line[..., picks], method="nearest_neighbor",
               coordinate_transformation_mode="asymmetric", rounding_method=rounding)


def test_integers_take_nearest_neighbour(rng):
    x = rng.integers(-100, 100, (1, 2, 3, 4)).astype("int32")
    _check(x, (5, 7), method="nearest_neighbor", coordinate_transformation_mode="half_pixel",
           rounding_method="round_prefer_floor")
    with pytest.raises(ValueError, match="linear interpolation takes float data"):
        topi.image.resize2d(te.placeholder(x.shape, dtype="int32"), None, (5, 7), method="linear")


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "area"}, "method must be one of"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "coordinate_transformation_mode must be"),
    ({"rounding_method": "nearest"}, "rounding_method must be"),
    ({"layout": "NHWC"}, "layout must be 'NCHW'"),
    ({"scale": (0.0, 1.0)}, "scale must be"),
    ({"method": "nearest_neighbor", "antialias": True}, "antialias takes the linear or cubic method"),
])
def test_bad_arguments_are_clear(kwargs, match):
    X = te.placeholder((1, 1, 4, 4), name="X")
    with pytest.raises(ValueError, match=match):
        topi.image.resize2d(X, None, (8, 8), **kwargs)
    with pytest.raises(ValueError, match="roi"):
        topi.image.resize2d(X, [0, 0, 1, 1], (8, 8))
    with pytest.raises(ValueError, match="size must be"):
        topi.image.resize2d(X, None, (0, 8))
