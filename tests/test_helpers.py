import numpy as np
import pytest
from helpers import SENTINEL, SUPPORTED_DTYPES, poisoned, random_array


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_poisoned_fills_with_marker(dtype):
    a = poisoned((3, 4), dtype)
    assert a.shape == (3, 4) and a.dtype == np.dtype(dtype)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        assert np.isnan(a).all()
    elif dt.kind == "b":
        assert a.all()
    else:
        info = np.iinfo(dt)
        assert (a == np.clip(SENTINEL, info.min, info.max)).all()


def test_poisoned_int_sentinel_values():
    assert poisoned(2, "int32")[0] == SENTINEL
    assert poisoned(2, "int8")[0] == -128
    assert poisoned(2, "uint8")[0] == 0


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_random_array_dtype_shape_nonzero(rng, dtype):
    a = random_array(rng, (5, 7), dtype)
    assert a.shape == (5, 7) and a.dtype == np.dtype(dtype)
    if np.dtype(dtype).kind != "b":
        assert (a != 0).all()
        assert np.isfinite(a.astype("float64")).all()


def test_random_array_bool_has_both_values(rng):
    a = random_array(rng, 1000, "bool")
    assert a.any() and not a.all()


def test_random_array_is_reproducible():
    a = random_array(np.random.default_rng(1), 16, "float32")
    b = random_array(np.random.default_rng(1), 16, "float32")
    np.testing.assert_array_equal(a, b)


def _random(shape, dtype):
    return random_array(np.random.default_rng(0), shape, dtype)


@pytest.mark.parametrize("fn", [poisoned, _random])
def test_unsupported_dtype_raises(fn):
    with pytest.raises(TypeError, match="unsupported dtype"):
        fn(3, "complex64")
