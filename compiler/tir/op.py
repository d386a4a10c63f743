"""Intrinsic operators, their attributes, and the per-target registry of lowering rules.

A ``Call`` names its intrinsic by ``call.op``: an :class:`Op`, which compares equal to
the short name the code generators know (``"exp"``) and whose ``.name`` is TVM's
qualified name (``"tir.exp"``). As in TVM, every operator has attributes registered
with a *level*: a registration at a higher level replaces the current value, one at a
lower level is ignored, and one at the same level is an error. An operator comes into
existence when its first attribute is registered::

    register_op_attr("tir.mylog", "TCallEffectKind", CallEffectKind.Pure)
    register_intrin_lowering("tir.mylog", target="cuda", f=my_rule, level=99)
    B = te.compute((n,), lambda i: call_intrin("float32", "tir.mylog", A[i]))

A lowering rule (attribute ``"<target>.FLowerIntrinsic"``) takes the ``Call`` and
returns an expression to use instead, or the call itself to decline. The pass
:func:`compiler.transform.lower_intrin.lower_intrin` applies the rules of the
target being built, under the keys its backend declared (:func:`register_target_rules`:
``"llvm"``; ``"cuda"`` then ``"nvptx"``, the backend of our CUDA path), then those of
``"default"``. The math each code generator lowers itself is registered for its kind
at level 10 as :data:`BUILTIN_LOWERING`, so a user's rule
for ``tir.exp`` needs a level above 10 to take over, as in TVM. Math that a GPU does
not lower natively (``sin``, ``erf``) takes a rule at any level, e.g. one calling
CUDA's libdevice (``call_pure_extern("float32", "__nv_sinf", x)``).

:func:`isolated_registry` forgets, at the end of a ``with`` block, every operator and
attribute registered inside it (tests, plugins that register rules temporarily).
"""

from __future__ import annotations

import builtins
import contextlib
import enum
import inspect
import logging
import math
from collections.abc import Callable, Iterator

from .. import dtypes
from ..errors import DTypeError
from . import expr as E
from .analysis import free_vars
from .expr import Call, PrimExpr, StringImm, convert

__all__ = ["Op", "CallEffectKind", "BUILTIN_LOWERING", "register_op_attr", "register_intrin_lowering",
           "register_intrin_rule", "lowering_rules", "list_op_names", "isolated_registry",
           "call_intrin", "call_extern", "call_pure_extern", "indexdiv", "indexmod", "if_then_else",
           "all", "any", "EXTERN_OPS", "MATH_OPS", "INT_OPS",
           "div", "truncdiv", "truncmod", "floordiv", "floormod", "popcount", "clz", "nearbyint", "fmod",
           "isnan", "isinf", "isfinite", "reinterpret", "shift_left", "shift_right", "bitwise_and",
           "bitwise_or", "bitwise_xor", "bitwise_not", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt",
           "tanh", "sin", "cos", "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc", "power",
           "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
           "NATIVE_MATH", "register_target_rules", "sum", "max", "min", "comm_reducer"]

logger = logging.getLogger(__name__)

_PREFIX = "tir."
_LOWER = ".FLowerIntrinsic"
# Target keys whose rules a build for a target kind consults, in order (register_target_rules).
_TARGET_KEYS: dict[str, tuple[str, ...]] = {}
EXTERN_OPS = frozenset({"call_extern", "call_pure_extern"})


class CallEffectKind(enum.IntEnum):
    """What evaluating a call does besides returning its value (TVM's ``CallEffectKind``;
    ``Opaque`` is another name of ``UpdateState``, as there)."""

    ExprAnnotation = 0
    Pure = 1
    ReadState = 2
    UpdateState = 3
    Opaque = 3


def BUILTIN_LOWERING(call: Call) -> Call:  # noqa: N802  (a registered value, named as a constant)
    """The lowering rule meaning "the code generator lowers this call itself": it declines."""
    return call


_ops: dict[str, str] = {}  # the IR's short name -> qualified name
_attrs: dict[tuple[str, str], tuple[object, int]] = {}  # (qualified name, key) -> (value, level)


class Op(str):
    """An intrinsic operator in ``Call.op``: equal to its short name (``"exp"``); ``.name`` is
    its qualified name (``"tir.exp"``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The qualified name, ``"tir.exp"`` (TVM's ``Op.name``)."""
        return _ops.get(str(self), _PREFIX + str(self))

    @staticmethod
    def get(name: str) -> Op:
        """The registered operator ``name`` (``"tir.exp"``); ValueError if none is registered."""
        if not isinstance(name, str):
            raise TypeError(f"an operator name is a string such as 'tir.exp', got {name!r}")
        short = _short(name)
        if _ops.get(short) != name:
            hint = f"; did you mean {_PREFIX + name!r}?" if _ops.get(name) == _PREFIX + name else ""
            raise ValueError(f"operator {name!r} is not registered{hint} (register it with "
                             "register_op_attr(name, 'TCallEffectKind', CallEffectKind.Pure))")
        return Op(short)

    def get_attr(self, attr_key: str):
        """The value of attribute ``attr_key`` of this operator, or None."""
        entry = _attrs.get((self.name, attr_key))
        return None if entry is None else entry[0]

    def reset_attr(self, attr_key: str) -> None:
        """Forget attribute ``attr_key`` of this operator (any level)."""
        _attrs.pop((self.name, attr_key), None)

    @staticmethod
    def list_op_names() -> list[str]:
        """The qualified names of every registered operator."""
        return list_op_names()


def _short(name: str) -> str:
    return name[len(_PREFIX):] if name.startswith(_PREFIX) else name


def _ensure_op(name: str) -> None:
    if not isinstance(name, str) or not _short(name) or not _short(name).replace(".", "_").isidentifier():
        raise ValueError(f"an operator name is a dotted identifier such as 'tir.mylog', got {name!r}")
    short = _short(name)
    known = _ops.get(short)
    if known is None:
        _ops[short] = name
    elif known != name:
        raise ValueError(f"operator {name!r} would share the IR name {short!r} with {known!r}; "
                         "choose another name")


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Register attribute ``attr_key`` of operator ``op_name`` (created if new) at ``level``.

    A higher level than the current registration replaces it, a lower one is ignored, the
    same one raises ValueError (TVM's rule). Without ``value``, returns a decorator.
    """
    if not isinstance(attr_key, str) or not attr_key:
        raise ValueError(f"an attribute key is a non-empty string, got {attr_key!r}")
    if not isinstance(level, int) or isinstance(level, bool):
        raise TypeError(f"the level of a registration is an int, got {level!r}")
    _ensure_op(op_name)

    def register(v):
        if v is None:
            raise ValueError(f"attribute {attr_key!r} of {op_name!r}: the value must not be None")
        old = _attrs.get((op_name, attr_key))
        if old is not None and old[1] == level:
            raise ValueError(f"attribute {attr_key!r} of operator {op_name!r} is already registered at "
                             f"level {level}; register at a higher level to replace it")
        if old is None or old[1] < level:
            _attrs[(op_name, attr_key)] = (v, level)
        else:
            logger.debug("%s of %s at level %d is ignored: level %d is registered", attr_key, op_name,
                         level, old[1])
        return v

    return register(value) if value is not None else register


def register_intrin_lowering(op_name: str, target: str, *, f: Callable | None = None, level: int = 10):
    """Register ``f(call) -> expr`` as the lowering of ``op_name`` for ``target`` (TVM's
    ``tvm.ir.register_intrin_lowering``); levels as :func:`register_op_attr`. Without ``f``,
    returns a decorator."""
    _check_target(target)

    def register(fn):
        if not callable(fn):
            raise TypeError(f"the lowering of {op_name!r} for {target!r} must be a function, got {fn!r}")
        return register_op_attr(op_name, target + _LOWER, fn, level)

    return register(f) if f is not None else register


def register_intrin_rule(target: str, intrin: str, f: Callable | None = None, override: bool = False):
    """TVM 0.8's ``tvm.target.register_intrin_rule``: ``f`` lowers ``intrin`` (``"exp"`` or
    ``"tir.exp"``) for ``target``. A rule already there (built-in ones included) is an
    error unless ``override``, which puts ``f`` above it."""
    _check_target(target)
    op_name = intrin if "." in intrin else _PREFIX + intrin

    def register(fn):
        if not callable(fn):
            raise TypeError(f"the rule for {intrin!r} on {target!r} must be a function, got {fn!r}")
        _ensure_op(op_name)
        old = _attrs.get((op_name, target + _LOWER))
        if old is not None and not override:
            raise ValueError(f"a lowering rule for {op_name!r} on {target!r} is already registered; "
                             "pass override=True to replace it")
        return register_op_attr(op_name, target + _LOWER, fn, 10 if old is None else old[1] + 1)

    return register(f) if f is not None else register


def _check_target(target: str) -> None:
    if not isinstance(target, str) or not target.isidentifier():
        raise ValueError(f"a rule's target is a target kind such as 'llvm' or 'cuda', got {target!r}")
    if not builtins.any(target in keys for keys in _TARGET_KEYS.values()):
        logger.warning("lowering rules for target %r are never used: builds consult %s", target,
                       sorted({k for keys in _TARGET_KEYS.values() for k in keys}))


def lowering_rules(op: str, target_kind: str) -> list[tuple[str, Callable]]:
    """``[(target key, rule)]`` for the short op name ``op`` when building for ``target_kind``,
    in the order they are tried."""
    name = _ops.get(str(op))
    if name is None:
        return []
    rules = []
    for key in _TARGET_KEYS.get(target_kind, (target_kind, "default")):
        entry = _attrs.get((name, key + _LOWER))
        if entry is not None:
            rules.append((key, entry[0]))
    return rules


def is_registered(op: str) -> bool:
    """Whether ``op`` (a short IR name) is a registered operator."""
    return str(op) in _ops


def is_builtin(op: str) -> bool:
    """Whether ``op`` (a short IR name) is one of the operators the compiler defines."""
    return str(op) in _BUILTIN_NAMES


def list_op_names() -> list[str]:
    """The qualified names of every registered operator."""
    return sorted(_ops.values())


@contextlib.contextmanager
def isolated_registry() -> Iterator[None]:
    """Inside the block, register operators and attributes freely; at its end, the registry
    is as it was before."""
    ops, attrs = dict(_ops), dict(_attrs)
    try:
        yield
    finally:
        _ops.clear()
        _ops.update(ops)
        _attrs.clear()
        _attrs.update(attrs)


# ----------------------------------------------------------------------------- calls


def call_intrin(dtype: str, func_name: str, *args) -> Call:
    """A call of the registered intrinsic ``func_name`` (``"tir.exp"``) returning ``dtype``."""
    op = Op.get(func_name)
    return Call(dtypes.check(dtype), op, tuple(convert(a) for a in args))


def _extern(kind: str, dtype: str, name: str, args: tuple) -> Call:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{kind}: the function name must be a C identifier, got {name!r}")
    return Call(dtypes.check(dtype), Op(kind), (StringImm(name), *(convert(a) for a in args)))


def call_extern(dtype: str, func_name: str, *args) -> Call:
    """A call of the C (or CUDA device) function ``func_name`` on ``args``, returning ``dtype``.

    On the CPU the generated code declares ``dtype func_name(args...)`` with the arguments'
    types and calls it wherever the expression is evaluated (lane by lane for vector
    arguments); the symbol must be visible to the loaded code (libc, libm, a loaded
    library). In CUDA kernels the name is a CUDA math function (``expf``, ``__expf``) or a
    libdevice one (``__nv_expf``); see :mod:`compiler.codegen.libdevice`. For a function
    returning void (``abort``) give any scalar dtype: the value is undefined.
    """
    return _extern("call_extern", dtype, func_name, args)


def call_pure_extern(dtype: str, func_name: str, *args) -> Call:
    """As :func:`call_extern`, for a function without side effects (``expf``): a pure call
    that the compiler may move, repeat or drop like arithmetic."""
    return _extern("call_pure_extern", dtype, func_name, args)


def if_then_else(cond, then_value, else_value) -> PrimExpr:
    """``then_value`` where ``cond`` holds, else ``else_value``; the other side is not evaluated,
    so it may guard an out-of-bounds read (padding)."""
    cond = convert(cond)
    if cond.dtype != "bool":
        cond = E._as_bool(cond)
    t, f = E._convert_pair(then_value, else_value)
    dtype = dtypes.promote(t.dtype, f.dtype)
    return E.Select(cond, E._cast_to(t, dtype), E._cast_to(f, dtype), dtype)


def all(*conds) -> PrimExpr:  # noqa: A001
    """Logical and of the conditions."""
    return E.all_of(*conds)


def any(*conds) -> PrimExpr:  # noqa: A001
    """Logical or of the conditions."""
    return E.any_of(*conds)


def indexdiv(a, b) -> PrimExpr:
    """Index division (TVM's ``indexdiv``): ``a / b`` rounded towards minus infinity, the
    floor division that index expressions use."""
    return E._binary(E.FloorDiv, a, b)


def indexmod(a, b) -> PrimExpr:
    """Index remainder (TVM's ``indexmod``): the remainder of :func:`indexdiv`, with the sign
    of ``b``."""
    return E._binary(E.FloorMod, a, b)


def floordiv(a, b) -> PrimExpr:
    """``a // b`` rounded towards minus infinity (TVM's ``floordiv``; ``floor(a / b)`` for floats)."""
    return E._binary(E.FloorDiv, a, b)


def floormod(a, b) -> PrimExpr:
    """The remainder of :func:`floordiv`: ``a - floordiv(a, b) * b``, with the sign of ``b``."""
    return E._binary(E.FloorMod, a, b)


def _int_pair(name: str, a, b) -> tuple[PrimExpr, PrimExpr, str]:
    """Both operands converted and promoted to one integer dtype (bool is not one)."""
    a, b = E._convert_pair(a, b)
    dtype = dtypes.promote(a.dtype, b.dtype)
    if not dtypes.is_int(dtype):
        raise DTypeError(f"tir.{name} needs integer operands, got {a.dtype} and {b.dtype}")
    return E._cast_to(a, dtype), E._cast_to(b, dtype), dtype


def truncdiv(a, b) -> PrimExpr:
    """Integer ``a / b`` rounded towards zero (C's ``/``, TVM's ``truncdiv``)."""
    a, b, dtype = _int_pair("truncdiv", a, b)
    return E.Div(a, b, dtype)


def truncmod(a, b) -> PrimExpr:
    """The remainder of :func:`truncdiv`, with the sign of ``a`` (C's ``%``, TVM's ``truncmod``)."""
    a, b, dtype = _int_pair("truncmod", a, b)
    return E.Mod(a, b, dtype)


def div(a, b) -> PrimExpr:
    """``a / b`` as in C (TVM's ``tir.div``): true division of floats, :func:`truncdiv` of integers."""
    return E._binary(E.Div, a, b)


def _int_call(name: str, x, dtype: str | None = None) -> Call:
    x = convert(x)
    if not dtypes.is_int(x.dtype):
        raise DTypeError(f"tir.{name} needs an integer expression, got {x.dtype}")
    return Call(dtype or x.dtype, Op(name), (x,))


def popcount(x) -> PrimExpr:
    """The number of set bits of an integer expression (of its own dtype)."""
    return _int_call("popcount", x)


def clz(x) -> PrimExpr:
    """The number of leading zero bits of an integer expression, as an int32 (TVM leaves
    ``clz(0)`` undefined; here it is the width of the dtype)."""
    return _int_call("clz", x, "int32")


def nearbyint(x) -> PrimExpr:
    """``x`` rounded to the nearest integer, halves to even (LLVM's ``nearbyint``)."""
    x = convert(x)
    if not dtypes.is_float(x.dtype):
        raise DTypeError(f"tir.nearbyint needs a float expression, got {x.dtype}; cast it with .astype()")
    return Call(x.dtype, Op("nearbyint"), (x,))


def fmod(x, y) -> PrimExpr:
    """The remainder of ``x / y`` rounded towards zero, with the sign of ``x`` (C's ``fmod``), of floats."""
    x, y = E._convert_pair(x, y)
    dtype = dtypes.promote(x.dtype, y.dtype)
    if not dtypes.is_float(dtype):
        raise DTypeError(f"tir.fmod needs float operands, got {x.dtype} and {y.dtype}; for integers use "
                         "tir.truncmod (the sign of x) or tir.floormod (the sign of y)")
    return Call(dtype, Op("fmod"), (E._cast_to(x, dtype), E._cast_to(y, dtype)))


def isnan(x) -> PrimExpr:
    """True where a float expression is NaN (never for integers)."""
    x = convert(x)
    if not dtypes.is_float(x.dtype):
        return E.const(False)
    return Call("bool", Op("isnan"), (x,))


def isinf(x) -> PrimExpr:
    """True where a float expression is plus or minus infinity (never for integers)."""
    x = convert(x)
    if not dtypes.is_float(x.dtype):
        return E.const(False)
    # An ordered comparison: false for NaN, as TVM's ``abs(x) == inf && !isnan(x)``.
    return E.EQ(Call(x.dtype, Op("fabs"), (x,)), E.FloatImm(math.inf, x.dtype), "bool")


def isfinite(x) -> PrimExpr:
    """True where a float expression is neither infinite nor NaN (always for integers)."""
    x = convert(x)
    if not dtypes.is_float(x.dtype):
        return E.const(True)
    return E.LT(Call(x.dtype, Op("fabs"), (x,)), E.FloatImm(math.inf, x.dtype), "bool")


def reinterpret(dtype: str, value) -> PrimExpr:
    """The bits of ``value`` read as ``dtype``, of the same width (``reinterpret("int32", f)``)."""
    dtype = dtypes.check(dtype)
    value = convert(value)
    if value.dtype == dtype:
        return value
    if "bool" in (dtype, value.dtype) or dtypes.bits(dtype) != dtypes.bits(value.dtype):
        raise DTypeError(f"tir.reinterpret: {value.dtype} and {dtype} differ in width; reinterpret "
                         "keeps every bit, so both must be of one width (and not bool)")
    return Call(dtype, Op("reinterpret"), (value,))


def _shift(name: str, a, b) -> PrimExpr:
    a, b, dtype = _int_pair(name, a, b)
    if isinstance(b, E.IntImm) and not 0 <= b.value < dtypes.bits(dtype):
        raise ValueError(f"tir.{name}: shifting a {dtype} by {b.value} bits is undefined "
                         f"(the amount must be in [0, {dtypes.bits(dtype)}))")
    return Call(dtype, Op(name), (a, b))


def shift_left(a, b) -> PrimExpr:
    """``a << b`` of integers (the amount ``b`` in ``[0, bits)``; more is undefined, as in C)."""
    return _shift("shift_left", a, b)


def shift_right(a, b) -> PrimExpr:
    """``a >> b`` of integers: arithmetic (sign-filling) for signed dtypes, logical for unsigned."""
    return _shift("shift_right", a, b)


def _bitwise(name: str, logical, a, b) -> PrimExpr:
    a, b = E._convert_pair(a, b)
    if a.dtype == "bool" and b.dtype == "bool":
        return logical(a, b, "bool")  # TVM's bool is a 1-bit unsigned: bitwise is logical
    # A bool beside an integer counts as 0 or 1 of the integer's dtype.
    if a.dtype == "bool":
        a = E._cast_to(a, b.dtype if dtypes.is_int(b.dtype) else "int32")
    if b.dtype == "bool":
        b = E._cast_to(b, a.dtype if dtypes.is_int(a.dtype) else "int32")
    a, b, dtype = _int_pair(name, a, b)
    return Call(dtype, Op(name), (a, b))


def bitwise_and(a, b) -> PrimExpr:
    """Bitwise ``a & b`` of integers; logical and of two bools."""
    return _bitwise("bitwise_and", E.And, a, b)


def bitwise_or(a, b) -> PrimExpr:
    """Bitwise ``a | b`` of integers; logical or of two bools."""
    return _bitwise("bitwise_or", E.Or, a, b)


def bitwise_xor(a, b) -> PrimExpr:
    """Bitwise ``a ^ b`` of integers; ``a != b`` of two bools."""
    return _bitwise("bitwise_xor", E.NE, a, b)


def bitwise_not(a) -> PrimExpr:
    """Bitwise ``~a`` of an integer; logical not of a bool."""
    a = convert(a)
    if a.dtype == "bool":
        return E.Not(a, "bool")
    if not dtypes.is_int(a.dtype):
        raise DTypeError(f"~ (tir.bitwise_not) needs an integer or bool expression, got {a.dtype}")
    return Call(a.dtype, Op("bitwise_not"), (a,))


def _float_call(op: str):
    def fn(x) -> PrimExpr:
        x = convert(x)
        if not dtypes.is_float(x.dtype):
            raise DTypeError(f"tir.{op} needs a float expression, got {x.dtype}; cast it with .astype()")
        return Call(x.dtype, Op(op), (x,))

    fn.__name__ = op
    fn.__doc__ = f"Elementwise ``{op}`` of a float expression."
    return fn


exp = _float_call("exp")
exp2 = _float_call("exp2")
log = _float_call("log")
log2 = _float_call("log2")
log10 = _float_call("log10")
sqrt = _float_call("sqrt")
rsqrt = _float_call("rsqrt")
tanh = _float_call("tanh")
sin = _float_call("sin")
cos = _float_call("cos")
sigmoid = _float_call("sigmoid")
erf = _float_call("erf")
floor = _float_call("floor")
ceil = _float_call("ceil")
round = _float_call("round")  # noqa: A001  (halves away from zero, as C's and TVM's; nearbyint: to even)
trunc = _float_call("trunc")
tan = _float_call("tan")
asin = _float_call("asin")
acos = _float_call("acos")
atan = _float_call("atan")
sinh = _float_call("sinh")
cosh = _float_call("cosh")
asinh = _float_call("asinh")
acosh = _float_call("acosh")
atanh = _float_call("atanh")


def abs(x) -> PrimExpr:  # noqa: A001
    """Absolute value of an integer or float expression."""
    x = convert(x)
    if dtypes.is_uint(x.dtype) or x.dtype == "bool":
        return x
    return Call(x.dtype, Op("fabs" if dtypes.is_float(x.dtype) else "abs"), (x,))


def power(x, y) -> PrimExpr:
    """``x ** y`` for float expressions."""
    x, y = E._convert_pair(x, y)
    dtype = dtypes.promote(x.dtype, y.dtype)
    if not dtypes.is_float(dtype):
        raise DTypeError("tir.power needs float operands; cast with .astype()")
    return Call(dtype, Op("pow"), (E._cast_to(x, dtype), E._cast_to(y, dtype)))


# ----------------------------------------------------------------------------- reductions
# TVM's tir.sum/max/min are comm-reducers: over a reduce axis they make a Reduce, on two
# expressions they combine them elementwise (tir.max(a, b)); te re-exports them.


def _reducer(kind: E.CommReducer):
    def reduce(expr, axis=None, where=None, init=None):
        if axis is None or not (isinstance(axis, E.IterVar) or (
                isinstance(axis, (list, tuple)) and axis
                and builtins.all(isinstance(a, E.IterVar) for a in axis))):
            if axis is None:
                raise TypeError(f"{kind.value} needs axis=... (a reduce_axis or a list of them)")
            # Called with two values: the elementwise combination (like the seed's reducers).
            return kind.combine(expr, axis)
        axes = (axis,) if isinstance(axis, E.IterVar) else tuple(axis)
        for a in axes:
            if a.iter_type is not E.IterType.COMM_REDUCE:
                raise TypeError(f"{kind.value}: axis {a.var.name!r} is not a reduce_axis")
        source = convert(expr)
        cond = E.const(True) if where is None else E.all_of(where)
        inits = () if init is None else _reduce_init(init, (source.dtype,), axes, f"{kind.value}")
        return E.Reduce(kind, source, axes, cond, source.dtype, init=inits)

    reduce.__name__ = kind.value
    reduce.__doc__ = (
        f"``{kind.value}(expr, axis=k, where=cond, init=v)``: the {kind.value} of ``expr`` over the "
        "reduce axis (or axes) ``k``, counting only points where ``cond`` holds, starting from "
        "``v`` (by default the reduction's identity; it may read the output's indices: ``init=C0[i]``). "
        f"With two expressions, ``{kind.value}(a, b)`` combines them elementwise."
    )
    return reduce


sum = _reducer(E.CommReducer.SUM)  # noqa: A001
max = _reducer(E.CommReducer.MAX)  # noqa: A001
min = _reducer(E.CommReducer.MIN)  # noqa: A001


def comm_reducer(fcombine, fidentity, name: str = "reduce"):
    """A reduction of your own, as TVM's ``tir.comm_reducer`` (also ``te.comm_reducer``).

    ``fcombine(x, y)`` combines two values (it must be commutative and associative) and
    ``fidentity(dtype)`` gives the value that leaves any other unchanged::

        prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, dtype=t), name="prod")
        B = te.compute((n,), lambda i: prod(A[i, k], axis=k))

    Over a tuple of values, ``x`` and ``y`` are tuples, ``fcombine`` returns a tuple and
    ``fidentity(*dtypes)`` one identity per value; the reduction then returns one
    expression per value, and ``te.compute`` one tensor per value::

        def fcombine(x, y):   # argmax over (index, value)
            keep = x[1] >= y[1]
            return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])
        argmax = te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)))
        T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k))

    The reducer takes ``axis``, ``where`` and ``init`` as ``te.sum`` does (``init``: one value
    per reduced value, that the reduction starts from instead of the identity); called on plain values
    (``r(a, b)``) it combines them.
    """
    for role, fn in (("fcombine", fcombine), ("fidentity", fidentity)):
        if not callable(fn):
            raise TypeError(f"comm_reducer({name!r}): {role} must be a function, got {type(fn).__name__}")
    try:
        params = [p.name for p in inspect.signature(fcombine).parameters.values()][:2]
    except (TypeError, ValueError):
        params = []
    lname, rname = params if len(params) == 2 else ("x", "y")

    def reducer(expr, axis=None, where=None, init=None, *args):
        if not _is_axes(axis):
            values = [v for v in (expr, axis, where, init, *args) if v is not None]
            result = values[0]
            for v in values[1:]:
                result = fcombine(result, v)
            return result
        axes = (axis,) if isinstance(axis, E.IterVar) else tuple(axis)
        for a in axes:
            if a.iter_type is not E.IterType.COMM_REDUCE:
                raise TypeError(f"{name}: axis {a.var.name!r} is not a reduce_axis")
        is_tuple = isinstance(expr, (tuple, list))
        sources = tuple(convert(e) for e in expr) if is_tuple else (convert(expr),)
        types = tuple(v.dtype for v in sources)
        if is_tuple:
            lhs = tuple(E.Var(f"{lname}_{k}", t) for k, t in enumerate(types))
            rhs = tuple(E.Var(f"{rname}_{k}", t) for k, t in enumerate(types))
            result, identity = fcombine(lhs, rhs), fidentity(*types)
        else:
            lhs, rhs = (E.Var(lname, types[0]),), (E.Var(rname, types[0]),)
            result, identity = fcombine(lhs[0], rhs[0]), fidentity(types[0])
        result = _as_values(result, types, f"{name}: fcombine")
        identity = _as_values(identity, types, f"{name}: fidentity")
        combiner = E.UserReducer(name, lhs, rhs, result, identity)
        cond = E.const(True) if where is None else E.all_of(where)
        inits = () if init is None else _reduce_init(init, types, axes, name)
        if not is_tuple:
            return E.Reduce(combiner, sources[0], axes, cond, types[0], init=inits)
        return tuple(E.Reduce(combiner, src, axes, cond, t, k, sources, inits)
                     for k, (src, t) in enumerate(zip(sources, types)))

    reducer.__name__ = name
    reducer.__doc__ = f"The {name!r} reduction made by comm_reducer."
    return reducer


def _is_axes(axis) -> bool:
    return isinstance(axis, E.IterVar) or (
        isinstance(axis, (list, tuple)) and bool(axis)
        and builtins.all(isinstance(a, E.IterVar) for a in axis))


def _reduce_init(init, types: tuple, axes: tuple, what: str) -> tuple:
    """The values a reduction over ``axes`` starts from (one per reduced value): expressions
    of the output's indices (typically a tensor element such as ``C0[i, j]``) or constants."""
    values = _as_values(init, types, f"{what}: init")
    reduce_vars = {a.var for a in axes}
    for v in values:
        used = [x.name for x in free_vars(v) if x in reduce_vars]
        if used:
            raise ValueError(f"{what}: init {v} uses the reduction axis {used[0]!r}; the value a "
                             "reduction starts from may only depend on the output's indices")
    return values


def _as_values(values, types: tuple, what: str) -> tuple:
    """``values`` (one per reduced value) as expressions of the reduced values' dtypes."""
    if not isinstance(values, (tuple, list)):
        values = (values,)
    if len(values) != len(types):
        raise TypeError(f"{what} returned {len(values)} values for a reduction of {len(types)}")
    out = []
    for v, t in zip(values, types):
        e = convert(v)
        out.append(E._cast_to(e, t) if isinstance(e, (E.IntImm, E.FloatImm)) else e)
        if out[-1].dtype != t:
            raise DTypeError(f"{what} returned a {out[-1].dtype} value for a {t} reduction; "
                             "cast it with .astype()")
    return tuple(out)


# ----------------------------------------------------------------------------- built-in operators

#: The built-in math intrinsics (short names).
MATH_OPS = ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sin", "cos", "sigmoid", "erf",
            "fabs", "abs", "floor", "ceil", "round", "trunc", "pow", "isnan", "nearbyint", "fmod",
            "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
#: The built-in integer and bit intrinsics (short names); every code generator lowers them itself.
INT_OPS = ("popcount", "clz", "reinterpret", "shift_left", "shift_right", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_not")
#: The math each target kind's code generator lowers itself (register_target_rules).
NATIVE_MATH: dict[str, frozenset] = {}
_BUILTIN_NAMES = frozenset((*MATH_OPS, *INT_OPS, *EXTERN_OPS))


def register_target_rules(target_kind: str, keys: tuple[str, ...], native_math) -> None:
    """Declare how intrinsics are lowered for ``target_kind`` (its backend calls this when it
    registers): the rule keys tried in order (``"default"`` is tried after them), and the math
    operators its code generator lowers itself."""
    _TARGET_KEYS[target_kind] = (*keys, "default")
    NATIVE_MATH[target_kind] = frozenset(native_math)
    for op in NATIVE_MATH[target_kind]:
        if (_PREFIX + op, target_kind + _LOWER) not in _attrs:
            register_intrin_lowering(_PREFIX + op, target_kind, f=BUILTIN_LOWERING)


def _register_builtins() -> None:
    for op in (*MATH_OPS, *INT_OPS):
        register_op_attr(_PREFIX + op, "TCallEffectKind", CallEffectKind.Pure)
    register_op_attr(_PREFIX + "call_extern", "TCallEffectKind", CallEffectKind.Opaque)
    register_op_attr(_PREFIX + "call_pure_extern", "TCallEffectKind", CallEffectKind.Pure)


_register_builtins()
