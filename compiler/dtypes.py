"""The dtypes the compiler knows, and the rules that combine them."""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

__all__ = ["INT32_INDEX_LIMIT", "SUPPORTED", "check", "is_float", "is_int", "is_uint", "is_bool", "bits",
           "promote", "to_numpy", "float_to_bfloat16", "bfloat16_to_float", "split_lanes", "with_lanes",
           "check_element", "DataType"]

#: Arrays of this many elements or more are indexed with 64-bit arithmetic (the compiler makes
#: int64 loops for constant shapes that large; the runtime refuses them for int32 sizes).
INT32_INDEX_LIMIT = 2**30

SUPPORTED = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "bfloat16")
# "handle" is the dtype of pointer-valued variables (buffer data) inside the IR.
_INTERNAL = ("handle",)

_ALIASES = {"float": "float32", "int": "int32", "double": "float64", "half": "float16"}


def check(dtype) -> str:
    """Return the canonical name of ``dtype`` or raise :class:`DTypeError`."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str):
        raise DTypeError(f"dtype must be a string such as 'float32', got {dtype!r}")
    dtype = _ALIASES.get(dtype, dtype)
    if dtype not in SUPPORTED and dtype not in _INTERNAL:
        base, lanes = _vector_parts(dtype)
        if lanes > 1 and base in SUPPORTED:
            raise DTypeError(
                f"vector dtype {dtype!r} is not supported here: variables, buffers, constants' scalars and "
                f"extern/tensorized tensors have scalar dtypes; tensors may have vector elements "
                f"(te.placeholder(shape, dtype={dtype!r}), te.compute of a vector body), vector values "
                f"are made with tir.Broadcast/tir.Ramp or expr.astype({dtype!r}), and vector loads with "
                f"buffer.vload(index, {dtype!r})")
        raise DTypeError(f"unsupported dtype {dtype!r}; supported: {', '.join(SUPPORTED)}")
    return dtype


def _vector_parts(dtype: str) -> tuple[str, int]:
    base, x, lanes = dtype.rpartition("x")
    if x and lanes.isdigit() and int(lanes) > 0 and base:
        return _ALIASES.get(base, base), int(lanes)
    return dtype, 1


def split_lanes(dtype) -> tuple[str, int]:
    """``"float32x4"`` -> ``("float32", 4)``, ``"int8"`` -> ``("int8", 1)`` (TVM's vector dtype names);
    the element dtype is checked."""
    if isinstance(dtype, str):
        base, lanes = _vector_parts(dtype)
        if lanes > 1:
            return check(base), lanes
    return check(dtype), 1


def check_element(dtype) -> str:
    """The canonical name of a tensor's element dtype, which may be a vector one (``"float32x4"``,
    ``"float32"``); :class:`DTypeError` if it is neither."""
    base, lanes = split_lanes(dtype)
    return with_lanes(base, lanes)


def with_lanes(base: str, lanes: int) -> str:
    """``("float32", 4)`` -> ``"float32x4"``; one lane is the element dtype itself."""
    return base if lanes == 1 else f"{base}x{lanes}"


def is_float(dtype: str) -> bool:
    """IEEE floats and bfloat16."""
    return dtype.startswith("float") or dtype == "bfloat16"


def is_int(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return dtype.startswith("int") or dtype.startswith("uint")


def is_uint(dtype: str) -> bool:
    return dtype.startswith("uint")


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


_BITS = {"bool": 8, "handle": 64}


def bits(dtype: str) -> int:
    """Width of one element in bits (bool counts as 8 in memory, 1 in registers)."""
    width = _BITS.get(dtype)
    if width is None:  # lowering and the interpreters ask for every node: parse each name once
        width = _BITS[dtype] = int("".join(ch for ch in dtype if ch.isdigit()))
    return width


def promote(a: str, b: str) -> str:
    """The dtype of a binary arithmetic result, following numpy's rules for like kinds.

    Mixing a float with an integer gives the float; two floats or two integers of
    the same signedness give the wider one.
    """
    if a == b:
        return a
    if is_float(a) and not is_float(b):
        return a
    if is_float(b) and not is_float(a):
        return b
    if "bfloat16" in (a, b):
        # bfloat16 computes in float32 anyway; beside float64 the wider one wins.
        return "float64" if "float64" in (a, b) else "float32"
    if is_bool(a):
        return b
    if is_bool(b):
        return a
    return np.result_type(np.dtype(a), np.dtype(b)).name


def to_numpy(dtype: str) -> np.dtype:
    """The numpy dtype of arrays of ``dtype``: bfloat16 has none, and its arrays hold its bits as
    uint16 (as TVM's ``NDArray.numpy()`` gives them); a vector dtype's is its element's."""
    dtype = split_lanes(dtype)[0]
    return np.dtype("uint16" if dtype == "bfloat16" else dtype)


def float_to_bfloat16(values) -> np.ndarray:
    """The bfloat16 bits (uint16) of float values, rounded to nearest, ties to even; NaN stays NaN."""
    x = np.asarray(values, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet_nan = (bits >> 16) | 0x40  # keep the sign and payload's top, make it quiet
    return np.where(np.isnan(x), quiet_nan, rounded).astype(np.uint16)


def bfloat16_to_float(bits) -> np.ndarray:
    """The float32 values of bfloat16 bits (uint16); exact."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class DataType:
    """A dtype's parts, as TVM's ``tvm.DataType``: ``DataType("float32x4").bits == 32``,
    ``.lanes == 4``, ``.type_code == DataType.FLOAT``; ``str()`` gives the name back. bool is
    TVM's 1-bit unsigned integer here too."""

    INT, UINT, FLOAT, HANDLE, BFLOAT = 0, 1, 2, 3, 4

    __slots__ = ("name", "type_code", "bits", "lanes")

    def __init__(self, dtype):
        base, lanes = split_lanes(str(dtype)) if not isinstance(dtype, DataType) else split_lanes(dtype.name)
        self.lanes = lanes
        self.name = base if lanes == 1 else f"{base}x{lanes}"
        if base == "bool":
            self.type_code, self.bits = DataType.UINT, 1
        elif base == "handle":
            self.type_code, self.bits = DataType.HANDLE, 64
        else:
            self.bits = bits(base)
            self.type_code = (DataType.BFLOAT if base == "bfloat16" else DataType.FLOAT if is_float(base)
                              else DataType.UINT if is_uint(base) else DataType.INT)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DataType({self.name!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, (str, DataType)):
            try:
                return self.name == DataType(other).name
            except DTypeError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)
