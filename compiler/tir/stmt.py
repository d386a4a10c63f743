"""Statement nodes of the loop IR."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .expr import IntImm, PrimExpr, Var

__all__ = [
    "Stmt", "ForKind", "For", "While", "BufferStore", "Allocate", "IfThenElse", "LetStmt", "SeqStmt",
    "Evaluate", "AttrStmt", "seq", "NOP",
]


class Stmt:
    """Base class of statements."""

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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class While(Stmt):
    """``while condition: body``: ``condition`` is evaluated before every iteration."""

    condition: PrimExpr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``. A vector ``value`` is stored at a vector index
    (contiguous for a unit-stride ``Ramp``, a scatter otherwise); ``predicate``
    (a bool vector, or None) names the lanes that are written."""

    buffer: Any  # Buffer
    value: PrimExpr
    indices: tuple
    predicate: PrimExpr | None = None


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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AttrStmt(Stmt):
    """An annotation around ``body``: ``key`` says what it means (e.g. "thread_extent", "barrier")."""

    node: Any
    key: str
    value: PrimExpr
    body: Stmt


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
