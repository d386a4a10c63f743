import helpers
import numpy as np
import pytest
from helpers import BOOL_POISON, CPUS, SENTINEL, SUPPORTED_DTYPES, assert_written, poisoned, random_array


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_poisoned_fills_with_marker(dtype):
    a = poisoned((3, 4), dtype)
    assert a.shape == (3, 4) and a.dtype == np.dtype(dtype)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        assert np.isnan(a).all()
    elif dt.kind == "b":
        assert (a.view(np.uint8) == BOOL_POISON).all() and BOOL_POISON not in (0, 1)
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


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_assert_written_catches_one_unwritten_element(rng, dtype):
    want = random_array(rng, 9, dtype)
    got = poisoned(9, dtype)
    got[:] = want
    assert_written(got, want)
    # Every value the element could have been left at by a kernel that skips it.
    got[4:5] = poisoned(1, dtype)
    with pytest.raises(AssertionError):
        assert_written(got, want)


def test_assert_written_bools_are_compared_by_byte():
    want = np.ones(3, bool)
    got = poisoned(3, "bool")
    assert (got == want).all()  # numpy reads the poison byte as True ...
    with pytest.raises(AssertionError):
        assert_written(got, want)  # ... the helper does not


def test_assert_written_nan_never_equals_nan():
    left = poisoned(4, "float32")
    left[:3] = 1.0
    with pytest.raises(AssertionError, match="reference holds NaN"):
        assert_written(left, left.copy())  # both sides left element 3 unwritten
    with pytest.raises(AssertionError):
        assert_written(left, np.ones(4, "float32"))
    assert_written(np.full(4, np.inf, "float32"), np.full(4, np.inf, "float32"))


def test_assert_written_tolerances_and_shapes():
    assert_written(np.float32([1.0, 2.0]), np.float32([1.0, 2.0 + 1e-6]), rtol=1e-5)
    with pytest.raises(AssertionError):
        assert_written(np.float32([1.0, 2.0]), np.float32([1.0, 2.1]), rtol=1e-5)
    with pytest.raises(AssertionError, match="shape"):
        assert_written(np.zeros(3, "int32"), np.zeros(4, "int32"))


def test_cpu_models_cover_both_vector_widths_and_avx2_only_parts():
    names = [c.name for c in CPUS]
    assert {"skylake-avx512", "znver4", "haswell"} <= set(names) and len(set(names)) == len(names)
    assert {c.vector_bits for c in CPUS} == {256, 512}
    avx2_only = [c for c in CPUS if "avx512f" not in c.features]
    assert len(avx2_only) >= 2 and all("avx2" in c.features for c in avx2_only)
    assert all(c.target == f"llvm -mcpu={c.name}" and str(c) == c.name for c in CPUS)


def test_cpu_runs_here_compares_with_the_host_features(monkeypatch):
    skx, zen4, hsw, _ = CPUS
    intel = hsw.features | skx.features | {"avx512fp16"}
    monkeypatch.setattr(helpers, "host_features", lambda: intel)
    assert skx.runs_here() and hsw.runs_here() and not zen4.runs_here()
    monkeypatch.setattr(helpers, "host_features", lambda: hsw.features)
    assert hsw.runs_here() and not skx.runs_here()
    monkeypatch.setattr(helpers, "host_features", lambda: zen4.features)
    assert all(c.runs_here() for c in CPUS)
