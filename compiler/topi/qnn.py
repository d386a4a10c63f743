"""Quantization as tensor expressions: ``quantize``, ``dequantize`` and ``requantize`` (the
operators of TVM's ``relay.qnn``, whose ``topi``-level helpers live in ``tvm.topi.nn.qnn``).

Their arithmetic is ONNX's, computed in float32 the way ONNX Runtime's kernels compute it, so
that a model's integers come out the same:

* ``quantize``: ``saturate(round(data / scale) + zero_point)``;
* ``dequantize``: ``float32(data - zero_point) * scale``;
* ``requantize``: ``saturate(round(float32(data - input_zero_point) * (input_scale / output_scale))
  + output_zero_point)``; with ``input_scale = x_scale * w_scale`` (float32) this is ONNX Runtime's
  requantization of an int32 accumulator (QLinearConv, QLinearMatMul). TVM's own ``qnn.requantize``
  defaults to fixed-point arithmetic, which can differ by one.

``round`` rounds halves to even and ``saturate`` clamps to ``out_dtype``'s range. A scale or zero
point is a tensor of shape ``()`` or ``(1,)`` (per tensor) or ``(C,)`` with ``C`` the length of
``axis`` (per channel). A NaN input gives an unspecified value.

The results are plain elementwise computations, scheduled as any other (no int8 instructions).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import te
from .utils import get_const_tuple

__all__ = ["quantize", "dequantize", "requantize", "QUANTIZED_DTYPES"]

#: The dtypes a tensor can be quantized to.
QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16")


def _param(t: te.Tensor, axis: int, ndim: int, what: str) -> Callable:
    """``t`` at an element's index: its one value (per tensor), or the entry of the element's
    position along ``axis`` (per channel)."""
    shape = get_const_tuple(t.shape)
    if shape == ():
        return lambda idx: t[()]
    if shape == (1,):
        return lambda idx: t[0]
    if len(shape) != 1 or not -ndim <= axis < ndim:
        raise ValueError(f"{what} must have shape (), (1,) or (C,) along an axis in range, got shape {shape} "
                         f"and axis {axis} for {ndim} dimensions")
    axis %= ndim
    return lambda idx: t[idx[axis]]


def _saturate(rounded: te.PrimExpr, zero_point: te.PrimExpr, out_dtype: str) -> te.PrimExpr:
    """``rounded`` (an integral float32) plus ``zero_point``, clamped to ``out_dtype`` and cast.
    Exact in float32: below 2**24 the sum is exact, and beyond it the clamp decides."""
    if out_dtype not in QUANTIZED_DTYPES:
        raise ValueError(f"out_dtype must be one of {QUANTIZED_DTYPES}, got {out_dtype!r}")
    info = np.iinfo(out_dtype)
    q = rounded + zero_point.astype("float32")
    q = te.min(te.max(q, te.const(float(info.min), "float32")), te.const(float(info.max), "float32"))
    return q.astype(out_dtype)


def quantize(data: te.Tensor, output_scale: te.Tensor, output_zero_point: te.Tensor, axis: int = -1,
             out_dtype: str = "int8") -> te.Tensor:
    """float32 ``data`` as ``out_dtype``: ``saturate(round(data / output_scale) + output_zero_point)``,
    the division in float32 (as ONNX Runtime's QuantizeLinear), halves rounded to even."""
    ndim = len(data.shape)
    scale = _param(output_scale, axis, ndim, "quantize: output_scale")
    zero = _param(output_zero_point, axis, ndim, "quantize: output_zero_point")

    def body(*i):
        return _saturate(te.nearbyint(data[i].astype("float32") / scale(i)), zero(i), out_dtype)

    return te.compute(data.shape, body, name="T_quantize", tag="broadcast")


def dequantize(data: te.Tensor, input_scale: te.Tensor, input_zero_point: te.Tensor,
               axis: int = -1) -> te.Tensor:
    """Integer ``data`` as float32: ``float32(data - input_zero_point) * input_scale``, the
    difference in int32."""
    ndim = len(data.shape)
    scale = _param(input_scale, axis, ndim, "dequantize: input_scale")
    zero = _param(input_zero_point, axis, ndim, "dequantize: input_zero_point")

    def body(*i):
        shifted = data[i].astype("int32") - zero(i).astype("int32")
        return shifted.astype("float32") * scale(i)

    return te.compute(data.shape, body, name="T_dequantize", tag="broadcast")


def requantize(data: te.Tensor, input_scale: te.Tensor, input_zero_point: te.Tensor, output_scale: te.Tensor,
               output_zero_point: te.Tensor, axis: int = -1, out_dtype: str = "int8") -> te.Tensor:
    """Integer ``data`` (an int32 accumulator) with ``input_scale``/``input_zero_point`` as
    ``out_dtype`` with ``output_scale``/``output_zero_point``: the difference in int32, converted to
    float32, times the float32 multiplier ``input_scale / output_scale``, rounded half to even,
    shifted by ``output_zero_point`` and saturated."""
    ndim = len(data.shape)
    in_scale = _param(input_scale, axis, ndim, "requantize: input_scale")
    in_zero = _param(input_zero_point, axis, ndim, "requantize: input_zero_point")
    out_scale = _param(output_scale, axis, ndim, "requantize: output_scale")
    out_zero = _param(output_zero_point, axis, ndim, "requantize: output_zero_point")

    def body(*i):
        shifted = (data[i].astype("int32") - in_zero(i).astype("int32")).astype("float32")
        return _saturate(te.nearbyint(shifted * (in_scale(i) / out_scale(i))), out_zero(i), out_dtype)

    return te.compute(data.shape, body, name="T_requantize", tag="broadcast")
