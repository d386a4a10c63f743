"""The dtypes the compiler knows, and the rules that combine them."""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

__all__ = ["INT32_INDEX_LIMIT", "SUPPORTED", "check", "is_float", "is_int", "is_uint", "is_bool", "bits",
           "promote", "to_numpy"]

#: Arrays of this many elements or more are indexed with 64-bit arithmetic (the compiler makes
#: int64 loops for constant shapes that large; the runtime refuses them for int32 sizes).
INT32_INDEX_LIMIT = 2**30

SUPPORTED = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64")
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
        raise DTypeError(f"unsupported dtype {dtype!r}; supported: {', '.join(SUPPORTED)}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


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
    if is_bool(a):
        return b
    if is_bool(b):
        return a
    return np.result_type(np.dtype(a), np.dtype(b)).name


def to_numpy(dtype: str) -> np.dtype:
    return np.dtype(check(dtype))
