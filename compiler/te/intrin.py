"""Reductions and intrinsic functions for tensor expressions.

This module defines ``sum``, ``max`` (and re-exports ``all``, ``any``) and other names of builtins, as the
seed's ``te`` does; inside it, the builtins are reached through :mod:`builtins`.
The math (``exp``, ``nearbyint``, ``fmod``, ...), the divisions (``div``, ``truncdiv``,
``truncmod``, ``floordiv``, ``floormod``, ``indexdiv``, ``indexmod``), ``popcount``, the
``isnan``/``isinf``/``isfinite`` tests and the calls by name (``call_intrin``,
``call_pure_extern``, ``call_extern``) come from :mod:`compiler.tir.op`, where the operators
and their lowering rules are registered: ``te.X is tir.X``, as in TVM.
"""

from __future__ import annotations

import builtins
import inspect

from ..errors import DTypeError
from ..tir import expr as E
from ..tir.analysis import free_vars
from ..tir.expr import CommReducer, IterVar, PrimExpr, Reduce, UserReducer, convert
from ..tir.op import (  # noqa: A004  (tir owns these; te re-exports the same objects, as TVM does)
    abs,
    all,
    any,
    call_extern,
    call_intrin,
    call_pure_extern,
    ceil,
    cos,
    div,
    erf,
    exp,
    exp2,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    indexdiv,
    indexmod,
    isfinite,
    isinf,
    isnan,
    log,
    log2,
    log10,
    nearbyint,
    popcount,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)

__all__ = ["sum", "max", "min", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh",
           "sin", "cos", "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc", "power",
           "isnan", "if_then_else", "all", "any", "max_value", "min_value", "const", "floordiv",
           "floormod", "indexdiv", "indexmod", "call_extern", "call_pure_extern", "call_intrin",
           "comm_reducer", "div", "truncdiv", "truncmod", "nearbyint", "popcount", "fmod", "isinf",
           "isfinite"]


def _reducer(kind: CommReducer):
    def reduce(expr, axis=None, where=None, init=None):
        if axis is None or not (isinstance(axis, IterVar) or (
                isinstance(axis, (list, tuple)) and axis
                and builtins.all(isinstance(a, IterVar) for a in axis))):
            if axis is None:
                raise TypeError(f"te.{kind.value} needs axis=... (a reduce_axis or a list of them)")
            # Called with two values: the elementwise combination (like the seed's reducers).
            return kind.combine(expr, axis)
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        for a in axes:
            if a.iter_type is not E.IterType.COMM_REDUCE:
                raise TypeError(f"te.{kind.value}: axis {a.var.name!r} is not a reduce_axis")
        source = convert(expr)
        cond = E.const(True) if where is None else E.all_of(where)
        inits = () if init is None else _reduce_init(init, (source.dtype,), axes, f"te.{kind.value}")
        return Reduce(kind, source, axes, cond, source.dtype, init=inits)

    reduce.__name__ = kind.value
    reduce.__doc__ = (
        f"``te.{kind.value}(expr, axis=k, where=cond, init=v)``: the {kind.value} of ``expr`` over the "
        "reduce axis (or axes) ``k``, counting only points where ``cond`` holds, starting from "
        "``v`` (by default the reduction's identity; it may read the output's indices: ``init=C0[i]``). "
        f"With two expressions, ``te.{kind.value}(a, b)`` combines them elementwise."
    )
    return reduce


sum = _reducer(CommReducer.SUM)  # noqa: A001
max = _reducer(CommReducer.MAX)  # noqa: A001
min = _reducer(CommReducer.MIN)  # noqa: A001


def comm_reducer(fcombine, fidentity, name: str = "reduce"):
    """A reduction of your own, as TVM's ``te.comm_reducer``.

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
            raise TypeError(f"te.comm_reducer({name!r}): {role} must be a function, got {type(fn).__name__}")
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
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
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
        combiner = UserReducer(name, lhs, rhs, result, identity)
        cond = E.const(True) if where is None else E.all_of(where)
        inits = () if init is None else _reduce_init(init, types, axes, name)
        if not is_tuple:
            return Reduce(combiner, sources[0], axes, cond, types[0], init=inits)
        return tuple(Reduce(combiner, src, axes, cond, t, k, sources, inits)
                     for k, (src, t) in enumerate(zip(sources, types)))

    reducer.__name__ = name
    reducer.__doc__ = f"The {name!r} reduction made by te.comm_reducer."
    return reducer


def _is_axes(axis) -> bool:
    return isinstance(axis, IterVar) or (
        isinstance(axis, (list, tuple)) and bool(axis)
        and builtins.all(isinstance(a, IterVar) for a in axis))


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


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` (infinity for floats)."""
    return E.max_value(dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (minus infinity for floats)."""
    return E.min_value(dtype)


def const(value, dtype: str | None = None) -> PrimExpr:
    """A constant expression."""
    return E.const(value, dtype)
