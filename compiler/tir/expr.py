"""Expression nodes shared by tensor expressions and the loop IR.

Every node is an immutable dataclass compared by identity: ``a == b`` builds an
``EQ`` node (as in the seed), whose truth value is "the same node". Use
:func:`structural_equal` to compare structure.

Vectors: ``dtype`` is always the *element* type (``float32``, never
``float32x16``). Width is carried by the nodes that create vectors -- ``Ramp``,
``Broadcast``, ``BufferLoad`` and ``ProducerLoad`` (``lanes``) -- and every other node (arithmetic,
comparisons, ``Select``, ``Cast``, ``Call``, ``Let``) is as wide as its widest
operand; scalar operands of a vector operation are broadcast. The
vectorize pass (:mod:`compiler.transform.vectorize`) makes the broadcasts
explicit; the code generator tolerates implicit ones. Only tensors and the
arrays that hold them name a vector dtype (``float32x4``): a tensor's element
is a ``ProducerLoad`` of 4 lanes.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import DTypeError

__all__ = [
    "PrimExpr", "Var", "IntImm", "FloatImm", "StringImm", "Cast", "BinaryOp", "Add", "Sub", "Mul",
    "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "CmpOp", "EQ", "NE", "LT", "LE", "GT", "GE",
    "And", "Or", "Not", "Select", "Call", "Let", "ProducerLoad", "BufferLoad", "Ramp", "Broadcast",
    "Reduce", "Range", "IterVar", "IterType", "CommReducer", "UserReducer", "convert", "const",
    "is_const_int", "const_value", "ExprOp", "max_value", "min_value", "all_of", "any_of", "expr_lanes",
]


class ExprOp:
    """Operator overloading shared by every expression-like object."""

    __slots__ = ()

    def _expr(self) -> PrimExpr:
        return self  # type: ignore[return-value]

    def __add__(self, other):
        if _foreign(other):
            return NotImplemented
        return _binary(Add, self, other)

    def __radd__(self, other):
        return _binary(Add, other, self)

    def __sub__(self, other):
        if _foreign(other):
            return NotImplemented
        return _binary(Sub, self, other)

    def __rsub__(self, other):
        return _binary(Sub, other, self)

    def __mul__(self, other):
        if _foreign(other):
            return NotImplemented
        return _binary(Mul, self, other)

    def __rmul__(self, other):
        return _binary(Mul, other, self)

    def __truediv__(self, other):
        if _foreign(other):
            return NotImplemented
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

    def __floordiv__(self, other):
        if _foreign(other):
            return NotImplemented
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return _binary(FloorDiv, other, self)

    def __mod__(self, other):
        if _foreign(other):
            return NotImplemented
        return _binary(FloorMod, self, other)

    def __rmod__(self, other):
        return _binary(FloorMod, other, self)

    def __neg__(self):
        e = convert(self)
        return _binary(Sub, const(0, e.dtype), e)

    def __lt__(self, other):
        return _binary(LT, self, other)

    def __le__(self, other):
        return _binary(LE, self, other)

    def __gt__(self, other):
        return _binary(GT, self, other)

    def __ge__(self, other):
        return _binary(GE, self, other)

    def __eq__(self, other):  # type: ignore[override]
        return _binary(EQ, self, other)

    def __ne__(self, other):  # type: ignore[override]
        return _binary(NE, self, other)

    # ``& | ^ ~ << >>`` are TVM's: logical on two conditions, bitwise on integers
    # (tir.bitwise_and, ...), shifts on integers (arithmetic right shift for signed ones).
    def __and__(self, other):
        return _bitwise("bitwise_and", self, other)

    def __rand__(self, other):
        return _bitwise("bitwise_and", other, self)

    def __or__(self, other):
        return _bitwise("bitwise_or", self, other)

    def __ror__(self, other):
        return _bitwise("bitwise_or", other, self)

    def __xor__(self, other):
        return _bitwise("bitwise_xor", self, other)

    def __rxor__(self, other):
        return _bitwise("bitwise_xor", other, self)

    def __lshift__(self, other):
        return _bitwise("shift_left", self, other)

    def __rlshift__(self, other):
        return _bitwise("shift_left", other, self)

    def __rshift__(self, other):
        return _bitwise("shift_right", self, other)

    def __rrshift__(self, other):
        return _bitwise("shift_right", other, self)

    def __invert__(self):
        from . import op  # op builds on this module

        return op.bitwise_not(self)

    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(
            "an expression has no truth value; combine conditions with te.all/te.any "
            "or & and |, and compare structure with structural_equal"
        )

    def equal(self, other) -> PrimExpr:
        """``self == other`` as an expression (TVM's spelling, e.g. ``tx.var.equal(0)``)."""
        return _binary(EQ, self, other)

    def __int__(self) -> int:
        """The value of a constant integer expression (``int(t.shape[0])``), as in TVM."""
        e = convert(self)
        if isinstance(e, IntImm):
            return e.value
        value = _constant_int(e)
        if value is None:
            raise TypeError(f"int() needs a constant integer expression, got {e} "
                            "(a symbolic size has no value until the function is called)")
        return value

    def astype(self, dtype: str) -> PrimExpr:
        """Cast to ``dtype``. To a vector dtype (``"float32x4"``), as TVM's ``astype``: a scalar
        is cast and broadcast to every lane, a vector of as many lanes is cast lane by lane."""
        e = convert(self)
        dtype, lanes = dtypes.split_lanes(dtype)
        if lanes > 1:
            width = expr_lanes(e)
            if width == 1:
                return Broadcast(e.astype(dtype), lanes, dtype)
            if width != lanes:
                raise DTypeError(f"cannot cast a vector of {width} lanes to {dtype}x{lanes}")
        if e.dtype == dtype:
            return e
        return Cast(dtype, e)


class PrimExpr(ExprOp):
    """Base class of scalar expressions; every node has a ``dtype``."""

    __slots__ = ()
    dtype: str

    def __repr__(self) -> str:
        return printer.expr_to_str(self)

    __str__ = __repr__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(PrimExpr):
    """A named variable: a loop index, a symbolic size or a buffer's data pointer ("handle")."""

    name: str
    dtype: str = "int32"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IntImm(PrimExpr):
    """An integer constant: ``IntImm(5, "int64")``, or TVM's order ``IntImm("int64", 5)``."""

    value: int
    dtype: str = "int32"

    def __post_init__(self) -> None:
        _tvm_operand_order(self)

    def __index__(self) -> int:
        # A constant is usable where Python wants an int: range(), numpy shapes, slicing.
        return self.value


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    """A float constant: ``FloatImm(0.5, "float64")``, or TVM's order ``FloatImm("float64", 0.5)``."""

    value: float
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _tvm_operand_order(self)


def _tvm_operand_order(imm) -> None:
    """Accept TVM's ``(dtype, value)`` order for a constant's constructor: a dtype string given
    first and a number second are swapped into place."""
    if isinstance(imm.value, str) and isinstance(imm.dtype, int | float) and not isinstance(imm.dtype, bool):
        value, dtype = imm.dtype, imm.value
        object.__setattr__(imm, "value", value)
        object.__setattr__(imm, "dtype", dtype)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StringImm(PrimExpr):
    value: str
    dtype: str = "handle"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    """A binary operator. Without ``dtype`` (``tir.Add(a, b)``, as TVM's constructors) the
    operands are converted and promoted as the operators ``a + b`` do."""

    a: PrimExpr
    b: PrimExpr
    dtype: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            return
        if isinstance(self, (And, Or)):
            a, b = _as_bool(convert(self.a)), _as_bool(convert(self.b))
        else:
            built = _binary(type(self), self.a, self.b)
            a, b = built.a, built.b
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "dtype", "bool" if isinstance(self, (CmpOp, And, Or)) else a.dtype)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Add(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Sub(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Mul(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Div(BinaryOp):
    """True division of floats; truncating division of integers (C semantics)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Mod(BinaryOp):
    """Remainder of the truncating division of integers: the sign of ``a`` (C's ``%``,
    TVM's ``truncmod``)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorDiv(BinaryOp):
    """Integer division rounding towards minus infinity (Python's ``//``)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorMod(BinaryOp):
    """Remainder with the sign of the divisor (Python's ``%``)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Min(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Max(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CmpOp(BinaryOp):
    """Comparisons; their dtype is always bool."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class EQ(CmpOp):
    def __bool__(self) -> bool:
        # Truth of ``a == b`` is identity, so expressions work as dict keys and in lists.
        return self.a is self.b or _same_const(self.a, self.b)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class NE(CmpOp):
    def __bool__(self) -> bool:
        return not (self.a is self.b or _same_const(self.a, self.b))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LT(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LE(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GT(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GE(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class And(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Or(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Select(PrimExpr):
    """``condition ? true_value : false_value``; only the chosen side is evaluated.

    Without ``dtype`` (``Select(c, a, b)``, as TVM's ``tir.Select``) the operands are
    converted and promoted to a common dtype, which becomes the node's.
    """

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            return
        t, f = _convert_pair(self.true_value, self.false_value)
        dtype = dtypes.promote(t.dtype, f.dtype)
        object.__setattr__(self, "condition", _as_bool(convert(self.condition)))
        object.__setattr__(self, "true_value", _cast_to(t, dtype))
        object.__setattr__(self, "false_value", _cast_to(f, dtype))
        object.__setattr__(self, "dtype", dtype)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Call(PrimExpr):
    """An intrinsic such as ``exp`` or ``sqrt``; ``op`` names it."""

    dtype: str
    op: str
    args: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``. Without ``dtype`` (``Let(x, 1, x + 1)``, as TVM's
    ``tir.Let``) the operands are converted and the dtype is the body's."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            return
        object.__setattr__(self, "value", convert(self.value))
        object.__setattr__(self, "body", convert(self.body))
        object.__setattr__(self, "dtype", self.body.dtype)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ProducerLoad(PrimExpr):
    """``tensor[indices]`` inside a tensor expression, before lowering. An element of a tensor
    of a vector dtype (``float32x4``) is a vector: ``dtype`` is its element type and ``lanes``
    its width, as for :class:`BufferLoad`."""

    producer: Any  # te.Tensor
    indices: tuple
    dtype: str
    lanes: int = 1


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    """A read of a buffer in the loop IR; ``dtype`` is the element type.

    With ``lanes > 1`` the single (flattened) index is a vector: a unit-stride
    ``Ramp`` reads contiguous elements, any other vector index gathers.
    ``predicate`` (a bool vector, or None for "all lanes") masks lanes off: a
    masked-off lane reads no memory and its value is unspecified.
    """

    buffer: Any  # tir.Buffer
    indices: tuple
    dtype: str
    lanes: int = 1
    predicate: PrimExpr | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Ramp(PrimExpr):
    """The vector ``base, base + stride, ..., base + (lanes - 1) * stride``.

    Without ``dtype`` (``Ramp(base, stride, lanes)``, as TVM's ``tir.Ramp``) the operands are
    converted and the dtype is the base's element dtype."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            return
        base, stride = _convert_pair(self.base, self.stride)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "stride", _cast_to(stride, base.dtype))
        object.__setattr__(self, "dtype", base.dtype)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Broadcast(PrimExpr):
    """``value`` in each of ``lanes`` lanes. Without ``dtype`` (``Broadcast(value, lanes)``, as
    TVM's ``tir.Broadcast``) it is the value's (the element dtype, not TVM's ``float32x4``)."""

    value: PrimExpr
    lanes: int
    dtype: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            return
        object.__setattr__(self, "value", convert(self.value))
        object.__setattr__(self, "dtype", self.value.dtype)


class CommReducer(enum.Enum):
    """The commutative reductions: their combiner and identity element."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"

    def combine(self, lhs: PrimExpr, rhs: PrimExpr) -> PrimExpr:
        if self is CommReducer.SUM:
            return _binary(Add, lhs, rhs)
        if self is CommReducer.MAX:
            return _binary(Max, lhs, rhs)
        return _binary(Min, lhs, rhs)

    def identity(self, dtype: str) -> PrimExpr:
        if self is CommReducer.SUM:
            return const(0, dtype)
        if self is CommReducer.MAX:
            return min_value(dtype)
        return max_value(dtype)

    @property
    def label(self) -> str:
        """How the printer names the reduction (``reduce_sum``)."""
        return self.value

    def combine_all(self, lhs: tuple, rhs: tuple) -> tuple:
        """:meth:`combine` on one-element tuples (the interface of :class:`UserReducer`)."""
        return (self.combine(lhs[0], rhs[0]),)

    def identities(self, dtypes: tuple) -> tuple:
        """:meth:`identity` as a one-element tuple (the interface of :class:`UserReducer`)."""
        return (self.identity(dtypes[0]),)


@dataclass(frozen=True, slots=True, eq=False)
class UserReducer:
    """A commutative reduction that ``te.comm_reducer`` defines, as TVM's ``tir.CommReducer``.

    It combines tuples of values: ``result[i]`` is the i-th combined value, an expression
    of the variables ``lhs`` (the accumulated tuple) and ``rhs`` (the new one);
    ``identity_element`` is the tuple that combines with any other to give it back. A
    single-value reduction (a product) is a tuple of one.
    """

    name: str
    lhs: tuple
    rhs: tuple
    result: tuple
    identity_element: tuple

    @property
    def label(self) -> str:
        """How the printer names the reduction: the name given to ``te.comm_reducer``."""
        return self.name

    def combine_all(self, lhs: tuple, rhs: tuple) -> tuple:
        """The combined tuple of ``lhs`` and ``rhs`` (tuples of expressions)."""
        mapping = dict(zip(self.lhs, lhs, strict=True))
        mapping.update(zip(self.rhs, rhs, strict=True))
        return tuple(analysis.substitute(r, mapping) for r in self.result)

    def identities(self, dtypes: tuple) -> tuple:
        """The identity tuple (typed when the reducer was defined, so ``dtypes`` is unused)."""
        return self.identity_element

    def combine(self, lhs: PrimExpr, rhs: PrimExpr) -> PrimExpr:
        """:meth:`combine_all` of a single-value reduction."""
        return self.combine_all((lhs,), (rhs,))[0]

    def identity(self, dtype: str) -> PrimExpr:
        """The identity of a single-value reduction."""
        return self.identity_element[0]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Reduce(PrimExpr):
    """A commutative reduction of ``source`` over ``axis`` where ``condition`` holds.

    A reduction of tuples (``te.comm_reducer`` over several values, such as an argmax
    over (index, value)) is one ``Reduce`` per element of the tuple: each holds all the
    ``sources`` and is the ``value_index``-th element of the result; ``source`` is its
    own source.

    ``init`` (empty by default) holds the value each element of the reduction starts
    from instead of the combiner's identity (``te.sum(..., init=C0[i])``): one expression
    per element of the tuple, over the output's axes but not the reduction's.
    """

    combiner: Any  # CommReducer or UserReducer
    source: PrimExpr
    axis: tuple
    condition: PrimExpr
    dtype: str
    value_index: int = 0
    sources: tuple = ()
    init: tuple = ()

    @property
    def all_sources(self) -> tuple:
        """The source of every element of the reduced tuple (just ``source`` for one)."""
        return self.sources or (self.source,)


@dataclass(frozen=True, slots=True, eq=False)
class Range:
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(min_value, extent) -> Range:
        return Range(convert(min_value), convert(extent))


class IterType(enum.IntEnum):
    DATA_PAR = 0
    THREAD_INDEX = 1
    COMM_REDUCE = 2
    ORDERED = 3


@dataclass(frozen=True, slots=True, eq=False)
class IterVar(ExprOp):
    """An iteration variable: a variable with its domain and kind.

    Usable wherever an expression is expected (it stands for its ``var``). The class
    constants are TVM's numbers for the kinds of loop (``IterVar.Unrolled == 5``), which
    ``s[T].iter_var_attrs[iv].iter_type`` reports.
    """

    DataPar, ThreadIndex, CommReduce, Ordered, DimInfo = 0, 1, 2, 3, 4
    Unrolled, Vectorized, Parallelized, Tensorized = 5, 6, 7, 8

    dom: Range | None
    var: Var
    iter_type: IterType = IterType.DATA_PAR
    thread_tag: str = ""

    def _expr(self) -> PrimExpr:
        return self.var

    @property
    def dtype(self) -> str:
        return self.var.dtype

    def __repr__(self) -> str:
        dom = "" if self.dom is None else f", range(min={self.dom.min}, ext={self.dom.extent})"
        tag = f", {self.thread_tag!r}" if self.thread_tag else ""
        return f"IterVar({self.var.name}{dom}{tag})"

    __hash__ = object.__hash__



# ----------------------------------------------------------------------------- construction


def const(value, dtype: str | None = None) -> PrimExpr:
    """A constant of ``dtype`` (int32 for Python ints, float32 for floats by default); of a vector
    dtype (``"float32x4"``), the constant in every lane (a :class:`Broadcast`), as in TVM."""
    if isinstance(dtype, str) and "x" in dtype:
        base, lanes = dtypes.split_lanes(dtype)
        if lanes > 1:
            return Broadcast(const(value, base), lanes, base)
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        else:
            dtype = "float32"
    dtype = dtypes.check(dtype)
    if dtypes.is_float(dtype):
        return FloatImm(float(value), dtype)
    if dtype == "bool":
        return IntImm(int(bool(value)), "bool")
    return IntImm(int(value), dtype)


def convert(value) -> PrimExpr:
    """Turn a Python number, an IterVar or an expression into a :class:`PrimExpr`."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool, int, float)):
        return const(value)
    if isinstance(value, np.generic):
        return const(value.item(), value.dtype.name)
    if isinstance(value, ExprOp):  # an expression-like object (a tensor slice): what it stands for
        return convert(value._expr())
    raise TypeError(f"cannot use {value!r} of type {type(value).__name__} as an expression")


def _foreign(value) -> bool:
    """Whether ``value`` is no expression-like operand, so that an operator gives the other
    operand's reflected method its turn (``n + A`` with a tensor ``A`` builds a compute)."""
    return not isinstance(value, (ExprOp, IterVar, bool, int, float, np.generic))


def _convert_pair(a, b) -> tuple[PrimExpr, PrimExpr]:
    """Convert both operands; Python numbers take the other operand's dtype."""
    a_py = isinstance(a, (bool, int, float))
    b_py = isinstance(b, (bool, int, float))
    if a_py and not b_py:
        b = convert(b)
        a = const(a, _literal_dtype(a, b.dtype))
    elif b_py and not a_py:
        a = convert(a)
        b = const(b, _literal_dtype(b, a.dtype))
    else:
        a, b = convert(a), convert(b)
    return a, b


def _literal_dtype(literal, other: str) -> str:
    if isinstance(literal, float) and not dtypes.is_float(other):
        return "float32"
    if other == "bool" and not isinstance(literal, bool):
        return "int32"
    return other


def _cast_to(e: PrimExpr, dtype: str) -> PrimExpr:
    if e.dtype == dtype:
        return e
    if isinstance(e, IntImm) and not dtypes.is_float(dtype):
        return IntImm(e.value, dtype)
    if isinstance(e, (IntImm, FloatImm)) and dtypes.is_float(dtype):
        return FloatImm(float(e.value), dtype)
    return Cast(dtype, e)


def _binary(cls, a, b) -> PrimExpr:
    a, b = _convert_pair(a, b)
    if "handle" in (a.dtype, b.dtype):
        raise DTypeError(f"cannot apply {cls.__name__} to a pointer value")
    dtype = dtypes.promote(a.dtype, b.dtype)
    if dtype == "bool" and cls in (Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod):
        dtype = "int32"
    a, b = _cast_to(a, dtype), _cast_to(b, dtype)
    if issubclass(cls, CmpOp):
        return cls(a, b, "bool")
    return cls(a, b, dtype)


def _div(a, b) -> PrimExpr:
    a, b = _convert_pair(a, b)
    if not dtypes.is_float(a.dtype) and not dtypes.is_float(b.dtype):
        raise DTypeError(
            "'/' on integer expressions is ambiguous; use '//' for floor division "
            "or cast an operand to a float dtype"
        )
    return _binary(Div, a, b)


def _as_bool(e: PrimExpr) -> PrimExpr:
    if e.dtype == "bool":
        return e
    return _binary(NE, e, const(0, e.dtype))


def _bitwise(name: str, a, b) -> PrimExpr:
    from . import op  # op builds on this module

    return getattr(op, name)(a, b)


def _logical(cls, a, b) -> PrimExpr:
    a, b = _as_bool(convert(a)), _as_bool(convert(b))
    return cls(a, b, "bool")


def _same_const(a: PrimExpr, b: PrimExpr) -> bool:
    return (
        isinstance(a, (IntImm, FloatImm))
        and type(a) is type(b)
        and a.value == b.value
        and a.dtype == b.dtype
    )


def is_const_int(e, value: int | None = None) -> bool:
    """Whether ``e`` is an integer constant (equal to ``value`` when given)."""
    if isinstance(e, int) and not isinstance(e, bool):
        return value is None or e == value
    return isinstance(e, IntImm) and e.dtype != "bool" and (value is None or e.value == value)


def const_value(e) -> int | float | None:
    """The Python value of a constant expression, or None."""
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    return None


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` (infinity for floats)."""
    dtype = dtypes.check(dtype)
    if dtypes.is_float(dtype):
        return FloatImm(math.inf, dtype)
    if dtype == "bool":
        return IntImm(1, "bool")
    return IntImm(int(np.iinfo(dtype).max), dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (minus infinity for floats)."""
    dtype = dtypes.check(dtype)
    if dtypes.is_float(dtype):
        return FloatImm(-math.inf, dtype)
    if dtype == "bool":
        return IntImm(0, "bool")
    return IntImm(int(np.iinfo(dtype).min), dtype)


def all_of(*conds) -> PrimExpr:
    """Logical and of every condition (true when none are given)."""
    if len(conds) == 1 and not isinstance(conds[0], (PrimExpr, IterVar, bool, int)):
        conds = tuple(conds[0])
    if not conds:
        return const(True)
    result = _as_bool(convert(conds[0]))
    for c in conds[1:]:
        result = _logical(And, result, c)
    return result


def any_of(*conds) -> PrimExpr:
    """Logical or of every condition (false when none are given)."""
    if len(conds) == 1 and not isinstance(conds[0], (PrimExpr, IterVar, bool, int)):
        conds = tuple(conds[0])
    if not conds:
        return const(False)
    result = _as_bool(convert(conds[0]))
    for c in conds[1:]:
        result = _logical(Or, result, c)
    return result


def expr_lanes(e: PrimExpr) -> int:
    """How many lanes ``e`` has: those of its widest vector node (1 for a scalar)."""
    if isinstance(e, (Ramp, Broadcast, BufferLoad, ProducerLoad)):
        return e.lanes
    if isinstance(e, (Var, IntImm, FloatImm, StringImm)):
        return 1
    from .functor import children  # functor builds on this module

    return max((expr_lanes(c) for c in children(e) if isinstance(c, PrimExpr)), default=1)


def _constant_int(e: PrimExpr) -> int | None:
    """The value of an integer (or bool) expression made of constants only, or None."""
    if dtypes.is_float(e.dtype) or e.dtype == "handle":
        return None
    try:
        value = evaluate.evaluate(e)
    except (KeyError, ZeroDivisionError, NotImplementedError, ValueError, OverflowError):
        return None  # a variable or a load (no value yet), or no defined value
    return None if isinstance(value, np.ndarray) else int(value)


# The modules below build on this one (they import its names and subclass its visitors),
# so they are imported last, and the methods above reach them at call time. ``stmt``
# first: the printer, which the others import, needs it complete.
from . import stmt  # noqa: E402, F401

# isort: split
from . import analysis, evaluate, printer  # noqa: E402
