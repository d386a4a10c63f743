"""Errors raised by the tuner front door."""

__all__ = ["AutotuneError"]


class AutotuneError(Exception):
    """Base class of autotune errors."""
