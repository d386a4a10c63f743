"""Quantization operators: ``qnn.quantize``, ``qnn.dequantize`` and ``qnn.requantize`` (TVM's
``relay.qnn`` names and arguments), with ONNX's arithmetic in float32 as ONNX Runtime computes it:

* ``qnn.quantize(data, output_scale, output_zero_point; axis, out_dtype)``: float32 data as
  ``saturate(round(data / output_scale) + output_zero_point)``;
* ``qnn.dequantize(data, input_scale, input_zero_point; axis)``: integer data as
  ``float32(data - input_zero_point) * input_scale``;
* ``qnn.requantize(data, input_scale, input_zero_point, output_scale, output_zero_point; axis,
  out_dtype)``: an integer accumulator as ``saturate(round(float32(data - input_zero_point) *
  (input_scale / output_scale)) + output_zero_point)``.

``round`` rounds halves to even; ``saturate`` clamps to ``out_dtype`` (int8, uint8, int16, uint16).
Each scale is float32 and each zero point an integer tensor, of shape ``()`` or ``(1,)`` (per
tensor) or ``(C,)``, ``C`` the length of axis ``axis`` (-1 by default, as in relay), per channel.

The references compute in float32 on purpose (not in float64 as the rest of the catalog's): a
quotient rounded to float32 and then to an integer is what ONNX Runtime produces, and a wider
quotient can round a value lying next to a half the other way. Quantized convolutions and
matrix products are composed by the importer from these and ``nn.conv2d``, ``nn.dense`` and
``nn.batch_matmul`` on int32 (:mod:`compiler.frontend.onnx.quantize`). All of them are plain
kernels, scheduled as any other: no int8 dot-product instructions yet.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes, topi
from ...topi.qnn import QUANTIZED_DTYPES
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import arity, axis_of, fail

__all__ = ["QUANTIZED_DTYPES", "DEQUANTIZED_DTYPES"]

#: The dtypes ``qnn.dequantize`` reads: the quantized ones and int32 (a bias or an accumulator).
DEQUANTIZED_DTYPES = (*QUANTIZED_DTYPES, "int32")
_F32 = "float32"


def _params(op: str, data: TensorType, params: list[tuple[str, TensorType]], attrs) -> None:
    """GraphError unless each scale is float32, each zero point an integer, and each is per tensor
    (shape ``()`` or ``(1,)``) or per channel along attribute ``axis`` of ``data``."""
    axis = attrs.get("axis", -1)
    for name, t in params:
        if name.endswith("scale") and t.dtype != _F32:
            raise fail(op, f"{name} must be float32, got {t.dtype}")
        if name.endswith("zero_point") and not dtypes.is_int(t.dtype):
            raise fail(op, f"{name} must be an integer tensor, got {t.dtype}")
        if t.shape in ((), (1,)):
            continue
        k = axis_of(op, axis, len(data.shape))
        if t.shape != (data.shape[k],):
            raise fail(op, f"{name} must have shape () or (1,) (per tensor) or ({data.shape[k]},) (per "
                           f"channel along axis {axis} of {data.shape}), got {t.shape}")


def _out_dtype(op: str, attrs) -> str:
    out = attrs.get("out_dtype", "int8")
    if out not in QUANTIZED_DTYPES:
        raise fail(op, f"attribute out_dtype must be one of {QUANTIZED_DTYPES}, got {out!r}")
    return out


def _view(param: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``param`` broadcastable against data of ``ndim`` dimensions: a scalar, or a vector along ``axis``."""
    if param.size == 1 and param.shape in ((), (1,)):
        return param.reshape(())
    return param.reshape((-1,) + (1,) * (ndim - 1 - axis % ndim))


def _saturate(rounded: np.ndarray, zero_point: np.ndarray, out_dtype: str) -> np.ndarray:
    info = np.iinfo(out_dtype)
    q = np.clip(rounded + zero_point.astype(_F32), np.float32(info.min), np.float32(info.max))
    with np.errstate(invalid="ignore"):  # a NaN's value is unspecified
        return np.asarray(q).astype(out_dtype)


# ---------------------------------------------------------------------------- qnn.quantize


def _quantize_infer(types, attrs):
    op = "qnn.quantize"
    arity(op, types, 3)
    data, scale, zero = types
    if data.dtype != _F32:
        raise fail(op, f"data must be float32, got {data.dtype}")
    _params(op, data, [("output_scale", scale), ("output_zero_point", zero)], attrs)
    return [TensorType(data.shape, _out_dtype(op, attrs))]


def _quantize_evaluate(arrays, attrs):
    x, scale, zero = arrays
    axis = attrs.get("axis", -1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotient = x.astype(_F32) / _view(scale, axis, x.ndim).astype(_F32)
    return [_saturate(np.rint(quotient), _view(zero, axis, x.ndim), _out_dtype("qnn.quantize", attrs))]


def _quantize_compute(tensors, attrs):
    out_dtype = _out_dtype("qnn.quantize", attrs)
    return [topi.qnn.quantize(*tensors, axis=attrs.get("axis", -1), out_dtype=out_dtype)]


register_op(OpDef("qnn.quantize", "broadcast", _quantize_infer, _quantize_evaluate, _quantize_compute,
                  "saturate(round(data / output_scale) + output_zero_point) in attribute out_dtype (int8); "
                  "float32, halves to even; per tensor or per channel along attribute axis (-1)."))


# ---------------------------------------------------------------------------- qnn.dequantize


def _dequantize_infer(types, attrs):
    op = "qnn.dequantize"
    arity(op, types, 3)
    data, scale, zero = types
    if data.dtype not in DEQUANTIZED_DTYPES:
        raise fail(op, f"data must be one of {DEQUANTIZED_DTYPES}, got {data.dtype}")
    _params(op, data, [("input_scale", scale), ("input_zero_point", zero)], attrs)
    return [TensorType(data.shape, _F32)]


def _dequantize_evaluate(arrays, attrs):
    x, scale, zero = arrays
    axis = attrs.get("axis", -1)
    shifted = x.astype("int32") - _view(zero, axis, x.ndim).astype("int32")
    return [np.asarray(shifted.astype(_F32) * _view(scale, axis, x.ndim).astype(_F32)).astype(_F32)]


def _dequantize_compute(tensors, attrs):
    return [topi.qnn.dequantize(*tensors, axis=attrs.get("axis", -1))]


register_op(OpDef("qnn.dequantize", "broadcast", _dequantize_infer, _dequantize_evaluate, _dequantize_compute,
                  "float32(data - input_zero_point) * input_scale; per tensor or per channel along "
                  "attribute axis (-1)."))


# ---------------------------------------------------------------------------- qnn.requantize


def _requantize_infer(types, attrs):
    op = "qnn.requantize"
    arity(op, types, 5)
    data = types[0]
    if data.dtype not in DEQUANTIZED_DTYPES:
        raise fail(op, f"data must be one of {DEQUANTIZED_DTYPES}, got {data.dtype}")
    names = ("input_scale", "input_zero_point", "output_scale", "output_zero_point")
    _params(op, data, list(zip(names, types[1:])), attrs)
    return [TensorType(data.shape, _out_dtype(op, attrs))]


def _requantize_evaluate(arrays, attrs):
    x, axis = arrays[0], attrs.get("axis", -1)
    in_scale, in_zero, out_scale, out_zero = (_view(p, axis, x.ndim) for p in arrays[1:])
    shifted = (x.astype("int32") - in_zero.astype("int32")).astype(_F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        multiplier = in_scale.astype(_F32) / out_scale.astype(_F32)
        rounded = np.rint(shifted * multiplier)
    return [_saturate(rounded, out_zero, _out_dtype("qnn.requantize", attrs))]


def _requantize_compute(tensors, attrs):
    out_dtype = _out_dtype("qnn.requantize", attrs)
    return [topi.qnn.requantize(*tensors, axis=attrs.get("axis", -1), out_dtype=out_dtype)]


register_op(OpDef("qnn.requantize", "broadcast", _requantize_infer, _requantize_evaluate, _requantize_compute,
                  "saturate(round(float32(data - input_zero_point) * (input_scale / output_scale)) + "
                  "output_zero_point) in attribute out_dtype (int8): ONNX Runtime's requantization of an "
                  "int32 accumulator; per tensor or per channel along attribute axis (-1)."))
