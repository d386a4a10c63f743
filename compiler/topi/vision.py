"""Vision operators as tensor expressions, under TVM's ``topi.vision`` names: ``roi_align``.

``roi_align`` pools each region of interest of an NCHW feature map into a fixed grid of bins,
each bin the average (or maximum) of bilinear samples on a regular grid inside it: Mask R-CNN's
RoIAlign, with the rules of ONNX RoiAlign as ONNX Runtime computes them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from .utils import get_const_tuple

__all__ = ["roi_align", "ROI_ALIGN_MODES"]

ROI_ALIGN_MODES = ("avg", "max")


def _pair(name: str, value) -> tuple[int, int]:
    if isinstance(value, int):
        value = (value, value)
    if not isinstance(value, Sequence) or len(value) != 2 or not all(
            isinstance(v, int) and v >= 1 for v in value):
        raise ValueError(f"roi_align: {name} must be a positive int or (height, width) of them, "
                         f"got {value!r}")
    return int(value[0]), int(value[1])


def roi_align(data: te.Tensor, rois: te.Tensor, pooled_size, spatial_scale: float, mode: str = "avg",
              sample_ratio: int = -1, aligned: bool = False, layout: str = "NCHW",
              max_samples=None) -> te.Tensor:
    """The regions ``rois`` of ``data`` (NCHW), each pooled to ``pooled_size`` = ``(PH, PW)`` bins:
    an output of ``(num_rois, C, PH, PW)``.

    ``rois`` is ``(num_rois, 5)``: ``[batch_index, x1, y1, x2, y2]`` in the coordinates of the
    image, which ``spatial_scale`` maps onto the feature map (the batch index, a float, is
    truncated and clamped into the batch). With ``aligned`` (ONNX's ``half_pixel``) a half pixel
    is taken off the scaled corners; without it, regions narrower than one pixel are widened to
    one. Each bin is sampled on a grid of ``sample_ratio`` x ``sample_ratio`` points, or where
    ``sample_ratio <= 0`` on ``ceil(roi_height / PH)`` x ``ceil(roi_width / PW)`` points, a
    count that depends on the data: then ``max_samples`` = ``(h, w)`` bounds it (the compiled
    loops run that far and mask the rest; a region needing more is sampled on the bound).

    A sample at ``(y, x)`` outside ``[-1, H] x [-1, W]`` is 0; one inside is clamped into the
    map and interpolated bilinearly from its four neighbours with weights ``w1 .. w4``.
    ``mode`` ``"avg"`` averages the samples of a bin, ``(w1 v1 + w2 v2 + w3 v3 + w4 v4)``;
    ``"max"`` takes the largest of ``max(w1 v1, w2 v2, w3 v3, w4 v4)`` over the samples, as ONNX
    Runtime (and ONNX's reference) compute it, which is not the maximum of the interpolated
    values that TVM's ``roi_align`` takes. A bin with no samples (an empty region with
    ``aligned`` and an adaptive grid) is 0.

    Work: ``num_rois x C x PH x PW x`` the samples per bin, four reads each.
    """
    if layout != "NCHW":
        raise ValueError(f"roi_align: layout must be 'NCHW', got {layout!r}")
    if mode not in ROI_ALIGN_MODES:
        raise ValueError(f"roi_align: mode must be one of {', '.join(ROI_ALIGN_MODES)}, got {mode!r}")
    dshape = tuple(int(d) for d in get_const_tuple(data.shape))
    rshape = tuple(int(d) for d in get_const_tuple(rois.shape))
    if len(dshape) != 4 or len(rshape) != 2 or rshape[1] != 5:
        raise ValueError(f"roi_align: data must be (N, C, H, W) and rois (num_rois, 5), got {dshape} and "
                         f"{rshape}")
    if not data.dtype.startswith("float") or rois.dtype != data.dtype:
        raise ValueError(f"roi_align: data and rois must share one float dtype, got {data.dtype} and "
                         f"{rois.dtype}")
    ph_n, pw_n = _pair("pooled_size", pooled_size)
    adaptive = sample_ratio <= 0
    if adaptive:
        if max_samples is None:
            raise ValueError("roi_align: an adaptive sample_ratio (<= 0) needs max_samples, the most "
                             "samples per bin along (height, width)")
        grid_h, grid_w = _pair("max_samples", max_samples)
    else:
        grid_h = grid_w = int(sample_ratio)
    N, C, H, W = dshape
    dt = rois.dtype

    def const(v):
        return te.const(v, dt)

    def axis_weights(v, size: int):
        """The two neighbours of sample coordinate ``v`` on an axis of ``size`` and their weights."""
        clamped = te.min(te.max(v, const(0.0)), const(size - 1))  # NaN becomes 0
        low = te.floor(clamped).astype("int32")
        high = te.min(low + 1, size - 1)
        frac = clamped - low.astype(dt)
        return low, high, const(1.0) - frac, frac

    def body(i, c, ph, pw):
        b = te.min(te.max(rois[i, 0], const(0.0)), const(N - 1)).astype("int32")
        offset = const(0.5 if aligned else 0.0)
        x1, y1, x2, y2 = (rois[i, k] * const(spatial_scale) - offset for k in (1, 2, 3, 4))
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:  # malformed regions become one pixel wide
            roi_w, roi_h = te.max(roi_w, const(1.0)), te.max(roi_h, const(1.0))
        bin_h, bin_w = roi_h / const(ph_n), roi_w / const(pw_n)
        if adaptive:
            gh = te.min(te.max(te.ceil(roi_h / const(ph_n)), const(0.0)), const(grid_h))
            gw = te.min(te.max(te.ceil(roi_w / const(pw_n)), const(0.0)), const(grid_w))
        else:
            gh = gw = const(sample_ratio)
        ry = te.reduce_axis((0, grid_h), name="ry")
        rx = te.reduce_axis((0, grid_w), name="rx")
        y = y1 + ph.astype(dt) * bin_h + (ry.var.astype(dt) + const(0.5)) * bin_h / gh
        x = x1 + pw.astype(dt) * bin_w + (rx.var.astype(dt) + const(0.5)) * bin_w / gw
        inside = te.all(y >= const(-1.0), y <= const(H), x >= const(-1.0), x <= const(W))
        yl, yh, hy, ly = axis_weights(y, H)
        xl, xh, hx, lx = axis_weights(x, W)
        zero = const(0.0)
        terms = [te.if_then_else(inside, wy * wx, zero) * data[b, c, iy, ix]
                 for wy, iy in ((hy, yl), (ly, yh)) for wx, ix in ((hx, xl), (lx, xh))]
        axes = [ry, rx]
        if mode == "avg":
            count = te.max(gh * gw, const(1.0))
            sample = (terms[0] + terms[1] + terms[2] + terms[3]) / count
            if not adaptive:
                return te.sum(sample, axis=axes)
            return te.sum(sample, axis=axes, where=te.all(ry.var.astype(dt) < gh, rx.var.astype(dt) < gw))
        sample = te.max(te.max(te.max(terms[0], terms[1]), terms[2]), terms[3])
        if not adaptive:
            return te.max(sample, axis=axes)
        # an empty bin is 0: its first sample is kept, as 0
        empty = te.any(gh < const(1.0), gw < const(1.0))
        first = te.all(ry.var == 0, rx.var == 0)
        kept = te.any(te.all(ry.var.astype(dt) < gh, rx.var.astype(dt) < gw), te.all(empty, first))
        return te.max(te.if_then_else(empty, zero, sample), axis=axes, where=kept)

    return te.compute((rshape[0], C, ph_n, pw_n), body, name="T_roi_align", tag="roi_align")
