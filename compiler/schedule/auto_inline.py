"""TVM's automatic inlining passes over a schedule (``te.schedule.AutoInlineElemWise``,
``AutoInlineBroadcast``, ``AutoInlineInjective``), which generic schedules such as topi's
``schedule_injective`` call before scheduling the outputs.

Each inlines every stage that is not an output, has not been scheduled yet (no split,
fuse, annotation or placement) and whose operation is of the kind the pass names. A stage
that cannot be inlined (read by a scan or an extern operation) is left where it is.
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..te.tensor import ComputeOp
from ..tir.analysis import post_order_visit
from ..tir.expr import ProducerLoad, Reduce, Var

__all__ = ["AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective"]


def _is_injective(op) -> bool:
    """A compute without reductions: every output element from the inputs alone."""
    return isinstance(op, ComputeOp) and not op.reduce_axis and not any(isinstance(b, Reduce)
                                                                         for b in op.bodies)


def _is_elemwise(op) -> bool:
    """An injective compute that reads each input at exactly its own index ``(i, j, ...)``."""
    if not _is_injective(op):
        return False
    axis_vars = [iv.var for iv in op.axis]
    ok = True

    def visit(node) -> None:
        nonlocal ok
        if isinstance(node, ProducerLoad):
            idx = node.indices
            if len(idx) != len(axis_vars) or not all(isinstance(e, Var) and e is v
                                                     for e, v in zip(idx, axis_vars, strict=True)):
                ok = False

    for body in op.bodies:
        post_order_visit(body, visit)
    return ok


def _inline_where(sch, is_kind) -> None:
    for stage in list(sch.stages):
        scheduled = (stage.relations or stage.iter_attrs or stage.attach_type != "root"
                     or stage.scope or stage.storage_aligns)
        if stage.is_output or scheduled or stage.scan_stage is not None or not is_kind(stage.op):
            continue
        try:
            stage.compute_inline()
        except ScheduleError:
            continue  # read by a scan or an extern operation: it stays a stored stage


def AutoInlineElemWise(sch) -> None:  # noqa: N802 (TVM's name)
    """Inline every unscheduled, non-output elementwise stage (one reading its inputs at its
    own indices)."""
    _inline_where(sch, _is_elemwise)


def AutoInlineBroadcast(sch) -> None:  # noqa: N802 (TVM's name)
    """Inline every unscheduled, non-output stage without a reduction (TVM's test for a
    broadcast is that of an injective operation)."""
    _inline_where(sch, _is_injective)


def AutoInlineInjective(sch) -> None:  # noqa: N802 (TVM's name)
    """Inline every unscheduled, non-output stage without a reduction."""
    _inline_where(sch, _is_injective)
