"""Tensor intrinsics: a computation declared in TE together with the statement that performs it
(TVM's ``te.decl_tensor_intrin``), for :meth:`compiler.te.Stage.tensorize`.

The declaration says *what* the intrinsic computes (a ``te.compute`` over placeholders);
``fcompute(ins, outs)`` says *how*: it receives one buffer per input and per output and
returns the statement that fills the outputs, typically a ``call_extern`` of a hand-written
kernel with the buffers' ``access_ptr``. ``tensorize`` checks that a loop nest computes what
the declaration says, binds the buffers to the regions the nest covers (their ``elem_offset``
and symbolic ``strides`` become the region's), and puts the statement in the nest's place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..arith import Analyzer
from ..errors import CompilerError
from ..tir.buffer import Buffer, decl_buffer
from ..tir.expr import Call, IterType, IterVar, PrimExpr, Reduce, Var, const, convert
from ..tir.functor import IRMutator
from ..tir.op import call_extern
from ..tir.stmt import Evaluate, Stmt
from .operation import compute, placeholder, var
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorSlice

__all__ = ["TensorIntrin", "TensorIntrinCall", "decl_tensor_intrin", "transpose_intrin", "TRANSPOSE",
           "MAX_TILE", "transpose_call", "TRANSPOSE_TILE", "transpose_rows", "transpose_columns"]

#: The extern function of a tile transpose, which the LLVM backend emits inline
#: (:mod:`compiler.codegen.llvm_transpose`): ``autotune_transpose(dst, dst_stride, src,
#: src_stride, rows, cols)``.
TRANSPOSE = "autotune_transpose"
#: The most rows and columns a transposed tile may have.
MAX_TILE = 64


class TensorIntrin:
    """A declared intrinsic: ``op`` (what it computes), ``inputs`` (the placeholders ``op`` reads,
    in order of first use), ``buffers`` (one per input, then one per output), and its statements:
    ``body`` computes the outputs outright; for a reduction split outside the intrinsic,
    ``reduce_init`` resets the outputs and ``reduce_update`` accumulates into them."""

    def __init__(self, name: str, op: ComputeOp, inputs: list, buffers: list, body, reduce_init,
                 reduce_update):
        self.name = name
        self.op = op
        self.inputs = list(inputs)
        self.buffers = list(buffers)
        self.body = body
        self.reduce_init = reduce_init
        self.reduce_update = reduce_update

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name!r}, op={self.op.name!r})"

    def __call__(self, *regions, reduce_axis=None) -> TensorIntrinCall:
        """The intrinsic applied to regions of tensors, as the body of a ``te.compute``
        (TVM's call syntax): ``te.compute((n, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]))``.
        One region per input, in the order the declaration reads them; each names the
        intrinsic's dimensions with slices (``0:16``) and fixes the others with indices.
        ``reduce_axis`` (an axis or a list) are reductions outside the intrinsic, of an
        intrinsic that reduces. The compute loops over the lambda's indices (and
        ``reduce_axis``) and the intrinsic computes the rest: its stage comes tensorized."""
        return TensorIntrinCall(self, regions, reduce_axis)


def decl_tensor_intrin(op: Operation, fcompute: Callable, name: str = "tensor_intrin",
                       binds: dict | None = None, scalar_params=None,
                       default_buffer_params: dict | None = None) -> TensorIntrin:
    """Declare a tensor intrinsic for the computation ``op`` (a ``te.compute`` over placeholders).

    ``fcompute(ins, outs)`` gets the buffers of ``op``'s inputs and outputs and returns a
    statement (or an expression, such as a ``call_extern``), or the triple ``(body,
    reduce_reset, reduce_update)`` for a reduction, any of which may be None. ``binds``
    maps ``op``'s tensors to buffers declared with :func:`compiler.tir.decl_buffer`
    (``offset_factor=1`` and ``strides=[te.var("s"), 1]`` let the intrinsic apply anywhere
    in a larger array); the other tensors get compact buffers made with
    ``default_buffer_params``, which start at offset 0 unless those give ``offset_factor``.
    """
    if isinstance(op, Tensor):
        op = op.op
    if not isinstance(op, ComputeOp):
        raise CompilerError(f"decl_tensor_intrin {name!r}: op must be a te.compute operation, got {op!r}")
    if scalar_params:
        raise CompilerError(f"decl_tensor_intrin {name!r}: scalar_params are not supported")
    inputs = op.input_tensors
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise CompilerError(f"decl_tensor_intrin {name!r}: input {t.name!r} is computed by "
                                f"{t.op.name!r}; an intrinsic's computation may only read placeholders")
    binds = dict(binds or {})
    params = dict(default_buffer_params or {})
    tensors = [*inputs, *(op.output(k) for k in range(op.num_outputs))]
    for t in binds:
        if not isinstance(t, Tensor) or t not in tensors:
            raise CompilerError(f"decl_tensor_intrin {name!r}: binds has {t!r}, which is neither an input "
                                f"nor an output of {op.name!r}")
    buffers = []
    for t in tensors:
        buf = binds.get(t)
        if buf is None:
            buf = decl_buffer(t.shape, t.dtype, t.op.name, **params)
        _check_buffer(name, t, buf)
        buffers.append(buf)
    result = fcompute(buffers[:len(inputs)], buffers[len(inputs):])
    if isinstance(result, (list, tuple)):
        if len(result) != 3:
            raise CompilerError(f"decl_tensor_intrin {name!r}: fcompute returned {len(result)} statements; "
                                "return one, or (body, reduce_reset, reduce_update)")
        body, reset, update = (_stmt(name, s) for s in result)
    else:
        body, reset, update = _stmt(name, result), None, None
    if body is None and update is None:
        raise CompilerError(f"decl_tensor_intrin {name!r}: fcompute returned no statement")
    return TensorIntrin(name, op, inputs, buffers, body, reset, update)


class TensorIntrinCall:
    """A tensor intrinsic applied to tensor regions (:meth:`TensorIntrin.__call__`), which
    ``te.compute`` expands into its body."""

    def __init__(self, intrin: TensorIntrin, regions, reduce_axis):
        self.intrin = intrin
        self.regions = tuple(regions)
        if reduce_axis is None:
            reduce_axis = ()
        self.reduce_axis = tuple(reduce_axis) if isinstance(reduce_axis, (list, tuple)) else (reduce_axis,)

    def _fail(self, name: str, what: str) -> CompilerError:
        return CompilerError(f"compute {name!r} calling tensor intrinsic {self.intrin.name!r}: {what}")

    def bodies(self, name: str, inner: tuple) -> tuple:
        """The compute's bodies, with ``inner`` the axes the intrinsic covers (the last
        dimensions of the compute): the intrinsic's computation reading the regions."""
        iop = self.intrin.op
        if iop.num_outputs != 1:
            raise self._fail(name, "only intrinsics with one output can be called in a compute")
        if len(inner) != len(iop.axis):
            raise self._fail(name, f"the intrinsic computes {len(iop.axis)} dimensions, the compute leaves "
                                   f"{len(inner)} to it (the shape's dimensions after the lambda's indices)")
        analyzer = Analyzer()
        for mine, theirs in zip(inner, iop.axis, strict=True):
            if not analyzer.can_prove_equal(mine.dom.extent, theirs.dom.extent):
                raise self._fail(name, f"the compute's dimension {mine.var.name} has extent "
                                       f"{mine.dom.extent}, the intrinsic's {theirs.dom.extent}")
        if len(self.regions) != len(self.intrin.inputs):
            raise self._fail(name, f"given {len(self.regions)} regions for {len(self.intrin.inputs)} inputs")
        vmap = {theirs.var: mine.var for mine, theirs in zip(inner, iop.axis, strict=True)}
        own_reduce = tuple(IterVar(r.dom, Var(r.var.name, r.var.dtype), IterType.COMM_REDUCE)
                           for r in iop.reduce_axis)
        vmap.update((r.var, n.var) for r, n in zip(iop.reduce_axis, own_reduce, strict=True))
        loads = {}
        for placeholder_t, region in zip(self.intrin.inputs, self.regions, strict=True):
            loads[placeholder_t] = self._region(name, placeholder_t, region, analyzer)
        body = _RegionLoads(loads, vmap).visit(iop.bodies[0])
        if isinstance(body, Reduce):
            if any(not isinstance(r, IterVar) or r.iter_type is not IterType.COMM_REDUCE
                   for r in self.reduce_axis):
                raise self._fail(name, "reduce_axis must be reduction axes (te.reduce_axis)")
            body = dataclasses.replace(body, axis=(*self.reduce_axis, *own_reduce))
        elif self.reduce_axis:
            raise self._fail(name, "reduce_axis was given but the intrinsic does not reduce")
        return (body,)

    def _region(self, name: str, t: Tensor, region, analyzer: Analyzer):
        if not isinstance(region, TensorSlice):
            raise self._fail(name, f"input {t.name!r} needs a tensor region such as A[i, 0:16], "
                                   f"got {region!r}")
        tensor, indices = region.tensor, region.indices
        if len(indices) != tensor.ndim or tensor.dtype != t.dtype:
            raise self._fail(name, f"the region of {tensor.name!r} must index all its {tensor.ndim} "
                                   f"dimensions and hold {t.dtype} (the intrinsic's input {t.name!r})")
        slices = [k for k, ix in enumerate(indices) if isinstance(ix, slice)]
        if len(slices) != t.ndim:
            raise self._fail(name, f"the region of {tensor.name!r} has {len(slices)} slices; input "
                                   f"{t.name!r} has {t.ndim} dimensions")
        for k, extent in zip(slices, t.shape, strict=True):
            sl = indices[k]
            spans = (sl.step in (None, 1) and sl.start is not None and sl.stop is not None
                     and analyzer.can_prove_equal(convert(sl.stop) - convert(sl.start), extent))
            if not spans:
                raise self._fail(name, f"slice {sl.start}:{sl.stop} of {tensor.name!r} must span the input's "
                                       f"extent {extent} with step 1")
        return tensor, indices, slices

    def __repr__(self) -> str:
        return f"TensorIntrinCall({self.intrin.name!r}, {len(self.regions)} regions)"


class _RegionLoads(IRMutator):
    """The intrinsic's computation over the call's regions: its axes renamed, its loads of
    input placeholders redirected to the regions' tensors."""

    def __init__(self, loads: dict, vmap: dict):
        self.loads = loads
        self.vmap = vmap

    def visit_Var(self, node):
        return self.vmap.get(node, node)

    def visit_ProducerLoad(self, node):
        node = self.generic_visit(node)
        found = self.loads.get(node.producer)
        if found is None:
            return node
        tensor, indices, slices = found
        full = list(indices)
        for k, idx in zip(slices, node.indices, strict=True):
            full[k] = convert(indices[k].start) + idx
        return tensor(*full)


#: Layout changes are transposed in tiles of up to this many channels by this many columns.
TRANSPOSE_TILE = 16


def transpose_rows(block: int) -> int | None:
    """Channels per transposed tile for channel blocks of ``block``: 16, 8 or 4, the largest
    dividing it; None where none does (the layout change then goes element by element)."""
    return next((r for r in (TRANSPOSE_TILE, 8, 4) if block % r == 0), None)


def transpose_columns(width: int) -> int | None:
    """Output columns per transposed tile of a row ``width`` long: all of them up to
    :data:`TRANSPOSE_TILE`, else the largest divisor from 4 to it; None where there is none, or
    the row is one column (no transpose)."""
    if width < 2:
        return None
    if width <= TRANSPOSE_TILE:
        return width
    return next((r for r in range(TRANSPOSE_TILE, 3, -1) if width % r == 0), None)


def transpose_intrin(rows: int, cols: int, dtype: str = "float32", out_ndim: int = 2,
                     in_ndim: int = 2) -> TensorIntrin:
    """The intrinsic ``out[j, i] = in[i, j]`` over an ``in`` tile of ``rows x cols``, transposed
    in vector registers (``rows`` vector loads, shuffles, ``cols`` vector stores) on CPUs.

    Both tiles may lie anywhere in larger arrays, each with unit stride along its rows
    (``in``'s ``cols``, ``out``'s ``rows``): tensorize the two innermost loops of a copy whose
    source is contiguous along the inner one and whose destination is contiguous along the outer
    one, the two loops' extents ``cols`` and ``rows``. With ``out_ndim > 2`` the output tile has
    unit dimensions between its rows and columns (``(cols, 1, rows)``), and with ``in_ndim > 2``
    the input tile (``(rows, 1, cols)``): for rows and columns that are not adjacent dimensions
    of the array, as channels and columns of an NCHW image, whose row loop lies outside the
    tile. The LLVM backend emits it inline (:mod:`compiler.codegen.llvm_transpose`); a scalar
    copy of such a tile does a load and a store per element, a vectorized one a gather lane."""
    for what, n in (("rows", rows), ("cols", cols)):
        if not isinstance(n, int) or not 2 <= n <= MAX_TILE:  # a single row or column is a plain copy
            raise CompilerError(f"transpose_intrin: {what} must be an int from 2 to {MAX_TILE}, got {n!r}")
    for what, n in (("out_ndim", out_ndim), ("in_ndim", in_ndim)):
        if n not in (2, 3, 4):
            raise CompilerError(f"transpose_intrin: {what} must be 2, 3 or 4, got {n!r}")
    src = placeholder((rows, *[1] * (in_ndim - 2), cols), dtype=dtype, name="src")
    units = [0] * (in_ndim - 2)  # dst's index is (j, its unit dimensions..., i)
    dst = compute((cols, *[1] * (out_ndim - 2), rows), lambda j, *units_i: src[(units_i[-1], *units, j)],
                  name="dst")
    binds = {t: decl_buffer(t.shape, dtype, t.op.name, offset_factor=1,
                            strides=[*(var(f"{t.op.name}_stride{k}") for k in range(t.ndim - 1)), 1])
             for t in (src, dst)}

    def fcompute(ins, outs):
        (s,), (d,) = ins, outs
        return transpose_call(d.access_ptr("w"), d.strides[0], s.access_ptr("r"), s.strides[0], rows, cols)

    name = f"transpose_{rows}x{cols}_{dtype}_{out_ndim}d" + (f"_from_{in_ndim}d" if in_ndim > 2 else "")
    return decl_tensor_intrin(dst.op, fcompute, name=name, binds=binds)


def transpose_call(dst, dst_stride, src, src_stride, rows: int, cols: int) -> Call:
    """The call that copies the ``rows x cols`` tile at ``src`` transposed to ``dst`` (both
    ``access_ptr`` of buffers of one dtype; strides in elements, between rows)."""
    return call_extern("int32", TRANSPOSE, dst, dst_stride, src, src_stride, const(rows, "int32"),
                       const(cols, "int32"))


def _check_buffer(name: str, t: Tensor, buf) -> None:
    if not isinstance(buf, Buffer):
        raise CompilerError(f"decl_tensor_intrin {name!r}: binds[{t.name!r}] must be a buffer "
                            f"(tir.decl_buffer), got {buf!r}")
    if buf.dtype != t.dtype or len(buf.shape) != t.ndim:
        raise CompilerError(f"decl_tensor_intrin {name!r}: buffer {buf.name!r} ({buf.dtype}, "
                            f"{len(buf.shape)} dimensions) does not match tensor {t.name!r} ({t.dtype}, "
                            f"{t.ndim} dimensions)")


def _stmt(name: str, s) -> Stmt | None:
    if s is None or isinstance(s, Stmt):
        return s
    if isinstance(s, PrimExpr):
        return Evaluate(s)
    raise CompilerError(f"decl_tensor_intrin {name!r}: fcompute must return statements or calls, got {s!r}")
