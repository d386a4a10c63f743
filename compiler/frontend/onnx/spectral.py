"""ONNX's spectral operators, ``DFT`` (opsets 17 and 20; torch's export of ``torch.fft``) and
``STFT`` (opset 17; ``torch.stft``), and the window generators ``HannWindow``,
``HammingWindow`` and ``BlackmanWindow``.

Shapes are static, so a transform's length is known at import: a DFT is a matrix product with
its constant matrix of cosines and sines (``nn.dense``, the tuned kernel), the signal's real
and imaginary parts in, the spectrum's out; the inverse of a one-sided spectrum (``inverse`` and
``onesided``, torch's ``irfft``) gives the real signal alone, the spectrum cut or padded to
the length as numpy's ``irfft`` and ONNX's reference cut it. An STFT gathers the frames
(``take`` with a constant index table) and multiplies by the window folded into that matrix.
The windows are constants.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...graph import Value
from .importer import NodeContext, converts, element_dtype, optional_input

__all__: list[str] = []


def _dft_matrix(taken: int, period: int, bins: int, complex_in: bool, inverse: bool,
                window: np.ndarray | None = None) -> np.ndarray:
    """The weight (``2 * bins`` outputs by ``taken`` or ``2 * taken`` inputs, ``nn.dense``'s form)
    of the transform of ``taken`` samples over a ``period``: output ``2k`` is bin ``k``'s real
    part, ``2k + 1`` its imaginary part; inputs likewise where the signal is complex. Computed in
    float64; the inverse divides by the period; a window multiplies each sample."""
    k = np.arange(bins, dtype=np.float64)[:, None]
    n = np.arange(taken, dtype=np.float64)[None, :]
    theta = 2.0 * np.pi * ((k * n) % period) / period  # the product reduced first: exact angles
    cos, sin = np.cos(theta), np.sin(theta)
    sign = 1.0 if inverse else -1.0  # e^(sign i theta)
    if window is not None:
        cos, sin = cos * window[None, :], sin * window[None, :]
    # (xr + i xi)(cos + sign i sin): real xr cos - sign xi sin, imaginary xi cos + sign xr sin
    weight = np.zeros((bins, 2, taken, 2 if complex_in else 1))
    weight[:, 0, :, 0], weight[:, 1, :, 0] = cos, sign * sin
    if complex_in:
        weight[:, 0, :, 1], weight[:, 1, :, 1] = -sign * sin, cos
    if inverse:
        weight /= period
    return weight.reshape(2 * bins, -1)


def _real_inverse_matrix(taken: int, period: int) -> np.ndarray:
    """The weight (``period`` outputs by ``2 * taken`` inputs) of the inverse of a
    one-sided spectrum (numpy's ``irfft``): the real signal whose spectrum is the given bins
    and their conjugates mirrored, each bin but the first and the middle one counted twice; the
    imaginary parts of those two add nothing."""
    t = np.arange(period, dtype=np.float64)[:, None]
    k = np.arange(taken, dtype=np.float64)[None, :]
    theta = 2.0 * np.pi * ((t * k) % period) / period
    twice = np.where((k == 0) | (2 * k == period), 1.0, 2.0) / period
    weight = np.zeros((period, taken, 2))
    weight[:, :, 0], weight[:, :, 1] = twice * np.cos(theta), -twice * np.sin(theta)
    return weight.reshape(period, -1)


def _transformed(ctx: NodeContext, x: Value, weight: np.ndarray, bins: int, parts: int = 2) -> Value:
    """``x`` (..., samples, 1 or 2) through the DFT matrix ``weight``: (..., bins, ``parts``)."""
    lead = x.shape[:-2]
    rows = ctx.reshape(x, (math.prod(lead), x.shape[-2] * x.shape[-1]))
    out = ctx.emit("nn.dense", [rows, ctx.const(weight.astype(x.dtype))])
    return ctx.reshape(out, (*lead, bins, parts))


def _signal(ctx: NodeContext, x: Value) -> bool:
    """Whether the signal ``x`` (its last axis 1 real or 2 complex) is complex."""
    if not dtypes.is_float(x.dtype):
        raise ctx.unsupported(f"a signal of dtype {x.dtype} (a float type is needed)")
    if len(x.shape) < 2 or x.shape[-1] not in (1, 2):
        raise ctx.error(f"the signal's last axis must be 1 (real) or 2 (complex), got shape {x.shape}")
    return x.shape[-1] == 2


@converts("DFT")
def _dft(ctx: NodeContext, ins, attrs):
    x = ins[0]
    complex_in = _signal(ctx, x)
    ndim = len(x.shape)
    if ctx.opset >= 20:
        given = ctx.scalar(optional_input(ins, 2), "axis")
        axis = -2 if given is None else int(given)
    else:
        axis = int(attrs.get("axis", 1))
    axis = ctx.axis(axis, ndim)
    if axis == ndim - 1:
        raise ctx.error("the transform's axis cannot be the last (real and imaginary parts)")
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    if onesided and complex_in and not inverse:
        raise ctx.error("onesided=1 transforms a real signal; this one is complex")
    samples = x.shape[axis]
    length = ctx.scalar(optional_input(ins, 1), "dft_length")
    real_inverse = inverse and onesided  # a one-sided spectrum to its real signal
    if real_inverse and not complex_in:
        raise ctx.error("inverse onesided=1 takes a complex spectrum; this signal is real")
    if length is None:
        period = 2 * (samples - 1) if real_inverse else samples
    else:
        period = int(length)
    if period < 1:
        raise ctx.error(f"the transform's length must be positive, got {period}")
    moved = x if axis == ndim - 2 else ctx.emit("transpose", [x], axes=_swap(ndim, axis))
    # past what the transform reads the input is cut; short of it, the zeros add nothing
    taken = min(samples, period // 2 + 1 if real_inverse else period)
    if taken < samples:
        moved = ctx.emit("strided_slice", [moved], begin=(0,) * ndim,
                         end=(*moved.shape[:-2], taken, moved.shape[-1]))
    if real_inverse:
        out = _transformed(ctx, moved, _real_inverse_matrix(taken, period), period, parts=1)
    else:
        bins = period // 2 + 1 if onesided else period
        out = _transformed(ctx, moved, _dft_matrix(taken, period, bins, complex_in, inverse), bins)
    return out if axis == ndim - 2 else ctx.emit("transpose", [out], axes=_swap(ndim, axis))


def _swap(ndim: int, axis: int) -> tuple[int, ...]:
    """The permutation exchanging ``axis`` with the one before the last."""
    order = list(range(ndim))
    order[axis], order[ndim - 2] = ndim - 2, axis
    return tuple(order)


@converts("STFT")
def _stft(ctx: NodeContext, ins, attrs):
    x = ins[0]
    complex_in = _signal(ctx, x)
    if len(x.shape) != 3:
        raise ctx.error(f"the signal must be (batch, length, 1 or 2), got shape {x.shape}")
    batch, length = x.shape[:2]
    step = ctx.scalar(optional_input(ins, 1), "frame_step")
    if step is None or int(step) < 1:
        raise ctx.error(f"frame_step must be a positive integer, got {step}")
    window_input, size = optional_input(ins, 2), ctx.scalar(optional_input(ins, 3), "frame_length")
    window = None if window_input is None else \
        ctx.array(window_input, "window").astype(np.float64).reshape(-1)
    if size is None and window is None:
        raise ctx.error("STFT needs a window or a frame_length")
    size = len(window) if size is None else int(size)
    if window is not None and len(window) != size:
        raise ctx.error(f"the window's length {len(window)} differs from frame_length {size}")
    if not 1 <= size <= length:
        raise ctx.error(f"frame_length {size} must be from 1 to the signal's length {length}")
    onesided = bool(attrs.get("onesided", 1))
    if onesided and complex_in:
        raise ctx.unsupported("onesided=1 of a complex signal")
    frames = (length - size) // int(step) + 1
    starts = np.arange(frames, dtype=np.int64)[:, None] * int(step)
    table = ctx.const((starts + np.arange(size, dtype=np.int64)[None, :]).astype("int64"))
    framed = ctx.emit("take", [x, table], axis=1)  # (batch, frames, size, 1 or 2)
    bins = size // 2 + 1 if onesided else size
    return _transformed(ctx, framed, _dft_matrix(size, size, bins, complex_in, False, window), bins)


@converts("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(ctx: NodeContext, ins, attrs):
    size = ctx.scalar(ins[0], "size")
    if size is None or int(size) < 0:
        raise ctx.error(f"size must be a non-negative integer, got {size}")
    size = int(size)
    periodic = bool(attrs.get("periodic", 1))
    dtype = element_dtype(attrs.get("output_datatype", 1), f"{ctx.where}: output_datatype")
    if size == 1 and not periodic:  # 0 / 0 by the formula: one sample, whole (numpy's and torch's)
        return ctx.const(np.ones(1, dtype))
    n = np.arange(size, dtype=np.float64)
    angle = 2.0 * np.pi * n / (size if periodic else size - 1)
    if ctx.op_type == "HannWindow":
        values = 0.5 - 0.5 * np.cos(angle)
    elif ctx.op_type == "HammingWindow":
        values = 25.0 / 46.0 - (21.0 / 46.0) * np.cos(angle)
    else:
        values = 0.42 - 0.5 * np.cos(angle) + 0.08 * np.cos(2.0 * angle)
    return ctx.const(values.astype(dtype))
