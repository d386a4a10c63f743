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
    IntImm,
    IterVar,
    Max,
    Min,
    PrimExpr,
    ProducerLoad,
    Range,
    Var,
    const,
    is_const_int,
)
from ..tir.functor import IRMutator
from .schedule import Schedule, Stage

__all__ = ["StageBounds", "infer_bounds", "inline_bodies", "loop_context", "storage_scope"]


@dataclass
class StageBounds:
    """What bound inference knows about one stage."""

    stage: Stage
    bodies: tuple  # one per output, inlined producers substituted
    root_range: dict = field(default_factory=dict)  # root iv -> Range
    extent: dict = field(default_factory=dict)  # iv -> extent, every iter var
    loop_min: dict = field(default_factory=dict)  # leaf iv -> first value of its loop
    value: dict = field(default_factory=dict)  # root iv -> its value in terms of leaf loop vars
    offset: dict = field(default_factory=dict)  # iv -> 0-based position in terms of leaf vars
    guards: list = field(default_factory=list)  # (condition, involves_reduction)
    factor: dict = field(default_factory=dict)  # split -> its inner extent (int if constant)
    scope: str = "global"  # where its buffer lives: the stage's scope, or the inferred one

    @property
    def body(self) -> PrimExpr:
        """The first output's body (a reduction's, for every output of a tuple reduction)."""
        return self.bodies[0]


class _Inline(IRMutator):
    memoize = True

    def __init__(self, sch: Schedule, bodies: dict):
        self.sch, self.bodies = sch, bodies

    def visit_ProducerLoad(self, node: ProducerLoad):
        indices = tuple(self.visit(i) for i in node.indices)
        stage = self.sch[node.producer]
        if stage.attach_type == "inline":
            op = stage.op
            body = self.bodies[stage][node.producer.value_index]
            return substitute(body, {iv.var: i for iv, i in zip(op.axis, indices)})
        if any(a is not b for a, b in zip(indices, node.indices)):
            return ProducerLoad(node.producer, indices, node.dtype, node.lanes)
        return node


def inline_bodies(sch: Schedule) -> dict[Stage, tuple]:
    """The bodies of every compute stage (one per output) with inlined producers
    substituted (by stage)."""
    bodies: dict[Stage, tuple] = {}
    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            bodies[st] = tuple(_Inline(sch, bodies).visit(b) for b in st.op.bodies)
    return bodies


def loop_context(sch: Schedule) -> dict[Stage, list[IterVar]]:
    """For each stage, the loops of other stages that enclose it, outermost first."""
    prefix: dict[Stage, list[IterVar]] = {}

    def of(st: Stage, chain: tuple = ()) -> list[IterVar]:
        if st in prefix:
            return prefix[st]
        if st.attach_type != "scope":
            prefix[st] = []
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
        prefix[st] = result
        return result

    for st in sch.stages:
        if not isinstance(st.op, PlaceholderOp) and st.attach_type != "inline":
            of(st)
    return prefix


def _derive_loops(info: StageBounds, analyzer: Analyzer) -> None:
    """Extents of every iter var, leaf loop ranges, root values and split guards."""
    st = info.stage
    op = st.op
    roots = list(op.root_iter_vars)
    root_set = set(roots)
    for r in roots:
        info.extent[r] = info.root_range[r].extent
    on_threads = any(attr.bind is not None for attr in st.iter_attrs.values())
    for rel in st.relations:
        rel.derive_extents(info, analyzer, on_threads)
    # Leaf loops: a root axis that is itself a loop runs over its own range (its loop variable
    # is its value); derived loops run from 0.
    for iv in st.leaf_iter_vars:
        if iv in root_set:
            info.loop_min[iv] = info.root_range[iv].min
            info.offset[iv] = analyzer.simplify(iv.var - info.root_range[iv].min)
        else:
            info.loop_min[iv] = const(0, iv.var.dtype)
            info.offset[iv] = iv.var
    for rel in reversed(st.relations):
        rel.derive_offsets(info)
    for r in roots:
        if any(r is leaf for leaf in st.leaf_iter_vars):
            info.value[r] = r.var
        else:
            info.value[r] = analyzer.simplify(info.root_range[r].min + info.offset[r])
    for iv in st.leaf_iter_vars:
        lo = info.loop_min[iv]
        analyzer.bind(iv.var, Range(lo, info.extent[iv]))


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
    attr = owner.iter_attrs.get(iv)
    return attr.bind.thread_tag if attr is not None and attr.bind is not None else ""


def storage_scope(stage: Stage, enclosing: list[IterVar], owner: dict) -> str:
    """The scope of ``stage``'s buffer: the one it was given, else the one its place implies.

    ``enclosing`` lists the loops around the stage (its attach path), ``owner`` maps
    each loop to the stage that owns it. As in TVM, the innermost kind of thread axis
    among them decides: under ``threadIdx``/``vthread`` each thread needs its own copy
    (``local``), under ``blockIdx`` only one per block (``shared``), elsewhere ``global``.
    """
    if stage.scope:
        return stage.scope
    rank = -1
    for iv in enclosing:
        trank = _thread_rank(_bound_tag(iv, owner[iv]))
        if trank is not None:
            rank = max(rank, trank)
    return _SCOPE_OF_THREAD_RANK[rank]


def _relax_map(ctx: list[IterVar], start: int, infos: dict, owner: dict, scope: str,
               analyzer: Analyzer) -> tuple[dict, dict]:
    """How the loops of ``ctx`` vary over the region a buffer of ``scope`` must hold.

    Returns ``(relax, back)``. ``relax`` maps each loop variable to the inclusive range it
    takes (for :meth:`Analyzer.interval`): every loop from ``start`` on, and the enclosing
    loops bound to thread axes that share a buffer of ``scope``, over their whole range;
    a fixed loop whose start depends on a relaxed loop to that start plus a fixed offset
    (a fresh variable; ``back`` maps it to the offset in the loop's own terms).
    """
    relax: dict = {}
    back: dict = {}
    rank = _SCOPE_RANK.get(scope, 0)
    for k, iv in enumerate(ctx):
        info = infos[owner[iv]]
        lo = info.loop_min[iv]
        ext = info.extent[iv]
        if k >= start:
            relax[iv.var] = (lo, lo + ext - 1)
            continue
        trank = _thread_rank(_bound_tag(iv, owner[iv]))
        if trank is not None and trank >= rank:
            relax[iv.var] = (lo, lo + ext - 1)
        elif not is_const_int(lo) and any(v in relax for v in free_vars(lo)):
            if is_const_int(ext, 1):
                relax[iv.var] = (lo, lo)
                continue
            off = Var(f"{iv.var.name}.offset", iv.var.dtype)
            analyzer.bind(off, Range(const(0, iv.var.dtype), ext))
            relax[iv.var] = (lo + off, lo + off)
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
    """Run bound inference; returns (bounds by stage, loop context by stage)."""
    bodies = inline_bodies(sch)
    prefix = loop_context(sch)
    infos: dict[Stage, StageBounds] = {}
    owner: dict[IterVar, Stage] = {}  # every leaf loop -> its stage
    active = [st for st in sch.stages if not isinstance(st.op, PlaceholderOp) and st.attach_type != "inline"]
    for st in active:
        for iv in st.leaf_iter_vars:
            owner[iv] = st
    for st in reversed(active):
        if not isinstance(st.op, ComputeOp):  # a scan (its time loop) or an extern op (no loops)
            info = StageBounds(st, ())
            for iv in st.op.root_iter_vars:
                info.root_range[iv] = iv.dom
            _derive_loops(info, analyzer)
            infos[st] = info
            continue
        info = StageBounds(st, bodies[st], scope=storage_scope(st, prefix[st], owner))
        op = st.op
        for iv in op.reduce_axis:
            info.root_range[iv] = iv.dom
        if st.attach_type == "scope":
            regions = _region_needed(st, info.scope, sch, active, infos, prefix, owner, analyzer)
            step = _scan_step(st)
            if step is not None:  # an update: the step of the time loop it runs in
                regions[0] = Range(step, const(1, step.dtype))
            for iv, rng in zip(op.axis, regions):
                info.root_range[iv] = rng if rng is not None else iv.dom
            for iv in op.axis:
                rng = info.root_range[iv]
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
                info.root_range[iv] = iv.dom
        _derive_loops(info, analyzer)
        # Guards were written in terms of the root variables; express them in loop variables.
        info.guards = [(substitute(c, {r.var: info.value[r] for r in op.root_iter_vars}), red)
                       for c, red in info.guards]
        infos[st] = info
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
    my_prefix = prefix[st]
    ndim = len(st.op.axis)
    lows: list[list] = [[] for _ in range(ndim)]
    highs: list[list] = [[] for _ in range(ndim)]
    for reader in active:
        if reader is st or reader not in infos:
            continue
        reads = [r for body in infos[reader].bodies for r in _reads_of(body, sch, st)]
        if not reads:
            continue
        ctx = prefix[reader] + list(reader.leaf_iter_vars)
        if len(ctx) < len(my_prefix) or any(a is not b for a, b in zip(ctx, my_prefix)):
            raise ScheduleError(
                f"stage {st.op.name!r} is computed at axis {st.attach_ivar.var.name!r} of "
                f"{st.attach_stage.op.name!r}, but stage {reader.op.name!r} also reads it outside "
                "that loop; compute it at a loop that encloses all of its readers")
        rinfo = infos[reader]
        relax, back = _relax_map(ctx, len(my_prefix), infos, owner, scope, analyzer)
        values = {r.var: rinfo.value[r] for r in reader.op.root_iter_vars}
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
        if not lows[d] or any(x is None for x in lows[d] + highs[d]):
            # No reader, or an index the analyzer cannot bound (such as a fused axis divided
            # by a symbolic size): the whole dimension, as TVM's CoverRange falls back to.
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
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a if a.value <= b.value else b
    return Min(a, b, a.dtype)


def _max(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a if a.value >= b.value else b
    return Max(a, b, a.dtype)
