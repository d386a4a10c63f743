"""Building tensor expressions: placeholders, computations, axes and variables."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .. import dtypes
from ..errors import CompilerError
from ..tir.analysis import post_order_visit
from ..tir.expr import IterType, IterVar, PrimExpr, Range, Reduce, Var, const, convert
from ..tir.indexing import index_dtype, widen
from .tensor import ComputeOp, PlaceholderOp, Tensor

__all__ = ["placeholder", "compute", "reduce_axis", "var", "size_var", "thread_axis"]


def _shape(shape) -> tuple:
    """The shape as integer expressions. Python floats with an integral value are cast
    to int, as TVM does (``(N / bn, K, bn)`` in Python 3 gives a float)."""
    if isinstance(shape, (int, float, PrimExpr)):
        shape = (shape,)
    out = []
    for s in shape:
        if isinstance(s, float):
            if not s.is_integer():
                raise CompilerError(f"shape entries must be integers, got {s!r}")
            s = int(s)
        e = convert(s)
        if dtypes.is_float(e.dtype) or e.dtype == "bool":
            raise CompilerError(f"shape entries must be integers, got {e} of dtype {e.dtype}")
        if isinstance(s, int) and s < 0:
            raise CompilerError(f"shape entries must not be negative, got {s}")
        out.append(e)
    return tuple(out)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` (ints or symbolic ``var``s) and ``dtype``."""
    return PlaceholderOp(name, _shape(shape), dtype).output(0)


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A symbolic scalar, typically a size bound when the compiled function is called.

    Index arithmetic over a size is done in the size's dtype: the runtime refuses
    arrays of 2**30 elements or more for int32 sizes (see :mod:`compiler.tir.indexing`);
    declare ``var(name, "int64")`` for larger ones.
    """
    return Var(name, dtypes.check(dtype))


size_var = var


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom``, given as ``(begin, end)`` or a Range.

    The axis counts in int64 over a 64-bit domain (see :mod:`compiler.tir.indexing`).
    """
    rng = _range(dom, name)
    if index_dtype([rng.min, rng.extent]) == "int64":
        rng = Range(widen(rng.min), widen(rng.extent))
    return IterVar(rng, Var(name, rng.extent.dtype if rng.extent.dtype != "bool" else "int32"),
                   IterType.COMM_REDUCE)


def _range(dom, name: str) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = convert(dom[0]), convert(dom[1])
        from ..arith import simplify

        return Range(lo, simplify(hi - lo))
    raise CompilerError(f"axis {name!r}: domain must be (begin, end) or a Range, got {dom!r}")


def thread_axis(dom=None, tag: str = "", name: str = "") -> IterVar:
    """A GPU thread axis: ``thread_axis("threadIdx.x")`` or ``thread_axis((0, 4), "vthread")``."""
    if isinstance(dom, str):
        tag, dom = dom, None
    if not tag:
        raise CompilerError("thread_axis needs a tag such as 'blockIdx.x', 'threadIdx.y' or 'vthread'")
    valid = ("blockIdx.", "threadIdx.", "vthread")
    if not tag.startswith(valid):
        raise CompilerError(f"unknown thread tag {tag!r}; "
                            "expected blockIdx.x/y/z, threadIdx.x/y/z or vthread")
    rng = None if dom is None else _range(dom, tag)
    return IterVar(rng, Var(name or tag), IterType.THREAD_INDEX, tag)


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Tensor | tuple[Tensor, ...]:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    When ``fcompute`` returns a tuple, the operation has one output per element and
    ``compute`` returns the tuple of tensors (``B0, B1 = te.compute(...)``), which one
    loop nest computes together; a tuple reduction (``te.comm_reducer``) gives one
    output per reduced value.

    The lambda's parameter names name the axes. A reduction (``te.sum`` and
    friends) may only appear as the whole body. The axes count in int64 when a size
    is 64-bit or a constant shape has 2**30 elements or more (see :mod:`compiler.tir.indexing`).
    """
    shape = _shape(shape)
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
        if len(names) != len(shape):
            raise CompilerError(
                f"compute {name!r}: the function takes {len(names)} indices but the shape has "
                f"{len(shape)} dimensions"
            )
    if index_dtype(shape) == "int64":
        axis = tuple(IterVar(Range(const(0, "int64"), widen(s)), Var(n, "int64"))
                     for n, s in zip(names, shape))
    else:
        axis = tuple(IterVar(Range(const(0, s.dtype), s), Var(n, s.dtype)) for n, s in zip(names, shape))
    body = fcompute(*[iv.var for iv in axis])
    if isinstance(body, (list, tuple)):
        if not body:
            raise CompilerError(f"compute {name!r}: the function returned an empty tuple")
        bodies = tuple(convert(b) for b in body)
    else:
        bodies = (convert(body),)
    for b in bodies:
        _check_reduce_top_level(b, name)
    _check_multi_output(bodies, name)
    op = ComputeOp(name, axis, bodies, tag, attrs, shape=shape)
    if op.num_outputs == 1:
        return op.output(0)
    return tuple(op.output(k) for k in range(op.num_outputs))


def _check_reduce_top_level(body: PrimExpr, name: str) -> None:
    nested = []

    def visit(node):
        if isinstance(node, Reduce) and node is not body:
            nested.append(node)

    post_order_visit(body, visit)
    if nested:
        raise CompilerError(
            f"compute {name!r}: a reduction must be the whole body of a compute; "
            "compute it in a stage of its own and combine the results in another"
        )


def _check_multi_output(bodies: tuple, name: str) -> None:
    """The outputs of one compute are all plain values, or together one tuple reduction
    (the elements of one ``te.comm_reducer`` call, in order)."""
    if len(bodies) == 1:
        first = bodies[0]
        if isinstance(first, Reduce) and len(first.all_sources) != 1:
            raise CompilerError(f"compute {name!r}: a tuple reduction of {len(first.all_sources)} values "
                                "gives as many outputs; return all of them (a tuple)")
        return
    reductions = [isinstance(b, Reduce) for b in bodies]
    if not any(reductions):
        return
    first = bodies[0]
    same = all(reductions) and all(
        b.combiner is first.combiner and b.sources is first.sources and b.value_index == k
        for k, b in enumerate(bodies))
    if not same or len(first.all_sources) != len(bodies):
        raise CompilerError(f"compute {name!r}: the outputs of a compute with a reduction must be "
                            "the elements of one tuple reduction (all that one te.comm_reducer call "
                            "returns, in order)")
