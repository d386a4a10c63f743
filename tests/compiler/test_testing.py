"""compiler.testing: TVM's tvm.testing.assert_allclose over numpy."""

from __future__ import annotations

import numpy as np
import pytest

import compiler
import compiler.testing


def test_assert_allclose_accepts_device_arrays_and_close_values():
    a = np.array([1.0, 2.0], dtype="float32")
    compiler.testing.assert_allclose(compiler.nd.array(a), a + 1e-8)


def test_assert_allclose_refuses_a_shape_mismatch():
    with pytest.raises(AssertionError, match="shapes differ"):
        compiler.testing.assert_allclose(np.zeros((2, 1)), np.zeros(2))


def test_assert_allclose_never_takes_nan_for_nan():
    with pytest.raises(AssertionError):
        compiler.testing.assert_allclose(np.array([np.nan]), np.array([np.nan]))


def test_assert_allclose_uses_tvm_tolerances():
    with pytest.raises(AssertionError):
        compiler.testing.assert_allclose(np.array([1.0]), np.array([1.0 + 1e-5]))
    compiler.testing.assert_allclose(np.array([1.0]), np.array([1.0 + 1e-5]), rtol=1e-4)
