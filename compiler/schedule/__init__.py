"""Schedules: stages, their loop transformations, bound inference and loop-nest construction."""

from .schedule import Fuse, IterAttr, Schedule, Split, Stage, create_schedule

__all__ = ["Schedule", "Stage", "Split", "Fuse", "IterAttr", "create_schedule"]
