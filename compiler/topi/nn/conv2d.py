"""Convolutions: ``conv2d``, ``conv2d_nchw``, ``conv2d_nhwc`` (TVM's ``topi.nn.conv2d``).

``stride`` and ``dilation`` are an int or ``(h, w)``; ``padding`` an int, ``(h, w)``,
``(top, left, bottom, right)``, ``"SAME"`` or ``"VALID"`` (:func:`get_pad_tuple`, applied
to the dilated window). The products are cast to ``out_dtype`` (the input's dtype by
default) before they are summed.
"""

from __future__ import annotations

from ... import te
from .pad import pad
from .utils import check_tensor, conv_window

__all__ = ["conv2d", "conv2d_nchw", "conv2d_nhwc"]


def _check_dtype(out_dtype, data):
    return data.dtype if out_dtype is None else out_dtype


def _channels_agree(given, expected, what: str) -> None:
    if isinstance(given, int) and isinstance(expected, int) and given != expected:
        raise ValueError(f"{what}: the filter has {given} input channels but the input has {expected}")


def conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):
    """``Input`` ``[batch, in_channel, in_height, in_width]`` convolved with ``Filter``
    ``[num_filter, in_channel, filter_height, filter_width]``: ``[batch, num_filter, out_height, out_width]``.

    The padded input is the stage ``Output.op.input_tensors[0]`` (always present, as in
    TVM); the reduce axes are ``rc, ry, rx``.
    """
    out_dtype = _check_dtype(out_dtype, Input)
    N, C, H, W = check_tensor(Input, 4, "conv2d_nchw: Input", "NCHW")
    F, CF, KH, KW = check_tensor(Filter, 4, "conv2d_nchw: Filter", "OIHW")
    _channels_agree(CF, C, "conv2d_nchw")
    (sh, sw), (dh, dw), (top, left, bottom, right), (Ho, Wo) = conv_window(
        H, W, KH, KW, stride, padding, dilation)
    temp = pad(Input, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    return te.compute(
        (N, F, Ho, Wo),
        lambda nn, ff, yy, xx: te.sum(
            temp[nn, rc, yy * sh + ry * dh, xx * sw + rx * dw].astype(out_dtype)
            * Filter[ff, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx]),
        name="conv2d_nchw", tag="conv2d_nchw")


def conv2d_nhwc(Input, Filter, stride, padding, dilation, out_dtype=None):
    """``Input`` ``[batch, in_height, in_width, in_channel]`` convolved with ``Filter``
    ``[filter_height, filter_width, in_channel, num_filter]`` (HWIO):
    ``[batch, out_height, out_width, num_filter]``; reduce axes ``ry, rx, rc``."""
    out_dtype = _check_dtype(out_dtype, Input)
    N, H, W, C = check_tensor(Input, 4, "conv2d_nhwc: Input", "NHWC")
    KH, KW, CF, F = check_tensor(Filter, 4, "conv2d_nhwc: Filter", "HWIO")
    _channels_agree(CF, C, "conv2d_nhwc")
    (sh, sw), (dh, dw), (top, left, bottom, right), (Ho, Wo) = conv_window(
        H, W, KH, KW, stride, padding, dilation)
    temp = pad(Input, [0, top, left, 0], [0, bottom, right, 0], name="PaddedInput")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, C), name="rc")
    return te.compute(
        (N, Ho, Wo, F),
        lambda nn, yy, xx, ff: te.sum(
            temp[nn, yy * sh + ry * dh, xx * sw + rx * dw, rc].astype(out_dtype)
            * Filter[ry, rx, rc, ff].astype(out_dtype), axis=[ry, rx, rc]),
        name="conv2d_nhwc", tag="conv2d_nhwc")


def conv2d(input, filter, strides, padding, dilation, layout: str = "NCHW", out_dtype=None):  # noqa: A002
    """``conv2d_nchw`` or ``conv2d_nhwc`` by ``layout``, as TVM's ``topi.nn.conv2d``."""
    if layout == "NCHW":
        return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype)
    if layout == "NHWC":
        return conv2d_nhwc(input, filter, strides, padding, dilation, out_dtype)
    raise ValueError(f"conv2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
