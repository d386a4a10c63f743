"""Argument helpers of the ``topi.nn`` operators (TVM's ``topi.nn.utils``)."""

from __future__ import annotations

import numbers
from typing import NamedTuple

from ... import te
from ..utils import get_const_tuple

__all__ = ["get_pad_tuple", "as_pair", "check_tensor", "conv_output_size", "ConvWindow", "conv_window"]

_PADDING_FORMS = "padding must be an int, a tuple of 2 or 4 ints, 'SAME' or 'VALID', got {!r}"


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def as_pair(value, name: str) -> tuple[int, int]:
    """A stride or dilation given as one int or ``(h, w)``, as ``(h, w)`` of positive ints."""
    if _is_int(value):
        pair = (int(value), int(value))
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_int(v) for v in value):
        pair = (int(value[0]), int(value[1]))
    else:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    if min(pair) < 1:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return pair


def get_pad_tuple(padding, kernel) -> tuple[int, int, int, int]:
    """``(pad_top, pad_left, pad_down, pad_right)`` as TVM's ``topi.nn.get_pad_tuple``.

    ``padding`` is an int (every side), ``(h, w)`` (top and bottom ``h``, left and right
    ``w``), ``(top, left, bottom, right)``, ``"VALID"`` (none) or ``"SAME"`` (``kernel - 1``
    in all on each axis, the larger half at the top and left). ``kernel`` is the
    (dilated) window size ``(h, w)``, used by ``"SAME"`` only.
    """
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            pad_h = pad_w = 0
        elif padding.upper() == "SAME":
            pad_h, pad_w = int(kernel[0]) - 1, int(kernel[1]) - 1
        else:
            raise ValueError(_PADDING_FORMS.format(padding))
    elif _is_int(padding):
        pad_h = pad_w = 2 * int(padding)
    elif isinstance(padding, (tuple, list)) and len(padding) in (2, 4) and all(_is_int(p) for p in padding):
        if len(padding) == 4:
            pads = tuple(int(p) for p in padding)
            _check_pads(pads, padding)
            return pads
        pads = (int(padding[0]), int(padding[1])) * 2
        _check_pads(pads, padding)
        return pads
    else:
        raise ValueError(_PADDING_FORMS.format(padding))
    top, left = (pad_h + 1) // 2, (pad_w + 1) // 2
    pads = (top, left, pad_h - top, pad_w - left)
    _check_pads(pads, padding)
    return pads


def _check_pads(pads, given) -> None:
    if min(pads) < 0:
        raise ValueError(f"padding must not be negative, got {given!r}")


def check_tensor(t, ndim: int, what: str, layout: str) -> tuple:
    """``t``'s shape (ints where constant), after checking that ``t`` is a tensor of ``ndim`` axes."""
    if not isinstance(t, te.Tensor):
        raise TypeError(f"{what} must be a te.Tensor, got {type(t).__name__}")
    if len(t.shape) != ndim:
        raise ValueError(f"{what} must have {ndim} dimensions ({layout}), "
                         f"got shape {get_const_tuple(t.shape)}")
    return get_const_tuple(t.shape)


def conv_output_size(size, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int = 1):
    """``(size + pad_lo + pad_hi - dilated_kernel) // stride + 1``; ``ValueError`` where the
    dilated window does not fit the padded input."""
    dilated = (kernel - 1) * dilation + 1
    if isinstance(size, int) and size + pad_lo + pad_hi < dilated:
        raise ValueError(f"a window of {kernel} taps (dilation {dilation}) does not fit the padded "
                         f"input ({size} + {pad_lo} + {pad_hi})")
    return (size + pad_lo + pad_hi - dilated) // stride + 1


class ConvWindow(NamedTuple):
    """A convolution's window over ``(H, W)``: strides, dilations, the paddings
    ``(top, left, bottom, right)`` and the output size."""

    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]
    out_size: tuple


def conv_window(H, W, KH: int, KW: int, stride, padding, dilation) -> ConvWindow:
    """Read a convolution's ``stride``, ``padding`` and ``dilation`` arguments (as TVM's
    operators take them) for a ``KH x KW`` kernel over an ``H x W`` input."""
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    top, left, bottom, right = get_pad_tuple(padding, ((KH - 1) * dh + 1, (KW - 1) * dw + 1))
    out = (conv_output_size(H, KH, sh, top, bottom, dh), conv_output_size(W, KW, sw, left, right, dw))
    return ConvWindow((sh, sw), (dh, dw), (top, left, bottom, right), out)
