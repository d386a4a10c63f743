"""Operators that pick or place elements by index, and running sums, with TVM's names and meaning:
``cumsum``, ``trilu``, ``one_hot``, ``gather_nd``, ``scatter_nd`` and ``scatter_elements``.

Indices read from a tensor follow ``take``'s rule: a negative index counts from the end of its
axis, others out of range clip to the axis (ONNX calls such indices an error; clipping keeps the
generated code inside its buffers). ``gather_nd`` and ``scatter_nd`` take TVM's layout of the
indices: the index tuples run along the *first* axis, ``(M, Y_0, ..., Y_{K-1})`` (ONNX puts them
last).

The scatters and ``cumsum`` are ``opaque``: every output element reads many input elements, so a
producer fused into them would be recomputed for each read. The references compute in float64
(int64 for integers) and round once to the dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes, topi
from ...topi.transform import SCATTER_REDUCTIONS
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import (
    arity,
    axis_of,
    clip_index,
    fail,
    flag,
    index_dtype,
    int_attr,
    narrow,
    numeric,
    positive_int,
    same_dtype,
    wide,
)

__all__: list[str] = []


def _dtype_attr(op: str, attrs, default: str) -> str:
    dtype = attrs.get("dtype") or default
    if dtype not in dtypes.SUPPORTED:
        raise fail(op, f"attribute dtype must be one of {dtypes.SUPPORTED}, got {dtype!r}")
    return dtype


# ---------------------------------------------------------------------------- cumsum


def _cumsum_attrs(op: str, attrs, ndim: int, dtype: str) -> tuple[int | None, str, bool, bool]:
    axis = attrs.get("axis")
    axis = None if axis is None else axis_of(op, axis, ndim)
    out_dtype = _dtype_attr(op, attrs, dtype)
    if out_dtype == "bool":
        raise fail(op, "attribute dtype must be numeric, got bool")
    return axis, out_dtype, flag(op, attrs, "exclusive", False), flag(op, attrs, "reverse", False)


def _cumsum_infer(types, attrs):
    op = "cumsum"
    arity(op, types, 1)
    (x,) = types
    numeric(op, x)
    axis, dtype, _, _ = _cumsum_attrs(op, attrs, len(x.shape), x.dtype)
    return [TensorType(x.shape if axis is not None else (x.size,), dtype)]


def _cumsum_evaluate(arrays, attrs):
    (x,) = arrays
    axis, dtype, exclusive, reverse = _cumsum_attrs("cumsum", attrs, x.ndim, x.dtype.name)
    a = wide(x.astype(dtype))
    if axis is None:
        a, axis = a.reshape(-1), 0
    if reverse:
        a = np.flip(a, axis)
    total = np.cumsum(a, axis=axis)
    if exclusive:
        total = total - a
    if reverse:
        total = np.flip(total, axis)
    return [narrow(np.ascontiguousarray(total), dtype)]


def _cumsum_compute(tensors, attrs):
    (x,) = tensors
    axis, dtype, exclusive, reverse = _cumsum_attrs("cumsum", attrs, len(x.shape), x.dtype)
    return [topi.cumsum(x, axis, dtype, exclusive, reverse)]


register_op(OpDef("cumsum", "opaque", _cumsum_infer, _cumsum_evaluate, _cumsum_compute,
                  "Running sums along attribute axis (None: over the flattened input) in attribute dtype "
                  "(the input's); exclusive leaves each element out of its own sum, reverse sums from the "
                  "end (ONNX CumSum; TVM's cumsum has no reverse)."))


# ---------------------------------------------------------------------------- trilu


def _trilu_attrs(attrs) -> tuple[int, bool]:
    return int_attr("trilu", attrs, "k", 0), flag("trilu", attrs, "upper", True)


def _trilu_infer(types, attrs):
    arity("trilu", types, 1)
    (x,) = types
    if len(x.shape) < 2:
        raise fail("trilu", f"the input must have at least 2 dimensions, got shape {x.shape}")
    _trilu_attrs(attrs)
    return [x]


def _trilu_evaluate(arrays, attrs):
    (x,) = arrays
    k, upper = _trilu_attrs(attrs)
    return [np.ascontiguousarray(np.triu(x, k) if upper else np.tril(x, k))]


def _trilu_compute(tensors, attrs):
    return [topi.trilu(tensors[0], *_trilu_attrs(attrs))]


# injective, not elementwise: what it keeps depends on each element's position, so passes that move
# elementwise operators across reshapes must leave it in place
register_op(OpDef("trilu", "injective", _trilu_infer, _trilu_evaluate, _trilu_compute,
                  "The upper (attribute upper, True) or lower triangle of each matrix in the last two axes, "
                  "zeros elsewhere: (i, j) is kept where j - i >= k (upper) or j - i <= k (lower)."))


# ---------------------------------------------------------------------------- one_hot


def _one_hot_attrs(attrs, ndim: int, dtype: str) -> tuple[int, int, str]:
    op = "one_hot"
    depth = positive_int(op, "depth", attrs.get("depth"))
    axis = axis_of(op, int_attr(op, attrs, "axis", -1), ndim + 1)
    return depth, axis, _dtype_attr(op, attrs, dtype)


def _one_hot_infer(types, attrs):
    op = "one_hot"
    arity(op, types, 3)
    indices, on, off = types
    index_dtype(op, indices)
    for t, what in ((on, "on_value"), (off, "off_value")):
        if t.shape != ():
            raise fail(op, f"{what} must be a scalar (shape ()), got shape {t.shape}")
    depth, axis, dtype = _one_hot_attrs(attrs, len(indices.shape), on.dtype)
    return [TensorType((*indices.shape[:axis], depth, *indices.shape[axis:]), dtype)]


def _one_hot_evaluate(arrays, attrs):
    indices, on, off = arrays
    depth, axis, dtype = _one_hot_attrs(attrs, indices.ndim, on.dtype.name)
    j = np.where(indices < 0, indices + depth, indices)
    hot = j[..., None] == np.arange(depth)
    out = np.where(hot, on.astype(dtype), off.astype(dtype))
    return [np.ascontiguousarray(np.moveaxis(out, -1, axis))]


def _one_hot_compute(tensors, attrs):
    indices, on, off = tensors
    depth, axis, dtype = _one_hot_attrs(attrs, len(indices.shape), on.dtype)
    return [topi.one_hot(indices, on[()], off[()], depth, axis, dtype)]


register_op(OpDef("one_hot", "injective", _one_hot_infer, _one_hot_evaluate, _one_hot_compute,
                  "on_value (a scalar) at each index's position along a new axis (attribute axis, -1) of "
                  "attribute depth elements, off_value elsewhere, in attribute dtype (on_value's). A "
                  "negative index counts from the end (as ONNX OneHot); one outside [-depth, depth) "
                  "gives a row of off_value."))


# ---------------------------------------------------------------------------- gather_nd


def _gather_nd_infer(types, attrs):
    op = "gather_nd"
    arity(op, types, 2)
    data, indices = types
    index_dtype(op, indices)
    b = int_attr(op, attrs, "batch_dims", 0)
    if not indices.shape or indices.shape[0] < 1:
        raise fail(op, f"the indices {indices.shape} must hold index tuples along their first axis "
                       f"(shape (M, ...), M >= 1)")
    m, ys = indices.shape[0], indices.shape[1:]
    if b < 0 or b + m > len(data.shape):
        raise fail(op, f"{m} indexed axes after batch_dims={b} do not fit the data's {len(data.shape)}")
    if ys[:b] != data.shape[:b]:
        raise fail(op, f"the indices {indices.shape} must run along the data's {b} batch axes "
                       f"{data.shape[:b]} after their first axis")
    if indices.size and 0 in data.shape[b:b + m]:
        raise fail(op, f"cannot index an empty axis of {data.shape}")
    return [TensorType((*ys, *data.shape[b + m:]), data.dtype)]


def _gather_nd_evaluate(arrays, attrs):
    data, indices = arrays
    b = attrs.get("batch_dims", 0)
    ys = indices.shape[1:]
    batch = [np.arange(n).reshape((-1,) + (1,) * (len(ys) - 1 - k)) for k, n in enumerate(ys[:b])]
    picks = [clip_index(indices[k], data.shape[b + k]) for k in range(indices.shape[0])]
    return [np.ascontiguousarray(data[(*batch, *picks)])]


def _gather_nd_compute(tensors, attrs):
    return [topi.gather_nd(*tensors, attrs.get("batch_dims", 0))]


register_op(OpDef("gather_nd", "injective", _gather_nd_infer, _gather_nd_evaluate, _gather_nd_compute,
                  "Slices picked by index tuples along the indices' first axis, (M, Y...): "
                  "out[y, x] = data[y_0..y_{b-1}, indices[0, y], ..., indices[M-1, y], x] for attribute "
                  "batch_dims b (0); indices by take's rule."))


# ---------------------------------------------------------------------------- the scatters


def _reduction(op: str, attrs, name: str) -> str:
    value = attrs.get(name, "update")
    if value not in SCATTER_REDUCTIONS:
        raise fail(op, f"attribute {name} must be one of {', '.join(SCATTER_REDUCTIONS)}, "
                       f"got {value!r}")
    return value


def _scatter_operands(op: str, types) -> tuple[TensorType, TensorType, TensorType]:
    arity(op, types, 3)
    data, indices, updates = types
    index_dtype(op, indices)
    same_dtype(op, [data, updates], "the data and the updates")
    return data, indices, updates


_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_rows(out: np.ndarray, rows: np.ndarray, values: np.ndarray, reduction: str) -> None:
    """Apply ``values[n]`` to row ``rows[n]`` of ``out`` for each ``n``, in order."""
    if not out.size or not rows.size:
        return
    if reduction == "update":  # the last update of each row wins
        last = len(rows) - 1 - np.unique(rows[::-1], return_index=True)[1]
        out[rows[last]] = values[last]
    else:
        _UFUNCS[reduction].at(out, rows, values)


def _scatter_elements_infer(types, attrs):
    op = "scatter_elements"
    data, indices, updates = _scatter_operands(op, types)
    rank = len(data.shape)
    if rank == 0:
        raise fail(op, "the data must have at least one axis")
    axis = axis_of(op, attrs.get("axis", 0), rank)
    _reduction(op, attrs, "reduction")
    if indices.shape != updates.shape or len(indices.shape) != rank:
        raise fail(op, f"the indices {indices.shape} and the updates {updates.shape} must share one shape "
                       f"of the data's rank ({data.shape})")
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise fail(op, f"the indices {indices.shape} reach past the data {data.shape} off axis {axis}")
    if data.shape[axis] == 0 and indices.size:
        raise fail(op, f"cannot scatter into an empty axis {axis} of {data.shape}")
    return [data]


def _scatter_elements_evaluate(arrays, attrs):
    data, indices, updates = arrays
    axis = attrs.get("axis", 0) % data.ndim
    grid = [np.broadcast_to(g, indices.shape) for g in np.indices(indices.shape, sparse=True)]
    grid[axis] = clip_index(indices, data.shape[axis])
    rows = np.ravel_multi_index(tuple(grid), data.shape).reshape(-1)
    out = wide(data)  # a copy
    _scatter_rows(out.reshape(-1, 1), rows, wide(updates).reshape(-1, 1), attrs.get("reduction", "update"))
    return [narrow(out, data.dtype)]


def _scatter_elements_compute(tensors, attrs):
    return [topi.scatter_elements(*tensors, attrs.get("axis", 0), attrs.get("reduction", "update"))]


register_op(OpDef("scatter_elements", "opaque", _scatter_elements_infer, _scatter_elements_evaluate,
                  _scatter_elements_compute,
                  "The data with each updates[u] applied at u with its coordinate on attribute axis (0) "
                  "replaced by indices[u] (ONNX ScatterElements); attribute reduction (update, add, mul, "
                  "min, max) combines it with what is there, update letting the last of several win; "
                  "indices by take's rule."))


def _scatter_nd_infer(types, attrs):
    op = "scatter_nd"
    data, indices, updates = _scatter_operands(op, types)
    _reduction(op, attrs, "mode")
    m = indices.shape[0] if indices.shape else 0
    if not 1 <= m <= len(data.shape) or updates.shape != (*indices.shape[1:], *data.shape[m:]):
        raise fail(op, f"the indices {indices.shape} and the updates {updates.shape} do not fit the data "
                       f"{data.shape}: they need shapes (M, *Y) and (*Y, *data.shape[M:]), "
                       f"1 <= M <= {len(data.shape)}")
    if indices.size and 0 in data.shape[:m]:
        raise fail(op, f"cannot scatter into an empty axis of {data.shape}")
    return [data]


def _scatter_nd_evaluate(arrays, attrs):
    data, indices, updates = arrays
    m = indices.shape[0]
    picks = tuple(clip_index(indices[k], data.shape[k]).reshape(-1) for k in range(m))
    rows = np.ravel_multi_index(picks, data.shape[:m])
    out = wide(data)  # a copy
    width = math.prod(data.shape[m:])
    _scatter_rows(out.reshape(-1, width), rows, wide(updates).reshape(-1, width), attrs.get("mode", "update"))
    return [narrow(out, data.dtype)]


def _scatter_nd_compute(tensors, attrs):
    return [topi.scatter_nd(*tensors, attrs.get("mode", "update"))]


register_op(OpDef("scatter_nd", "opaque", _scatter_nd_infer, _scatter_nd_evaluate, _scatter_nd_compute,
                  "The data with slices of the updates applied at index tuples along the indices' first "
                  "axis, (M, Y...): out[indices[0, y], ..., indices[M-1, y], x] = f(out[...], "
                  "updates[y, x]), f by attribute mode (update, add, mul, min, max), update letting the "
                  "last of several win; indices by take's rule."))
