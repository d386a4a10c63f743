"""ONNX converters for running sums, triangles and index-based operators: CumSum, Trilu, OneHot,
GatherND, ScatterND, ScatterElements (Scatter before opset 11) and EyeLike.

Each becomes one catalog operator (:mod:`compiler.graph.ops.indexing`); EyeLike depends only on
its input's shape, so it becomes a constant. GatherND and ScatterND list each index tuple along
the indices' last axis, the catalog's ``gather_nd`` and ``scatter_nd`` (TVM's) along the first, so
their indices are transposed (a constant folds; a transpose of model inputs fuses with its
reader).

Constant indices out of range are an error here. Indices computed from the model inputs cannot be
checked at import: out of range, they clip to their axis (ONNX leaves that undefined).
"""

from __future__ import annotations

import numpy as np

from ...graph import Value
from .importer import NodeContext, converts, element_dtype, optional_input

__all__: list[str] = []

# ONNX's reduction -> the catalog's, and the opset that introduced it
_REDUCTIONS = {"none": ("update", 1), "add": ("add", 16), "mul": ("mul", 16), "max": ("max", 18),
               "min": ("min", 18)}


def _reduction(ctx: NodeContext, attrs) -> str:
    name = attrs.get("reduction", "none")
    if name not in _REDUCTIONS:
        raise ctx.unsupported(f"reduction={name!r}")
    reduction, since = _REDUCTIONS[name]
    if ctx.opset < since:
        raise ctx.error(f"reduction={name!r} needs opset {since} or later")
    return reduction


def _checked(ctx: NodeContext, indices: Value, bounds, what: str) -> Value:
    """``indices``, where constant checked to lie in ``[-n, n)`` for the size ``n`` of the axis each
    indexes (``bounds``: one size, or one per entry of the last axis)."""
    if indices.dtype not in ("int32", "int64"):
        raise ctx.error(f"{what} must be int32 or int64, got {indices.dtype}")
    if indices.is_constant and indices.data.size:
        idx = indices.data
        n = np.broadcast_to(np.asarray(bounds), idx.shape)
        bad = np.argwhere((idx < -n) | (idx >= n))
        if len(bad):
            at = tuple(int(k) for k in bad[0])
            raise ctx.error(f"{what} {int(idx[at])} at position {at} is out of range for an axis of "
                            f"{int(n[at])}")
    return indices


def _tuples_first(ctx: NodeContext, indices: Value) -> Value:
    """ONNX's indices ``(..., M)`` as TVM's ``(M, ...)``."""
    q = len(indices.shape)
    if q < 2:
        return indices
    return ctx.emit("transpose", [indices], axes=(q - 1, *range(q - 1)))


# ---------------------------------------------------------------------------- running sums, triangles


@converts("CumSum")
def _cumsum(ctx: NodeContext, ins, attrs):
    x = ins[0]
    axis = ctx.scalar(optional_input(ins, 1), "axis")
    if axis is None:
        raise ctx.error("input axis is missing")
    if not isinstance(axis, int):
        raise ctx.error(f"input axis must be an integer, got {axis!r}")
    if not x.shape:
        raise ctx.error("the input must have at least one axis")
    return ctx.emit("cumsum", [x], axis=ctx.axis(axis, len(x.shape)),
                    exclusive=bool(attrs.get("exclusive", 0)), reverse=bool(attrs.get("reverse", 0)))


@converts("Trilu")
def _trilu(ctx: NodeContext, ins, attrs):
    x = ins[0]
    k = ctx.scalar(optional_input(ins, 1), "k")
    if not isinstance(k, (int, type(None))):
        raise ctx.error(f"input k must be an integer, got {k!r}")
    if len(x.shape) < 2:
        raise ctx.error(f"the input must have at least 2 dimensions, got shape {x.shape}")
    return ctx.emit("trilu", [x], k=k or 0, upper=bool(attrs.get("upper", 1)))


@converts("EyeLike")
def _eye_like(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if len(x.shape) != 2:
        raise ctx.error(f"the input must be 2-D, got shape {x.shape}")
    dtype = element_dtype(attrs["dtype"], ctx.where) if "dtype" in attrs else x.dtype
    return ctx.const(np.eye(*x.shape, k=int(attrs.get("k", 0)), dtype=dtype))


@converts("OneHot")
def _one_hot(ctx: NodeContext, ins, attrs):
    indices, depth, values = ins
    d = ctx.scalar(depth, "depth")
    if d is None:
        raise ctx.error("input depth is missing")
    if isinstance(d, bool) or not float(d).is_integer() or d < 1:
        raise ctx.error(f"depth must be a positive integer, got {d!r}")
    if values.shape != (2,):
        raise ctx.error(f"values must hold [off_value, on_value], got shape {values.shape}")
    if indices.dtype not in ("int32", "int64"):  # ONNX casts other indices to int64
        indices = ctx.cast(indices, "int64")
    rank = len(indices.shape) + 1
    axis = attrs.get("axis", -1)
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for an output of rank {rank}")
    off, on = (ctx.reshape(ctx.emit("strided_slice", [values], begin=(k,), end=(k + 1,)), ()) for k in (0, 1))
    return ctx.emit("one_hot", [indices, on, off], depth=int(d), axis=axis % rank, dtype=values.dtype)


# ---------------------------------------------------------------------------- gathers and scatters


@converts("GatherND")
def _gather_nd(ctx: NodeContext, ins, attrs):
    data, indices = ins
    b = int(attrs.get("batch_dims", 0))
    r, q = len(data.shape), len(indices.shape)
    if not 0 <= b < min(q, r):
        raise ctx.error(f"batch_dims={b} must lie in [0, {min(q, r)}) for data {data.shape} and indices "
                        f"{indices.shape}")
    m = indices.shape[-1]
    if not 1 <= m <= r - b:
        raise ctx.error(f"index tuples of {m} entries (the indices' last axis) do not fit the {r - b} "
                        f"axes of data {data.shape} after {b} batch axes")
    if indices.shape[:b] != data.shape[:b]:
        raise ctx.error(f"the indices {indices.shape} and data {data.shape} differ in their {b} batch axes")
    indices = _checked(ctx, indices, data.shape[b:b + m], "an index")
    return ctx.emit("gather_nd", [data, _tuples_first(ctx, indices)], batch_dims=b)


@converts("ScatterND")
def _scatter_nd(ctx: NodeContext, ins, attrs):
    data, indices, updates = ins
    reduction = _reduction(ctx, attrs)
    r = len(data.shape)
    m = indices.shape[-1] if indices.shape else 0
    if not 1 <= m <= r:
        raise ctx.error(f"index tuples of {m} entries (the indices' last axis) do not fit data {data.shape}")
    want = (*indices.shape[:-1], *data.shape[m:])
    if updates.shape != want:
        raise ctx.error(f"the updates {updates.shape} must have shape {want} for indices {indices.shape} "
                        f"and data {data.shape}")
    indices = _checked(ctx, indices, data.shape[:m], "an index")
    return ctx.emit("scatter_nd", [data, _tuples_first(ctx, indices), updates], mode=reduction)


@converts("ScatterElements", "Scatter")
def _scatter_elements(ctx: NodeContext, ins, attrs):
    data, indices, updates = ins
    axis = ctx.axis(attrs.get("axis", 0), len(data.shape))
    reduction = _reduction(ctx, attrs)
    indices = _checked(ctx, indices, data.shape[axis], "an index")
    return ctx.emit("scatter_elements", [data, indices, updates], axis=axis, reduction=reduction)
