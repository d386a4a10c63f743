"""Errors of the model layer."""

from ..error import OpNotImplemented
from ..errors import CompilerError

__all__ = ["GraphError", "UnsupportedOperatorError"]


class GraphError(CompilerError, ValueError):
    """A malformed graph, a shape that cannot be inferred, or a value the graph cannot hold."""


class UnsupportedOperatorError(GraphError, OpNotImplemented):
    """A model uses an operator (or an attribute of one) that the importer does not cover."""
