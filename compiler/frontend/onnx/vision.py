"""ONNX converters for the operators of detectors and spatial transformers: TopK, ReverseSequence,
GridSample, AffineGrid and RoiAlign.

* ``TopK`` becomes ``topk`` (:mod:`compiler.graph.ops.vision`) asking for the indices, and a
  ``gather`` of the values at them: a catalog node has one output in the model build, and the
  gather costs one read per value where a second ``topk`` would compare the whole row again. The
  result is always sorted, which ``sorted=0`` allows.
* ``ReverseSequence`` is a ``take`` along the batch and time axes merged into one, at indices
  computed from ``sequence_lens`` by elementwise operators: constant lengths fold into constant
  indices; for lengths computed from the model inputs the index arithmetic fuses into the take's
  kernel. Lengths out of ``[0, T]`` are an error where constant; computed ones read other rows of
  the input, never outside it (ONNX leaves them undefined).
* ``GridSample`` (2-D) is ``image.grid_sample`` on the grid transposed to TVM's ``(N, 2, H, W)``
  (the transpose fuses into the sampling kernel).
* ``AffineGrid`` (opset 20) is the constant grid of normalised coordinates times each affine map,
  a batched matrix product.
* ``RoiAlign`` is ``vision.roi_align`` on TVM's ``(num_rois, 5)`` regions, the batch indices as
  their first column. An adaptive ``sampling_ratio`` (0) takes as many samples as each region is
  bins wide, a count that depends on the regions: with constant regions it is bounded by the
  largest of them; with regions computed from the model inputs it has no static bound, and the
  importer refuses it (a positive ``sampling_ratio`` compiles).
"""

from __future__ import annotations

import math

import numpy as np

from ...graph import Value
from .importer import NodeContext, converts, optional_input
from .nn import matmul

__all__: list[str] = []


# ---------------------------------------------------------------------------- TopK


@converts("TopK")
def _topk(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if not x.shape:
        raise ctx.error("the input must have at least one axis")
    if x.dtype == "bool":
        raise ctx.error("the input must be numeric, got bool")
    axis = ctx.axis(attrs.get("axis", -1), len(x.shape))
    if ctx.opset < 10:
        k = attrs.get("k")
        if k is None:
            raise ctx.error("attribute k is missing")
    else:
        k = ctx.scalar(optional_input(ins, 1), "K")
        if k is None:
            raise ctx.error("input K is missing")
    n = x.shape[axis]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise ctx.error(f"k={k!r} must be an integer in [0, {n}] for axis {axis} of {x.shape}")
    k = int(k)
    largest = bool(attrs.get("largest", 1))
    shape = (*x.shape[:axis], k, *x.shape[axis + 1:])
    if k == 0:  # empty outputs
        return ctx.const(np.zeros(shape, x.dtype)), ctx.const(np.zeros(shape, "int64"))
    # both outputs are always named; one the model does not read is dropped with its nodes
    indices = ctx.emit("topk", [x], k=k, axis=axis, ret_type="indices", is_ascend=not largest, dtype="int64")
    return ctx.emit("gather", [x, indices], axis=axis), indices


# ---------------------------------------------------------------------------- ReverseSequence


@converts("ReverseSequence")
def _reverse_sequence(ctx: NodeContext, ins, attrs):
    x, lens = ins
    batch_axis, time_axis = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    if {batch_axis, time_axis} != {0, 1}:
        raise ctx.error(f"batch_axis={batch_axis} and time_axis={time_axis} must be 0 and 1, in either order")
    if len(x.shape) < 2:
        raise ctx.error(f"the input must have at least 2 dimensions, got shape {x.shape}")
    B, T = x.shape[batch_axis], x.shape[time_axis]
    if lens.shape != (B,) or lens.dtype not in ("int32", "int64"):
        raise ctx.error(f"sequence_lens must be int64 of shape ({B},) (the batch), "
                        f"got {lens.dtype}{list(lens.shape)}")
    if lens.is_constant and ((lens.data < 0) | (lens.data > T)).any():
        raise ctx.error(f"sequence_lens {lens.data.tolist()} must lie in [0, {T}] (the time axis)")
    lens = ctx.cast(lens, "int64")
    # the merged first two axes, row-major: output (t, b) reads (t', b), t' = L[b] - 1 - t for t < L[b]
    time_major = time_axis == 0
    t = ctx.const(np.arange(T, dtype="int64").reshape((T, 1) if time_major else (1, T)))
    b = ctx.const(np.arange(B, dtype="int64").reshape((1, B) if time_major else (B, 1)))
    L = ctx.reshape(lens, (1, B) if time_major else (B, 1))
    one = ctx.const(np.array(1, "int64"))
    reversed_t = ctx.emit("subtract", [ctx.emit("subtract", [L, one]), t])
    source = ctx.emit("where", [ctx.emit("less", [t, L]), reversed_t, t])
    if time_major:
        flat = ctx.emit("add", [ctx.emit("multiply", [source, ctx.const(np.array(B, "int64"))]), b])
    else:
        flat = ctx.emit("add", [ctx.emit("multiply", [b, ctx.const(np.array(T, "int64"))]), source])
    rest = x.shape[2:]
    rows = ctx.reshape(x, (T * B, *rest))
    taken = ctx.emit("take", [rows, ctx.reshape(flat, (T * B,))], axis=0)
    return ctx.reshape(taken, x.shape)


# ---------------------------------------------------------------------------- GridSample

# ONNX's mode -> the catalog's method, by the names of opsets 16 and 20
_GRID_MODES = {16: {"bilinear": "bilinear", "nearest": "nearest", "bicubic": "bicubic"},
               20: {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}}
_PADDING_MODES = ("zeros", "border", "reflection")


@converts("GridSample")
def _grid_sample(ctx: NodeContext, ins, attrs):
    x, grid = ins
    names = _GRID_MODES[20 if ctx.opset >= 20 else 16]
    mode = attrs.get("mode", "linear" if ctx.opset >= 20 else "bilinear")
    if mode not in names:
        raise ctx.error(f"mode={mode!r} must be one of {', '.join(names)} at opset {ctx.opset}")
    padding = attrs.get("padding_mode", "zeros")
    if padding not in _PADDING_MODES:
        raise ctx.error(f"padding_mode={padding!r} must be one of {', '.join(_PADDING_MODES)}")
    if len(x.shape) != 4:
        raise ctx.unsupported(f"a {len(x.shape)}-D input (2-D images, NCHW, are sampled)")
    N, _, H, W = x.shape
    if len(grid.shape) != 4 or grid.shape[0] != N or grid.shape[3] != 2:
        raise ctx.error(f"the grid must have shape ({N}, H_out, W_out, 2) for input {x.shape}, "
                        f"got {grid.shape}")
    for v, what in ((x, "the input"), (grid, "the grid")):
        if not v.dtype.startswith("float"):
            raise ctx.error(f"{what} must be a float tensor, got {v.dtype}")
    if 0 in (H, W):
        raise ctx.error(f"cannot sample an empty image {x.shape}")
    points = ctx.emit("transpose", [grid], axes=(0, 3, 1, 2))
    return ctx.emit("image.grid_sample", [x, points], method=names[mode], layout="NCHW", padding_mode=padding,
                    align_corners=bool(attrs.get("align_corners", 0)))


# ---------------------------------------------------------------------------- RoiAlign

_ROI_MODES = ("avg", "max")
_ROI_COORDINATES = ("half_pixel", "output_half_pixel")


def _adaptive_bound(ctx: NodeContext, rois: Value, scale: float, aligned: bool, pooled: tuple[int, int],
                    dtype: str) -> tuple[int, int]:
    """The most samples per bin along (height, width) that constant ``rois`` ask for with an adaptive
    sampling ratio, computed in the data's float type as the kernel computes it, plus one: a
    rounding that differs at an integer leaves the bound above the kernel's count."""
    t = np.dtype(dtype).type
    r = ctx.array(rois, "rois").astype(dtype)
    offset = t(0.5 if aligned else 0.0)
    x1, y1, x2, y2 = (r[:, k] * t(scale) - offset for k in range(4))
    sizes = [y2 - y1, x2 - x1]
    if not aligned:
        sizes = [np.maximum(s, t(1)) for s in sizes]
    bounds = []
    for size, bins in zip(sizes, pooled):
        grid = np.ceil(size / t(bins)) if size.size else np.zeros(1)
        finite = grid[np.isfinite(grid)]
        bounds.append(int(max(finite.max(initial=0), 0)) + 1)
    return bounds[0], bounds[1]


@converts("AffineGrid")
def _affine_grid(ctx: NodeContext, ins, attrs):
    """Opset 20's sampling grid of affine maps (torch's ``affine_grid``; ``GridSample`` reads
    it): each output position's normalised coordinates (a constant), with a 1 appended, times
    each map ``theta`` transposed, a batched matrix product."""
    theta, size = ins[0], ctx.ints(ins[1], "size")
    if len(size) not in (4, 5) or theta.shape != (size[0], len(size) - 2, len(size) - 1):
        raise ctx.error(f"theta {theta.shape} must be (N, {len(size) - 2}, {len(size) - 1}) for size {size}")
    corners = bool(attrs.get("align_corners", 0))
    axes = []
    for n in reversed(size[2:]):  # x, then y (then z), as the grid lists them
        if corners:
            # one position: 0, as torch's affine_grid (ONNX Runtime gives 1, the reference -1)
            axes.append(np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1))
        else:
            axes.append((2.0 * np.arange(n) + 1.0) / n - 1.0)
    mesh = np.meshgrid(*axes[::-1], indexing="ij")[::-1]  # each (D,) H, W
    base = np.stack([*mesh, np.ones_like(mesh[0])], axis=-1).reshape(1, -1, len(size) - 1)
    maps = ctx.emit("transpose", [theta], axes=(0, 2, 1))
    grid = matmul(ctx, ctx.const(base.astype(theta.dtype)), maps)
    return ctx.reshape(grid, (size[0], *size[2:], len(size) - 2))


@converts("RoiAlign")
def _roi_align(ctx: NodeContext, ins, attrs):
    x, rois, batch = ins
    mode = attrs.get("mode", "avg")
    if mode not in _ROI_MODES:
        raise ctx.error(f"mode={mode!r} must be one of {', '.join(_ROI_MODES)}")
    # opset 10 has no coordinate_transformation_mode: its rule is output_half_pixel
    coordinates = attrs.get("coordinate_transformation_mode", "half_pixel") if ctx.opset >= 16 \
        else "output_half_pixel"
    if coordinates not in _ROI_COORDINATES:
        raise ctx.error(f"coordinate_transformation_mode={coordinates!r} must be one of "
                        f"{', '.join(_ROI_COORDINATES)}")
    pooled = (attrs.get("output_height", 1), attrs.get("output_width", 1))
    if not all(isinstance(p, int) and p >= 1 for p in pooled):
        raise ctx.error(f"output_height and output_width must be positive, got {pooled}")
    ratio = attrs.get("sampling_ratio", 0)
    if ratio < 0:
        raise ctx.error(f"sampling_ratio={ratio} must be 0 (adaptive) or positive")
    scale = float(attrs.get("spatial_scale", 1.0))
    if not (math.isfinite(scale) and scale > 0):
        raise ctx.error(f"spatial_scale={scale} must be a positive number")
    if len(x.shape) != 4 or not x.dtype.startswith("float"):
        raise ctx.error(f"the input must be a 4-D (N, C, H, W) float tensor, got {x.dtype}{list(x.shape)}")
    R = rois.shape[0] if rois.shape else 0
    if len(rois.shape) != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        raise ctx.error(f"rois must be {x.dtype} of shape (num_rois, 4), got {rois.dtype}{list(rois.shape)}")
    if batch.shape != (R,) or batch.dtype not in ("int32", "int64"):
        raise ctx.error(f"batch_indices must be int64 of shape ({R},), got {batch.dtype}{list(batch.shape)}")
    N, C, H, W = x.shape
    if batch.is_constant and ((batch.data < 0) | (batch.data >= N)).any():
        raise ctx.error(f"batch_indices {batch.data.tolist()} must lie in [0, {N}) (the batch)")
    if 0 in (H, W):
        raise ctx.error(f"cannot sample an empty feature map {x.shape}")
    if R == 0:
        return ctx.const(np.zeros((0, C, *pooled), x.dtype))
    aligned = coordinates == "half_pixel"
    bound = None
    if ratio == 0:
        if not rois.is_constant:
            raise ctx.unsupported("sampling_ratio=0 (adaptive) with rois computed from the model inputs: the "
                                  "samples per bin depend on the regions' sizes, which have no static bound; "
                                  "a positive sampling_ratio compiles")
        bound = _adaptive_bound(ctx, rois, scale, aligned, pooled, x.dtype)
    column = ctx.reshape(ctx.cast(batch, x.dtype), (R, 1))
    regions = ctx.emit("concatenate", [column, rois], axis=1)
    return ctx.emit("vision.roi_align", [x, regions], pooled_size=pooled, spatial_scale=scale, mode=mode,
                    sample_ratio=ratio, aligned=aligned, layout="NCHW", max_samples=bound)
