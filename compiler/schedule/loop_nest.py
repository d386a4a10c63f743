"""What the loop builder (:mod:`.build_loops`) shares with the code that lowers one stage on
its behalf (:mod:`.tensorize`): where the buffer of a tensor is filed, the rebinding of buffers
inside a statement, and :class:`LoopNestContext`, the stage's view of the nest being built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..te.tensor import Operation, Tensor
from ..tir.buffer import Buffer
from ..tir.expr import BufferLoad, Call, IterVar, PrimExpr, Var
from ..tir.functor import IRMutator
from ..tir.packed import ARRAY_HANDLE, read_only
from ..tir.stmt import BufferStore, Stmt
from .bound import StageBounds
from .schedule import Schedule, Stage

__all__ = ["buffer_key", "RebindBuffers", "LoopNestContext"]


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
