"""TVM's ``tvm.error``: the error classes that code written for TVM catches.

``TVMError`` is :class:`compiler.errors.CompilerError`, the base of every error the
compiler raises, and like TVM's it is a :class:`RuntimeError`. The operator errors keep
TVM's double parentage (``OpNotImplemented`` is also a ``NotImplementedError``), so an
``except`` clause written against either base catches them.
"""

from .errors import CompilerError

__all__ = ["TVMError", "InternalError", "DiagnosticError", "OpError", "OpNotImplemented",
           "OpAttributeRequired", "OpAttributeInvalid", "OpAttributeUnImplemented"]

TVMError = CompilerError


class InternalError(TVMError):
    """An invariant of the compiler itself was broken: a bug to report, not a user error."""


class DiagnosticError(TVMError):
    """An error reported with a source location (kept for code that catches it by name)."""


class OpError(TVMError):
    """Base class of the errors about an operator of a model."""


class OpNotImplemented(OpError, NotImplementedError):
    """An operator that is not implemented here."""


class OpAttributeRequired(OpError, AttributeError):
    """An operator lacks an attribute it needs."""


class OpAttributeInvalid(OpError, AttributeError):
    """An operator attribute has a value that is not allowed."""


class OpAttributeUnImplemented(OpError, NotImplementedError):
    """An operator attribute value that is valid but not supported here."""
