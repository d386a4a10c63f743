"""ONNX's constants, shape arithmetic and data movement: ``Constant``, ``Shape``, ``Reshape``,
``Transpose``, ``Concat``, ``Gather``, ``Slice``, ``Split``, ``Pad``, ``Expand``, ``Tile``,
``DepthToSpace``/``SpaceToDepth``, and operators computed on constants only (``Range``, ``Xor``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from onnx import numpy_helper

from ... import dtypes
from .importer import NodeContext, converts, optional_input

__all__: list[str] = []

# ---------------------------------------------------------------------------- constants

_NUMPY_ONLY: dict[str, Callable] = {
    "Range": lambda ins, attrs: np.arange(ins[0].item(), ins[1].item(), ins[2].item()).astype(ins[0].dtype),
    "Xor": lambda ins, attrs: np.logical_xor(ins[0], ins[1]),
}


@converts(*_NUMPY_ONLY)
def _numpy_only(ctx: NodeContext, ins, attrs):
    """Operators the catalog lacks, supported where they only compute on constants (shape arithmetic)."""
    arrays = [ctx.array(v, str(k)) for k, v in enumerate(ins)]
    return ctx.const(np.asarray(_NUMPY_ONLY[ctx.op_type](arrays, attrs)))


@converts("Constant")
def _constant(ctx: NodeContext, ins, attrs):
    if "value" in attrs:
        return ctx.const(numpy_helper.to_array(attrs["value"]))
    if "value_float" in attrs:
        return ctx.const(np.array(attrs["value_float"], "float32"))
    if "value_floats" in attrs:
        return ctx.const(np.array(attrs["value_floats"], "float32"))
    if "value_int" in attrs:
        return ctx.const(np.array(attrs["value_int"], "int64"))
    if "value_ints" in attrs:
        return ctx.const(np.array(attrs["value_ints"], "int64"))
    raise ctx.unsupported(f"a constant given as {', '.join(attrs) or 'nothing'}")


@converts("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext, ins, attrs):
    shape = ctx.ints(ins[0], "shape")
    fill = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, "float32")
    return ctx.const(np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype))


@converts("Shape")
def _shape(ctx: NodeContext, ins, attrs):
    dims = np.array(ins[0].shape, "int64")
    if ctx.opset >= 15:
        dims = dims[attrs.get("start", 0):attrs.get("end")]
    return ctx.const(dims)


@converts("Size")
def _size(ctx: NodeContext, ins, attrs):
    return ctx.const(np.array(math.prod(ins[0].shape), "int64"))


# ---------------------------------------------------------------------------- shapes and indexing


def _reshape_target(ctx: NodeContext, src: tuple[int, ...], shape: list[int], allowzero: bool) -> tuple:
    """ONNX Reshape's ``shape`` resolved against input shape ``src``: 0 copies (unless
    ``allowzero``), -1 is inferred."""
    if not allowzero and any(d == 0 and k >= len(src) for k, d in enumerate(shape)):
        raise ctx.error(f"shape {shape} copies a dimension (0) past the rank of the input {src}")
    out = [src[k] if d == 0 and not allowzero else d for k, d in enumerate(shape)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ctx.error(f"shape {shape} is not a valid reshape target")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or math.prod(src) % known:
            raise ctx.error(f"cannot reshape {src} to {shape}")
        out[out.index(-1)] = math.prod(src) // known
    if math.prod(out) != math.prod(src):
        raise ctx.error(f"cannot reshape {src} ({math.prod(src)} elements) to {tuple(out)}")
    return tuple(out)


@converts("Reshape")
def _reshape(ctx: NodeContext, ins, attrs):
    x = ins[0]
    shape = list(attrs["shape"]) if ctx.opset < 5 else ctx.ints(optional_input(ins, 1), "shape")
    return ctx.reshape(x, _reshape_target(ctx, x.shape, shape, bool(attrs.get("allowzero", 0))))


@converts("Flatten")
def _flatten(ctx: NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    axis = attrs.get("axis", 1)
    if not -ndim <= axis <= ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}")
    axis += ndim if axis < 0 else 0
    return ctx.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@converts("Unsqueeze")
def _unsqueeze(ctx: NodeContext, ins, attrs):
    x = ins[0]
    axes = list(attrs["axes"]) if ctx.opset < 13 else ctx.ints(optional_input(ins, 1), "axes")
    rank = len(x.shape) + len(axes)
    axes = sorted(ctx.axis(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat an axis")
    dims = iter(x.shape)
    return ctx.reshape(x, [1 if k in axes else next(dims) for k in range(rank)])


@converts("Squeeze")
def _squeeze(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if ctx.opset < 13:
        axes = attrs.get("axes")
    else:
        axes = None if optional_input(ins, 1) is None else ctx.ints(ins[1], "axes")
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if d == 1]
    axes = {ctx.axis(a, len(x.shape)) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ctx.error(f"cannot squeeze axes {sorted(axes)} of shape {x.shape}: not all are 1")
    return ctx.reshape(x, [d for k, d in enumerate(x.shape) if k not in axes])


@converts("Transpose")
def _transpose(ctx: NodeContext, ins, attrs):
    x = ins[0]
    perm = tuple(attrs.get("perm", reversed(range(len(x.shape)))))
    if perm == tuple(range(len(x.shape))):
        return x
    return ctx.emit("transpose", [x], axes=perm)


@converts("Concat")
def _concat(ctx: NodeContext, ins, attrs):
    return ctx.emit("concatenate", ins, axis=ctx.axis(attrs["axis"], len(ins[0].shape)))


@converts("Gather", "GatherElements")
def _gather(ctx: NodeContext, ins, attrs):
    data, indices = ins
    axis = ctx.axis(attrs.get("axis", 0), len(data.shape))
    if indices.is_constant:
        n = data.shape[axis]
        idx = indices.data
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ctx.error(f"indices out of range for axis {axis} of {data.shape}")
        if (idx < 0).any():
            indices = ctx.const(np.where(idx < 0, idx + n, idx).astype(idx.dtype))
    return ctx.emit("take" if ctx.op_type == "Gather" else "gather", [data, indices], axis=axis)


@converts("Slice")
def _slice(ctx: NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    if ctx.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = ctx.ints(ins[1], "starts"), ctx.ints(ins[2], "ends")
        axes = None if optional_input(ins, 3) is None else ctx.ints(ins[3], "axes")
        steps = None if optional_input(ins, 4) is None else ctx.ints(ins[4], "steps")
    axes = list(range(len(starts))) if axes is None else [ctx.axis(a, ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} do not match")
    begin, end, strides = [0] * ndim, list(x.shape), [1] * ndim
    reversed_axes: dict[int, list[int]] = {}
    for a, s, e, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise ctx.error("a step is 0")
        start, stop, step = slice(s, e, step).indices(x.shape[a])
        if step > 0:
            begin[a], end[a], strides[a] = start, max(start, stop), step
        else:  # taken by index: the catalog's slices step forwards
            reversed_axes[a] = list(range(start, stop, step))
    out = x
    if begin != [0] * ndim or end != list(x.shape) or strides != [1] * ndim:
        out = ctx.emit("strided_slice", [out], begin=tuple(begin), end=tuple(end), strides=tuple(strides))
    for a, index in reversed_axes.items():
        out = ctx.emit("take", [out, ctx.const(np.array(index, "int64"))], axis=a)
    return out


@converts("Split")
def _split(ctx: NodeContext, ins, attrs):
    x = ins[0]
    axis = ctx.axis(attrs.get("axis", 0), len(x.shape))
    dim = x.shape[axis]
    if ctx.opset < 13:
        split = attrs.get("split")
    else:
        split = None if optional_input(ins, 1) is None else ctx.ints(ins[1], "split")
    if split is None:
        if "num_outputs" in attrs:  # opset 18: the last part may be smaller
            n = attrs["num_outputs"]
            size = -(-dim // n)
            split = [size] * (n - 1) + [dim - size * (n - 1)]
        else:
            n = len(ctx.node.output)
            if dim % n:
                raise ctx.error(f"axis {axis} of {x.shape} does not split into {n} equal parts")
            split = [dim // n] * n
    if sum(split) != dim or any(s < 0 for s in split):
        raise ctx.error(f"parts {list(split)} do not add up to axis {axis} of {x.shape}")
    outs, offset = [], 0
    for size in split:
        begin = [0] * len(x.shape)
        end = list(x.shape)
        begin[axis], end[axis] = offset, offset + size
        outs.append(ctx.emit("strided_slice", [x], begin=tuple(begin), end=tuple(end),
                             strides=(1,) * len(x.shape)))
        offset += size
    return outs


@converts("Expand")
def _expand(ctx: NodeContext, ins, attrs):
    return ctx.emit("expand", [ins[0]], shape=tuple(ctx.ints(ins[1], "shape")))


@converts("Pad")
def _pad(ctx: NodeContext, ins, attrs):
    """Negative pads crop first (a slice); then constant padding is ``nn.pad``, and reflect, edge
    and wrap padding take each padded axis's elements by index, one ``take`` per axis (all of it
    one kernel)."""
    x = ins[0]
    ndim = len(x.shape)
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode={mode!r}")
    if ctx.opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings", []))), attrs.get("value", 0.0)
        axes = None
    else:
        pads = ctx.ints(ins[1], "pads")
        value = ctx.scalar(optional_input(ins, 2), "constant_value") or 0
        given = optional_input(ins, 3)
        axes = None if given is None else [ctx.axis(a, ndim) for a in ctx.ints(given, "axes")]
    axes = list(range(ndim)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must hold two entries per padded axis ({len(axes)})")
    width = [(0, 0)] * ndim
    for k, a in enumerate(axes):
        width[a] = (pads[k], pads[k + len(axes)])
    if any(before + after < -n for n, (before, after) in zip(x.shape, width)):
        raise ctx.error(f"pads {pads} crop more than the input's shape {list(x.shape)} holds")
    kept, width = zip(*(_crop_then_pad(n, before, after) for n, (before, after) in zip(x.shape, width)))
    if kept != tuple((0, n) for n in x.shape):
        x = ctx.emit("strided_slice", [x], begin=tuple(lo for lo, _ in kept), end=tuple(hi for _, hi in kept),
                     strides=(1,) * ndim)
    if not any(p for pair in width for p in pair):
        return x
    if mode != "constant":
        for axis, (before, after) in enumerate(width):
            if before or after:
                if x.shape[axis] == 0:
                    raise ctx.error(f"{mode} padding of an axis the pads {pads} crop to nothing")
                source = _padded_positions(np.arange(-before, x.shape[axis] + after), x.shape[axis], mode)
                x = ctx.emit("take", [x, ctx.const(source)], axis=axis)
        return x
    value = float(value) if dtypes.is_float(x.dtype) else int(value)
    return ctx.emit("nn.pad", [x], pad_width=tuple(width), pad_value=value)


def _crop_then_pad(n: int, before: int, after: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """An axis of ``n`` padded by ``before`` and ``after`` (negative: cropped) as the range of the
    input it keeps and the padding around that range. Output element j reads input element
    j - before (ONNX Runtime's rule), so where a crop overlaps the other side's padding, that
    padding is shorter."""
    out = n + before + after
    low = min(max(-before, 0), n)
    high = min(max(n + after, low), n)
    pad_before = min(max(before, 0), out)
    return (low, high), (pad_before, out - pad_before - (high - low))


def _padded_positions(positions: np.ndarray, n: int, mode: str) -> np.ndarray:
    """The element of an axis of ``n`` that each of ``positions`` (below 0 or from ``n``: padding)
    reads, padded by ``mode``: ``edge`` repeats the end elements, ``wrap`` goes round, ``reflect``
    mirrors about the end elements without repeating them (as numpy.pad, also past one length)."""
    if mode == "edge":
        return np.clip(positions, 0, n - 1).astype("int64")
    if mode == "wrap":
        return (positions % n).astype("int64")
    if n == 1:
        return np.zeros_like(positions, dtype="int64")
    period = 2 * (n - 1)
    folded = positions % period
    return np.where(folded < n, folded, period - folded).astype("int64")


@converts("CenterCropPad")
def _center_crop_pad(ctx: NodeContext, ins, attrs):
    """Each of ``axes`` (all by default) cut or zero-padded to its size in ``shape``, centred (an
    odd difference: its extra element at the end)."""
    x = ins[0]
    ndim = len(x.shape)
    axes = [ctx.axis(a, ndim) for a in attrs.get("axes", range(ndim))]
    sizes = ctx.ints(ins[1], "shape")
    if len(sizes) != len(axes):
        raise ctx.error(f"shape {sizes} must have one size per axis of {axes}")
    begin, end, pads, out = [0] * ndim, list(x.shape), [(0, 0)] * ndim, list(x.shape)
    for a, size in zip(axes, sizes):
        if size < 0:
            raise ctx.error(f"shape {sizes} holds a negative size")
        out[a] = size
        if size < x.shape[a]:
            begin[a] = (x.shape[a] - size) // 2
            end[a] = begin[a] + size
        elif size > x.shape[a]:
            before = (size - x.shape[a]) // 2
            pads[a] = (before, size - x.shape[a] - before)
    if 0 in out:
        return ctx.const(np.zeros(out, x.dtype))
    if tuple(begin) != (0,) * ndim or tuple(end) != x.shape:
        x = ctx.emit("strided_slice", [x], begin=tuple(begin), end=tuple(end))
    if any(p != (0, 0) for p in pads):
        x = ctx.emit("nn.pad", [x], pad_width=tuple(pads))
    return x


@converts("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: NodeContext, ins, attrs):
    """Channels moved into blocks of pixels, or back: a reshape, a transpose and a reshape."""
    x, b = ins[0], int(attrs.get("blocksize", 0))
    if len(x.shape) != 4 or b < 1:
        raise ctx.error(f"needs a 4-D input and a positive blocksize, got shape {x.shape}, blocksize {b}")
    N, C, H, W = x.shape
    if ctx.op_type == "SpaceToDepth":
        if H % b or W % b:
            raise ctx.error(f"blocksize {b} must divide the height {H} and width {W}")
        blocks = ctx.reshape(x, (N, C, H // b, b, W // b, b))
        moved = ctx.emit("transpose", [blocks], axes=(0, 3, 5, 1, 2, 4))
        return ctx.reshape(moved, (N, C * b * b, H // b, W // b))
    if C % (b * b):
        raise ctx.error(f"blocksize {b} squared must divide the {C} channels")
    mode = attrs.get("mode", "DCR")
    if mode == "DCR":  # depth, column, row: the block's row and column outermost in the channels
        split, order = (N, b, b, C // (b * b), H, W), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        split, order = (N, C // (b * b), b, b, H, W), (0, 1, 4, 2, 5, 3)
    else:
        raise ctx.error(f"mode {mode!r} is not DCR or CRD")
    moved = ctx.emit("transpose", [ctx.reshape(x, split)], axes=order)
    return ctx.reshape(moved, (N, C // (b * b), H * b, W * b))


@converts("Tile")
def _tile(ctx: NodeContext, ins, attrs):
    """Each axis repeated: the input with a new axis of its repeats before each, broadcast along
    them, and merged."""
    x = ins[0]
    reps = ctx.ints(ins[1], "repeats")
    if len(reps) != len(x.shape) or any(r < 1 for r in reps):
        raise ctx.error(f"repeats {reps} must hold one positive count per axis of {x.shape}")
    if all(r == 1 for r in reps):
        return x
    spread = ctx.reshape(x, tuple(d for n in x.shape for d in (1, n)))
    wide = ctx.emit("expand", [spread], shape=tuple(d for r, n in zip(reps, x.shape) for d in (r, n)))
    return ctx.reshape(wide, tuple(r * n for r, n in zip(reps, x.shape)))
