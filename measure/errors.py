"""Errors raised while building or running candidates."""

__all__ = ["MeasureError"]


class MeasureError(Exception):
    """Base class of measurement errors."""
