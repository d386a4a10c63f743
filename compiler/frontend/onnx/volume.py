"""A volume's convolutions (3-D ``Conv`` and ``ConvTranspose``) as 2-D ones, the ones the
templates tune: each output depth is an image of the batch, whose channels are the input's at
each of the kernel's depth taps (the depth unfolded, as im2col unfolds every axis).
"""

from __future__ import annotations

import numpy as np

from ...graph import Value
from .importer import NodeContext

__all__ = ["conv3d", "conv3d_transpose"]


def conv3d(ctx: NodeContext, x: Value, w: Value, strides, dilations, pads, groups: int) -> Value:
    """A 3-D convolution as one 2-D convolution (the one the templates tune): each output depth
    is an image of the batch, whose channels are the input's channels at each of the kernel's
    depth taps (the depth unfolded, as im2col does, for depth alone); the weight's depth taps
    become channels alike."""
    n, c = x.shape[:2]
    f, c_group, taps = w.shape[:3]
    if c != c_group * groups or f % groups:
        raise ctx.error(f"{c} input channels and {f} filters do not split into {groups} groups of the "
                        f"weight's {c_group} channels")
    x = _depth_cropped_padded(ctx, x, pads[0], pads[3])
    images, out_depth = _depth_unfolded(ctx, x, taps, strides[0], dilations[0])
    weight = ctx.reshape(w, (f, c_group * taps, *w.shape[3:]))
    out = ctx.emit("nn.conv2d", [images, weight], strides=tuple(strides[1:]),
                   padding=(pads[1], pads[2], pads[4], pads[5]), dilation=tuple(dilations[1:]), groups=groups)
    return _depth_folded(ctx, out, n, out_depth)


def conv3d_transpose(ctx: NodeContext, x: Value, w: Value, strides, dilations, pads, output_padding,
                      groups: int) -> Value:
    """A 3-D transposed convolution as one 2-D one: along the depth it is a convolution of the
    input with ``stride - 1`` zeros between its slices, padded by the kernel's reach less the
    pads, by the depth taps in reverse; that depth is unfolded into channels as :func:`conv3d`
    unfolds it, and height and width stay transposed."""
    n, c, depth = x.shape[:3]
    _, f_group, taps = w.shape[:3]
    if c % groups or w.shape[0] != c:
        raise ctx.error(f"the weight's {w.shape[0]} input channels differ from the input's {c}, or do not "
                        f"split into {groups} groups")
    stride, dilation = strides[0], dilations[0]
    if stride > 1:  # the slices, each followed by stride - 1 of zeros, the last zeros dropped
        slices = ctx.reshape(x, (n, c, depth, 1, *x.shape[3:]))
        zeros_after = ((0, 0),) * 3 + ((0, stride - 1),) + ((0, 0),) * 2
        padded = ctx.emit("nn.pad", [slices], pad_width=zeros_after)
        spread = ctx.reshape(padded, (n, c, depth * stride, *x.shape[3:]))
        x = ctx.emit("strided_slice", [spread], begin=(0,) * 5,
                     end=(n, c, stride * (depth - 1) + 1, *x.shape[3:]))
    reach = (taps - 1) * dilation
    x = _depth_cropped_padded(ctx, x, reach - pads[0], reach - pads[3] + output_padding[0])
    images, out_depth = _depth_unfolded(ctx, x, taps, 1, dilation)
    # (C, F / groups, taps, ...) as (C * taps, F / groups, ...), the taps reversed
    flipped = np.ascontiguousarray(ctx.array(w, "W")[:, :, ::-1].transpose(0, 2, 1, 3, 4))
    weight = ctx.const(flipped.reshape(c * taps, f_group, *w.shape[3:]))
    out = ctx.emit("nn.conv2d_transpose", [images, weight], strides=tuple(strides[1:]),
                   padding=(pads[1], pads[2], pads[4], pads[5]), dilation=tuple(dilations[1:]),
                   groups=groups, output_padding=tuple(output_padding[1:]))
    return _depth_folded(ctx, out, n, out_depth)


def _depth_cropped_padded(ctx: NodeContext, x: Value, before: int, after: int) -> Value:
    """``x`` (N, C, D, H, W) with ``before`` and ``after`` zero slices added to its depth, or that
    many taken off where negative."""
    depth = x.shape[2]
    if before < 0 or after < 0:
        end = depth + min(after, 0)
        x = ctx.emit("strided_slice", [x], begin=(0, 0, max(-before, 0), 0, 0),
                     end=(*x.shape[:2], end, *x.shape[3:]))
    if before > 0 or after > 0:
        x = ctx.emit("nn.pad", [x], pad_width=((0, 0), (0, 0), (max(before, 0), max(after, 0)), (0, 0),
                                                (0, 0)))
    return x


def _depth_unfolded(ctx: NodeContext, x: Value, taps: int, stride: int, dilation: int) -> tuple[Value, int]:
    """``x`` (N, C, D, H, W) as the images (N * out depth, C * taps, H, W) whose channels are its
    channels at each tap of a window ``taps`` deep (input depth ``o * stride + k * dilation`` for
    tap ``k`` of output depth ``o``), and the output depth."""
    n, c, depth, h, w = x.shape
    span = depth - dilation * (taps - 1) - 1
    if span < 0:
        raise ctx.error(f"the kernel's depth {taps} (dilation {dilation}) exceeds the padded input's {depth}")
    out_depth = span // stride + 1
    slices = [ctx.reshape(ctx.emit("strided_slice", [x], begin=(0, 0, k * dilation, 0, 0),
                                   end=(n, c, k * dilation + (out_depth - 1) * stride + 1, h, w),
                                   strides=(1, 1, stride, 1, 1)), (n, c, 1, out_depth, h, w))
              for k in range(taps)]
    unfolded = slices[0] if taps == 1 else ctx.emit("concatenate", slices, axis=2)
    images = ctx.emit("transpose", [unfolded], axes=(0, 3, 1, 2, 4, 5))
    return ctx.reshape(images, (n * out_depth, c * taps, h, w)), out_depth


def _depth_folded(ctx: NodeContext, images: Value, n: int, depth: int) -> Value:
    """The images (N * depth, C, H, W) of a volume's depth slices as the volume (N, C, depth, H, W)."""
    out = ctx.reshape(images, (n, depth, *images.shape[1:]))
    return ctx.emit("transpose", [out], axes=(0, 2, 1, 3, 4))
