"""Primitives that rewrite the operation graph: cache_read, cache_write, rfactor.

They replace a stage's operation by a new one with the same axes, so that the
axes users hold (``C.op.axis``) stay valid; ``s[old_tensor]`` keeps naming the
stage.
"""

from __future__ import annotations

import dataclasses

from ..errors import ScheduleError
from ..te.tensor import ComputeOp, Tensor
from ..tir.analysis import substitute
from ..tir.buffer import SCOPES
from ..tir.expr import (
    IntImm,
    IterType,
    IterVar,
    ProducerLoad,
    Range,
    Reduce,
    Select,
    UserReducer,
    Var,
    const,
)
from ..tir.functor import IRMutator
from ..tir.indexing import index_dtype, widen

# schedule.py imports this module before it defines its classes (Schedule's methods call
# these functions), so its names are looked up when these functions run.
from . import schedule

__all__ = ["cache_read", "cache_write", "rfactor"]


class _RedirectLoads(IRMutator):
    """Point loads of one output of a stage at another tensor."""

    def __init__(self, sch: schedule.Schedule, stage: schedule.Stage, value_index: int, target: Tensor):
        self.sch, self.stage, self.value_index, self.target = sch, stage, value_index, target

    def visit_ProducerLoad(self, node: ProducerLoad):
        indices = tuple(self.visit(i) for i in node.indices)
        producer = node.producer
        if (producer in self.sch and self.sch[producer] is self.stage
                and producer.value_index == self.value_index):
            return ProducerLoad(self.target, indices, node.dtype, node.lanes)
        if any(a is not b for a, b in zip(indices, node.indices)):
            return ProducerLoad(node.producer, indices, node.dtype, node.lanes)
        return node


def _check_scope(scope: str, what: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(f"{what}: unknown scope {scope!r}; use one of {SCOPES}")


def cache_read(sch: schedule.Schedule, tensor: Tensor, scope: str, readers) -> Tensor:
    """Copy ``tensor`` into a ``scope`` buffer and make ``readers`` read the copy."""
    source = sch[tensor]
    _check_scope(scope, f"cache_read of {source.op.name!r}")
    if isinstance(readers, (Tensor, schedule.Stage)) or hasattr(readers, "input_tensors"):
        readers = [readers]
    reader_stages = [r if isinstance(r, schedule.Stage) else sch[r] for r in readers]
    if not reader_stages:
        raise ScheduleError(f"cache_read of {source.op.name!r}: give at least one reader")
    vi = tensor.value_index
    for r in reader_stages:
        if not isinstance(r.op, ComputeOp) or not any(
                sch[t] is source and t.value_index == vi for t in r.op.input_tensors):
            raise ScheduleError(f"cache_read of {tensor.name!r}: stage {r.op.name!r} does not "
                                "read it, so it cannot be one of its readers")
    data = source.op.output(vi)
    # Count as te.compute does: in int64 where the shape needs it (compiler.tir.indexing).
    wide = index_dtype(data.shape) == "int64"
    axis = tuple(IterVar(Range(const(0, "int64"), widen(s)), Var(f"ax{k}", "int64")) if wide
                 else IterVar(Range(const(0, s.dtype), s), Var(f"ax{k}", s.dtype))
                 for k, s in enumerate(data.shape))
    body = data[tuple(iv.var for iv in axis)] if axis else data[()]
    cache_op = ComputeOp(f"{data.name}.{scope}", axis, body)
    cache = sch.add_stage(cache_op, after=source)
    cache.scope = scope
    target = cache_op.output(0)
    for r in reader_stages:
        redirect = _RedirectLoads(sch, source, vi, target)
        new_bodies = tuple(redirect.visit(b) for b in r.op.bodies)
        sch.replace_op(r, ComputeOp(r.op.name, r.op.axis, new_bodies, r.op.tag, r.op.attrs),
                       reset_loops=False)
    return target


def cache_write(sch: schedule.Schedule, tensor, scope: str):
    """Compute ``tensor`` into a ``scope`` buffer; its stage then copies the result out.

    For an operation with several outputs give all of them (a list, as in TVM); the
    cache tensors come back in the same order.
    """
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    if not tensors:
        raise ScheduleError("cache_write needs a tensor")
    stage = sch[tensors[0]]
    if any(sch[t] is not stage for t in tensors) or sorted(t.value_index for t in tensors) != list(
            range(stage.op.num_outputs)):
        raise ScheduleError(f"cache_write of {stage.op.name!r}: give every output of the operation, "
                            "and only those")
    _check_scope(scope, f"cache_write of {stage.op.name!r}")
    op = stage.op
    if not isinstance(op, ComputeOp):
        raise ScheduleError(f"cache_write of {op.name!r}: it is a placeholder, nothing computes it")
    if stage.attach_type == "inline":
        raise ScheduleError(f"cache_write of {op.name!r}: the stage is inlined")
    if stage.relations or any(a.kind.value != "serial" or a.bind is not None
                              for a in stage.iter_attrs.values()):
        raise ScheduleError(f"cache_write of {op.name!r}: call cache_write before splitting, fusing "
                            "or annotating the stage's axes")
    new_axis = tuple(IterVar(iv.dom, Var(f"{iv.var.name}.c", iv.var.dtype), IterType.DATA_PAR)
                     for iv in op.axis)
    mapping = {iv.var: n.var for iv, n in zip(op.axis, new_axis)}
    cache_bodies = _substitute_bodies(op.bodies, mapping)
    cache_op = ComputeOp(f"{op.name}.{scope}", new_axis, cache_bodies, op.tag, op.attrs)
    cache = sch.add_stage(cache_op, before=stage)
    cache.scope = scope
    index = tuple(iv.var for iv in op.axis)
    copies = tuple(cache_op.output(k)[index] for k in range(op.num_outputs))
    sch.replace_op(stage, ComputeOp(op.name, op.axis, copies, op.tag, op.attrs), reset_loops=True)
    outputs = tuple(cache_op.output(t.value_index) for t in tensors)
    return outputs if isinstance(tensor, (list, tuple)) else outputs[0]


def _substitute_bodies(bodies: tuple, mapping: dict) -> tuple:
    """``bodies`` with ``mapping``'s variables replaced, in the reduction's parts that
    :func:`substitute` leaves alone as well: the extents of the reduction axes and a
    ``te.comm_reducer``'s combiner and identity, which may use the output's axes
    (``te.reduce_axis((0, i))``). Reduction axes that do not change keep their identity."""
    new_bodies = tuple(substitute(b, mapping) for b in bodies)
    if not isinstance(new_bodies[0], Reduce):
        return new_bodies
    axes = {}
    for iv in new_bodies[0].axis:
        dom = Range(substitute(iv.dom.min, mapping), substitute(iv.dom.extent, mapping))
        changed = dom.min is not iv.dom.min or dom.extent is not iv.dom.extent
        axes[iv] = IterVar(dom, iv.var, iv.iter_type, iv.thread_tag) if changed else iv
    out = []
    for r in new_bodies:
        combiner = r.combiner
        if isinstance(combiner, UserReducer):
            combiner = dataclasses.replace(
                combiner, result=tuple(substitute(e, mapping) for e in combiner.result),
                identity_element=tuple(substitute(e, mapping) for e in combiner.identity_element))
        out.append(dataclasses.replace(r, combiner=combiner, axis=tuple(axes[iv] for iv in r.axis)))
    return tuple(out)


def rfactor(sch: schedule.Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
    """Turn the reduction axis ``axis`` into a data-parallel axis of a new stage ``T.rf``
    holding partial results; ``T`` then reduces over that axis. For a tuple reduction
    (several outputs) the partial results are a tuple of tensors."""
    stage = sch[tensor]
    op = stage.op
    name = op.name
    if not isinstance(op, ComputeOp) or not isinstance(op.bodies[0], Reduce):
        raise ScheduleError(f"rfactor of {name!r}: the stage is not a reduction")
    if not any(v is axis for v in stage.leaf_iter_vars):
        raise ScheduleError(f"rfactor of {name!r}: axis {getattr(axis, 'var', axis)} is not a leaf "
                            "axis of the stage")
    if axis.iter_type is not IterType.COMM_REDUCE:
        raise ScheduleError(f"rfactor of {name!r}: axis {axis.var.name!r} is not a reduction axis")
    red: Reduce = op.bodies[0]
    root, rel = _reduce_root_of(stage, axis)
    if root is None:
        raise ScheduleError(f"rfactor of {name!r}: axis {axis.var.name!r} must be a reduction axis "
                            "or one part of a single split of one")
    extent_k = root.dom.extent  # constant or symbolic (a te.var size)
    kmin = root.dom.min
    dtype = root.var.dtype
    new_reduce: list[IterVar] = []
    v = Var(f"{axis.var.name}.v", dtype)
    if rel is None:  # the whole axis becomes data-parallel
        v_extent = extent_k
        k_value = kmin + v
        cond = const(True)
    else:  # axis is a part of root that rel made; rel says what else stays a reduction
        v_extent, others, offset, cond = rel.factor_reduction(axis, v, extent_k)
        new_reduce += others
        k_value = kmin + offset
    spatial = tuple(IterVar(iv.dom, Var(iv.var.name, iv.var.dtype)) for iv in op.axis)
    if not 0 <= factor_axis <= len(spatial):
        raise ScheduleError(f"rfactor of {name!r}: factor_axis must be in [0, {len(spatial)}]")
    v_iv = IterVar(Range(const(0, dtype), v_extent), v)
    rf_axis = spatial[:factor_axis] + (v_iv,) + spatial[factor_axis:]
    mapping = {iv.var: s.var for iv, s in zip(op.axis, spatial)}
    mapping[root.var] = k_value
    sources = tuple(substitute(x, mapping) for x in red.all_sources)
    condition = substitute(red.condition, mapping)
    if not _is_true(cond):
        condition = condition & cond
    remaining = tuple(a for a in red.axis if a is not root) + tuple(new_reduce)
    types = tuple(b.dtype for b in op.bodies)
    rf_op = ComputeOp(f"{name}.rf", rf_axis, _reduce_bodies(red.combiner, sources, remaining, condition,
                                                             types), op.tag, op.attrs)
    sch.add_stage(rf_op, before=stage)
    final_axis = IterVar(Range(const(0, dtype), v_extent),
                         Var(f"{axis.var.name}.v", dtype), IterType.COMM_REDUCE)
    idx = tuple(iv.var for iv in op.axis)
    idx = idx[:factor_axis] + (final_axis.var,) + idx[factor_axis:]
    partial = tuple(rf_op.output(k)[idx] for k in range(rf_op.num_outputs))
    # The partial results start from the identity; the final reduction (over the same axes as
    # the original) starts from the init= values, as in TVM.
    final = _reduce_bodies(red.combiner, partial, (final_axis,), const(True), types, red.init)
    sch.replace_op(stage, ComputeOp(name, op.axis, final, op.tag, op.attrs), reset_loops=True)
    outputs = tuple(rf_op.output(k) for k in range(rf_op.num_outputs))
    return outputs[0] if len(outputs) == 1 else outputs


def _reduce_bodies(combiner, sources: tuple, axes: tuple, condition, types: tuple, init: tuple = ()) -> tuple:
    """The bodies of a reduction of ``sources`` (one per output), starting from ``init``
    (the identity if empty); without axes left to reduce, the sources themselves where
    ``condition`` holds, else the identity."""
    if axes:
        if len(sources) == 1:
            return (Reduce(combiner, sources[0], axes, condition, types[0], init=init),)
        return tuple(Reduce(combiner, x, axes, condition, t, k, sources, init)
                     for k, (x, t) in enumerate(zip(sources, types)))
    if _is_true(condition):
        return sources
    return tuple(Select(condition, x, e, t)
                 for x, e, t in zip(sources, combiner.identities(types), types))


def _is_true(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _reduce_root_of(stage: schedule.Stage, axis: IterVar):
    """The root reduction axis ``axis`` comes from and the relation producing it (None if
    root); (None, None) where rfactor cannot factor ``axis``."""
    roots = stage.op.reduce_axis
    if any(r is axis for r in roots):
        return axis, None
    for rel in stage.relations:
        if rel.defines(axis):
            root = rel.reduce_root(roots)
            return (root, rel) if root is not None else (None, None)
    return None, None
