"""Mapping compiler dtypes to LLVM types and constants.

``bool`` is ``i1`` in registers and ``i8`` in memory. Vector dtypes may be
spelled ``float32x8``; elsewhere a node's ``lanes`` field says how wide it is.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError

__all__ = ["split_dtype", "scalar_type", "memory_type", "value_type", "constant", "lanes_of",
           "splat_constant", "type_suffix", "shuffle_mask", "I1", "I8", "I32", "I64", "VOID", "I8PTR"]

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VOID = ir.VoidType()
I8PTR = I8.as_pointer()


def split_dtype(dtype: str) -> tuple[str, int]:
    """``"float32x4"`` -> ``("float32", 4)``; ``"int8"`` -> ``("int8", 1)``."""
    base, x, lanes = dtype.partition("x")
    if x and lanes.isdigit():
        return base, int(lanes)
    return dtype, 1


def scalar_type(dtype: str) -> ir.Type:
    """The register type of one element of ``dtype``."""
    base, _ = split_dtype(dtype)
    if base == "bool":
        return I1
    if base == "handle":
        return I8PTR
    if base == "float16":
        return ir.HalfType()
    if base == "float32":
        return ir.FloatType()
    if base == "float64":
        return ir.DoubleType()
    if dtypes.is_int(base):
        return ir.IntType(dtypes.bits(base))
    raise CodegenError(f"no LLVM type for dtype {dtype!r}")


def memory_type(dtype: str) -> ir.Type:
    """The in-memory type of one element (bool is stored as a byte)."""
    base, _ = split_dtype(dtype)
    return I8 if base == "bool" else scalar_type(base)


def value_type(dtype: str, lanes: int = 1) -> ir.Type:
    t = scalar_type(dtype)
    return ir.VectorType(t, lanes) if lanes > 1 else t


def lanes_of(value: ir.Value) -> int:
    return value.type.count if isinstance(value.type, ir.VectorType) else 1


def constant(dtype: str, value) -> ir.Constant:
    """A scalar constant of ``dtype`` (integers wrap to the type's width, floats round to it)."""
    base, _ = split_dtype(dtype)
    t = scalar_type(base)
    if isinstance(t, ir.IntType):
        v = int(value) & ((1 << t.width) - 1)
        if t.width > 1 and v >= 1 << (t.width - 1):
            v -= 1 << t.width  # LLVM reads integer literals as signed
        return ir.Constant(t, v)
    # Round to the element type first: LLVM rejects literals it cannot represent exactly.
    return ir.Constant(t, float(np.asarray(value, dtype=dtypes.to_numpy(base))))


def splat_constant(t: ir.Type, value) -> ir.Constant:
    """A constant of type ``t`` (scalar or vector) with every lane equal to ``value``."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix of an LLVM intrinsic for type ``t`` (``f32``, ``v8f32``, ``i64``)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise CodegenError(f"no intrinsic suffix for LLVM type {t}")


def shuffle_mask(lanes) -> ir.Constant:
    """The constant ``<n x i32>`` of ``lanes``: a ``shufflevector``'s mask."""
    lanes = list(lanes)
    return ir.Constant(ir.VectorType(I32, len(lanes)), lanes)
