"""Errors raised by search spaces and templates."""

__all__ = ["InstantiationError", "SearchSpaceError"]


class SearchSpaceError(Exception):
    """Base class of search-space errors: unknown knobs, templates or tasks."""


class InstantiationError(SearchSpaceError):
    """A configuration cannot be turned into a valid schedule by its template."""
