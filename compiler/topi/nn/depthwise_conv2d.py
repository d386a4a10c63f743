"""``depthwise_conv2d_nchw`` (TVM's ``topi.nn.depthwise_conv2d_nchw``)."""

from __future__ import annotations

from ... import te
from .pad import pad
from .utils import check_tensor, conv_window

__all__ = ["depthwise_conv2d_nchw"]


def depthwise_conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):
    """Each input channel convolved with its own ``channel_multiplier`` filters.

    ``Input`` is ``[batch, in_channel, in_height, in_width]``, ``Filter``
    ``[in_channel, channel_multiplier, filter_height, filter_width]``; output channel
    ``c`` reads input channel ``c // channel_multiplier`` with filter
    ``Filter[c // channel_multiplier, c % channel_multiplier]``. The result is
    ``[batch, in_channel * channel_multiplier, out_height, out_width]``; the padded input
    is ``Output.op.input_tensors[0]`` and the reduce axes are ``di, dj``. Arguments as
    in :func:`conv2d_nchw`.
    """
    out_dtype = Input.dtype if out_dtype is None else out_dtype
    N, C, H, W = check_tensor(Input, 4, "depthwise_conv2d_nchw: Input", "NCHW")
    CF, mult, KH, KW = check_tensor(Filter, 4, "depthwise_conv2d_nchw: Filter",
                                    "in_channel, channel_multiplier, KH, KW")
    if isinstance(CF, int) and isinstance(C, int) and CF != C:
        raise ValueError(f"depthwise_conv2d_nchw: the filter has {CF} channels but the input has {C}")
    if not isinstance(mult, int):
        raise ValueError("depthwise_conv2d_nchw: the channel multiplier must be a constant")
    (sh, sw), (dh, dw), (top, left, bottom, right), (Ho, Wo) = conv_window(
        H, W, KH, KW, stride, padding, dilation)
    padded = pad(Input, [0, 0, top, left], [0, 0, bottom, right], name="PaddedInput")
    di = te.reduce_axis((0, KH), name="di")
    dj = te.reduce_axis((0, KW), name="dj")

    def channel(c):  # (input channel, filter of that channel); plain c without a multiplier
        if mult == 1:
            return c, 0
        return te.indexdiv(c, mult), te.indexmod(c, mult)

    def body(b, c, i, j):
        ic, m = channel(c)
        return te.sum(padded[b, ic, i * sh + di * dh, j * sw + dj * dw].astype(out_dtype)
                      * Filter[ic, m, di, dj].astype(out_dtype), axis=[di, dj])

    return te.compute((N, C * mult, Ho, Wo), body, name="DepthwiseConv2d", tag="depthwise_conv2d_nchw")
