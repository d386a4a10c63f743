"""Helpers shared by the operator modules: argument checks, broadcasting, wide numpy copies."""

from __future__ import annotations

import numbers

import numpy as np

from ... import dtypes
from ...topi.utils import get_const_tuple
from ..errors import GraphError
from ..ir import TensorType

__all__ = ["fail", "arity", "numeric", "floating", "same_dtype", "axis_of", "int_tuple", "pair",
           "positive_int", "epsilon", "broadcast_shape", "broadcast_index", "shape_of", "wide", "narrow",
           "window_output", "index_dtype", "clip_index", "is_int", "int_attr", "flag"]


def fail(op: str, problem: str) -> GraphError:
    """The error of operator ``op`` (raise it)."""
    return GraphError(f"{op}: {problem}")


def arity(op: str, types: list[TensorType], n: int) -> None:
    """GraphError unless ``op`` has ``n`` inputs."""
    if len(types) != n:
        raise fail(op, f"takes {n} input{'s' if n != 1 else ''}, got {len(types)}")


def numeric(op: str, t: TensorType, what: str = "the input") -> None:
    """GraphError unless ``t`` holds numbers (not bools)."""
    if t.dtype == "bool":
        raise fail(op, f"{what} must be numeric, got bool")


def floating(op: str, t: TensorType, what: str = "the input") -> None:
    """GraphError unless ``t`` holds floating-point numbers."""
    if not dtypes.is_float(t.dtype):
        raise fail(op, f"{what} must be a float tensor, got {t.dtype}")


def integer(op: str, t: TensorType, what: str = "the input") -> None:
    """GraphError unless ``t`` holds integers."""
    if not dtypes.is_int(t.dtype):
        raise fail(op, f"{what} must be an integer tensor, got {t.dtype}")


def same_dtype(op: str, types: list[TensorType], what: str = "the inputs") -> str:
    """The dtype every type in ``types`` shares (GraphError if they differ)."""
    kinds = {t.dtype for t in types}
    if len(kinds) != 1:
        raise fail(op, f"{what} must share one dtype, got {', '.join(t.dtype for t in types)}")
    return types[0].dtype


def index_dtype(op: str, t: TensorType, what: str = "the indices") -> None:
    """GraphError unless ``t`` holds int32 or int64 indices."""
    if t.dtype not in ("int32", "int64"):
        raise fail(op, f"{what} must be int32 or int64, got {t.dtype}")


def clip_index(indices: np.ndarray, n: int) -> np.ndarray:
    """``indices`` on an axis of ``n`` elements by ``take``'s rule: a negative one counts from the
    end, others out of range clip to the axis."""
    return np.clip(np.where(indices < 0, indices + n, indices), 0, max(n - 1, 0))


def is_int(v) -> bool:
    """Whether ``v`` is an int (Python's or numpy's), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def int_attr(op: str, attrs, name: str, default: int) -> int:
    """The attribute ``name`` (``default`` where absent), which must be an int."""
    value = attrs.get(name, default)
    if not is_int(value):
        raise fail(op, f"attribute {name} must be an int, got {value!r}")
    return int(value)


def flag(op: str, attrs, name: str, default: bool) -> bool:
    """The attribute ``name`` (``default`` where absent): a bool, or the int 0 or 1."""
    value = attrs.get(name, default)
    if not isinstance(value, (bool, np.bool_, int, np.integer)) or value not in (0, 1):
        raise fail(op, f"attribute {name} must be a bool, got {value!r}")
    return bool(value)


def axis_of(op: str, axis, ndim: int) -> int:
    """``axis`` in ``[0, ndim)`` (a negative one counts from the end)."""
    if not is_int(axis) or not -ndim <= axis < ndim:
        raise fail(op, f"axis {axis!r} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def int_tuple(op: str, name: str, value, length: int | None = None, minimum: int | None = None) -> tuple:
    """The attribute ``name`` as a tuple of ints (of ``length`` entries, each ``>= minimum``)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (tuple, list)) or not all(is_int(v) for v in value):
        raise fail(op, f"attribute {name} must be a tuple of ints, got {value!r}")
    out = tuple(int(v) for v in value)
    if length is not None and len(out) != length:
        raise fail(op, f"attribute {name} must have {length} entries, got {value!r}")
    if minimum is not None and any(v < minimum for v in out):
        raise fail(op, f"attribute {name} entries must be at least {minimum}, got {value!r}")
    return out


def positive_int(op: str, name: str, value) -> int:
    """The attribute ``name``, which must be an int of at least 1."""
    if not is_int(value) or value < 1:
        raise fail(op, f"attribute {name} must be a positive int, got {value!r}")
    return int(value)


def pair(op: str, name: str, value, minimum: int = 1) -> tuple[int, int]:
    """An attribute given as one int or ``(h, w)``, as ``(h, w)``."""
    if is_int(value):
        value = (value, value)
    return int_tuple(op, name, value, 2, minimum)


def epsilon(op: str, attrs, default: float = 1e-5) -> float:
    """The attribute ``epsilon`` of a normalisation, a non-negative float."""
    eps = attrs.get("epsilon", default)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0:
        raise fail(op, f"attribute epsilon must be a non-negative number, got {eps!r}")
    return float(eps)


def window_output(H: int, W: int, KH: int, KW: int, strides, padding, dilation) -> tuple[int, int]:
    """The output rows and columns of a ``KH x KW`` window over ``H x W`` with ``strides``,
    ``padding`` (top, left, bottom, right) and ``dilation``: 0 or less where it does not fit."""
    (sh, sw), (top, left, bottom, right), (dh, dw) = strides, padding, dilation
    return (H + top + bottom - (KH - 1) * dh - 1) // sh + 1, (W + left + right - (KW - 1) * dw - 1) // sw + 1


def broadcast_shape(op: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The numpy broadcast of ``shapes`` (GraphError where they do not broadcast)."""
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dims = {s[k - ndim + len(s)] for s in shapes if k - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise fail(op, f"shapes {', '.join(map(str, shapes))} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_index(idx: tuple, shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple:
    """The index into a tensor of ``shape`` broadcast to ``out_shape`` at output index ``idx``."""
    lead = len(out_shape) - len(shape)
    return tuple(0 if d == 1 and out_shape[lead + k] != 1 else idx[lead + k] for k, d in enumerate(shape))


def shape_of(t) -> tuple[int, ...]:
    """A tensor expression's shape as ints."""
    return tuple(int(d) for d in get_const_tuple(t.shape))


def wide(a: np.ndarray) -> np.ndarray:
    """``a`` in float64 (int64 for integers): the precision the references compute in."""
    return a.astype("float64" if a.dtype.kind == "f" else "int64")


def narrow(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` cast to ``dtype``, as an array even where numpy made a scalar."""
    return np.asarray(a).astype(dtype)
