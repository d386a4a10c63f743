"""Schedules: stages, their loop transformations, bound inference and loop-nest construction."""

from .auto_inline import AutoInlineBroadcast, AutoInlineElemWise, AutoInlineInjective
from .relations import Fuse, Relation, Singleton, Split
from .schedule import IterAttr, IterVarAttr, Schedule, Stage, create_schedule

__all__ = ["Schedule", "Stage", "Relation", "Split", "Fuse", "Singleton", "IterAttr", "IterVarAttr",
           "create_schedule", "AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective"]
