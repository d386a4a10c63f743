"""Operators that move elements: ``reshape``, ``transpose``, ``concatenate``, ``take``,
``gather``, ``strided_slice``, ``expand`` and ``nn.pad``. Their references are numpy's own."""

from __future__ import annotations

import math

import numpy as np

from ... import te, topi
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import (
    arity,
    axis_of,
    broadcast_index,
    broadcast_shape,
    clip_index,
    fail,
    index_dtype,
    int_tuple,
    same_dtype,
    shape_of,
)

__all__ = ["transpose_axes", "take_positions"]


def _injective(name: str, infer, evaluate, compute, doc: str, pattern: str = "injective") -> OpDef:
    return register_op(OpDef(name, pattern, infer, evaluate, compute, doc))


# ---------------------------------------------------------------------------- reshape


def _reshape_infer(types, attrs):
    arity("reshape", types, 1)
    (x,) = types
    shape = int_tuple("reshape", "newshape", attrs.get("newshape"), minimum=0)
    if math.prod(shape) != x.size:
        raise fail("reshape", f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return [TensorType(shape, x.dtype)]


def _reshape_compute(tensors, attrs):
    (x,) = tensors
    src, dst = shape_of(x), tuple(attrs["newshape"])
    if src == dst:
        return [te.compute(dst, lambda *i: x[i], name="T_reshape", tag="injective")]

    def body(*i):
        flat = 0
        for k, d in zip(i, dst):
            flat = flat * d + k
        idx, rest = [], flat
        for d in reversed(src):  # the innermost axis first
            idx.append(rest % d if d != 1 else 0)
            rest = rest // d
        return x[tuple(reversed(idx))]

    return [te.compute(dst, body, name="T_reshape", tag="injective")]


_injective("reshape", _reshape_infer, lambda arrays, attrs: [arrays[0].reshape(attrs["newshape"])],
           _reshape_compute, "The same elements in attribute newshape (a fully resolved tuple).")


# ---------------------------------------------------------------------------- transpose


def transpose_axes(attrs, ndim: int) -> tuple[int, ...]:
    """A transpose's permutation of ``ndim`` axes, from its ``axes`` attribute (reversed when None)."""
    axes = attrs.get("axes")
    if axes is None:
        return tuple(reversed(range(ndim)))
    axes = tuple(axis_of("transpose", a, ndim) for a in int_tuple("transpose", "axes", axes, ndim))
    if sorted(axes) != list(range(ndim)):
        raise fail("transpose", f"attribute axes must be a permutation of {ndim} axes, "
                                f"got {attrs.get('axes')!r}")
    return axes


def _transpose_infer(types, attrs):
    arity("transpose", types, 1)
    (x,) = types
    return [TensorType(tuple(x.shape[a] for a in transpose_axes(attrs, len(x.shape))), x.dtype)]


def _transpose_compute(tensors, attrs):
    (x,) = tensors
    src = shape_of(x)
    axes = transpose_axes(attrs, len(src))
    inverse = np.argsort(axes)
    return [te.compute(tuple(src[a] for a in axes), lambda *i: x[tuple(i[k] for k in inverse)],
                       name="T_transpose", tag="injective")]


def _transpose_evaluate(arrays, attrs):
    (x,) = arrays
    return [np.ascontiguousarray(x.transpose(transpose_axes(attrs, x.ndim)))]


_injective("transpose", _transpose_infer, _transpose_evaluate,
           _transpose_compute, "Permute the axes (attribute axes; reversed when None).")


# ---------------------------------------------------------------------------- concatenate


def _concat_infer(types, attrs):
    op = "concatenate"
    if not types:
        raise fail(op, "takes at least one input")
    dtype = same_dtype(op, types)
    ndim = len(types[0].shape)
    if any(len(t.shape) != ndim for t in types) or ndim == 0:
        shapes = ", ".join(str(t.shape) for t in types)
        raise fail(op, f"the inputs must have one rank of at least 1, got {shapes}")
    axis = axis_of(op, attrs.get("axis", 0), ndim)
    rest = {t.shape[:axis] + t.shape[axis + 1:] for t in types}
    if len(rest) != 1:
        raise fail(op, f"the inputs' shapes differ off axis {axis}: {', '.join(str(t.shape) for t in types)}")
    shape = list(types[0].shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(tuple(shape), dtype)]


def _concat_compute(tensors, attrs):
    shapes = [shape_of(t) for t in tensors]
    axis = attrs.get("axis", 0) % len(shapes[0])
    offsets = np.cumsum([0] + [s[axis] for s in shapes]).tolist()
    out = list(shapes[0])
    out[axis] = offsets[-1]

    def body(*i):
        def at(k):
            return tensors[k][(*i[:axis], i[axis] - offsets[k], *i[axis + 1:])]

        value = at(len(tensors) - 1)
        for k in reversed(range(len(tensors) - 1)):
            value = te.if_then_else(i[axis] < offsets[k + 1], at(k), value)
        return value

    return [te.compute(tuple(out), body, name="T_concat", tag="injective")]


_injective("concatenate", _concat_infer,
           lambda arrays, attrs: [np.concatenate(arrays, axis=attrs.get("axis", 0))], _concat_compute,
           "The inputs joined along attribute axis.")


# ---------------------------------------------------------------------------- take


def _indexed(op: str, types) -> tuple[TensorType, TensorType]:
    """``(data, indices)`` of an operator that picks elements by index (int32 or int64)."""
    arity(op, types, 2)
    data, indices = types
    index_dtype(op, indices)
    return data, indices


def _take_infer(types, attrs):
    op = "take"
    data, indices = _indexed(op, types)
    if not data.shape:
        raise fail(op, "the data must have at least one axis")
    axis = axis_of(op, attrs.get("axis", 0), len(data.shape))
    if data.shape[axis] == 0 and indices.size:
        raise fail(op, f"cannot take from an empty axis {axis} of {data.shape}")
    return [TensorType(data.shape[:axis] + indices.shape + data.shape[axis + 1:], data.dtype)]


def take_positions(attrs, shape, indices: np.ndarray) -> tuple[int, np.ndarray]:
    """A take's axis of data of ``shape``, and the positions on it that ``indices`` pick: a
    negative index counts from the end, others out of range clip to the axis."""
    axis = attrs.get("axis", 0) % len(shape)
    return axis, clip_index(indices, shape[axis])


def _take_evaluate(arrays, attrs):
    data, indices = arrays
    axis, positions = take_positions(attrs, data.shape, indices)
    return [np.asarray(np.take(data, positions, axis=axis))]


def _take_compute(tensors, attrs):
    data, indices = tensors
    return [topi.take(data, indices, attrs.get("axis", 0))]


_injective("take", _take_infer, _take_evaluate, _take_compute,
           "numpy.take along attribute axis; negative indices count from the end, others out of "
           "range clip to the axis.")


# ---------------------------------------------------------------------------- gather


def _gather_infer(types, attrs):
    op = "gather"
    data, indices = _indexed(op, types)
    if len(indices.shape) != len(data.shape) or not data.shape:
        raise fail(op, f"the indices {indices.shape} must have the data's rank ({data.shape})")
    axis = axis_of(op, attrs.get("axis", 0), len(data.shape))
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise fail(op, f"the indices {indices.shape} reach past the data {data.shape} off axis {axis}")
    if data.shape[axis] == 0 and indices.size:
        raise fail(op, f"cannot gather from an empty axis {axis} of {data.shape}")
    return [TensorType(indices.shape, data.dtype)]


def _gather_evaluate(arrays, attrs):
    data, indices = arrays
    axis = attrs.get("axis", 0) % data.ndim
    n = data.shape[axis]
    grid = list(np.indices(indices.shape, sparse=True))  # each output element's own position,
    grid[axis] = clip_index(indices, n)  # its pick on axis
    return [np.ascontiguousarray(data[tuple(grid)])]


def _gather_compute(tensors, attrs):
    data, indices = tensors
    return [topi.gather(data, attrs.get("axis", 0), indices)]


_injective("gather", _gather_infer, _gather_evaluate, _gather_compute,
           "Each index picks along attribute axis at its own position (ONNX GatherElements, TVM's "
           "gather; numpy.take_along_axis where the shapes agree off the axis); negative indices "
           "count from the end, others out of range clip to the axis.")


# ---------------------------------------------------------------------------- strided_slice


def _slice_attrs(shape, attrs) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(begin, strides, out_shape)`` with begin and end clamped to each axis."""
    op, ndim = "strided_slice", len(shape)
    begin = int_tuple(op, "begin", attrs.get("begin"), ndim, 0)
    end = int_tuple(op, "end", attrs.get("end"), ndim, 0)
    strides = attrs.get("strides")
    strides = (1,) * ndim if strides is None else int_tuple(op, "strides", strides, ndim)
    if any(s < 1 for s in strides):
        raise fail(op, f"only positive strides are supported, got {strides}")
    begin = tuple(min(b, d) for b, d in zip(begin, shape))
    end = tuple(min(e, d) for e, d in zip(end, shape))
    out = tuple(max(0, -(-(e - b) // s)) for b, e, s in zip(begin, end, strides))
    return begin, strides, out


def _slice_infer(types, attrs):
    arity("strided_slice", types, 1)
    (x,) = types
    return [TensorType(_slice_attrs(x.shape, attrs)[2], x.dtype)]


def _slice_evaluate(arrays, attrs):
    (x,) = arrays
    begin, strides, out = _slice_attrs(x.shape, attrs)
    index = tuple(slice(b, b + (n - 1) * s + 1, s) for b, s, n in zip(begin, strides, out))
    return [np.ascontiguousarray(x[index])]


def _slice_compute(tensors, attrs):
    (x,) = tensors
    begin, strides, out = _slice_attrs(shape_of(x), attrs)
    return [te.compute(out, lambda *i: x[tuple(b + k * s for k, b, s in zip(i, begin, strides))],
                       name="T_strided_slice", tag="injective")]


_injective("strided_slice", _slice_infer, _slice_evaluate, _slice_compute,
           "x[begin:end:strides] per axis: non-negative begin and end (clamped to the axis), "
           "positive strides.")


# ---------------------------------------------------------------------------- expand


def _expand_infer(types, attrs):
    arity("expand", types, 1)
    (x,) = types
    target = int_tuple("expand", "shape", attrs.get("shape"), minimum=0)
    return [TensorType(broadcast_shape("expand", [x.shape, target]), x.dtype)]


def _expand_compute(tensors, attrs):
    (x,) = tensors
    src = shape_of(x)
    out = broadcast_shape("expand", [src, tuple(attrs["shape"])])
    return [te.compute(out, lambda *i: x[broadcast_index(i, src, out)], name="T_expand", tag="broadcast")]


def _expand_evaluate(arrays, attrs):
    (x,) = arrays
    out = broadcast_shape("expand", [x.shape, tuple(attrs["shape"])])
    return [np.ascontiguousarray(np.broadcast_to(x, out))]


_injective("expand", _expand_infer, _expand_evaluate, _expand_compute,
           "x broadcast with attribute shape (numpy broadcasting both ways, as ONNX Expand).",
           pattern="broadcast")


# ---------------------------------------------------------------------------- nn.pad


def _pad_attrs(ndim: int, attrs) -> tuple[list[int], list[int], float]:
    op = "nn.pad"
    width = attrs.get("pad_width")
    if not isinstance(width, (tuple, list)) or len(width) != ndim:
        raise fail(op, f"attribute pad_width must hold one (before, after) pair per axis ({ndim}), "
                       f"got {width!r}")
    pairs = [int_tuple(op, "pad_width", p, 2, 0) for p in width]
    value = attrs.get("pad_value", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(op, f"attribute pad_value must be a number, got {value!r}")
    return [p[0] for p in pairs], [p[1] for p in pairs], value


def _pad_infer(types, attrs):
    arity("nn.pad", types, 1)
    (x,) = types
    before, after, _ = _pad_attrs(len(x.shape), attrs)
    return [TensorType(tuple(d + b + a for d, b, a in zip(x.shape, before, after)), x.dtype)]


def _pad_evaluate(arrays, attrs):
    (x,) = arrays
    before, after, value = _pad_attrs(x.ndim, attrs)
    return [np.pad(x, list(zip(before, after)), constant_values=np.asarray(value).astype(x.dtype))]


def _pad_compute(tensors, attrs):
    (x,) = tensors
    before, after, value = _pad_attrs(len(x.shape), attrs)
    return [topi.nn.pad(x, before, after, value, name="T_pad")]


_injective("nn.pad", _pad_infer, _pad_evaluate, _pad_compute,
           "A border of attribute pad_value (0) of pad_width ((before, after) per axis).")
