"""Errors raised by the tuning log."""

__all__ = ["TuningLogError"]


class TuningLogError(Exception):
    """Base class of tuning-log errors: unreadable logs, bad records, bad URLs."""
