"""``lower()``: from a schedule (or a function) to optimised loop IR (the passes of
:data:`compiler.passes.LOWER`, with the user passes of the current PassContext)."""

from __future__ import annotations

from .errors import LoweringError
from .passes import LOWER
from .schedule import Schedule
from .schedule.build_loops import schedule_to_primfunc
from .tir.function import IRModule, PrimFunc

__all__ = ["lower"]


def lower(inp, args=None, name: str = "main", binds: dict | None = None,
          simple_mode: bool = False) -> IRModule:
    """Lower ``inp`` to an :class:`~compiler.tir.IRModule`.

    ``inp`` is a schedule (then ``args`` lists the tensors, and optionally
    ``te.var`` scalars, that become the function's parameters, in order), a
    :class:`~compiler.tir.PrimFunc` or an :class:`~compiler.tir.IRModule`.
    ``binds`` maps argument tensors to buffers declared with
    :func:`compiler.tir.decl_buffer` (custom strides or offsets).
    ``simple_mode`` skips loop partitioning, unrolling and vectorization, leaving
    the loop nest as the schedule describes it (handy to read).
    """
    if isinstance(inp, Schedule):
        func = schedule_to_primfunc(inp, list(args) if args is not None else None, name, binds)
        return LOWER.run(IRModule({name: func}), simple_mode=simple_mode)
    if isinstance(inp, PrimFunc):
        func = inp if inp.name == name or name == "main" else inp.with_name(name)
        return LOWER.run(IRModule({func.name: func}), simple_mode=simple_mode)
    if isinstance(inp, IRModule):
        return LOWER.run(inp, simple_mode=simple_mode)
    raise LoweringError(f"lower() takes a schedule, a PrimFunc or an IRModule, got {type(inp).__name__}")
