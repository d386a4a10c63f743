"""Helpers on shapes and constant expressions, as in TVM's ``topi.utils``, and one schedule
helper that templates and the graph's default schedule share (:func:`vectorize_reduction`), and
:func:`let`, which names values that an operator's expression uses more than once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..arith import Analyzer
from ..tir.expr import IntImm, Let, PrimExpr, Var, convert

__all__ = ["get_const_int", "get_const_tuple", "let", "vectorize_reduction"]


def let(values: Sequence[PrimExpr], name: str, use: Callable[[list[Var]], PrimExpr]) -> PrimExpr:
    """``use(variables)`` with each of ``values`` bound once to a variable (``name`` and its
    position) by a ``Let``. The code generator shares no common subexpressions: an expression
    written into each of its uses is computed, and lowered and compiled, once per use, which for
    an interpolation's weights (sixteen products for bicubic) made one kernel take seconds to build."""
    variables = [Var(f"{name}{k}", convert(v).dtype) for k, v in enumerate(values)]
    out = use(variables)
    for var, value in reversed(list(zip(variables, values, strict=True))):
        out = Let(var, convert(value), out, out.dtype)
    return out


def get_const_int(expr) -> int:
    """The value of a constant integer expression; ``ValueError`` if it is not constant."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    e = convert(expr)
    if not isinstance(e, IntImm):
        e = Analyzer().simplify(e)
    if not isinstance(e, IntImm) or e.dtype == "bool":
        raise ValueError(f"expected a constant integer, got {expr}")
    return e.value

def get_const_tuple(in_tuple) -> tuple:
    """The entries of a shape as ints where they are constant.

    Symbolic entries stay expressions (a ``te.var`` as itself, other expressions
    simplified), so ``get_const_tuple(A.shape)`` works for symbolic shapes as in TVM.
    """
    out: list = []
    analyzer = Analyzer()
    for elem in in_tuple:
        if isinstance(elem, Var):
            out.append(elem)
            continue
        e = convert(elem)
        if not isinstance(e, IntImm):
            e = analyzer.simplify(e)
        out.append(e.value if isinstance(e, IntImm) else e)
    return tuple(out)


def vectorize_reduction(s, tensor, width: int):
    """Accumulate the single-axis reduction ``tensor`` as ``width`` partial results per output
    element, in vector lanes, then reduce those in ``tensor`` itself.

    The reduction axis is split by ``width`` and its inner part made a
    data-parallel axis of a new stage (``rfactor``), last, vectorized below the remaining
    reduction: one element at a time, a row of 768 waits on 768 dependent additions; in vectors
    of 8 lanes, on 96. Where ``width`` does not divide the axis, the last group of lanes is
    partial, the lanes past the end guarded. Returns the new stage's tensor, computed at the
    root: place it (and ``tensor``) as the schedule needs. A ``tensor`` of several reduction
    axes, or a ``width`` that is not a positive int, is a ValueError."""
    axes = s[tensor].op.reduce_axis
    if len(axes) != 1:
        raise ValueError(f"vectorize_reduction: {tensor.op.name!r} reduces over {len(axes)} axes, "
                         "not one")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"vectorize_reduction: width must be a positive int, got {width!r}")
    _, lane = s[tensor].split(axes[0], factor=width)
    partial = s.rfactor(tensor, lane, factor_axis=len(s[tensor].op.axis))
    *outer, lane = s[partial].op.axis
    s[partial].reorder(*outer, *s[partial].op.reduce_axis, lane)
    s[partial].vectorize(lane)
    return partial
