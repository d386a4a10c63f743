"""Bound inference: the range of every loop and the region of every intermediate buffer.

Stages are visited consumers first. A stage computed at the top level covers its
whole domain; a stage computed at (``s[A]``, ``iv``) covers the union of the
regions that its readers need inside that loop: the loops outside the attach
point (up to and including ``iv``) are fixed, every loop inside it is relaxed
over its range.

GPU memory scopes change what "fixed" means, as in TVM (``NeedRelax`` in its
``bound.cc``): a loop bound to a thread axis is relaxed when the buffer is shared by
the threads of that axis. A ``shared`` buffer computed under ``threadIdx``/``vthread``
loops holds what the whole block needs (relaxed over those axes, fixed over
``blockIdx``); a ``global`` one what the whole grid needs; a ``local`` one what its
own thread needs. A stage whose scope was never set gets it from the thread axes
around it: ``local`` under a ``threadIdx``/``vthread`` loop, ``shared`` under
``blockIdx`` loops only, ``global`` elsewhere (:func:`storage_scope`).

A loop outside the attach point that is fixed may still start at a value that depends
on a relaxed one (a stage computed at a thread loop covers that thread's part, and its
own loops start there); its value is then that start plus a fixed offset, and the
relaxation goes through the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arith import Analyzer
from ..errors import ScheduleError
from ..te.tensor import ComputeOp, PlaceholderOp
from ..tir.analysis import free_vars, post_order_visit, substitute
from ..tir.expr import (
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    ProducerLoad,
    Range,
    Var,
    const,
    is_const_int,
)
from ..tir.functor import IRMutator
from ..tir.indexing import widen
from .schedule import Fuse, Schedule, Split, Stage

__all__ = ["StageBounds", "infer_bounds", "inline_bodies", "loop_context", "storage_scope"]


@dataclass
class StageBounds:
    """What bound inference knows about one stage."""

    stage: Stage
    bodies: tuple  # one per output, inlined producers substituted
    root_range: dict = field(default_factory=dict)  # id(root iv) -> Range
    extent: dict = field(default_factory=dict)  # id(iv) -> extent, every iter var
    loop_min: dict = field(default_factory=dict)  # id(leaf iv) -> first value of its loop
    value: dict = field(default_factory=dict)  # id(root iv) -> its value in terms of leaf loop vars
    offset: dict = field(default_factory=dict)  # id(iv) -> 0-based position in terms of leaf vars
    guards: list = field(default_factory=list)  # (condition, involves_reduction)
    factor: dict = field(default_factory=dict)  # id(split) -> its inner extent (int if constant)
    scope: str = "global"  # where its buffer lives: the stage's scope, or the inferred one

    @property
    def body(self) -> PrimExpr:
        """The first output's body (a reduction's, for every output of a tuple reduction)."""
        return self.bodies[0]


class _Inline(IRMutator):
    def __init__(self, sch: Schedule, bodies: dict):
        self.sch, self.bodies = sch, bodies

    def visit_ProducerLoad(self, node: ProducerLoad):
        indices = tuple(self.visit(i) for i in node.indices)
        stage = self.sch[node.producer]
        if stage.attach_type == "inline":
            op = stage.op
            body = self.bodies[id(stage)][node.producer.value_index]
            return substitute(body, {iv.var: i for iv, i in zip(op.axis, indices)})
        if any(a is not b for a, b in zip(indices, node.indices)):
            return ProducerLoad(node.producer, indices, node.dtype)
        return node


def inline_bodies(sch: Schedule) -> dict[int, tuple]:
    """The bodies of every compute stage (one per output) with inlined producers
    substituted (by id(stage))."""
    bodies: dict[int, tuple] = {}
    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            bodies[id(st)] = tuple(_Inline(sch, bodies).visit(b) for b in st.op.bodies)
    return bodies


def loop_context(sch: Schedule) -> dict[int, list[IterVar]]:
    """For each stage, the loops of other stages that enclose it, outermost first."""
    prefix: dict[int, list[IterVar]] = {}

    def of(st: Stage, chain: tuple = ()) -> list[IterVar]:
        if id(st) in prefix:
            return prefix[id(st)]
        if st.attach_type != "scope":
            prefix[id(st)] = []
            return []
        parent, iv = st.attach_stage, st.attach_ivar
        if parent.attach_type == "inline":
            raise ScheduleError(f"stage {st.op.name!r} is computed at {parent.op.name!r}, which is inlined")
        pos = next((k for k, v in enumerate(parent.leaf_iter_vars) if v is iv), None)
        if pos is None:
            raise ScheduleError(
                f"stage {st.op.name!r} is computed at axis {iv.var.name!r} of {parent.op.name!r}, "
                "which is no longer a loop of that stage (it was split or fused afterwards)")
        result = of(parent) + parent.leaf_iter_vars[:pos + 1]
        prefix[id(st)] = result
        return result

    for st in sch.stages:
        if not isinstance(st.op, PlaceholderOp) and st.attach_type != "inline":
            of(st)
    return prefix


def _ceil_div(a: PrimExpr, b: int, analyzer: Analyzer) -> PrimExpr:
    if is_const_int(a):
        return const(-(-a.value // b), a.dtype)
    return analyzer.simplify(FloorDiv(a + (b - 1), const(b, a.dtype), a.dtype))


def _narrow(e: PrimExpr, dtype: str) -> PrimExpr:
    if e.dtype == dtype:
        return e
    return const(e.value, dtype) if is_const_int(e) else Cast(dtype, e)


def _derive_loops(info: StageBounds, analyzer: Analyzer) -> None:
    """Extents of every iter var, leaf loop ranges, root values and split guards."""
    st = info.stage
    op = st.op
    roots = list(op.root_iter_vars)
    root_ids = {id(r) for r in roots}
    for r in roots:
        info.extent[id(r)] = info.root_range[id(r)].extent
    on_threads = any(attr.bind is not None for attr in st.iter_attrs.values())
    for rel in st.relations:
        if isinstance(rel, Split):
            ext = info.extent[id(rel.parent)]
            if rel.factor is not None:
                f = rel.factor
                if is_const_int(ext) and f >= ext.value and not on_threads:
                    # One outer iteration: the inner loop runs over the parent's range alone,
                    # with no guard and no iterations past its end. (Loops bound to GPU
                    # threads keep the factor: every stage of a kernel binds one extent.)
                    f = ext.value
                info.extent[id(rel.inner)] = const(f, ext.dtype)
                info.extent[id(rel.outer)] = _ceil_div(ext, f, analyzer)
            else:
                # Over a symbolic extent the inner extent is symbolic too: ceil(extent / nparts).
                info.extent[id(rel.outer)] = const(rel.nparts, ext.dtype)
                f = _ceil_div(ext, rel.nparts, analyzer)
                info.extent[id(rel.inner)] = f
                if is_const_int(f):
                    f = f.value
            info.factor[id(rel)] = f
        elif isinstance(rel, Fuse):
            dt = rel.fused.var.dtype  # wide enough for the product (Stage.fuse chose it)
            info.extent[id(rel.fused)] = analyzer.simplify(
                widen(info.extent[id(rel.outer)], dt) * widen(info.extent[id(rel.inner)], dt))
    # Leaf loops: a root axis that is itself a loop runs over its own range (its loop variable
    # is its value); derived loops run from 0.
    for iv in st.leaf_iter_vars:
        if id(iv) in root_ids:
            info.loop_min[id(iv)] = info.root_range[id(iv)].min
            info.offset[id(iv)] = analyzer.simplify(iv.var - info.root_range[id(iv)].min)
        else:
            info.loop_min[id(iv)] = const(0, iv.var.dtype)
            info.offset[id(iv)] = iv.var
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            f = info.factor[id(rel)]
            info.offset[id(rel.parent)] = info.offset[id(rel.outer)] * f + info.offset[id(rel.inner)]
            ext = info.extent[id(rel.parent)]
            # The loops cover outer * inner iterations: with nparts=4 over 9, inner is 3 and
            # 4 * 3 = 12 > 9 although 3 divides 9.
            outer_ext = info.extent[id(rel.outer)]
            divisible = (is_const_int(ext) and isinstance(f, int) and is_const_int(outer_ext)
                         and outer_ext.value * f == ext.value)
            if not divisible:
                info.guards.append((info.offset[id(rel.parent)] < ext,
                                    rel.parent.iter_type is IterType.COMM_REDUCE))
        elif isinstance(rel, Fuse):
            fused = info.offset[id(rel.fused)]
            inner_ext = widen(info.extent[id(rel.inner)], fused.dtype)
            outer = FloorDiv(fused, inner_ext, fused.dtype) if not is_const_int(inner_ext, 1) else fused
            inner = FloorMod(fused, inner_ext, fused.dtype) if not is_const_int(inner_ext, 1) \
                else const(0, fused.dtype)
            # Each part counts in its own dtype again (narrower where the fused one was widened).
            info.offset[id(rel.outer)] = _narrow(outer, rel.outer.var.dtype)
            info.offset[id(rel.inner)] = _narrow(inner, rel.inner.var.dtype)
    for r in roots:
        if any(r is leaf for leaf in st.leaf_iter_vars):
            info.value[id(r)] = r.var
        else:
            info.value[id(r)] = analyzer.simplify(info.root_range[id(r)].min + info.offset[id(r)])
    for iv in st.leaf_iter_vars:
        lo = info.loop_min[id(iv)]
        analyzer.bind(iv.var, Range(lo, info.extent[id(iv)]))


# How widely a storage scope is shared (TVM's StorageRank) and how widely a thread axis
# runs (its ThreadScope rank): a buffer of scope rank r computed inside a loop bound to a
# thread axis of rank >= r holds the region of every iteration of that loop.
_SCOPE_RANK = {"global": 0, "shared": 1, "local": 3}
_SCOPE_OF_THREAD_RANK = {-1: "global", 0: "shared", 1: "local"}


def _thread_rank(tag: str) -> int | None:
    if tag.startswith("blockIdx."):
        return 0
    if tag.startswith("threadIdx.") or tag == "vthread":
        return 1
    return None


def _bound_tag(iv: IterVar, owner: Stage) -> str:
    attr = owner.iter_attrs.get(id(iv))
    return attr.bind.thread_tag if attr is not None and attr.bind is not None else ""


def storage_scope(stage: Stage, enclosing: list[IterVar], owner: dict) -> str:
    """The scope of ``stage``'s buffer: the one it was given, else the one its place implies.

    ``enclosing`` lists the loops around the stage (its attach path), ``owner`` maps
    ``id(loop)`` to the stage that owns it. As in TVM, the innermost kind of thread axis
    among them decides: under ``threadIdx``/``vthread`` each thread needs its own copy
    (``local``), under ``blockIdx`` only one per block (``shared``), elsewhere ``global``.
    """
    if stage.scope:
        return stage.scope
    rank = -1
    for iv in enclosing:
        trank = _thread_rank(_bound_tag(iv, owner[id(iv)]))
        if trank is not None:
            rank = max(rank, trank)
    return _SCOPE_OF_THREAD_RANK[rank]


def _relax_map(ctx: list[IterVar], start: int, infos: dict, owner: dict, scope: str,
               analyzer: Analyzer) -> tuple[dict, dict]:
    """How the loops of ``ctx`` vary over the region a buffer of ``scope`` must hold.

    Returns ``(relax, back)``. ``relax`` maps ``id(loop var)`` to the inclusive range it
    takes (for :meth:`Analyzer.interval`): every loop from ``start`` on, and the enclosing
    loops bound to thread axes that share a buffer of ``scope``, over their whole range;
    a fixed loop whose start depends on a relaxed loop to that start plus a fixed offset
    (a fresh variable; ``back`` maps it to the offset in the loop's own terms).
    """
    relax: dict = {}
    back: dict = {}
    rank = _SCOPE_RANK.get(scope, 0)
    for k, iv in enumerate(ctx):
        info = infos[id(owner[id(iv)])]
        lo = info.loop_min[id(iv)]
        ext = info.extent[id(iv)]
        if k >= start:
            relax[id(iv.var)] = (lo, lo + ext - 1)
            continue
        trank = _thread_rank(_bound_tag(iv, owner[id(iv)]))
        if trank is not None and trank >= rank:
            relax[id(iv.var)] = (lo, lo + ext - 1)
        elif not is_const_int(lo) and any(id(v) in relax for v in free_vars(lo)):
            if is_const_int(ext, 1):
                relax[id(iv.var)] = (lo, lo)
                continue
            off = Var(f"{iv.var.name}.offset", iv.var.dtype)
            analyzer.bind(off, Range(const(0, iv.var.dtype), ext))
            relax[id(iv.var)] = (lo + off, lo + off)
            back[off] = iv.var - lo
    return relax, back


def _reads_of(body: PrimExpr, sch: Schedule, stage: Stage) -> list[tuple]:
    reads = []

    def visit(node):
        if isinstance(node, ProducerLoad) and sch[node.producer] is stage:
            reads.append(node.indices)

    post_order_visit(body, visit)
    return reads


def infer_bounds(sch: Schedule, analyzer: Analyzer) -> tuple[dict, dict]:
    """Run bound inference; returns (bounds by id(stage), loop context by id(stage))."""
    bodies = inline_bodies(sch)
    prefix = loop_context(sch)
    infos: dict[int, StageBounds] = {}
    owner: dict[int, Stage] = {}
    active = [st for st in sch.stages if not isinstance(st.op, PlaceholderOp) and st.attach_type != "inline"]
    for st in active:
        for iv in st.leaf_iter_vars:
            owner[id(iv)] = st
    for st in reversed(active):
        if not isinstance(st.op, ComputeOp):  # a scan (its time loop) or an extern op (no loops)
            info = StageBounds(st, ())
            for iv in st.op.root_iter_vars:
                info.root_range[id(iv)] = iv.dom
            _derive_loops(info, analyzer)
            infos[id(st)] = info
            continue
        info = StageBounds(st, bodies[id(st)], scope=storage_scope(st, prefix[id(st)], owner))
        op = st.op
        for iv in op.reduce_axis:
            info.root_range[id(iv)] = iv.dom
        if st.attach_type == "scope":
            regions = _region_needed(st, info.scope, sch, active, infos, prefix, owner, analyzer)
            step = _scan_step(st)
            if step is not None:  # an update: the step of the time loop it runs in
                regions[0] = Range(step, const(1, step.dtype))
            for iv, rng in zip(op.axis, regions):
                info.root_range[id(iv)] = rng if rng is not None else iv.dom
            for iv in op.axis:
                rng = info.root_range[id(iv)]
                if rng is not iv.dom:
                    lo_ok = analyzer.can_prove(rng.min >= iv.dom.min)
                    hi_ok = analyzer.can_prove(rng.min + rng.extent <= iv.dom.min + iv.dom.extent)
                    value = iv.var  # rewritten in loop variables below
                    if not lo_ok:
                        info.guards.append((value >= iv.dom.min, False))
                    if not hi_ok:
                        info.guards.append((value < iv.dom.min + iv.dom.extent, False))
        else:
            for iv in op.axis:
                info.root_range[id(iv)] = iv.dom
        _derive_loops(info, analyzer)
        # Guards were written in terms of the root variables; express them in loop variables.
        info.guards = [(substitute(c, {r.var: info.value[id(r)] for r in op.root_iter_vars}), red)
                       for c, red in info.guards]
        infos[id(st)] = info
    return infos, prefix


def _scan_step(st: Stage):
    """The time loop's variable if ``st`` computes an update of the scan it belongs to."""
    scan = st.scan_stage
    if scan is None or not any(t.op is st.op for t in scan.op.update):
        return None
    return scan.op.scan_axis.var


def _region_needed(st: Stage, scope: str, sch: Schedule, active: list, infos: dict, prefix: dict,
                   owner: dict, analyzer: Analyzer) -> list:
    """The union, per dimension, of what the readers of ``st`` need inside its attach point,
    for a buffer of ``scope``."""
    my_prefix = prefix[id(st)]
    ndim = len(st.op.axis)
    lows: list[list] = [[] for _ in range(ndim)]
    highs: list[list] = [[] for _ in range(ndim)]
    for reader in active:
        if reader is st or id(reader) not in infos:
            continue
        reads = [r for body in infos[id(reader)].bodies for r in _reads_of(body, sch, st)]
        if not reads:
            continue
        ctx = prefix[id(reader)] + list(reader.leaf_iter_vars)
        if len(ctx) < len(my_prefix) or any(a is not b for a, b in zip(ctx, my_prefix)):
            raise ScheduleError(
                f"stage {st.op.name!r} is computed at axis {st.attach_ivar.var.name!r} of "
                f"{st.attach_stage.op.name!r}, but stage {reader.op.name!r} also reads it outside "
                "that loop; compute it at a loop that encloses all of its readers")
        rinfo = infos[id(reader)]
        relax, back = _relax_map(ctx, len(my_prefix), infos, owner, scope, analyzer)
        values = {r.var: rinfo.value[id(r)] for r in reader.op.root_iter_vars}
        for indices in reads:
            for d, idx in enumerate(indices):
                lo, hi = analyzer.interval(substitute(idx, values), relax)
                if back:
                    lo = None if lo is None else substitute(lo, back)
                    hi = None if hi is None else substitute(hi, back)
                lows[d].append(lo)
                highs[d].append(hi)
    result = []
    for d in range(ndim):
        if not lows[d]:
            result.append(None)
            continue
        lo, hi = lows[d][0], highs[d][0]
        for x in lows[d][1:]:
            lo = _min(lo, x)
        for x in highs[d][1:]:
            hi = _max(hi, x)
        lo = analyzer.simplify(lo)
        result.append(Range(lo, analyzer.simplify(hi - lo + 1)))
    return result


def _min(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    from ..tir.expr import Min

    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a if a.value <= b.value else b
    return Min(a, b, a.dtype)


def _max(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    from ..tir.expr import Max

    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a if a.value >= b.value else b
    return Max(a, b, a.dtype)
