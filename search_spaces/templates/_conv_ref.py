"""The float64 NCHW convolution reference that ``tests/compiler/test_cuda_codegen.py`` still
calls by this name; it is ``topi.testing.conv2d_nchw_python`` on float64 data. The templates
use ``topi.testing`` directly: remove this module once that test does too."""

from __future__ import annotations

import numpy as np

from compiler import topi

__all__ = ["conv2d_nchw_np"]


def conv2d_nchw_np(x: np.ndarray, w: np.ndarray, stride, pads, dilation, groups_depthwise: bool = False):
    """``conv2d`` of ``x`` (N, C, H, W) with ``w`` (F, C, KH, KW), or depthwise with ``w`` (C, 1, KH, KW),
    in float64."""
    groups = x.shape[1] if groups_depthwise else 1
    return topi.testing.conv2d_nchw_python(x.astype("float64"), w.astype("float64"), stride, pads,
                                           groups=groups, dilation=dilation)
