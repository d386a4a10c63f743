"""Test utilities under TVM's ``tvm.testing`` names, thin over numpy.

>>> import compiler.testing
>>> compiler.testing.assert_allclose(c.numpy(), a + b, rtol=1e-5)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

__all__ = ["assert_allclose"]


def _as_numpy(x) -> np.ndarray:
    """A numpy view of ``x``: device arrays (anything with ``.numpy()``) are copied to the host."""
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """Check that ``actual`` and ``desired`` have the same shape and close values (TVM's defaults).

    Unlike numpy's, NaN never equals NaN here: an output element left unwritten in an array
    filled with NaN fails even where ``desired`` holds NaN at the same place.
    """
    actual, desired = _as_numpy(actual), _as_numpy(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"shapes differ: actual {actual.shape}, desired {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, equal_nan=False, verbose=True)
