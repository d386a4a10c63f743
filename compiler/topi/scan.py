"""``cumsum``: running sums along an axis (TVM's ``topi.cumsum``, with ONNX CumSum's ``reverse``)."""

from __future__ import annotations

import math

from .. import te
from ..dtypes import check
from .utils import get_const_tuple

__all__ = ["cumsum"]


def _unflatten(flat, shape: tuple[int, ...]) -> tuple:
    """Row-major position ``flat`` in ``shape`` as one index per axis."""
    idx = []
    for d in reversed(shape):
        idx.append(flat % d if d != 1 else 0)
        flat = flat // d
    return tuple(reversed(idx))


def cumsum(data: te.Tensor, axis: int | None = None, dtype: str | None = None, exclusive: bool | None = None,
           reverse: bool = False, name: str = "T_cumsum") -> te.Tensor:
    """The running sum of ``data`` along ``axis`` (over the flattened data where ``axis`` is None).

    ``dtype`` is the output's and the accumulator's dtype (default: the data's). ``exclusive``
    leaves each element out of its own sum (the first one is 0); ``reverse`` sums from the end of
    the axis towards its start.

    Each output element is a reduction over the whole axis that counts the elements before it
    (``k <= i``, or ``k < i``, ``k >= i``, ``k > i``): O(n^2) work along an axis of ``n``, no
    sequential dependence between outputs.
    """
    shape = tuple(int(d) for d in get_const_tuple(data.shape))
    dtype = check(dtype or data.dtype)
    if axis is None:
        size = math.prod(shape)
        out_shape, n = (size,), size

        def at(i, k):
            return data[_unflatten(k, shape)]
    else:
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"cumsum: axis {axis} is out of range for {len(shape)} dimensions")
        axis %= len(shape)
        out_shape, n = shape, shape[axis]

        def at(i, k):
            return data[(*i[:axis], k, *i[axis + 1:])]

    def body(*i):
        k = te.reduce_axis((0, n), name="k")
        pos = i[0] if axis is None else i[axis]
        if reverse:
            counted = k > pos if exclusive else k >= pos
        else:
            counted = k < pos if exclusive else k <= pos
        return te.sum(at(i, k).astype(dtype), axis=k, where=counted)

    return te.compute(out_shape, body, name=name, tag="cumsum")
