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
import logging
from collections.abc import Callable, Iterator

from .. import dtypes
from . import expr as E
from .expr import Call, PrimExpr, StringImm, convert

__all__ = ["Op", "CallEffectKind", "BUILTIN_LOWERING", "register_op_attr", "register_intrin_lowering",
           "register_intrin_rule", "lowering_rules", "list_op_names", "isolated_registry",
           "call_intrin", "call_extern", "call_pure_extern", "indexdiv", "indexmod", "if_then_else",
           "all", "any", "EXTERN_OPS", "MATH_OPS",
           "NATIVE_MATH", "register_target_rules"]

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


# ----------------------------------------------------------------------------- built-in operators

#: The built-in math intrinsics (short names).
MATH_OPS = ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sin", "cos", "sigmoid", "erf",
            "fabs", "abs", "floor", "ceil", "round", "trunc", "pow", "isnan")
#: The math each target kind's code generator lowers itself (register_target_rules).
NATIVE_MATH: dict[str, frozenset] = {}
_BUILTIN_NAMES = frozenset((*MATH_OPS, *EXTERN_OPS))


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
    for op in MATH_OPS:
        register_op_attr(_PREFIX + op, "TCallEffectKind", CallEffectKind.Pure)
    register_op_attr(_PREFIX + "call_extern", "TCallEffectKind", CallEffectKind.Opaque)
    register_op_attr(_PREFIX + "call_pure_extern", "TCallEffectKind", CallEffectKind.Pure)


_register_builtins()
