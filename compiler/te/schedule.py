"""TVM's ``te.schedule`` names (``te.schedule.Fuse``, ``te.schedule.AutoInlineInjective``, ...),
for code that spells them that way; they live in :mod:`compiler.schedule`."""

from ..schedule import (
    AutoInlineBroadcast,
    AutoInlineElemWise,
    AutoInlineInjective,
    Fuse,
    IterVarAttr,
    Schedule,
    Singleton,
    Split,
    Stage,
    create_schedule,
)
from ..tir.buffer import Buffer
from ..tir.expr import IterVar

__all__ = ["Schedule", "Stage", "create_schedule", "Split", "Fuse", "Singleton", "IterVarAttr", "IterVar",
           "Buffer", "AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective"]
