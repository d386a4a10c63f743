"""Tensors and the operations that produce them."""

from __future__ import annotations

from .. import dtypes
from ..tir.analysis import post_order_visit
from ..tir.expr import ExprOp, IterVar, PrimExpr, ProducerLoad, Reduce, convert, expr_lanes

__all__ = ["Tensor", "TensorSlice", "Operation", "PlaceholderOp", "ComputeOp", "ScanOp", "ExternOp"]


class Operation:
    """A node of the operation graph; ``output(0)`` is the tensor it produces."""

    __slots__ = ("name", "tag", "attrs", "_outputs")

    def __init__(self, name: str, tag: str = "", attrs: dict | None = None):
        self.name = name
        self.tag = tag
        self.attrs = {k: _attr_value(v) for k, v in (attrs or {}).items()}
        self._outputs = tuple(Tensor(self, k) for k in range(self.num_outputs))

    def output(self, index: int = 0) -> Tensor:
        """The ``index``-th tensor this operation produces."""
        if not 0 <= index < len(self._outputs):
            n = len(self._outputs)
            raise IndexError(f"operation {self.name!r} has {n} output{'s' * (n != 1)}, "
                             f"asked for output {index}")
        return self._outputs[index]

    @property
    def num_outputs(self) -> int:
        return 1

    def output_dtype(self, index: int) -> str:
        """The element type of output ``index``."""
        return self.dtype

    def output_shape(self, index: int) -> tuple:
        """The shape of output ``index`` (the outputs of a scan or an extern op may differ)."""
        return self.shape

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        """The axes a stage of this operation loops over before any schedule primitive."""
        return ()

    @property
    def shape(self) -> tuple:
        raise NotImplementedError

    @property
    def dtype(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _attr_value(value):
    """An attribute as TVM keeps it: numbers as immediates (``attrs["n"].value``), lists
    as tuples of such; strings, expressions and other objects as given."""
    if isinstance(value, (bool, int, float)):
        return convert(value)
    if isinstance(value, (list, tuple)):
        return tuple(_attr_value(v) for v in value)
    return value


class PlaceholderOp(Operation):
    """An input tensor: data that the caller provides."""

    __slots__ = ("_shape", "_dtype")

    def __init__(self, name: str, shape: tuple, dtype: str):
        self._shape = tuple(convert(s) for s in shape)
        self._dtype = dtypes.check_element(dtype)
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

    With a tuple of bodies the operation has one output per body, all over the same
    axes (TVM's multi-output compute); reductions then reduce a tuple together, one
    ``Reduce`` per output. ``body`` is the first body, ``bodies`` all of them.
    ``shape`` is the shape as declared (by default the extents of ``axis``), which the
    output buffers keep even where the axes count in a wider type than its entries.
    """

    __slots__ = ("axis", "reduce_axis", "bodies", "_shape", "_dtypes", "intrin_call")

    def __init__(self, name: str, axis: tuple[IterVar, ...], body, tag: str = "",
                 attrs: dict | None = None, shape: tuple | None = None, intrin_call=None):
        self.axis = tuple(axis)
        # (intrinsic, index of its first axis) for a compute whose body calls a tensor
        # intrinsic (TVM's TensorComputeOp): its stage is created tensorized there.
        self.intrin_call = intrin_call
        self.bodies = tuple(body) if isinstance(body, (tuple, list)) else (body,)
        first = self.bodies[0]
        self.reduce_axis = tuple(first.axis) if isinstance(first, Reduce) else ()
        self._shape = tuple(shape) if shape is not None else tuple(iv.dom.extent for iv in self.axis)
        # A body that is a vector (of a vector tensor's elements, an astype("float32x4")) gives
        # elements of a vector dtype, as in TVM.
        self._dtypes = tuple(dtypes.with_lanes(b.dtype, expr_lanes(b)) for b in self.bodies)
        super().__init__(name, tag, attrs)

    @property
    def body(self) -> tuple[PrimExpr, ...]:
        """The expressions of the outputs, one per output, as TVM's ``ComputeOp.body`` (an
        array: ``op.body[0]`` is the first output's)."""
        return self.bodies

    @property
    def num_outputs(self) -> int:
        """How many outputs the operation computes (one per body)."""
        return len(self.bodies)

    def output_dtype(self, index: int) -> str:
        """The dtype of output ``index`` (``"float32x4"`` for a body of 4 lanes)."""
        return self._dtypes[index]

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtypes[0]

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors read by the body, in order of first use."""
        found: dict[Tensor, None] = {}  # a tensor is its operation and output index (Tensor.__eq__)

        def visit(node):
            if isinstance(node, ProducerLoad):
                found.setdefault(node.producer)

        for body in self.bodies:
            post_order_visit(body, visit)
        return list(found)

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        return self.axis + self.reduce_axis


class _PerOutputOp(Operation):
    """An operation whose outputs each declare their own shape and dtype (a scan, an extern
    op): ``shape`` and ``dtype`` are those of output 0."""

    __slots__ = ()

    @property
    def shape(self) -> tuple:
        return self.output_shape(0)

    @property
    def dtype(self) -> str:
        return self.output_dtype(0)


class ScanOp(_PerOutputOp):
    """A recurrence over a time axis (TVM's ``te.scan``): output ``k`` holds the state
    ``state_placeholder[k]`` at every step.

    Steps ``[0, init_len)`` come from ``init[k]``; each later step ``t`` from
    ``update[k]`` at ``t``, which reads earlier steps through ``state_placeholder[k]``.
    ``scan_axis`` runs over ``[init_len, steps)``. The stages between the states (and
    ``inputs``) and the updates form the scan's body, computed once per step.
    """

    __slots__ = ("scan_axis", "init", "update", "state_placeholder", "inputs")

    def __init__(self, name: str, scan_axis: IterVar, init: tuple, update: tuple,
                 state_placeholder: tuple, inputs: tuple, tag: str = "", attrs: dict | None = None):
        self.scan_axis = scan_axis
        self.init = tuple(init)
        self.update = tuple(update)
        self.state_placeholder = tuple(state_placeholder)
        self.inputs = tuple(inputs)
        super().__init__(name, tag, attrs)

    @property
    def num_outputs(self) -> int:
        """One output per state."""
        return len(self.update)

    def output_dtype(self, index: int) -> str:
        """The dtype of state ``index``."""
        return self.update[index].dtype

    def output_shape(self, index: int) -> tuple:
        """The shape of state ``index`` (time first)."""
        return self.state_placeholder[index].shape

    @property
    def input_tensors(self) -> list[Tensor]:
        """The initial values and the updates, as in TVM."""
        return [*self.init, *self.update]

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        return (self.scan_axis,)


class ExternOp(_PerOutputOp):
    """An operation whose body is a statement (TVM's ``te.extern``): typically a call
    to a registered or external function that reads ``input_placeholders`` (buffers
    standing for ``inputs``) and writes ``output_placeholders`` (one per output)."""

    __slots__ = ("inputs", "input_placeholders", "output_placeholders", "body")

    def __init__(self, name: str, inputs: tuple, input_placeholders: tuple, output_placeholders: tuple,
                 body, tag: str = "", attrs: dict | None = None):
        self.inputs = tuple(inputs)
        self.input_placeholders = tuple(input_placeholders)
        self.output_placeholders = tuple(output_placeholders)
        self.body = body
        super().__init__(name, tag, attrs)

    @property
    def num_outputs(self) -> int:
        """One output per output buffer."""
        return len(self.output_placeholders)

    def output_dtype(self, index: int) -> str:
        """The dtype of output ``index``."""
        return self.output_placeholders[index].dtype

    def output_shape(self, index: int) -> tuple:
        """The shape of output ``index``."""
        return self.output_placeholders[index].shape

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


class Tensor:
    """The output of an operation; index it (``A[i, j]``) inside compute definitions."""

    __slots__ = ("op", "value_index")

    def __init__(self, op: Operation, value_index: int = 0):
        self.op = op
        self.value_index = value_index

    @property
    def shape(self) -> tuple:
        return self.op.output_shape(self.value_index)

    @property
    def dtype(self) -> str:
        return self.op.output_dtype(self.value_index)

    @property
    def name(self) -> str:
        """The operation's name; ``name.v<k>`` for the outputs of a multi-output one, as in TVM."""
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> PrimExpr | TensorSlice:
        """``A[i, j]``: the element (a load). With fewer indices than dimensions
        (``A[i]``), a :class:`TensorSlice` that further indexing completes (``A[i][j]``)."""
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) < self.ndim or any(isinstance(ix, slice) for ix in indices):
            return TensorSlice(self, indices)  # with slices: a region, for a tensor intrinsic's call
        return self(*indices)

    def __call__(self, *indices) -> PrimExpr:
        """``A(i, j)``: the element at ``(i, j)``; one index per dimension."""
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])  # A((i, j)), as A[i, j]
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
        base, lanes = dtypes.split_lanes(self.dtype)
        return ProducerLoad(self, tuple(converted), base, lanes)

    # Arithmetic on tensors builds a new tensor, as TVM's topi overloads do: two tensors
    # broadcast (tag "broadcast"), a tensor and a scalar combine elementwise (tag "elemwise").
    def __add__(self, other):
        return _broadcast().add(self, other)

    def __radd__(self, other):
        return _broadcast().add(other, self)

    def __sub__(self, other):
        return _broadcast().subtract(self, other)

    def __rsub__(self, other):
        return _broadcast().subtract(other, self)

    def __mul__(self, other):
        return _broadcast().multiply(self, other)

    def __rmul__(self, other):
        return _broadcast().multiply(other, self)

    def __truediv__(self, other):
        return _broadcast().divide(self, other)

    def __rtruediv__(self, other):
        return _broadcast().divide(other, self)

    def __eq__(self, other) -> bool:
        return isinstance(other, Tensor) and other.op is self.op and other.value_index == self.value_index

    def __hash__(self) -> int:
        return hash((self.op, self.value_index))  # operations hash by identity

    def __repr__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}, shape=({shape}), {self.dtype})"


def _broadcast():
    from . import broadcast  # it builds computes, whose module imports this one

    return broadcast


class TensorSlice(ExprOp):
    """A tensor indexed in its leading dimensions only (``A[i]`` of a 2-d ``A``), as TVM's
    ``TensorSlice``: indexing it further (``A[i][j]``) gives the element, and used as an
    expression it stands for the element (``asobject()``), so it must be complete by then.
    """

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices):
        self.tensor = tensor
        self.indices = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)

    def __getitem__(self, indices) -> PrimExpr | TensorSlice:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.tensor[self.indices + indices]

    def asobject(self) -> PrimExpr:
        """The element this slice names (an error unless every dimension is indexed)."""
        if any(isinstance(ix, slice) for ix in self.indices):
            raise TypeError(f"{self!r} is a region (it has slices): it is an argument of a tensor "
                            "intrinsic's call, not an expression")
        return self.tensor(*self.indices)

    def _expr(self) -> PrimExpr:
        return self.asobject()

    @property
    def dtype(self) -> str:
        """The tensor's element type."""
        return self.tensor.dtype

    def __repr__(self) -> str:
        return f"TensorSlice({self.tensor.name}, {', '.join(str(i) for i in self.indices)})"
