"""Buffers: named, typed, shaped memory regions that the loop IR reads and writes."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import LoweringError
from .expr import BufferLoad, Call, IntImm, PrimExpr, Ramp, StringImm, Var, convert, expr_lanes
from .stmt import BufferStore

__all__ = ["Buffer", "decl_buffer", "compact_strides", "SCOPES", "ACCESS_PTR"]

SCOPES = ("global", "shared", "local")

#: ``Call("handle", ACCESS_PTR, (dtype, data, offset, extent, mask))``: the address of element
#: ``offset`` of a buffer's memory, typed as a pointer to ``dtype`` (TVM's ``tvm_access_ptr``);
#: ``mask`` says whether the callee reads ("r"), writes ("w") or both ("rw") ``extent`` elements.
ACCESS_PTR = "tvm_access_ptr"
_MASKS = {"r": "r", "w": "w", "rw": "rw", "wr": "rw", 1: "r", 2: "w", 3: "rw"}


def compact_strides(shape) -> list:
    """The strides, in elements, of a compact row-major array of ``shape``."""
    strides, stride = [], None
    for d in reversed(list(shape)):
        strides.append(stride if stride is not None else IntImm(1, d.dtype))
        stride = d if stride is None else stride * d
    return list(reversed(strides))


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
    offset_factor: int = 0  # elem_offset is a multiple of it (0: no promise)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, shape={list(self.shape)}, {self.dtype}, scope={self.scope})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def with_shape(self, shape, strides=()) -> Buffer:
        """A view of the same memory with another shape (used by storage flattening)."""
        return Buffer(self.name, tuple(shape), self.dtype, self.data, tuple(strides),
                      self.elem_offset, self.scope, self.align, self.offset_factor)

    def access_ptr(self, access_mask="rw", ptr_type: str = "handle", content_lanes: int = 1,
                   offset=0, extent=None) -> PrimExpr:
        """The address of the buffer's first element (plus ``offset`` elements), to pass to
        an external function (``call_extern``), as TVM's ``Buffer.access_ptr``.

        ``access_mask`` is "r", "w" or "rw" (or TVM's 1, 2, 3): what the callee does with
        the memory. The address includes ``elem_offset``, so in a tensor intrinsic it points
        at the region that :meth:`compiler.te.Stage.tensorize` binds the buffer to.
        """
        mask = _MASKS.get(access_mask)
        if mask is None:
            raise ValueError(f"buffer {self.name!r}: access_ptr mask must be 'r', 'w' or 'rw', got "
                             f"{access_mask!r}")
        if ptr_type != "handle" or content_lanes != 1:
            raise ValueError(f"buffer {self.name!r}: access_ptr supports ptr_type='handle' and "
                             "content_lanes=1 only")
        base = self.elem_offset if self.elem_offset is not None else IntImm(0, "int32")
        off = convert(offset)
        start = base if isinstance(off, IntImm) and off.value == 0 else base + off
        if extent is None:
            extent = self._extent()
        return Call("handle", ACCESS_PTR, (StringImm(self.dtype), self.data, start, convert(extent) - off,
                                           StringImm(mask)))

    def _extent(self) -> PrimExpr:
        """How many elements the buffer spans from its first one."""
        if not self.shape:
            return IntImm(1, "int32")
        if self.strides:
            return self.strides[0] * self.shape[0]
        total = self.shape[0]
        for d in self.shape[1:]:
            total = total * d
        return total

    def _begin(self, begin, what: str) -> tuple:
        begin = tuple(convert(b) for b in (begin if isinstance(begin, (list, tuple)) else (begin,)))
        if len(begin) != len(self.shape):
            raise ValueError(f"buffer {self.name!r} has {len(self.shape)} dimensions, {what} got "
                             f"{len(begin)} indices")
        return begin

    def _lanes_at(self, begin: tuple, lanes: int) -> tuple:
        """The indices of ``lanes`` consecutive elements from ``begin`` along the last dimension."""
        last = begin[-1]
        return (*begin[:-1], Ramp(last, IntImm(1, last.dtype), lanes, last.dtype))

    def vload(self, begin, dtype: str | None = None) -> PrimExpr:
        """The element at index ``begin`` (a tuple, one index per dimension). With a vector
        ``dtype`` of this buffer's element type (``"float32x4"``), as TVM's: the vector of that
        many consecutive elements from ``begin`` along the last dimension."""
        begin = self._begin(begin, "vload")
        if dtype is None:
            return BufferLoad(self, begin, self.dtype)
        base, lanes = dtypes.split_lanes(dtype)
        if base != self.dtype:
            raise ValueError(f"buffer {self.name!r}: vload of {dtype} from a {self.dtype} buffer (a vector "
                             f"load is of {self.dtype}xN)")
        if lanes == 1:
            return BufferLoad(self, begin, self.dtype)
        if not begin:
            raise ValueError(f"buffer {self.name!r}: a vector vload needs a buffer with a dimension")
        return BufferLoad(self, self._lanes_at(begin, lanes), self.dtype, lanes)

    def vstore(self, begin, value):
        """A statement storing ``value`` at index ``begin``; a vector ``value`` of N lanes (TVM's)
        fills the N consecutive elements from ``begin`` along the last dimension."""
        begin = self._begin(begin, "vstore")
        value = convert(value)
        lanes = expr_lanes(value)
        if lanes > 1:
            if not begin:
                raise ValueError(f"buffer {self.name!r}: a vector vstore needs a buffer with a dimension")
            begin = self._lanes_at(begin, lanes)
        return BufferStore(self, value, begin)


def decl_buffer(shape, dtype: str | None = "float32", name: str = "buffer", data=None, strides=None,
                elem_offset=None, scope: str = "global", data_alignment: int = -1,
                offset_factor: int = 0, buffer_type: str = "", axis_separators=None, span=None) -> Buffer:
    """Declare a buffer, for ``lower(..., binds={tensor: buffer})``, for the buffers of a tensor
    intrinsic (:func:`compiler.te.decl_tensor_intrin`) and for hand-written IR.

    ``strides`` and ``elem_offset`` may be symbolic (``te.var``), in which case
    they are bound from the array passed at call time, or from the region a tensorized
    loop nest covers. ``offset_factor`` (TVM's): when nonzero and no ``elem_offset`` is
    given, the offset is a new variable ``<name>_elem_offset``, promised to be a multiple
    of ``offset_factor``; with 0 the buffer starts at offset 0. ``scope=""`` and ``dtype=None``
    mean "global" and "float32", as in TVM; ``buffer_type="auto_broadcast"`` and
    ``axis_separators`` are not supported.
    """
    dtype = dtypes.check(dtype if dtype is not None else "float32")
    scope = scope or "global"
    if buffer_type not in ("", "default"):
        raise LoweringError(f"buffer {name!r}: buffer_type={buffer_type!r} is not supported (only the "
                            "default buffer type)")
    if axis_separators:
        raise LoweringError(f"buffer {name!r}: axis_separators are not supported")
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
    if isinstance(offset_factor, bool) or not isinstance(offset_factor, int) or offset_factor < 0:
        raise LoweringError(f"buffer {name!r}: offset_factor must be an int >= 0, got {offset_factor!r}")
    if offset is None and offset_factor:
        offset = Var(f"{name}_elem_offset", "int32")
    if data is None:
        data = Var(name, "handle")
    elif not isinstance(data, Var) or data.dtype != "handle":
        raise LoweringError(f"buffer {name!r}: data must be a handle variable, got {data!r}")
    align = data_alignment if data_alignment > 0 else 64
    return Buffer(name, shape, dtype, data, strides, offset, scope, align, offset_factor)


