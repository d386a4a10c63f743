"""``topk``: the ``k`` largest (or smallest) elements along an axis and their indices (TVM's
``topi.topk``).

Shapes are static, so the selection is written as pure tensor expressions rather than a sort:

1. the *rank* of each element: how many elements of its row come before it in the order asked
   for, a reduction over the row (O(n^2) comparisons per row of ``n``);
2. for each output position ``p < k``, the index of the element of rank ``p``, a second
   reduction over the row (O(n k) per row);
3. the values, read at those indices.

The order is total, so the ranks of a row are a permutation of ``0 .. n-1`` and each position
finds exactly one element: values compare as numbers, ties go to the lower index (as ONNX
Runtime breaks them), and NaN counts as larger than every number (numpy's sort order), NaNs
among themselves by index. ``-0.0`` and ``0.0`` tie.
"""

from __future__ import annotations

from .. import dtypes, te
from .utils import get_const_tuple

__all__ = ["topk", "RET_TYPES"]

#: What :func:`topk` returns: both the values and the indices (a list of two tensors), or one.
RET_TYPES = ("both", "values", "indices")


def _precedes(a, b, ja, jb, ascending: bool, floating: bool):
    """Whether element ``a`` (at ``ja``) comes before ``b`` (at ``jb``) in the output order."""
    first, second = (b, a) if ascending else (a, b)  # "first beats second" below means a precedes b
    beats = first > second
    ties = a == b
    if floating:
        nan_a, nan_b = te.isnan(a), te.isnan(b)
        # NaN is the largest value: it beats every number; two NaNs tie
        nan_first, nan_second = (nan_b, nan_a) if ascending else (nan_a, nan_b)
        beats = beats | (nan_first & ~nan_second)
        ties = ties | (nan_a & nan_b)
    return beats | (ties & (ja < jb))


def topk(data: te.Tensor, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int64"):
    """The ``k`` largest elements of ``data`` along ``axis`` (the smallest with ``is_ascend``),
    in order, and their indices along the axis as ``dtype``.

    ``ret_type`` is ``"both"`` (returns ``[values, indices]``), ``"values"`` or ``"indices"``
    (returns one tensor). The outputs have ``data``'s shape with ``axis`` of ``k`` elements. Ties
    go to the lower index; NaN is larger than every number. ``k`` of 0 or less takes the whole
    axis (TVM's convention). Work: O(n^2 + n k) comparisons per row of ``n`` along the axis (see
    the module's docstring).
    """
    shape = tuple(int(d) for d in get_const_tuple(data.shape))
    if not shape:
        raise ValueError("topk: data must have at least one axis")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"topk: axis {axis} is out of range for {len(shape)} dimensions")
    axis %= len(shape)
    n = shape[axis]
    if ret_type not in RET_TYPES:
        raise ValueError(f"topk: ret_type must be one of {', '.join(RET_TYPES)}, got {ret_type!r}")
    if dtype not in ("int32", "int64"):
        raise ValueError(f"topk: dtype must be int32 or int64, got {dtype!r}")
    if data.dtype == "bool":
        raise ValueError("topk: data must be numeric, got bool")
    k = n if k < 1 else int(k)
    if not 1 <= k <= n:
        raise ValueError(f"topk: k={k} must lie in [1, {n}] for an axis of {n}")
    floating = dtypes.is_float(data.dtype)

    def at(i, j):
        return data[(*i[:axis], j, *i[axis + 1:])]

    def rank_body(*i):
        j = te.reduce_axis((0, n), name="j")
        before = _precedes(at(i, j), data[i], j, i[axis], is_ascend, floating)
        return te.sum(te.if_then_else(before, te.const(1, "int32"), te.const(0, "int32")), axis=j)

    rank = te.compute(shape, rank_body, name="T_topk_rank", tag="topk_rank")
    out_shape = (*shape[:axis], k, *shape[axis + 1:])

    def index_body(*o):
        r = te.reduce_axis((0, n), name="r")
        hit = rank[(*o[:axis], r, *o[axis + 1:])] == o[axis]
        return te.sum(r.var.astype(dtype), axis=r, where=hit)

    indices = te.compute(out_shape, index_body, name="T_topk_indices", tag="topk")
    if ret_type == "indices":
        return indices

    def value_body(*o):
        # each position has exactly one hit; clamped all the same, so the read stays in bounds
        j = te.min(te.max(indices[o].astype("int32"), 0), n - 1)
        return at(o, j)

    values = te.compute(out_shape, value_body, name="T_topk_values", tag="topk")
    return values if ret_type == "values" else [values, indices]
