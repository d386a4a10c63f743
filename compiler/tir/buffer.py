"""Buffers: named, typed, shaped memory regions that the loop IR reads and writes."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from .expr import PrimExpr, Var, convert

__all__ = ["Buffer", "decl_buffer", "SCOPES"]

SCOPES = ("global", "shared", "local")


@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """A region of memory. ``data`` is the pointer variable that codegen binds.

    ``strides`` are in elements; empty means compact row-major. ``elem_offset``
    is added to every flattened index.
    """

    name: str
    shape: tuple
    dtype: str
    data: Var
    strides: tuple = ()
    elem_offset: PrimExpr | None = None
    scope: str = "global"
    align: int = 64

    def __repr__(self) -> str:
        return f"Buffer({self.name}, shape={list(self.shape)}, {self.dtype}, scope={self.scope})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def with_shape(self, shape, strides=()) -> Buffer:
        """A view of the same memory with another shape (used by storage flattening)."""
        return Buffer(self.name, tuple(shape), self.dtype, self.data, tuple(strides),
                      self.elem_offset, self.scope, self.align)


def decl_buffer(shape, dtype: str = "float32", name: str = "buffer", strides=None,
                elem_offset=None, scope: str = "global") -> Buffer:
    """Declare a buffer, for ``lower(..., binds={tensor: buffer})`` and for hand-written IR.

    ``strides`` and ``elem_offset`` may be symbolic (``te.var``), in which case
    they are bound from the array passed at call time.
    """
    from ..errors import LoweringError

    dtype = dtypes.check(dtype)
    if scope not in SCOPES:
        raise LoweringError(f"buffer {name!r}: unknown scope {scope!r}; use one of {SCOPES}")
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    shape = tuple(convert(s) for s in shape)
    strides = tuple(convert(s) for s in strides) if strides else ()
    if strides and len(strides) != len(shape):
        raise LoweringError(f"buffer {name!r}: {len(strides)} strides for {len(shape)} dimensions")
    offset = convert(elem_offset) if elem_offset is not None else None
    if offset is not None and offset.dtype != "int32" and offset.dtype != "int64":
        raise LoweringError(f"buffer {name!r}: elem_offset must be an integer")
    data = Var(name, "handle")
    return Buffer(name, shape, dtype, data, strides, offset if offset is not None else None, scope)


