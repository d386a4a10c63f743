"""What the loop builder (:mod:`.build_loops`) shares with the code that lowers one stage on
its behalf (:mod:`.tensorize`): where the buffer of a tensor is filed, the rebinding of buffers
inside a statement, and :class:`LoopNestContext`, the stage's view of the nest being built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..arith import Analyzer
from ..te.tensor import Operation, Tensor
from ..tir.buffer import Buffer, compact_strides
from ..tir.expr import BufferLoad, Call, IterVar, PrimExpr, Var, const, is_const_int
from ..tir.functor import IRMutator
from ..tir.indexing import as_index
from ..tir.packed import ARRAY_HANDLE, read_only
from ..tir.stmt import BufferStore, Stmt
from .bound import StageBounds
from .schedule import Schedule, Stage

__all__ = ["buffer_key", "RebindBuffers", "LoopNestContext", "bind_buffer"]


def buffer_key(sch: Schedule, tensor: Tensor) -> tuple[Stage | Operation, int]:
    """Where the buffer of ``tensor`` is filed: its stage (its operation, for a tensor the
    schedule does not compute) and its output index."""
    holder = sch[tensor] if tensor in sch else tensor.op
    return holder, tensor.value_index


class RebindBuffers(IRMutator):
    """Point accesses of buffers, and their data variables, at other buffers.

    ``mapping`` maps the data variable of each buffer to replace to its replacement;
    ``read_only_data`` holds the data variables whose array arguments (``ARRAY_HANDLE``)
    are only read, which are marked so.
    """

    def __init__(self, mapping: Mapping[Var, Buffer], read_only_data: frozenset | set = frozenset()):
        self.mapping = mapping
        self.read_only_data = read_only_data

    def visit_Call(self, node: Call):
        new = self.generic_visit(node)
        if node.op == ARRAY_HANDLE and node.args[0] in self.read_only_data:
            return read_only(new)
        return new

    def visit_Var(self, node: Var):
        buf = self.mapping.get(node)
        return node if buf is None else buf.data

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        buf = self.mapping.get(node.buffer.data)
        return node if buf is None else BufferLoad(buf, node.indices, node.dtype, node.lanes, node.predicate)

    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        buf = self.mapping.get(node.buffer.data)
        return node if buf is None else BufferStore(buf, node.value, node.indices, node.predicate)


def bind_buffer(declared: Buffer, actual: Buffer, mins, region: list, tensor_name: str, vmap: dict,
                an: Analyzer, fail: Callable[[str], Exception]) -> Buffer:
    """``declared`` (a buffer of a tensor intrinsic or an extern op) as a view of ``region``
    (``(min, extent)`` per dimension) of ``actual``, which holds the tensor from ``mins`` on
    (None: from 0), as TVM's buffer binding: the view's ``elem_offset`` is the region's first
    element; the declared buffer's symbolic shape, strides and ``elem_offset`` are recorded in
    ``vmap`` (variable -> its value here); constant ones must agree with the region's.

    ``declared`` may have fewer dimensions than the region: its leading dimensions must then
    cover one value. ``fail(message)`` makes the exception to raise."""
    strides = list(actual.strides) or compact_strides(actual.shape)
    offset = actual.elem_offset if actual.elem_offset is not None else const(0, "int32")
    for d, (lo, _) in enumerate(region):
        start = lo if mins is None or is_const_int(mins[d], 0) else lo - mins[d]
        offset = offset + as_index(start, strides[d].dtype) * strides[d]
    offset = an.simplify(offset)
    lead = len(region) - len(declared.shape)
    if lead < 0:
        raise fail(f"buffer {declared.name!r} has {len(declared.shape)} dimensions, tensor {tensor_name!r} "
                   f"only {len(region)}")
    for d in range(lead):
        if not is_const_int(an.simplify(region[d][1]), 1):
            raise fail(f"the region of {tensor_name!r} spans {region[d][1]} values in dimension {d}, which "
                       f"buffer {declared.name!r} does not have")
    shape = [ext for _, ext in region[lead:]]
    mine = strides[lead:]
    where = f"buffer {declared.name!r} (bound to {tensor_name!r})"

    def bind(want, got, what: str) -> None:
        if isinstance(want, Var):
            got = as_index(got, want.dtype)
            if want in vmap and not an.can_prove_equal(vmap[want], got):
                raise fail(f"{what} {got}, but {want.name!r} is already bound to {vmap[want]}")
            vmap.setdefault(want, got)
        elif not an.can_prove_equal(want, got):
            raise fail(f"{what} {want} in the declaration, {got} in the region")

    for j, (want, got) in enumerate(zip(declared.shape, shape)):
        bind(want, got, f"{where}: dimension {j} has extent")
    if declared.strides:
        for j, (want, got) in enumerate(zip(declared.strides, mine)):
            if not is_const_int(an.simplify(shape[j]), 1):
                bind(want, got, f"{where}: dimension {j} has stride")
    else:
        for j, (want, got) in enumerate(zip(compact_strides(shape), mine)):
            if not is_const_int(an.simplify(shape[j]), 1) and not an.can_prove_equal(want, got):
                raise fail(f"{where} is compact (no strides declared), but the region has stride {got} in "
                           f"dimension {j} where a compact one has {want}: declare the buffer with "
                           "strides=[te.var(...), ..., 1]")
    if declared.elem_offset is None:
        if not an.can_prove_equal(offset, 0):
            raise fail(f"{where} starts at offset 0, but the region starts at element {offset}: declare "
                       "the buffer with offset_factor=1 (tir.decl_buffer(..., offset_factor=1))")
    else:
        bind(declared.elem_offset, offset, f"{where}: elem_offset is")
    if declared.offset_factor > 1:
        rem = an.simplify(offset % declared.offset_factor)
        if is_const_int(rem) and rem.value != 0:
            raise fail(f"{where}: the region starts at element {offset}, not a multiple of the buffer's "
                       f"offset_factor {declared.offset_factor}")
    return Buffer(actual.name, tuple(shape), actual.dtype, actual.data, tuple(mine), offset, actual.scope,
                  actual.align, declared.offset_factor)


@dataclass(frozen=True, eq=False)
class LoopNestContext:
    """What lowering the statement of ``stage`` may use of the loop nest being built.

    The loop builder makes one for a stage whose lowering it hands to another module (a
    tensorized stage, :func:`compiler.schedule.tensorize.tensorize_stmt`):

    * ``bounds``: the stage's bound inference (loop ranges, root values, guards);
    * :meth:`buffer`: the buffer that holds a tensor, and where its region starts;
    * ``attached(iv)``: the stages computed at the stage's loop ``iv`` (compute_at);
    * ``place(stages, body)``: the statements of ``stages``, then ``body``, inside the
      allocations of their buffers;
    * ``loop(iv, body)``: ``body`` inside the stage's loop ``iv``, with its kind, thread
      binding and pragmas;
    * ``store_predicate(lower)``: the stage's store predicate as a list of guards over its
      loops (empty without one); ``lower`` rewrites an expression of the stage's root axes
      and tensors into one of its loops and buffers.
    """

    stage: Stage
    bounds: StageBounds
    buffers: Mapping[tuple, Buffer]  # by buffer_key
    mins: Mapping[tuple, list]  # by buffer_key: the region's start per dimension (absent: 0)
    attached: Callable[[IterVar], list[Stage]]
    place: Callable[[list[Stage], Stmt | None], Stmt]
    loop: Callable[[IterVar, Stmt], Stmt]
    store_predicate: Callable[[Callable[[PrimExpr], PrimExpr]], list[PrimExpr]]

    def buffer(self, tensor: Tensor) -> tuple[Buffer | None, list | None]:
        """The buffer that holds ``tensor`` (None if none does: it is neither an argument nor
        computed by the schedule) and the start of the region it holds (None: from 0)."""
        key = buffer_key(self.stage.schedule, tensor)
        return self.buffers.get(key), self.mins.get(key)
