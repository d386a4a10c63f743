"""Numpy references for softmax and batched products, under TVM's ``topi.testing`` names."""

from __future__ import annotations

import numpy as np

__all__ = ["softmax_python", "batch_matmul"]


def softmax_python(a_np, axis: int = -1):
    """Softmax of ``a_np`` along ``axis`` (the last by default; TVM's takes 2-D input and the
    last axis), computed in float64 and returned in ``a_np``'s dtype."""
    x = np.asarray(a_np)
    wide = x.astype("float64")
    with np.errstate(invalid="ignore"):  # a row all -inf (every key masked) is NaN, as computed
        e = np.exp(wide - wide.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def batch_matmul(x, y, out_dtype=None, trans_x: bool = False, trans_y: bool = True):
    """``op(x[b]) @ op(y[b])`` per batch, as ``topi.nn.batch_matmul`` (``y`` transposed by
    default; a batch of 1 broadcast), accumulated in float64 (int64 for integers)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 3 or y.ndim != 3:
        raise ValueError(f"batch_matmul takes 3-D arrays, got shapes {x.shape} and {y.shape}")
    out_dtype = x.dtype if out_dtype is None else np.dtype(out_dtype)
    wide = "int64" if x.dtype.kind in "iub" else "float64"
    a = x.astype(wide).transpose(0, 2, 1) if trans_x else x.astype(wide)
    b = y.astype(wide).transpose(0, 2, 1) if trans_y else y.astype(wide)
    if a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
        raise ValueError(f"batch sizes {a.shape[0]} and {b.shape[0]} differ and neither is 1")
    if a.shape[2] != b.shape[1]:
        raise ValueError(f"the reduction lengths differ ({a.shape[2]} and {b.shape[1]})")
    return np.matmul(a, b).astype(out_dtype)
