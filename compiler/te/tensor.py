"""Tensors and the operations that produce them."""

from __future__ import annotations

from .. import dtypes
from ..tir.analysis import post_order_visit
from ..tir.expr import IterVar, PrimExpr, ProducerLoad, Reduce, convert

__all__ = ["Tensor", "Operation", "PlaceholderOp", "ComputeOp"]


class Operation:
    """A node of the operation graph; ``output(0)`` is the tensor it produces."""

    __slots__ = ("name", "tag", "attrs", "_output")

    def __init__(self, name: str, tag: str = "", attrs: dict | None = None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self._output = Tensor(self, 0)

    def output(self, index: int = 0) -> Tensor:
        if index != 0:
            raise IndexError(f"operation {self.name!r} has one output, asked for output {index}")
        return self._output

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    @property
    def shape(self) -> tuple:
        raise NotImplementedError

    @property
    def dtype(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class PlaceholderOp(Operation):
    """An input tensor: data that the caller provides."""

    __slots__ = ("_shape", "_dtype")

    def __init__(self, name: str, shape: tuple, dtype: str):
        self._shape = tuple(convert(s) for s in shape)
        self._dtype = dtypes.check(dtype)
        super().__init__(name)

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype


class ComputeOp(Operation):
    """``output[axis] = body`` for every point of ``axis``; ``body`` may be a reduction
    over ``reduce_axis``.

    ``shape`` is the shape as declared (by default the extents of ``axis``), which the
    output buffer keeps even where the axes count in a wider type than its entries.
    """

    __slots__ = ("axis", "reduce_axis", "body", "_shape")

    def __init__(self, name: str, axis: tuple[IterVar, ...], body: PrimExpr, tag: str = "",
                 attrs: dict | None = None, shape: tuple | None = None):
        self.axis = tuple(axis)
        self.body = body
        self.reduce_axis = tuple(body.axis) if isinstance(body, Reduce) else ()
        self._shape = tuple(shape) if shape is not None else tuple(iv.dom.extent for iv in self.axis)
        super().__init__(name, tag, attrs)

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self.body.dtype

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors read by the body, in order of first use."""
        found: dict[tuple, Tensor] = {}

        def visit(node):
            if isinstance(node, ProducerLoad):
                t = node.producer
                found.setdefault((id(t.op), t.value_index), t)

        post_order_visit(self.body, visit)
        return list(found.values())

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        return self.axis + self.reduce_axis


class Tensor:
    """The output of an operation; index it (``A[i, j]``) inside compute definitions."""

    __slots__ = ("op", "value_index")

    def __init__(self, op: Operation, value_index: int = 0):
        self.op = op
        self.value_index = value_index

    @property
    def shape(self) -> tuple:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> PrimExpr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(
                f"tensor {self.name!r} has {self.ndim} dimensions, indexed with {len(indices)}"
            )
        converted = []
        for idx in indices:
            e = convert(idx)
            if dtypes.is_float(e.dtype) or e.dtype == "bool":
                raise TypeError(f"tensor {self.name!r} indexed with a {e.dtype} expression {e}")
            converted.append(e)
        return ProducerLoad(self, tuple(converted), self.dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, Tensor) and other.op is self.op and other.value_index == self.value_index

    def __hash__(self) -> int:
        return hash((id(self.op), self.value_index))

    def __repr__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}, shape=({shape}), {self.dtype})"
