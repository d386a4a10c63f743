"""Exceptions raised by the compiler package.

Every error a user can provoke is a subclass of :class:`CompilerError`, so
callers can catch the whole family at once. :class:`CompilerError` is a
:class:`RuntimeError`, as TVM's ``TVMError`` is, so code written for TVM that catches
``tvm.error.TVMError`` (:mod:`compiler.error`) or ``RuntimeError`` catches these too.
"""

__all__ = [
    "CompilerError",
    "DTypeError",
    "ScheduleError",
    "TagScopeError",
    "LoweringError",
    "CodegenError",
    "RuntimeArgumentError",
    "TargetError",
]


class CompilerError(RuntimeError):
    """Base class of every error raised by :mod:`compiler`; TVM's ``TVMError``."""


class DTypeError(CompilerError, TypeError):
    """An unknown dtype, or an operation on dtypes that do not fit together."""


class ScheduleError(CompilerError):
    """An illegal schedule primitive: names the stage, the axis and the problem."""


class TagScopeError(CompilerError, ValueError):
    """Tags given twice: nested ``te.tag_scope``s, or ``tag=`` inside one (a ``ValueError``
    too, as TVM raises)."""


class LoweringError(CompilerError):
    """A schedule or function that cannot be lowered to the loop IR."""


class CodegenError(CompilerError):
    """A loop-IR construct that the code generator cannot translate."""


class RuntimeArgumentError(CompilerError, ValueError):
    """A compiled function was called with wrong arguments (count, shape, dtype, layout)."""


class TargetError(CompilerError, ValueError):
    """An unknown or malformed target string, or a CPU, feature or triple LLVM does not know."""
