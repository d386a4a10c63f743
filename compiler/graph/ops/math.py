"""Elementwise operators: unary (``exp``, ``nn.relu``, ``cast``, ...), binary with numpy
broadcasting (``add``, ``power``, ``less``, ...) and ``where``.

Binary operators take two inputs of one dtype (an importer casts where a model mixes them);
the references compute transcendental functions in float64 and round once to the dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ... import dtypes, te, topi
from ...topi.nn import ACTIVATIONS, Activation, erf_numpy
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import (
    arity,
    broadcast_index,
    broadcast_shape,
    fail,
    floating,
    integer,
    numeric,
    same_dtype,
    shape_of,
    wide,
)

__all__ = ["UNARY_OPS", "BINARY_OPS", "COMPARISON_OPS"]

# ---------------------------------------------------------------------------- unary


def _unary(name: str, ref: Callable, expr: Callable, *, float_only: bool, doc: str,
           check: Callable | None = None, integer_only: bool = False) -> OpDef:
    """An elementwise operator: ``ref(array, attrs)`` in numpy (float64 for floats) and
    ``expr(value, attrs)`` on one element; ``check(attrs)`` validates the attributes."""

    def infer(types: list[TensorType], attrs) -> list[TensorType]:
        arity(name, types, 1)
        (floating if float_only else integer if integer_only else numeric)(name, types[0])
        if check is not None:
            check(attrs)
        return [types[0]]

    def evaluate(arrays, attrs):
        (x,) = arrays
        return [np.asarray(ref(wide(x) if x.dtype.kind == "f" else x, attrs)).astype(x.dtype)]

    def compute(tensors, attrs):
        (x,) = tensors
        return [te.compute(x.shape, lambda *i: expr(x[i], attrs), name=f"T_{name.split('.')[-1]}",
                           tag="elemwise")]

    return register_op(OpDef(name, "elemwise", infer, evaluate, compute, doc))


def _const(value, like) -> te.PrimExpr:
    return te.const(value, like.dtype)


def _sign(v: te.PrimExpr) -> te.PrimExpr:
    """1, -1, or ``v`` itself (a zero, or NaN)."""
    below = te.if_then_else(v < _const(0, v), _const(-1, v), v)
    return te.if_then_else(v > _const(0, v), _const(1, v), below)


def _bounds(attrs, dtype: str) -> tuple[float | int | None, float | int | None]:
    """``clip``'s bounds in ``dtype``'s terms: None where a side is open; integer tensors
    clip to the integers inside the bounds."""
    lo, hi = attrs.get("a_min"), attrs.get("a_max")
    lo = None if lo is None or lo == -math.inf else lo
    hi = None if hi is None or hi == math.inf else hi
    if dtypes.is_int(dtype):
        lo = None if lo is None else math.ceil(lo)
        hi = None if hi is None else math.floor(hi)
    return lo, hi


def _clip_infer(types, attrs):
    arity("clip", types, 1)
    numeric("clip", types[0])
    for key in ("a_min", "a_max"):
        v = attrs.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v)):
            raise fail("clip", f"attribute {key} must be a number, got {v!r}")
    return [types[0]]


def _clip_evaluate(arrays, attrs):
    (x,) = arrays
    lo, hi = _bounds(attrs, x.dtype.name)
    out = x
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(x.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(x.dtype))
    return [np.array(out, dtype=x.dtype)]


def _clip_compute(tensors, attrs):
    (x,) = tensors
    lo, hi = _bounds(attrs, x.dtype)

    def body(*i):
        v = x[i]
        if lo is not None:
            v = te.max(v, te.const(lo, x.dtype))
        if hi is not None:
            v = te.min(v, te.const(hi, x.dtype))
        return v

    return [te.compute(x.shape, body, name="T_clip", tag="elemwise")]


register_op(OpDef("clip", "elemwise", _clip_infer, _clip_evaluate, _clip_compute,
                  "Clamp to [a_min, a_max] (floats; either may be None or infinite for no bound)."))


def _cast_infer(types, attrs):
    arity("cast", types, 1)
    dtype = attrs.get("dtype")
    if dtype not in dtypes.SUPPORTED:
        raise fail("cast", f"attribute dtype must be one of {dtypes.SUPPORTED}, got {dtype!r}")
    return [TensorType(types[0].shape, dtype)]


def _cast_evaluate(arrays, attrs):
    return [arrays[0].astype(attrs["dtype"])]


def _cast_compute(tensors, attrs):
    (x,) = tensors
    dtype = attrs["dtype"]
    if dtype == "bool" and x.dtype != "bool":
        body = lambda *i: x[i] != te.const(0, x.dtype)
    else:
        body = lambda *i: x[i].astype(dtype)
    return [te.compute(x.shape, body, name="T_cast", tag="elemwise")]


register_op(OpDef("cast", "elemwise", _cast_infer, _cast_evaluate, _cast_compute,
                  "Convert to attribute dtype (to bool: nonzero)."))


def _gelu_mode(attrs) -> str:
    mode = attrs.get("approximate", "none")
    if mode not in ("none", "tanh"):
        raise fail("nn.gelu", f"attribute approximate must be 'none' or 'tanh', got {mode!r}")
    return mode


def _gelu_activation(attrs) -> Activation:
    return ACTIVATIONS["gelu_tanh" if _gelu_mode(attrs) == "tanh" else "gelu"]


def _activation_op(name: str, activation: str, doc: str) -> OpDef:
    """A float operator computing ``ACTIVATIONS[activation]``."""
    act = ACTIVATIONS[activation]
    return _unary(name, lambda x, a: act.numpy(x), lambda v, a: act.expr(v), float_only=True,
                  doc=f"{act.formula} ({doc}).")


def _leaky_alpha(attrs) -> float:
    alpha = attrs.get("alpha", 0.01)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise fail("nn.leaky_relu", f"attribute alpha must be a finite number, got {alpha!r}")
    return float(alpha)


def _leaky(attrs) -> Activation:
    return topi.nn.activation(topi.nn.leaky_relu_name(_leaky_alpha(attrs)))


_unary("nn.leaky_relu", lambda x, a: _leaky(a).numpy(x), lambda v, a: _leaky(a).expr(v), float_only=True,
       check=_leaky_alpha, doc="x where positive, attribute alpha (0.01) times x below (LeakyReLU).")


def _relu_infer(types, attrs):
    arity("nn.relu", types, 1)
    numeric("nn.relu", types[0])
    return [types[0]]


register_op(OpDef("nn.relu", "elemwise", _relu_infer,
                  lambda arrays, attrs: [np.maximum(arrays[0], arrays[0].dtype.type(0))],
                  lambda tensors, attrs: [topi.nn.relu(tensors[0])], "max(x, 0)."))

UNARY_OPS = {
    "tanh": (lambda x, a: np.tanh(x), lambda v, a: te.tanh(v), True),
    "exp": (lambda x, a: np.exp(x), lambda v, a: te.exp(v), True),
    "log": (lambda x, a: np.log(x), lambda v, a: te.log(v), True),
    "sqrt": (lambda x, a: np.sqrt(x), lambda v, a: te.sqrt(v), True),
    "erf": (lambda x, a: erf_numpy(x), lambda v, a: te.erf(v), True),
    "reciprocal": (lambda x, a: 1.0 / x, lambda v, a: _const(1.0, v) / v, True),
    "sin": (lambda x, a: np.sin(x), lambda v, a: te.sin(v), True),
    "cos": (lambda x, a: np.cos(x), lambda v, a: te.cos(v), True),
    "floor": (lambda x, a: np.floor(x), lambda v, a: te.floor(v), True),
    "ceil": (lambda x, a: np.ceil(x), lambda v, a: te.ceil(v), True),
    "round": (lambda x, a: np.round(x), lambda v, a: te.nearbyint(v), True),  # halves to even
    "sign": (lambda x, a: np.sign(x), lambda v, a: _sign(v), False),
    "negative": (lambda x, a: np.negative(x), lambda v, a: -v, False),
    "abs": (lambda x, a: np.abs(x), lambda v, a: te.abs(v), False),
    "tan": (lambda x, a: np.tan(x), lambda v, a: te.tan(v), True),
    "asin": (lambda x, a: np.arcsin(x), lambda v, a: te.asin(v), True),
    "acos": (lambda x, a: np.arccos(x), lambda v, a: te.acos(v), True),
    "atan": (lambda x, a: np.arctan(x), lambda v, a: te.atan(v), True),
    "sinh": (lambda x, a: np.sinh(x), lambda v, a: te.sinh(v), True),
    "cosh": (lambda x, a: np.cosh(x), lambda v, a: te.cosh(v), True),
    "asinh": (lambda x, a: np.arcsinh(x), lambda v, a: te.asinh(v), True),
    "acosh": (lambda x, a: np.arccosh(x), lambda v, a: te.acosh(v), True),
    "atanh": (lambda x, a: np.arctanh(x), lambda v, a: te.atanh(v), True),
}

for _name, (_ref, _expr, _float_only) in UNARY_OPS.items():
    _unary(_name, _ref, _expr, float_only=_float_only, doc=f"Elementwise {_name}.")
_unary("bitwise_not", lambda x, a: np.invert(x), lambda v, a: ~v, float_only=False, integer_only=True,
       doc="Elementwise bitwise not of an integer tensor.")
_activation_op("sigmoid", "sigmoid", "elementwise sigmoid")
_unary("nn.gelu", lambda x, a: _gelu_activation(a).numpy(x), lambda v, a: _gelu_activation(a).expr(v),
       float_only=True, check=_gelu_mode,
       doc="x * Phi(x); attribute approximate 'none' (erf, the default) or 'tanh'.")
_activation_op("nn.silu", "silu", "SiLU, Swish")
_activation_op("nn.hardswish", "hardswish", "ONNX's HardSwish")


def _float_test(name: str, ref: Callable, expr: Callable, doc: str) -> OpDef:
    """A bool operator testing each element of a float tensor."""

    def infer(types, attrs):
        arity(name, types, 1)
        floating(name, types[0])
        return [TensorType(types[0].shape, "bool")]

    def compute(tensors, attrs):
        (x,) = tensors
        return [te.compute(x.shape, lambda *i: expr(x[i]), name=f"T_{name}", tag="elemwise")]

    return register_op(OpDef(name, "elemwise", infer, lambda arrays, attrs: [ref(arrays[0])], compute, doc))


_float_test("isnan", np.isnan, te.isnan, "True where x is NaN.")
_float_test("isinf", np.isinf, te.isinf, "True where x is infinite, of either sign.")


# ---------------------------------------------------------------------------- binary


def _binary(name: str, ref: Callable, expr: Callable, *, kind: str, out_dtype: str | None = None,
            doc: str) -> OpDef:
    """A binary operator with numpy broadcasting over inputs of one dtype.

    ``kind`` says which dtypes it takes: ``"float"``, ``"integer"``, ``"numeric"`` (not bool) or
    ``"any"``;
    ``out_dtype`` is the result's (the inputs' by default)."""

    def infer(types, attrs):
        arity(name, types, 2)
        dtype = same_dtype(name, types)
        if kind != "any":
            {"float": floating, "integer": integer, "numeric": numeric}[kind](name, types[0], "the inputs")
        shape = broadcast_shape(name, [t.shape for t in types])
        return [TensorType(shape, out_dtype or dtype)]

    def evaluate(arrays, attrs):
        a, b = arrays
        return [np.asarray(ref(a, b)).astype(out_dtype or a.dtype)]

    def compute(tensors, attrs):
        a, b = tensors
        sa, sb = shape_of(a), shape_of(b)
        shape = broadcast_shape(name, [sa, sb])
        return [te.compute(shape, lambda *i: expr(a[broadcast_index(i, sa, shape)],
                                                   b[broadcast_index(i, sb, shape)]),
                           name=f"T_{name}", tag="broadcast")]

    return register_op(OpDef(name, "broadcast", infer, evaluate, compute, doc))


def _divide_ref(a, b):
    if a.dtype.kind == "f":
        return a / b
    q = np.floor_divide(a, b)  # truncate towards zero, as C and ONNX do
    return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))


def _divide_expr(a, b):
    if dtypes.is_float(a.dtype):
        return a / b
    q = a // b
    inexact = (a % b != te.const(0, a.dtype)) & ((a < te.const(0, a.dtype)) != (b < te.const(0, b.dtype)))
    return te.if_then_else(inexact, q + te.const(1, a.dtype), q)


def _fmod_expr(a, b):
    return te.fmod(a, b) if dtypes.is_float(a.dtype) else te.truncmod(a, b)


def _shift_ref(left: bool):
    """numpy's shift, but by the width or more: 0, or for a signed right shift the sign."""
    def ref(a, b):
        width = a.dtype.itemsize * 8
        count = np.minimum(b, width - 1)
        if left:
            return np.where(b < width, np.left_shift(a, count), 0)
        return np.where((b < width) | (a < 0), np.right_shift(a, count), 0)
    return ref


def _shift_expr(left: bool):
    """A shift whose count is the width or more gives what :func:`_shift_ref` gives (a machine's
    shift by that much is undefined)."""
    def expr(a, b):
        width = dtypes.bits(a.dtype)
        inside = b < te.const(width, b.dtype)
        if left:
            return te.if_then_else(inside, a << b, te.const(0, a.dtype))
        count = te.min(b, te.const(width - 1, b.dtype))  # a signed value shifted out is its sign
        beyond = te.const(0, a.dtype) if dtypes.is_uint(a.dtype) else a >> count
        return te.if_then_else(inside, a >> b, beyond)
    return expr


BINARY_OPS = {
    "add": (np.add, lambda a, b: a + b, "numeric"),
    "subtract": (np.subtract, lambda a, b: a - b, "numeric"),
    "multiply": (np.multiply, lambda a, b: a * b, "numeric"),
    "divide": (_divide_ref, _divide_expr, "numeric"),
    "power": (lambda a, b: np.power(wide(a), wide(b)), te.power, "float"),
    "maximum": (np.maximum, lambda a, b: te.max(a, b), "numeric"),
    "minimum": (np.minimum, lambda a, b: te.min(a, b), "numeric"),
    # the remainder with the divisor's sign (numpy's mod, Python's %), and with the dividend's (C's fmod)
    "mod": (np.mod, te.floormod, "numeric"),
    "fmod": (np.fmod, _fmod_expr, "numeric"),
    # TVM's names; right shifts are arithmetic on signed integers
    "bitwise_and": (np.bitwise_and, lambda a, b: a & b, "integer"),
    "bitwise_or": (np.bitwise_or, lambda a, b: a | b, "integer"),
    "bitwise_xor": (np.bitwise_xor, lambda a, b: a ^ b, "integer"),
    "left_shift": (_shift_ref(True), _shift_expr(True), "integer"),
    "right_shift": (_shift_ref(False), _shift_expr(False), "integer"),
}

COMPARISON_OPS = {
    "equal": (np.equal, lambda a, b: a == b),
    "not_equal": (np.not_equal, lambda a, b: a != b),
    "less": (np.less, lambda a, b: a < b),
    "less_equal": (np.less_equal, lambda a, b: a <= b),
    "greater": (np.greater, lambda a, b: a > b),
    "greater_equal": (np.greater_equal, lambda a, b: a >= b),
}

for _name, (_ref, _expr, _kind) in BINARY_OPS.items():
    _binary(_name, _ref, _expr, kind=_kind, doc=f"Elementwise {_name} with numpy broadcasting.")
for _name, (_ref, _expr) in COMPARISON_OPS.items():
    _binary(_name, _ref, _expr, kind="any", out_dtype="bool",
            doc=f"Elementwise {_name} with numpy broadcasting; a bool tensor.")


# ---------------------------------------------------------------------------- where


def _where_infer(types, attrs):
    arity("where", types, 3)
    if types[0].dtype != "bool":
        raise fail("where", f"the condition must be a bool tensor, got {types[0].dtype}")
    dtype = same_dtype("where", types[1:], "the two branches")
    return [TensorType(broadcast_shape("where", [t.shape for t in types]), dtype)]


def _where_compute(tensors, attrs):
    shapes = [shape_of(t) for t in tensors]
    shape = broadcast_shape("where", shapes)
    c, x, y = (lambda i, t=t, s=s: t[broadcast_index(i, s, shape)] for t, s in zip(tensors, shapes))
    return [te.compute(shape, lambda *i: te.if_then_else(c(i), x(i), y(i)), name="T_where", tag="broadcast")]


register_op(OpDef("where", "broadcast", _where_infer,
                  lambda arrays, attrs: [np.where(*arrays).astype(arrays[1].dtype)], _where_compute,
                  "x where cond holds, else y, with numpy broadcasting."))
