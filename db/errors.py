"""Errors raised by the tuning log."""

__all__ = ["TuningLogError", "RecordError", "SchemaVersionError"]


class TuningLogError(Exception):
    """Base class of tuning-log errors: unreadable logs, bad records, bad URLs."""


class RecordError(TuningLogError, ValueError):
    """A record (or a line of a JSONL file) is malformed: a missing field, a wrong type."""


class SchemaVersionError(TuningLogError):
    """A log was written with a schema this version of the library does not know."""
