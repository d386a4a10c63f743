"""Exact value semantics of every expression kind, and a small evaluator built on them.

They are part of the IR's meaning, so they live with it: the constant folder of
:mod:`compiler.arith` and the loop-IR interpreters (:mod:`compiler.tir.interpreter`)
both use them, so "what the simplifier folds" and "what the interpreter
computes" are the same thing by construction. Integers wrap to their dtype's
width (two's complement, as the generated machine code does); ``FloorDiv`` and
``FloorMod`` round towards minus infinity, integer ``Div`` truncates towards
zero (C); floats compute in their own precision through numpy scalars.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes
from . import expr as E
from .functor import Functor

__all__ = ["wrap_int", "cast_value", "binary_value", "evaluate", "Evaluator", "INTRINSICS"]

def _round_half_away(x):
    """C's ``round``: to nearest, halves away from zero (``x - trunc(x)`` is exact)."""
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)[()]


# Intrinsic calls the evaluator understands, by ``Call.op``.
INTRINSICS: dict[str, Callable] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": _round_half_away, "sin": np.sin,
    "cos": np.cos, "pow": np.power, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf), "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
    "trunc": np.trunc, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "rsqrt": lambda x: 1 / np.sqrt(x), "nearbyint": np.rint, "fmod": np.fmod,
    # Integers are Python ints here: bitwise operators act on two's complement, ``>>`` on a
    # negative value fills with its sign, and the caller wraps the result to the dtype.
    "bitwise_and": lambda a, b: int(a) & int(b), "bitwise_or": lambda a, b: int(a) | int(b),
    "bitwise_xor": lambda a, b: int(a) ^ int(b), "bitwise_not": lambda a: ~int(a),
    "shift_left": lambda a, b: int(a) << int(b), "shift_right": lambda a, b: int(a) >> int(b),
}


def _unsigned_bits(x, dtype: str) -> int:
    return int(x) & ((1 << dtypes.bits(dtype)) - 1)


def _reinterpret(x, src: str, dst: str):
    raw = np.array(x, dtype=src).view(dst)
    return raw.item() if not dtypes.is_float(dst) else raw[()]


# Intrinsics whose value depends on the argument's dtype: fn(x, arg dtype, result dtype).
_TYPED: dict[str, Callable] = {
    "popcount": lambda x, src, dst: bin(_unsigned_bits(x, src)).count("1"),
    "clz": lambda x, src, dst: dtypes.bits(src) - _unsigned_bits(x, src).bit_length(),
    "reinterpret": _reinterpret,
}


def _extern_math(name: str) -> Callable | None:
    """The math function an external call names, C and CUDA spellings alike
    (``expf``, ``__expf``, ``__nv_expf``, ``__fdividef``), or None."""
    base = name.removeprefix("__nv_").removeprefix("__")
    if base in ("fdividef", "fdivide"):
        return np.divide
    if base in INTRINSICS:
        return INTRINSICS[base]
    return INTRINSICS.get(base.removesuffix("f")) if base.endswith("f") else None


_INT_RANGES: dict[str, tuple[int, int]] = {}  # dtype -> (lowest, highest) value


def _int_range(dtype: str) -> tuple[int, int]:
    nbits = dtypes.bits(dtype)
    low = 0 if dtypes.is_uint(dtype) else -(1 << (nbits - 1))
    return _INT_RANGES.setdefault(dtype, (low, low + (1 << nbits) - 1))


def wrap_int(value: int, dtype: str) -> int:
    """``value`` reduced to the range of the integer (or bool) ``dtype``."""
    if dtype == "bool":
        return int(value != 0)
    value = int(value)
    low, high = _INT_RANGES.get(dtype) or _int_range(dtype)
    if low <= value <= high:  # nearly always: the interpreters call this for every operation
        return value
    return (value - low) % (high - low + 1) + low


_FLOAT_TYPES: dict[str, type] = {}  # dtype -> numpy scalar type


def _float(value, dtype: str):
    scalar = _FLOAT_TYPES.get(dtype)
    if scalar is None:  # looked up once per dtype: the interpreters convert in every operation
        # bfloat16 values are float32 until they are stored (see compiler.codegen.llvm_types).
        scalar = _FLOAT_TYPES[dtype] = np.float32 if dtype == "bfloat16" else np.dtype(dtype).type
    return scalar(value)


def cast_value(value, dtype: str):
    """Convert a Python/numpy scalar to ``dtype`` with C semantics (float -> int truncates)."""
    if dtype == "bool":
        return int(bool(value))
    if dtypes.is_float(dtype):
        return _float(value, dtype)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ValueError(f"cannot convert {value} to {dtype}")
        value = math.trunc(float(value))
    return wrap_int(int(value), dtype)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def binary_value(op: type, a, b, dtype: str):
    """The value of ``op(a, b)`` for a binary node class; ``dtype`` is the operands' dtype.

    Comparisons and logical operators return 0/1. Integer division by zero raises
    :class:`ZeroDivisionError` (the caller decides what that means).
    """
    if issubclass(op, E.CmpOp):
        return int(bool(_COMPARE[op](a, b)))
    if op is E.And:
        return int(bool(a) and bool(b))
    if op is E.Or:
        return int(bool(a) or bool(b))
    if dtypes.is_float(dtype):
        a, b = _float(a, dtype), _float(b, dtype)
        with np.errstate(all="ignore"):
            return _float(_FLOAT_OPS[op](a, b), dtype)
    a, b = int(a), int(b)
    if op in (E.Div, E.Mod, E.FloorDiv, E.FloorMod) and b == 0:
        raise ZeroDivisionError(f"integer {op.__name__} by zero")
    return wrap_int(_INT_OPS[op](a, b), dtype)


_COMPARE = {E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
            E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b}
_INT_OPS = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
            E.Div: _trunc_div, E.Mod: lambda a, b: a - _trunc_div(a, b) * b,
            E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
            E.Min: min, E.Max: max}
_FLOAT_OPS = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
              E.Div: lambda a, b: a / b, E.Mod: np.fmod, E.FloorDiv: np.floor_divide, E.FloorMod: np.mod,
              E.Min: np.minimum, E.Max: np.maximum}


def _lane(value, k: int):
    """Lane ``k`` of a vector value (a scalar stands for all of its lanes)."""
    return value[k] if isinstance(value, np.ndarray) else value


def _lanes(value) -> int | None:
    return len(value) if isinstance(value, np.ndarray) else None


def _elementwise(fn, *args):
    """Apply a scalar function lane by lane when any argument is a vector."""
    n = next((len(a) for a in args if isinstance(a, np.ndarray)), None)
    if n is None:
        return fn(*args)
    cols = [a if isinstance(a, np.ndarray) else [a] * n for a in args]
    return np.array([fn(*row) for row in zip(*cols, strict=True)], dtype=object)


def evaluate(expr: E.PrimExpr, env: dict | None = None,
             load: Callable[[Any, tuple], Any] | None = None) -> Any:
    """The value of ``expr``.

    ``env`` maps variables (the :class:`~compiler.tir.Var` objects, or their names)
    to values. ``load(buffer, indices)`` reads buffers for :class:`BufferLoad`
    nodes (indices are evaluated; a vector index is a numpy object array).
    Integers and bools come back as Python ints, floats as numpy scalars of
    their dtype, vectors (from ``Ramp``/``Broadcast``) as numpy object arrays.
    """
    env = env or {}
    by_var = {k: v for k, v in env.items() if not isinstance(k, str)}
    by_name = {k: v for k, v in env.items() if isinstance(k, str)}
    return Evaluator(by_var, by_name, load).eval(expr)


class Evaluator(Functor):
    """Evaluates expressions repeatedly against a mutable environment.

    ``env`` maps :class:`~compiler.tir.Var` objects to values (callers update it as
    loops advance), ``by_name`` is consulted next; ``load`` is as in :func:`evaluate`.
    """

    def __init__(self, env: dict, by_name: dict, load):
        self.env = env
        self.by_name = by_name
        self.load = load

    def eval(self, e):
        """The value of ``e``."""
        return self.visit(e)

    def generic_visit(self, e):
        raise NotImplementedError(f"cannot evaluate {type(e).__name__}")

    def visit_Var(self, e: E.Var):
        if e in self.env:
            return self.env[e]
        if e.name in self.by_name:
            return self.by_name[e.name]
        raise KeyError(f"no value for variable {e.name!r}")

    def visit_IntImm(self, e):
        return cast_value(e.value, e.dtype)

    visit_FloatImm = visit_IntImm

    def visit_BinaryOp(self, e: E.BinaryOp):
        a, b = self.eval(e.a), self.eval(e.b)
        dtype = e.a.dtype
        if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            return binary_value(type(e), a, b, dtype)
        return _elementwise(lambda x, y: binary_value(type(e), x, y, dtype), a, b)

    def visit_And(self, e: E.BinaryOp):
        # Short-circuit like the generated code: the right side may be undefined otherwise.
        a = self.eval(e.a)
        if _lanes(a) is None:
            if isinstance(e, E.And) and not a:
                return 0
            if isinstance(e, E.Or) and a:
                return 1
        return self.visit_BinaryOp(e)

    visit_Or = visit_And

    def visit_Not(self, e: E.Not):
        return _elementwise(lambda x: int(not x), self.eval(e.a))

    def visit_Cast(self, e: E.Cast):
        return _elementwise(lambda x: cast_value(x, e.dtype), self.eval(e.value))

    def visit_Select(self, e: E.Select):
        c = self.eval(e.condition)
        if _lanes(c) is None:
            return self.eval(e.true_value if c else e.false_value)
        t, f = self.eval(e.true_value), self.eval(e.false_value)
        return _elementwise(lambda cc, x, y: x if cc else y, c, t, f)

    def visit_Call(self, e: E.Call):
        if e.op == "if_then_else":
            c = self.eval(e.args[0])
            return self.eval(e.args[1] if c else e.args[2])
        if e.op in _TYPED:
            src, fn = e.args[0].dtype, _TYPED[e.op]
            return _elementwise(lambda x: cast_value(fn(x, src, e.dtype), e.dtype), self.eval(e.args[0]))
        if e.op in ("call_extern", "call_pure_extern"):
            fn, args = _extern_math(e.args[0].value), [self.eval(a) for a in e.args[1:]]
        else:
            fn, args = INTRINSICS.get(e.op), [self.eval(a) for a in e.args]
        if fn is None:
            name = e.args[0].value if e.op.endswith("extern") else e.op
            raise NotImplementedError(f"cannot evaluate intrinsic {name!r}")
        with np.errstate(all="ignore"):
            return _elementwise(lambda *xs: cast_value(fn(*xs), e.dtype), *args)

    def visit_Let(self, e: E.Let):
        self.env[e.var] = self.eval(e.value)
        try:
            return self.eval(e.body)
        finally:
            del self.env[e.var]

    def visit_BufferLoad(self, e: E.BufferLoad):
        if self.load is None:
            raise KeyError(f"no buffers given to evaluate a load of {e.buffer.name!r}")
        indices = tuple(self.eval(i) for i in e.indices)
        if e.predicate is None:
            return self.load(e.buffer, indices)
        # Inactive lanes read no memory (their address may be out of bounds); they hold 0.
        mask = self.eval(e.predicate)
        lanes = [self.load(e.buffer, tuple(_lane(i, k) for i in indices)) if _lane(mask, k)
                 else cast_value(0, e.dtype) for k in range(e.lanes)]
        return np.array(lanes, dtype=object)

    def visit_Ramp(self, e: E.Ramp):
        base, stride = self.eval(e.base), self.eval(e.stride)
        dtype = e.base.dtype
        return np.array([wrap_int(base + k * stride, dtype) for k in range(e.lanes)], dtype=object)

    def visit_Broadcast(self, e: E.Broadcast):
        return np.array([self.eval(e.value)] * e.lanes, dtype=object)
