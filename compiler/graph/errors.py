"""Errors of the model layer."""

from ..error import OpNotImplemented
from ..errors import CompilerError

__all__ = ["GraphError", "UnsupportedOperatorError", "InputShapeError"]


class GraphError(CompilerError, ValueError):
    """A malformed graph, a shape that cannot be inferred, or a value the graph cannot hold."""


class UnsupportedOperatorError(GraphError, OpNotImplemented):
    """A model uses an operator (or an attribute of one) that the importer does not cover."""


class InputShapeError(GraphError):
    """Model inputs whose shapes the model does not fix (a symbolic dimension, or no shape at
    all): ``unbound`` maps each one's name to its dimensions as the model writes them (a symbol's
    name, ``"?"`` where unknown; None where the model gives no shape); ``advice`` says how to
    give them, after the list of them."""

    def __init__(self, unbound: dict[str, tuple | None], advice: str):
        self.unbound = unbound
        super().__init__(f"the model does not fix the shape of input(s) {self.listed()}: {advice}")

    def listed(self) -> str:
        """The inputs of :attr:`unbound` with their dimensions: ``'x' (batch, 3); 'z' (no shape)``."""
        return "; ".join(f"{name!r} ({'no shape' if dims is None else ', '.join(map(str, dims))})"
                         for name, dims in self.unbound.items())
