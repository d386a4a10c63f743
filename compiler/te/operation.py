"""Building tensor expressions: placeholders, computations, axes and variables."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .. import dtypes
from ..arith import Analyzer, simplify
from ..errors import CompilerError
from ..tir.analysis import post_order_visit
from ..tir.buffer import Buffer, decl_buffer
from ..tir.expr import (
    EQ,
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    ProducerLoad,
    Range,
    Reduce,
    Var,
    const,
    convert,
)
from ..tir.indexing import index_dtype, widen
from ..tir.stmt import Evaluate, Stmt
from .tag import current_tag
from .tensor import ComputeOp, ExternOp, PlaceholderOp, ScanOp, Tensor, TensorSlice

__all__ = ["placeholder", "compute", "reduce_axis", "var", "size_var", "thread_axis", "scan", "extern"]


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
            attrs: dict | None = None, varargs_names=None) -> Tensor | tuple[Tensor, ...]:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    When ``fcompute`` returns a tuple, the operation has one output per element and
    ``compute`` returns the tuple of tensors (``B0, B1 = te.compute(...)``), which one
    loop nest computes together; a tuple reduction (``te.comm_reducer``) gives one
    output per reduced value.

    The lambda's parameter names name the axes; ``lambda *i:`` (or ``lambda n, *rest:``)
    takes one index per remaining dimension, named ``i0, i1, ...`` or by ``varargs_names``.
    A lambda with fewer parameters than the shape has dimensions must return a slice of a
    tensor indexed in as many leading dimensions (``lambda i: A[i]``): the remaining
    dimensions index the rest of it. A reduction (``te.sum`` and friends) may only appear
    as the whole body. Inside ``te.tag_scope`` the scope gives the tag. The axes count in
    int64 when a size is 64-bit or a constant shape has 2**30 elements or more (see
    :mod:`compiler.tir.indexing`).
    """
    shape = _shape(shape)
    tag = current_tag(tag, name)
    names, given = _axis_names(fcompute, len(shape), name, varargs_names)
    if index_dtype(shape) == "int64":
        axis = tuple(IterVar(Range(const(0, "int64"), widen(s)), Var(n, "int64"))
                     for n, s in zip(names, shape))
    else:
        axis = tuple(IterVar(Range(const(0, s.dtype), s), Var(n, s.dtype)) for n, s in zip(names, shape))
    body = fcompute(*[iv.var for iv in axis[:given]])
    from .tensor_intrin import TensorIntrinCall  # it builds on this module

    if isinstance(body, TensorIntrinCall):
        op = ComputeOp(name, axis, body.bodies(name, axis[given:]), tag, attrs, shape=shape,
                       intrin_call=(body.intrin, given))
        return op.output(0)
    if given < len(axis):
        body = _expand_slice(body, axis[given:], name, given, len(axis))
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


def _axis_names(fcompute: Callable, ndim: int, name: str, varargs_names) -> tuple[list[str], int]:
    """The names of the axes, from ``fcompute``'s parameters, and how many indices it takes
    (fewer than ``ndim`` when it returns a tensor slice; see :func:`_expand_slice`)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: one index per dimension
        return [f"i{k}" for k in range(ndim)], ndim
    P = inspect.Parameter
    bad = [p.name for p in params if p.kind in (P.KEYWORD_ONLY, P.VAR_KEYWORD) or
           (p.kind is not P.VAR_POSITIONAL and p.default is not P.empty)]
    if bad:
        raise CompilerError(f"compute {name!r}: the function's parameters {bad} have defaults or are "
                            "keywords; it takes one index per dimension")
    positional = [p.name for p in params if p.kind is not P.VAR_POSITIONAL]
    varargs = len(positional) != len(params)
    if not varargs:
        if len(positional) > ndim:
            raise CompilerError(f"compute {name!r}: the function takes {len(positional)} indices but the "
                                f"shape has {ndim} dimensions")
        return positional + [f"ax{k}" for k in range(ndim - len(positional))], len(positional)
    rest = ndim - len(positional)
    if rest < 0:
        raise CompilerError(f"compute {name!r}: the function takes at least {len(positional)} indices but "
                            f"the shape has {ndim} dimensions")
    if varargs_names is not None:
        varargs_names = list(varargs_names)
        if len(varargs_names) != rest:
            raise CompilerError(f"compute {name!r}: {len(varargs_names)} varargs_names for the {rest} "
                                "dimensions that *indices covers")
        return positional + varargs_names, ndim
    return positional + [f"i{k}" for k in range(rest)], ndim


def _expand_slice(body, rest: tuple, name: str, given: int, ndim: int):
    """The body of a compute whose function took only the leading ``given`` indices: it
    must return a tensor slice missing exactly the remaining dimensions, which ``rest`` index."""
    if not isinstance(body, TensorSlice) or len(body.indices) + len(rest) != body.tensor.ndim:
        raise CompilerError(f"compute {name!r}: the function takes {given} indices but the shape has "
                            f"{ndim} dimensions; take one index per dimension (or *indices), or return "
                            f"a tensor slice indexed in {given} fewer dimensions than the tensor has")
    return body[tuple(iv.var for iv in rest)]


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


# ---------------------------------------------------------------------------- scan


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "",
         attrs: dict | None = None):
    """A recurrence over the first (time) axis, as TVM's ``te.scan``.

    ``state_placeholder`` is a ``te.placeholder`` of the whole state ``(steps, ...)``;
    ``init`` computes its first ``init_len`` steps (shape ``(init_len, ...)``) and
    ``update`` (shape ``(steps, ...)``) step ``t`` from earlier steps, read as
    ``state[t - 1, ...]``. Give lists of each for several states (one output each).
    ``inputs`` lists the tensors the step reads besides the states: the stages
    between them and the updates are computed inside the time loop. The result is
    the state after every step (a list of them for several states); ``result.op.scan_axis``
    is the time loop.
    """
    tag = current_tag(tag, name)
    init, update, states = (_tensor_list(x, what) for x, what in
                            ((init, "init"), (update, "update"), (state_placeholder, "state_placeholder")))
    inputs = _tensor_list(inputs or [], "inputs")
    if not (len(init) == len(update) == len(states)) or not init:
        raise CompilerError(f"scan {name!r}: give as many init, update and state_placeholder tensors "
                            f"(got {len(init)}, {len(update)} and {len(states)})")
    an = Analyzer()
    for k, (i, u, st) in enumerate(zip(init, update, states)):
        where = f"scan {name!r}, state {k}"
        if not isinstance(st.op, PlaceholderOp):
            raise CompilerError(f"{where}: the state must be a te.placeholder, got {st.op.name!r}")
        if not isinstance(i.op, ComputeOp) or not isinstance(u.op, ComputeOp):
            raise CompilerError(f"{where}: init and update must be te.compute tensors")
        if not (i.ndim == u.ndim == st.ndim) or st.ndim < 1:
            raise CompilerError(f"{where}: init, update and state need the same number of dimensions "
                                f"(time first), got {i.ndim}, {u.ndim} and {st.ndim}")
        if not (i.dtype == u.dtype == st.dtype):
            raise CompilerError(f"{where}: init, update and state need one dtype, got {i.dtype}, "
                                f"{u.dtype} and {st.dtype}")
        for d in range(st.ndim):
            if not _same_extent(an, u.shape[d], st.shape[d]):
                raise CompilerError(f"{where}: the update's shape {u.shape} differs from the state's "
                                    f"{st.shape} in dimension {d}")
            if d and not _same_extent(an, i.shape[d], st.shape[d]):
                raise CompilerError(f"{where}: the init's shape {i.shape} differs from the state's "
                                    f"{st.shape} in dimension {d}")
        if not _same_extent(an, i.shape[0], init[0].shape[0]) or not _same_extent(an, st.shape[0],
                                                                                  states[0].shape[0]):
            raise CompilerError(f"{where}: every state needs the same number of steps and of initial steps")
    for u in update:
        _check_reads_earlier_steps(u, states, name)
    init_len, steps = init[0].shape[0], states[0].shape[0]
    if an.can_prove(init_len >= steps):
        raise CompilerError(f"scan {name!r}: the init covers {init_len} steps of {steps}; nothing is left "
                            "to update")
    dtype = steps.dtype
    axis = IterVar(Range(widen(init_len, dtype) if init_len.dtype != dtype else init_len,
                         an.simplify(steps - init_len)), Var(f"{name}.idx", dtype), IterType.ORDERED)
    op = ScanOp(name, axis, tuple(init), tuple(update), tuple(states), tuple(inputs), tag, attrs)
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def _tensor_list(x, what: str) -> list:
    items = [x] if isinstance(x, Tensor) else list(x) if isinstance(x, (list, tuple)) else None
    if items is None or not all(isinstance(t, Tensor) for t in items):
        raise CompilerError(f"{what} must be a tensor or a list of tensors, got {x!r}")
    return items


def _same_extent(an, a, b) -> bool:
    a, b = convert(a), convert(b)
    return a is b or an.can_prove(EQ(a, b if b.dtype == a.dtype else b.astype(a.dtype), "bool"))


def _check_reads_earlier_steps(update: Tensor, states: list, name: str) -> None:
    """Refuse an update that reads its state at its own step or later (no value exists yet)."""
    op = update.op
    if not isinstance(op, ComputeOp):
        return
    t = op.axis[0].var
    state_ops = {s.op for s in states}

    def visit(node):
        if isinstance(node, ProducerLoad) and node.producer.op in state_ops:
            ahead = simplify(node.indices[0] - t)
            if isinstance(ahead, IntImm) and ahead.value >= 0:
                raise CompilerError(f"scan {name!r}: update {op.name!r} reads state "
                                    f"{node.producer.name!r} at step {node.indices[0]}, which is not "
                                    "computed yet; read earlier steps (t - 1)")

    for body in op.bodies:
        post_order_visit(body, visit)


# ---------------------------------------------------------------------------- extern


def extern(shape, inputs, fcompute: Callable, name: str = "extern", dtype=None, in_buffers=None,
           out_buffers=None, tag: str = "", attrs: dict | None = None):
    """Tensors computed by a statement, as TVM's ``te.extern``.

    ``shape`` is the output's shape (or a list of shapes, one per output); ``inputs``
    lists the tensors it reads. ``fcompute(ins, outs)`` receives one buffer per input
    and per output and returns the statement (or call) that fills the outputs, typically
    ``compiler.tir.call_packed("name", ins[0], outs[0])`` of a function registered with
    :func:`compiler.register_func`, or ``te.call_extern`` of a C function. ``dtype``
    defaults to the first input's. Returns the tensor, or a list for several outputs.
    """
    shapes = [shape] if isinstance(shape, (int, PrimExpr)) or (
        isinstance(shape, (list, tuple)) and (not shape or not isinstance(shape[0], (list, tuple)))) \
        else list(shape)
    shapes = [_shape(s) for s in shapes]
    tag = current_tag(tag, name)
    inputs = _tensor_list(inputs, f"extern {name!r}: inputs")
    if dtype is None:
        if not inputs:
            raise CompilerError(f"extern {name!r}: give dtype= (there is no input to take it from)")
        dtype = inputs[0].dtype
    dtypes_ = [dtype] * len(shapes) if isinstance(dtype, str) else list(dtype)
    if len(dtypes_) != len(shapes):
        raise CompilerError(f"extern {name!r}: {len(dtypes_)} dtypes for {len(shapes)} outputs")
    ins = _extern_buffers(in_buffers, [(t.shape, t.dtype, t.name) for t in inputs],
                          f"extern {name!r}: in_buffers")
    outs = _extern_buffers(out_buffers, [(s, d, name if len(shapes) == 1 else f"{name}.v{k}")
                                         for k, (s, d) in enumerate(zip(shapes, dtypes_))],
                           f"extern {name!r}: out_buffers")
    body = fcompute(ins, outs)
    if isinstance(body, PrimExpr):
        body = Evaluate(body)
    if not isinstance(body, Stmt):
        raise CompilerError(f"extern {name!r}: fcompute must return a statement or a call, got {body!r}")
    op = ExternOp(name, tuple(inputs), tuple(ins), tuple(outs), body, tag, attrs)
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def _extern_buffers(given, specs: list, what: str) -> list:
    """The buffers ``fcompute`` sees: those given (checked against ``specs``) or new compact ones."""
    if given is None:
        return [decl_buffer(s, d, n) for s, d, n in specs]
    given = list(given)
    if len(given) != len(specs):
        raise CompilerError(f"{what}: {len(given)} buffers for {len(specs)} tensors")
    for b, (s, d, n) in zip(given, specs):
        if not isinstance(b, Buffer) or b.dtype != d or len(b.shape) != len(s):
            raise CompilerError(f"{what}: buffer {b!r} does not match tensor {n!r} "
                                f"({d}, {len(s)} dimensions)")
    return given
