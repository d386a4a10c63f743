"""Numpy references for convolutions and pooling (NCHW), accumulated in float64."""

from __future__ import annotations

import numpy as np

__all__ = ["conv2d_nchw_np", "window_views"]


def window_views(xp: np.ndarray, KH: int, KW: int, stride, dilation, Ho: int, Wo: int):
    """Yield ``(ry, rx, view)``: the input ``(..., H, W)`` seen by kernel tap ``(ry, rx)``."""
    sh, sw = stride
    dh, dw = dilation
    for ry in range(KH):
        for rx in range(KW):
            y0, x0 = ry * dh, rx * dw
            yield ry, rx, xp[..., y0:y0 + sh * (Ho - 1) + 1:sh, x0:x0 + sw * (Wo - 1) + 1:sw]


def conv2d_nchw_np(x: np.ndarray, w: np.ndarray, stride, pads, dilation, groups_depthwise: bool = False):
    """``conv2d`` of ``x`` (N, C, H, W) with ``w`` (F, C, KH, KW), or depthwise with ``w`` (C, 1, KH, KW)."""
    top, left, bottom, right = pads
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (top, bottom), (left, right)))
    F, _, KH, KW = w.shape
    H, W = xp.shape[2:]
    Ho = (H - (KH - 1) * dilation[0] - 1) // stride[0] + 1
    Wo = (W - (KW - 1) * dilation[1] - 1) // stride[1] + 1
    wf = w.astype("float64")
    out = np.zeros((x.shape[0], F, Ho, Wo))
    for ry, rx, view in window_views(xp, KH, KW, stride, dilation, Ho, Wo):
        if groups_depthwise:
            out += view * wf[None, :, 0, ry, rx, None, None]
        else:
            out += np.einsum("nchw,fc->nfhw", view, wf[:, :, ry, rx])
    return out
