"""Elementwise activations (TVM's ``topi.nn.relu``)."""

from __future__ import annotations

from ... import te

__all__ = ["relu"]


def relu(x):
    """``max(x, 0)`` elementwise."""
    if not isinstance(x, te.Tensor):
        raise TypeError(f"relu: x must be a te.Tensor, got {type(x).__name__}")
    zero = te.const(0, x.dtype)
    return te.compute(x.shape, lambda *i: te.max(x[i], zero), name="T_relu", tag="elemwise")
