"""``conv2d_transpose_nchw``: the transposed convolution (TVM's ``topi.nn.conv2d_transpose_nchw``,
with ONNX ConvTranspose's dilation and groups).

Each input pixel ``(iy, ix)`` spreads ``x * Filter`` over the output around ``(iy * stride - pad,
ix * stride - pad)``; written as a gather, output pixel ``y`` sums the taps ``ky`` for which
``y + pad_top - ky * dilation`` is a multiple of the stride inside the input.
"""

from __future__ import annotations

from ... import te
from .utils import as_pair, check_tensor, get_pad_tuple

__all__ = ["conv2d_transpose_nchw", "conv2d_transpose_output_size"]


def conv2d_transpose_output_size(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int,
                                 dilation: int = 1, output_padding: int = 0) -> int:
    """``stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_lo - pad_hi``."""
    return stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_lo - pad_hi


def conv2d_transpose_nchw(Input, Filter, strides, padding, out_dtype=None, output_padding=(0, 0),
                          dilation=1, groups: int = 1):
    """``Input`` ``[batch, in_channel, in_height, in_width]`` through the transposed convolution
    of ``Filter`` ``[in_channel, num_filter / groups, filter_height, filter_width]`` (IOHW, as
    ONNX and TVM store it): ``[batch, num_filter, out_height, out_width]``.

    ``padding`` (an int, ``(h, w)`` or ``(top, left, bottom, right)``) is taken off the full
    output; ``output_padding`` (each below the stride or the dilation) adds rows and columns at the
    bottom and right. The reduce axes are ``rc, ry, rx``."""
    out_dtype = Input.dtype if out_dtype is None else out_dtype
    N, C, H, W = check_tensor(Input, 4, "conv2d_transpose_nchw: Input", "NCHW")
    CF, Fg, KH, KW = check_tensor(Filter, 4, "conv2d_transpose_nchw: Filter", "IOHW")
    if not isinstance(groups, int) or groups < 1 or C % groups:
        raise ValueError(f"conv2d_transpose_nchw: groups must divide the {C} input channels, got {groups!r}")
    if CF != C:
        raise ValueError(f"conv2d_transpose_nchw: the filter has {CF} input channels but the input has {C}")
    sh, sw = as_pair(strides, "strides")
    dh, dw = as_pair(dilation, "dilation")
    pair = (output_padding,) * 2 if isinstance(output_padding, int) else tuple(output_padding)
    if len(pair) != 2 or not all(isinstance(p, int) for p in pair):
        raise ValueError(f"conv2d_transpose_nchw: output_padding must be an int or (h, w), "
                         f"got {output_padding!r}")
    oph, opw = pair
    if not (0 <= oph < max(sh, dh) and 0 <= opw < max(sw, dw)):
        raise ValueError(f"conv2d_transpose_nchw: output_padding must be below the stride or the dilation, "
                         f"got {output_padding!r}")
    if isinstance(padding, str):
        raise ValueError(f"conv2d_transpose_nchw: padding must be numbers, got {padding!r}")
    top, left, bottom, right = get_pad_tuple(padding, (KH, KW))
    Ho = conv2d_transpose_output_size(H, KH, sh, top, bottom, dh, oph)
    Wo = conv2d_transpose_output_size(W, KW, sw, left, right, dw, opw)
    if Ho < 1 or Wo < 1:
        raise ValueError(f"conv2d_transpose_nchw: padding {padding!r} leaves an output of {Ho} x {Wo}")
    Cg = C // groups
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def source(out, tap, pad: int, stride: int, dil: int, size: int):
        """The input index ``out`` reads through ``tap`` (clamped into the input: only read where
        the condition holds) and that condition."""
        t = out + pad - tap * dil
        index = te.floordiv(t, stride)
        valid = te.all(t >= 0, te.floormod(t, stride) == 0, index < size)
        return te.min(te.max(index, 0), size - 1), valid

    def body(n, f, y, x):
        ic = te.floordiv(f, Fg) * Cg + rc
        iy, vy = source(y, ry, top, sh, dh, H)
        ix, vx = source(x, rx, left, sw, dw, W)
        zero = te.const(0, out_dtype)
        value = te.if_then_else(te.all(vy, vx), Input[n, ic, iy, ix].astype(out_dtype), zero)
        return te.sum(value * Filter[ic, te.floormod(f, Fg), ry, rx].astype(out_dtype), axis=[rc, ry, rx])

    return te.compute((N, Fg * groups, Ho, Wo), body, name="conv2d_transpose_nchw",
                      tag="conv2d_transpose_nchw")
