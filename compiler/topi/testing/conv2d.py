"""Numpy references for convolutions, under TVM's ``topi.testing`` names.

Products are accumulated in float64 (int64 for integer inputs) and the result is
returned in the input's dtype.
"""

from __future__ import annotations

import numpy as np

from ..nn.utils import as_pair, get_pad_tuple

__all__ = ["conv2d_nchw_python", "conv2d_nhwc_python", "depthwise_conv2d_python_nchw", "dilate_python",
           "conv2d_transpose_nchw_python"]


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype("int64" if a.dtype.kind in "iub" else "float64")


def _conv_nchw(x: np.ndarray, w: np.ndarray, stride, padding, dilation) -> np.ndarray:
    """``x`` (N, C, H, W) with ``w`` (F, C, KH, KW), accumulated wide."""
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    F, C, KH, KW = w.shape
    if x.shape[1] != C:
        raise ValueError(f"the filter has {C} input channels but the input has {x.shape[1]}")
    top, left, bottom, right = get_pad_tuple(padding, ((KH - 1) * dh + 1, (KW - 1) * dw + 1))
    xp = np.pad(_wide(x), ((0, 0), (0, 0), (top, bottom), (left, right)))
    Ho = (xp.shape[2] - (KH - 1) * dh - 1) // sh + 1
    Wo = (xp.shape[3] - (KW - 1) * dw - 1) // sw + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"a {KH}x{KW} window (dilation {dh}x{dw}) does not fit the padded input "
                         f"{xp.shape[2:]}")
    wf = _wide(w)
    out = np.zeros((x.shape[0], F, Ho, Wo), dtype=wf.dtype)
    for ry in range(KH):
        for rx in range(KW):
            y0, x0 = ry * dh, rx * dw
            view = xp[:, :, y0:y0 + sh * (Ho - 1) + 1:sh, x0:x0 + sw * (Wo - 1) + 1:sw]
            out += np.einsum("nchw,fc->nfhw", view, wf[:, :, ry, rx])
    return out


def conv2d_nchw_python(a_np, w_np, stride, padding, groups: int = 1, dilation=1):
    """Convolution of ``a_np`` ``[batch, in_channel, H, W]`` with ``w_np``
    ``[num_filter, in_channel // groups, KH, KW]``: ``[batch, num_filter, out_H, out_W]``.

    ``stride``/``padding`` as for ``topi.nn.conv2d_nchw``; ``dilation`` is an extension
    (TVM's callers dilate the filter with :func:`dilate_python` instead, which works too).
    """
    if groups < 1 or a_np.shape[1] % groups or w_np.shape[0] % groups:
        raise ValueError(f"groups={groups} must divide the {a_np.shape[1]} input channels and the "
                         f"{w_np.shape[0]} filters")
    parts = [_conv_nchw(a, w, stride, padding, dilation)
             for a, w in zip(np.split(a_np, groups, axis=1), np.split(w_np, groups, axis=0), strict=True)]
    return np.concatenate(parts, axis=1).astype(a_np.dtype)


def conv2d_nhwc_python(a_np, w_np, stride, padding, groups: int = 1, dilation=1):
    """Convolution of ``a_np`` ``[batch, H, W, in_channel]`` with ``w_np``
    ``[KH, KW, in_channel // groups, num_filter]`` (HWIO): ``[batch, out_H, out_W, num_filter]``."""
    out = conv2d_nchw_python(a_np.transpose(0, 3, 1, 2), w_np.transpose(3, 2, 0, 1), stride, padding,
                             groups, dilation)
    return out.transpose(0, 2, 3, 1)


def depthwise_conv2d_python_nchw(input_np, filter_np, stride, padding, dilation=1):
    """Depthwise convolution of ``input_np`` ``[batch, in_channel, H, W]`` with
    ``filter_np`` ``[in_channel, channel_multiplier, KH, KW]``: output channel ``c`` is
    input channel ``c // channel_multiplier`` convolved with filter
    ``filter_np[c // channel_multiplier, c % channel_multiplier]``."""
    C, mult, KH, KW = filter_np.shape
    if input_np.shape[1] != C:
        raise ValueError(f"the filter has {C} channels but the input has {input_np.shape[1]}")
    x = np.repeat(input_np, mult, axis=1)  # channel c of x is input channel c // mult
    w = filter_np.reshape(C * mult, 1, KH, KW)
    return conv2d_nchw_python(x, w, stride, padding, groups=C * mult, dilation=dilation)


def dilate_python(input_np, strides, dilation_value=0.0, out_dtype=None):
    """``input_np`` with ``strides[i] - 1`` elements of ``dilation_value`` between
    neighbours on each axis ``i`` (how TVM's tests dilate a filter)."""
    if len(strides) != input_np.ndim:
        raise ValueError(f"strides must have one entry per dimension ({input_np.ndim}), got {strides!r}")
    out_dtype = input_np.dtype if out_dtype is None else out_dtype
    shape = tuple((n - 1) * s + 1 for n, s in zip(input_np.shape, strides, strict=True))
    out = np.full(shape, dilation_value, dtype=out_dtype)
    out[tuple(slice(None, None, s) for s in strides)] = input_np
    return out


def conv2d_transpose_nchw_python(a_np, w_np, stride, padding, output_padding=(0, 0), dilation=1, groups=1):
    """The transposed convolution of ``a_np`` (NCHW) by ``w_np`` (IOHW, ``O`` per group), as
    ``topi.nn.conv2d_transpose_nchw``: each input pixel's products scattered over the output,
    accumulated in float64 and returned in ``a_np``'s dtype."""
    a, w = np.asarray(a_np), np.asarray(w_np)
    N, C, H, W = a.shape
    _, Fg, KH, KW = w.shape
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    oph, opw = (output_padding, output_padding) if isinstance(output_padding, int) else output_padding
    top, left, bottom, right = get_pad_tuple(padding, (KH, KW))
    full_h, full_w = sh * (H - 1) + (KH - 1) * dh + 1 + oph, sw * (W - 1) + (KW - 1) * dw + 1 + opw
    full = np.zeros((N, Fg * groups, full_h, full_w))
    Cg = C // groups
    for g in range(groups):
        x = a[:, g * Cg:(g + 1) * Cg].astype(np.float64)
        k = w[g * Cg:(g + 1) * Cg].astype(np.float64)
        for ky in range(KH):
            for kx in range(KW):
                spread = np.einsum("nchw,cf->nfhw", x, k[:, :, ky, kx])
                full[:, g * Fg:(g + 1) * Fg, ky * dh:ky * dh + sh * (H - 1) + 1:sh,
                     kx * dw:kx * dw + sw * (W - 1) + 1:sw] += spread
    return full[:, :, top:full_h - bottom, left:full_w - right].astype(a.dtype)
