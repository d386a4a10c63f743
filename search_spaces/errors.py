"""Errors raised by search spaces and templates."""

from __future__ import annotations

__all__ = ["InstantiationError", "SearchSpaceError"]


class SearchSpaceError(Exception):
    """Base class of search-space errors: unknown knobs, templates or tasks."""


class InstantiationError(SearchSpaceError, ValueError):
    """A configuration cannot be turned into a valid schedule by its template (a
    ``ValueError``, as AutoTVM's ``InstantiationError`` is).

    ``template`` names the template, ``config`` is the config (a ConfigEntity, or None)
    and ``cause`` the exception that stopped it (also its ``__cause__``).
    """

    def __init__(self, message: str, template: str | None = None, config=None,
                 cause: BaseException | None = None):
        super().__init__(message)
        self.template = template
        self.config = config
        self.cause = cause

    def __reduce__(self):
        # Keep the message, template and config across processes; the cause may not pickle.
        return (type(self), (self.args[0], self.template, self.config))
