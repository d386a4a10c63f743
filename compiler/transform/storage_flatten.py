"""Storage flattening: multi-dimensional buffer accesses become one-dimensional offsets."""

from __future__ import annotations

from ..errors import LoweringError
from ..tir.buffer import Buffer
from ..tir.expr import BufferLoad, PrimExpr, Ramp, const, is_const_int
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ..tir.indexing import as_index
from ..tir.stmt import Allocate, BufferStore

__all__ = ["storage_flatten", "flat_index"]

_INT32_MAX = 2**31 - 1


def _index_dtype(buf: Buffer) -> str:
    dims = list(buf.shape) + list(buf.strides)
    if not all(is_const_int(d) for d in dims):
        return "int64"
    total = 1
    for d in buf.shape:
        total *= max(d.value, 1)
    if buf.strides:
        total = max(total, max(s.value * max(d.value, 1) for s, d in zip(buf.strides, buf.shape)))
    return "int32" if total <= _INT32_MAX else "int64"



def flat_index(buf: Buffer, indices) -> PrimExpr:
    """The element offset of ``buf[indices]`` from the buffer's data pointer. One index may be a
    ``Ramp`` (a vector access along that dimension, as a vector load of a tensor of ``float32x4``
    elements is): the offset is then a ``Ramp`` too."""
    dtype = _index_dtype(buf)
    if len(indices) != len(buf.shape):
        raise LoweringError(f"buffer {buf.name!r} has {len(buf.shape)} dimensions, "
                            f"accessed with {len(indices)} indices")
    if buf.strides:
        strides = [as_index(s, dtype) for s in buf.strides]
    else:
        strides, stride = [], const(1, dtype)
        for d in reversed(buf.shape):
            strides.append(stride)
            stride = _mul(stride, as_index(d, dtype))
        strides.reverse()
    total = const(0, dtype)
    ramp = None
    for idx, stride in zip(indices, strides):
        if isinstance(idx, Ramp) and ramp is None:
            ramp = (_mul(as_index(idx.stride, dtype), stride), idx.lanes)
            idx = idx.base
        total = _add(total, _mul(as_index(idx, dtype), stride))
    if buf.elem_offset is not None:
        total = _add(total, as_index(buf.elem_offset, dtype))
    if ramp is not None:
        return Ramp(total, ramp[0], ramp[1], dtype)
    return total


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if is_const_int(a, 1):
        return b
    if is_const_int(b, 1):
        return a
    if is_const_int(a) and is_const_int(b):
        return const(a.value * b.value, a.dtype)
    return a * b


def _add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if is_const_int(a, 0):
        return b
    if is_const_int(b, 0):
        return a
    return a + b


def _flat_size(buf: Buffer) -> PrimExpr:
    dtype = _index_dtype(buf)
    if not buf.shape:
        return const(1, dtype)
    if buf.strides:
        return _mul(as_index(buf.strides[0], dtype), as_index(buf.shape[0], dtype))
    size = const(1, dtype)
    for d in buf.shape:
        size = _mul(size, as_index(d, dtype))
    return size


class _Flatten(IRMutator):
    memoize = True

    def __init__(self):
        self.flat: dict[Buffer, Buffer] = {}  # a buffer -> its one-dimensional view

    def _flat(self, buf: Buffer) -> Buffer:
        f = self.flat.get(buf)
        if f is None:
            f = Buffer(buf.name, (_flat_size(buf),), buf.dtype, buf.data, (), None, buf.scope, buf.align)
            self.flat[buf] = f
        return f

    def visit_BufferLoad(self, node: BufferLoad):
        indices = [self.visit(i) for i in node.indices]
        if len(node.buffer.shape) == 1 and len(indices) == 1 and not node.buffer.strides \
                and node.buffer.elem_offset is None:
            return BufferLoad(node.buffer, tuple(indices), node.dtype, node.lanes) \
                if any(a is not b for a, b in zip(indices, node.indices)) else node
        return BufferLoad(self._flat(node.buffer), (flat_index(node.buffer, indices),), node.dtype,
                          node.lanes)

    def visit_BufferStore(self, node: BufferStore):
        indices = [self.visit(i) for i in node.indices]
        value = self.visit(node.value)
        buf = node.buffer
        if len(buf.shape) == 1 and len(indices) == 1 and not buf.strides and buf.elem_offset is None:
            return BufferStore(buf, value, tuple(indices))
        return BufferStore(self._flat(buf), value, (flat_index(buf, indices),))

    def visit_Allocate(self, node: Allocate):
        body = self.visit(node.body)
        return Allocate(self._flat(node.buffer), body)


def storage_flatten(func: PrimFunc) -> PrimFunc:
    """Rewrite every buffer access of ``func`` to a single flattened index.

    Parameters keep their multi-dimensional buffers (they describe the calling
    convention); accesses use one-dimensional views sharing the same data pointer.
    """
    return func.with_body(_Flatten().visit(func.body))
