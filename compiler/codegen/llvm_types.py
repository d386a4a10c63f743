"""Mapping compiler dtypes to LLVM types and constants.

``bool`` is ``i1`` in registers and ``i8`` in memory. ``bfloat16`` is ``float`` in registers
and ``i16`` (its bits) in memory, as TVM's BF16Legalize lowers it: loads widen to float32,
arithmetic (and a cast to bfloat16) stays in float32, and stores round to nearest even.
Vector dtypes may be spelled ``float32x8``; elsewhere a node's ``lanes`` field says how wide it is.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError

__all__ = ["split_dtype", "scalar_type", "memory_type", "value_type", "constant", "lanes_of",
           "splat_constant", "type_suffix", "shuffle_mask", "double_to_half", "bfloat16_to_float",
           "float_to_bfloat16", "register_dtype", "I1", "I8", "I32", "I64",
           "VOID", "I8PTR"]

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
    if base in ("float32", "bfloat16"):
        return ir.FloatType()
    if base == "float64":
        return ir.DoubleType()
    if dtypes.is_int(base):
        return ir.IntType(dtypes.bits(base))
    raise CodegenError(f"no LLVM type for dtype {dtype!r}")


def memory_type(dtype: str) -> ir.Type:
    """The in-memory type of one element (bool is stored as a byte)."""
    base, _ = split_dtype(dtype)
    if base == "bfloat16":
        return ir.IntType(16)
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
    return ir.Constant(t, float(np.asarray(value, dtype=dtypes.to_numpy(register_dtype(base)))))


def register_dtype(dtype: str) -> str:
    """The dtype whose arithmetic a value of ``dtype`` uses in registers (bfloat16's is float32)."""
    return "float32" if dtype == "bfloat16" else dtype


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


def _like(v: ir.Value, scalar: ir.Type) -> ir.Type:
    return ir.VectorType(scalar, v.type.count) if isinstance(v.type, ir.VectorType) else scalar


def bfloat16_to_float(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """The float of bfloat16 ``bits`` (``i16``, scalar or vector): the high half of its float32."""
    wide = b.zext(bits, _like(bits, I32))
    return b.bitcast(b.shl(wide, splat_constant(wide.type, 16)), _like(bits, ir.FloatType()))


def float_to_bfloat16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """The bfloat16 bits (``i16``) of float ``v``, rounded to nearest, ties to even; a NaN stays a
    (quiet) NaN, where adding the rounding bias could carry it into an infinity."""
    i32 = _like(v, I32)
    bits = b.bitcast(v, i32)
    odd = b.and_(b.lshr(bits, splat_constant(i32, 16)), splat_constant(i32, 1))
    rounded = b.lshr(b.add(bits, b.add(odd, splat_constant(i32, 0x7FFF))), splat_constant(i32, 16))
    quiet = b.or_(b.lshr(bits, splat_constant(i32, 16)), splat_constant(i32, 0x40))
    is_nan = b.fcmp_unordered("uno", v, v)
    return b.trunc(b.select(is_nan, quiet, rounded), _like(v, ir.IntType(16)))


def double_to_half(b: ir.IRBuilder, v: ir.Value, t: ir.Type) -> ir.Value:
    """``fptrunc`` from double to half (scalar or vector), rounded correctly, without a libcall.

    x86 has no double-to-half instruction before AVX512-FP16, and LLVM calls
    ``__truncdfhf2`` for it, which the JIT cannot resolve: the call jumps to address 0.
    So: round to float *to odd* (truncate, then set the last bit if inexact), then to half
    in hardware; rounding to odd first makes the second rounding the only one.
    """
    lanes = lanes_of(v)

    def vec(scalar: ir.Type) -> ir.Type:
        return ir.VectorType(scalar, lanes) if lanes > 1 else scalar

    f32, i32, i64 = vec(ir.FloatType()), vec(I32), vec(I64)
    f = b.fptrunc(v, f32)  # to nearest: may be the float above the exact value in magnitude
    back = b.fpext(f, v.type)
    exact = b.fcmp_ordered("==", back, v)  # false for NaN, which stays NaN below
    magnitude = splat_constant(i64, 2**63 - 1)
    above = b.icmp_unsigned(">", b.and_(b.bitcast(back, i64), magnitude),
                            b.and_(b.bitcast(v, i64), magnitude))
    bits = b.bitcast(f, i32)
    toward_zero = b.select(above, b.sub(bits, splat_constant(i32, 1)), bits)
    odd = b.or_(toward_zero, splat_constant(i32, 1))
    return b.fptrunc(b.bitcast(b.select(exact, bits, odd), f32), t)
