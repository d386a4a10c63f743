"""Schedules: stages, their loop transformations, bound inference and loop-nest construction."""

from .relations import Fuse, Relation, Split
from .schedule import IterAttr, Schedule, Stage, create_schedule

__all__ = ["Schedule", "Stage", "Relation", "Split", "Fuse", "IterAttr", "create_schedule"]
