"""Statement nodes of the loop IR."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from .expr import IntImm, PrimExpr, Var, _as_bool, const, convert

__all__ = [
    "Stmt", "ForKind", "For", "While", "BufferStore", "Allocate", "IfThenElse", "LetStmt", "SeqStmt",
    "Evaluate", "AttrStmt", "seq", "NOP",
]


def _expr_fields(node, *names: str) -> None:
    """Convert the named fields of a new statement from Python numbers (``tir.Evaluate(0)``,
    ``tir.LetStmt(x, 1, body)``) to expressions, as TVM's constructors do."""
    for name in names:
        value = getattr(node, name)
        if value is not None and not isinstance(value, PrimExpr):
            object.__setattr__(node, name, convert(value))


class Stmt:
    """Base class of statements. The constructors take Python numbers where an expression is
    expected (``Evaluate(0)``, ``For(i, 0, 8, ...)``), as TVM's do."""

    __slots__ = ()

    def __repr__(self) -> str:
        return printer.stmt_to_str(self)

    __str__ = __repr__


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class For(Stmt):
    """``for loop_var in [min, min + extent)``; ``thread_tag`` names the bound thread axis."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_tag: str = ""

    def __post_init__(self):
        _expr_fields(self, "min", "extent")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class While(Stmt):
    """``while condition: body``: ``condition`` is evaluated before every iteration."""

    condition: PrimExpr
    body: Stmt

    def __post_init__(self):
        _condition(self)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``. A vector ``value`` is stored at a vector index
    (contiguous for a unit-stride ``Ramp``, a scatter otherwise); ``predicate``
    (a bool vector, or None) names the lanes that are written."""

    buffer: Any  # Buffer
    value: PrimExpr
    indices: tuple
    predicate: PrimExpr | None = None

    def __post_init__(self):
        if not isinstance(self.value, PrimExpr):
            # A Python number is a value of the buffer's element type (TVM converts it so).
            value = self.value
            dtype = getattr(self.buffer, "dtype", None)
            if isinstance(value, (bool, int, float)) and isinstance(dtype, str) and dtype != "handle":
                object.__setattr__(self, "value", const(value, dtypes.split_lanes(dtype)[0]))
            else:
                object.__setattr__(self, "value", convert(value))
        if not isinstance(self.indices, tuple) or not all(isinstance(i, PrimExpr) for i in self.indices):
            indices = self.indices if isinstance(self.indices, (tuple, list)) else (self.indices,)
            object.__setattr__(self, "indices", tuple(convert(i) for i in indices))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Allocate(Stmt):
    """Memory for ``buffer`` (in its scope) that lives for the duration of ``body``."""

    buffer: Any  # Buffer
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self):
        _condition(self)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt

    def __post_init__(self):
        _expr_fields(self, "value")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Evaluate(Stmt):
    """An expression evaluated for its effect (a call); ``Evaluate(0)`` is a no-op."""

    value: PrimExpr

    def __post_init__(self):
        _expr_fields(self, "value")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AttrStmt(Stmt):
    """An annotation around ``body``: ``key`` says what it means (e.g. "thread_extent", "barrier")."""

    node: Any
    key: str
    value: PrimExpr
    body: Stmt

    def __post_init__(self):
        _expr_fields(self, "value")


def _condition(node) -> None:
    """A statement's condition as a bool expression (a Python bool or number, or an integer
    expression compared with 0)."""
    cond = node.condition
    if not isinstance(cond, PrimExpr) or cond.dtype != "bool":
        object.__setattr__(node, "condition", _as_bool(convert(cond)))


NOP = Evaluate(IntImm(0, "int32"))


def seq(*stmts) -> Stmt:
    """Sequence of statements, flattening nested sequences and dropping no-ops."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            s = seq(*s)
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        elif s is NOP:
            continue
        else:
            flat.append(s)
    if not flat:
        return NOP
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


# The printer builds on this module (it imports its names), so it is imported last;
# ``Stmt.__repr__`` reaches it at call time.
from . import printer  # noqa: E402
