"""Lowering a tensorized stage (:meth:`Stage.tensorize`): the loop nest from the tensorized
axis inward becomes the statement of a tensor intrinsic, as TVM's ``MakeTensorize``.

1. *Regions.* With the loops outside the axis fixed and those inside it relaxed over their
   ranges, every root axis of the stage covers a range (``out_dom``) and every input tensor a
   region, all expressions of the outer loop variables.
2. *Matching.* The stage's body, its axes renamed to the intrinsic's (the last ones; leading
   axes must cover one value) and its inputs' indices taken relative to their regions, must
   simplify to the intrinsic's body, with the same dtypes and extents.
3. *Binding.* Each buffer of the intrinsic is bound to the region of its tensor in the buffer
   that holds it: ``elem_offset`` becomes the region's offset, symbolic strides and shapes the
   region's; constant ones must agree with them.
4. *Placement.* Without reduction loops outside the axis the intrinsic's ``body`` runs in the
   outer loops. Otherwise its ``reduce_reset`` runs before the outer reduction loops and its
   ``reduce_update`` inside them; without a reset, ``body`` runs at their first iteration and
   ``reduce_update`` at the others.
"""

from __future__ import annotations

from ..arith import Analyzer, expr_key
from ..errors import ScheduleError
from ..te.tensor import Tensor
from ..tir.analysis import post_order_visit, substitute, uses_var
from ..tir.buffer import Buffer
from ..tir.builtin import PRAGMA_PREFIX
from ..tir.expr import (
    EQ,
    IterType,
    Max,
    Min,
    PrimExpr,
    ProducerLoad,
    Reduce,
    StringImm,
    Var,
    all_of,
    is_const_int,
)
from ..tir.functor import IRMutator
from ..tir.indexing import as_index
from ..tir.stmt import AttrStmt, IfThenElse, Stmt, seq
from .loop_nest import LoopNestContext, RebindBuffers, bind_buffer

__all__ = ["tensorize_stmt"]


def tensorize_stmt(ctx: LoopNestContext, tloc: int) -> Stmt:
    """The statement of stage ``ctx.stage``, whose leaf ``tloc`` is tensorized."""
    return _Tensorize(ctx, tloc).stmt()


class _Tensorize:
    def __init__(self, ctx: LoopNestContext, tloc: int):
        self.ctx, self.st, self.tloc = ctx, ctx.stage, tloc
        self.info = ctx.bounds
        self.op = self.st.op
        self.leaves = self.st.leaf_iter_vars
        self.axis = self.leaves[tloc]
        self.intrin = self.st.iter_attrs[self.axis].tensor_intrin
        self.an = Analyzer()
        for iv in self.leaves:
            self.an.bind(iv.var, (self.info.loop_min[iv],
                                  self.info.loop_min[iv] + self.info.extent[iv] - 1))
        inner = self.leaves[tloc:]
        self.inner_vars = {iv.var for iv in inner}
        self.relax = {iv.var: self._loop_range(iv) for iv in inner}
        self.values = {r.var: self.info.value[r] for r in self.op.root_iter_vars}

    def _loop_range(self, iv) -> tuple[PrimExpr, PrimExpr]:
        lo = self.info.loop_min[iv]
        return lo, self.an.simplify(lo + self.info.extent[iv] - 1)

    def fail(self, what: str) -> ScheduleError:
        return ScheduleError(f"stage {self.op.name!r}, axis {self.axis.var.name!r}: tensorize with "
                             f"{self.intrin.name!r}: {what}")

    # ------------------------------------------------------------------ regions

    def _range(self, expr: PrimExpr, what: str) -> tuple[PrimExpr, PrimExpr]:
        """``(min, extent)`` of ``expr`` (in leaf loop variables) over the tensorized loops."""
        lo, hi = self.an.interval(expr, self.relax)
        if lo is None or hi is None:
            raise self.fail(f"cannot bound {what} over the tensorized loops")
        return lo, self.an.simplify(hi - lo + 1)

    def out_dom(self) -> dict:
        return {r: self._range(self.info.value[r], f"axis {r.var.name!r}")
                for r in self.op.root_iter_vars}

    def inputs(self) -> list:
        """The tensors the stage's body reads, in order of first use (as ``ComputeOp.input_tensors``)."""
        found: dict[Tensor, None] = {}

        def visit(node):
            if isinstance(node, ProducerLoad):
                found.setdefault(node.producer)

        for body in self.info.bodies:
            post_order_visit(body, visit)
        return list(found)

    def in_regions(self, inputs: list) -> dict:
        """Per input (by position): one ``(min, extent)`` per dimension, the union over its reads."""
        loads: dict = {k: [] for k in range(len(inputs))}
        index = {t: k for k, t in enumerate(inputs)}

        def visit(node):
            if isinstance(node, ProducerLoad):
                loads[index[node.producer]].append(node)

        for body in self.info.bodies:
            post_order_visit(body, visit)
        regions = {}
        for k, t in enumerate(inputs):
            dims = []
            for d in range(t.ndim):
                los, his = [], []
                for load in loads[k]:
                    lo, ext = self._range(substitute(load.indices[d], self.values),
                                          f"dimension {d} of the reads of {t.name!r}")
                    los.append(lo)
                    his.append(lo + ext)
                lo, hi = los[0], his[0]
                for a, b in zip(los[1:], his[1:]):
                    lo, hi = _min(lo, a), _max(hi, b)
                dims.append((self.an.simplify(lo), self.an.simplify(hi - lo)))
            regions[k] = dims
        return regions

    # ------------------------------------------------------------------ matching

    def match(self, out_dom: dict, inputs: list, regions: dict) -> dict:
        """Check the stage's body against the intrinsic's; returns the bindings of the intrinsic's
        symbolic reduction extents."""
        iop = self.intrin.op
        if len(inputs) != len(self.intrin.inputs):
            raise self.fail(f"the loop nest reads {len(inputs)} tensors ("
                            + ", ".join(repr(t.name) for t in inputs)
                            + f"), the intrinsic {len(self.intrin.inputs)} ("
                            + ", ".join(repr(t.name) for t in self.intrin.inputs) + ")")
        if iop.num_outputs != self.op.num_outputs:
            raise self.fail(f"the stage computes {self.op.num_outputs} outputs, the intrinsic "
                            f"{iop.num_outputs}")
        vmap: dict = {}
        bound: dict = {}
        intrin_an = Analyzer()
        for iv in self.leaves[:self.tloc]:  # the loops outside, which the remapped body keeps
            intrin_an.bind(iv.var, self._loop_range(iv))
        for ours, theirs, kind in ((self.op.axis, iop.axis, "axis"),
                                   (self.op.reduce_axis, iop.reduce_axis, "reduction axis")):
            if len(ours) < len(theirs):
                raise self.fail(f"the intrinsic has {len(theirs)} {kind} dimensions, the stage only "
                                f"{len(ours)}")
            start = len(ours) - len(theirs)
            for i, r in enumerate(ours):
                lo, ext = out_dom[r]
                if i < start:
                    if not is_const_int(ext, 1):
                        raise self.fail(f"{kind} {r.var.name!r} covers {ext} values inside the tensorized "
                                        f"loops, but the intrinsic has no {kind} for it (only "
                                        f"{len(theirs)}): it must cover one value")
                    vmap[r.var] = lo
                    continue
                t = theirs[i - start]
                want = t.dom.extent
                if isinstance(want, Var):
                    bound[want] = ext
                elif not self.an.can_prove_equal(ext, want):
                    raise self.fail(f"{kind} {r.var.name!r} covers {ext} values inside the tensorized loops, "
                                    f"the intrinsic's {kind} {t.var.name!r} has extent {want}")
                vmap[r.var] = as_index(t.var, r.var.dtype) + lo
                intrin_an.bind(t.var, t.dom)
        remap = _Remap(vmap, inputs, self.intrin.inputs, regions, self.fail)
        for k, (mine, theirs) in enumerate(zip(self.info.bodies, iop.bodies, strict=True)):
            if mine.dtype != theirs.dtype:
                raise self.fail(f"output {k} is {mine.dtype}, the intrinsic's is {theirs.dtype}")
            problem = _compare(mine, theirs, remap, intrin_an)
            if problem:
                raise self.fail(f"the loop nest does not compute what the intrinsic declares: {problem}")
        return bound

    # ------------------------------------------------------------------ binding

    def bind(self, ib: Buffer, actual: Buffer, mins, region: list, tensor_name: str, vmap: dict) -> Buffer:
        """``ib`` (an intrinsic's buffer) as a view of ``region`` of ``actual`` (which holds
        the tensor from ``mins`` on); records its symbolic strides, shape and offset in ``vmap``."""
        return bind_buffer(ib, actual, mins, region, tensor_name, vmap, self.an, self.fail)

    # ------------------------------------------------------------------ the statement

    def stmt(self) -> Stmt:
        ctx, st, info, op, tloc = self.ctx, self.st, self.info, self.op, self.tloc
        if not hasattr(op, "axis"):
            raise self.fail("only te.compute stages can be tensorized")
        for iv in self.leaves[tloc:]:
            for child in ctx.attached(iv):
                raise self.fail(f"stage {child.op.name!r} is computed at axis {iv.var.name!r}, inside the "
                                "tensorized loops; compute it at an axis outside them")
        for cond, _ in info.guards:
            if uses_var(cond, self.inner_vars):
                raise self.fail(f"the loop nest checks {cond} inside the tensorized loops: the splits "
                                "below the axis must divide their axes")
        out_dom = self.out_dom()
        inputs = self.inputs()
        regions = self.in_regions(inputs)
        vmap = dict(self.match(out_dom, inputs, regions))  # the intrinsic's symbolic sizes -> ours
        mapping = {}
        for k, t in enumerate(inputs):
            ib = self.intrin.buffers[k]
            actual, mins = ctx.buffer(t)
            if actual is None:
                raise self.fail(f"tensor {t.name!r} is read but is neither an argument nor computed by the "
                                "schedule; add it to the argument list")
            if ib.dtype != t.dtype:
                raise self.fail(f"buffer {ib.name!r} is {ib.dtype}, tensor {t.name!r} is {t.dtype}")
            mapping[ib.data] = self.bind(ib, actual, mins, regions[k], t.name, vmap)
        out_region = [out_dom[r] for r in op.axis]
        n_in = len(inputs)
        for k in range(op.num_outputs):
            ib = self.intrin.buffers[n_in + k]
            actual, mins = ctx.buffer(op.output(k))
            mapping[ib.data] = self.bind(ib, actual, mins, out_region, op.output(k).name, vmap)
        inputs_data = {self.intrin.buffers[k].data for k in range(n_in)}

        # The loops of the tensorized axes are gone; code they import stays with the intrinsic.
        imports = [attr.pragmas["import_llvm"] for iv in self.leaves[tloc:]
                   if (attr := st.iter_attrs.get(iv)) is not None and "import_llvm" in attr.pragmas]

        def bound(s: Stmt | None) -> Stmt | None:
            if s is None:
                return None
            s = substitute(RebindBuffers(mapping, inputs_data).visit(s), vmap)
            for code in imports:
                s = AttrStmt(self.axis.var, PRAGMA_PREFIX + "import_llvm", StringImm(code), s)
            return s

        return self._place(bound)

    def _place(self, bound) -> Stmt:
        info, tloc, leaves = self.info, self.tloc, self.leaves
        intrin = self.intrin
        spatial = [c for c, red in info.guards if not red]
        reduce_ = [c for c, red in info.guards if red]
        store = self.ctx.store_predicate(lambda e: substitute(e, self.values))
        for c in store:
            if uses_var(c, self.inner_vars):
                raise self.fail(f"the store predicate {c} depends on loops inside the tensorized nest")
        first_reduce = next((k for k, iv in enumerate(leaves) if iv.iter_type is IterType.COMM_REDUCE),
                            len(leaves))
        outer = leaves[:tloc]
        if not self.op.reduce_axis or tloc <= first_reduce:
            if intrin.body is None:
                raise self.fail("the tensorized loops cover the whole reduction, but the intrinsic has no "
                                "body (fcompute returned None for it)")
            stmt = _guard(bound(intrin.body), spatial + store + reduce_)
            return self._loops(outer, stmt)
        if intrin.reduce_update is None:
            names = ", ".join(iv.var.name for iv in outer if iv.iter_type is IterType.COMM_REDUCE)
            raise self.fail(f"reduction loops ({names}) stay outside the tensorized loops, but the "
                            "intrinsic has no reduce_update: return (body, reduce_reset, reduce_update) "
                            "from fcompute")
        update = bound(intrin.reduce_update)
        if intrin.reduce_init is not None:
            init = _guard(bound(intrin.reduce_init), spatial + store)
            init_nest = [iv for iv in outer[first_reduce:] if iv.iter_type is not IterType.COMM_REDUCE]
            init = self._loops(init_nest, init, place=False)
            stmt = self._loops(outer[first_reduce:], _guard(update, spatial + store + reduce_))
            return self._loops(outer[:first_reduce], seq(init, stmt))
        if intrin.body is None:
            raise self.fail("the intrinsic has neither a reduce_reset nor a body to start the reduction with")
        first = [EQ(iv.var, info.loop_min[iv], "bool") for iv in outer[first_reduce:]
                 if iv.iter_type is IterType.COMM_REDUCE]
        body = IfThenElse(all_of(*first), bound(intrin.body), update)
        return self._loops(outer, _guard(body, spatial + store + reduce_))

    def _loops(self, ivs: list, body: Stmt, place: bool = True) -> Stmt:
        """``body`` inside the loops of ``ivs`` (outermost first), with the stages attached to them."""
        for iv in reversed(ivs):
            if place:
                body = self.ctx.place(self.ctx.attached(iv), body)
            body = self.ctx.loop(iv, body)
        return body


class _Remap(IRMutator):
    """The stage's body in the intrinsic's terms: its axes renamed, its inputs read as the
    intrinsic's placeholders, relative to the regions bound to them."""

    def __init__(self, vmap: dict, inputs: list, intrin_inputs: list, regions: dict, fail):
        self.vmap = vmap
        self.index = {t: k for k, t in enumerate(inputs)}
        self.intrin_inputs, self.regions, self.fail = intrin_inputs, regions, fail

    def visit_Var(self, node: Var):
        return self.vmap.get(node, node)

    def visit_ProducerLoad(self, node: ProducerLoad):
        indices = [self.visit(i) for i in node.indices]
        k = self.index[node.producer]
        target = self.intrin_inputs[k]
        region = self.regions[k]
        start = len(indices) - target.ndim
        if start < 0:
            raise self.fail(f"tensor {node.producer.name!r} has {len(indices)} dimensions, the intrinsic's "
                            f"input {target.name!r} {target.ndim}")
        for d in range(start):
            if not is_const_int(region[d][1], 1):
                raise self.fail(f"the region of {node.producer.name!r} spans {region[d][1]} values in "
                                f"dimension {d}, which the intrinsic's input {target.name!r} does not have")
        shifted = tuple(i - as_index(region[d][0], i.dtype) for d, i in enumerate(indices) if d >= start)
        return ProducerLoad(target, shifted, node.dtype, node.lanes)



def _compare(mine: PrimExpr, want: PrimExpr, remap: _Remap, an: Analyzer) -> str:
    """What differs between the stage's body ``mine`` (remapped) and the intrinsic's ``want``
    ("" if nothing). Reductions compare their combiner, then sources and condition."""
    if isinstance(mine, Reduce) != isinstance(want, Reduce):
        return (f"the stage computes {'a reduction' if isinstance(mine, Reduce) else 'no reduction'}, "
                f"the intrinsic {'a reduction' if isinstance(want, Reduce) else 'none'}")
    if isinstance(mine, Reduce):
        if mine.combiner is not want.combiner and mine.combiner != want.combiner:
            return f"the stage reduces with {mine.combiner.label}, the intrinsic with {want.combiner.label}"
        if mine.value_index != want.value_index or len(mine.all_sources) != len(want.all_sources):
            return "the reduced tuples differ"
        if mine.init or want.init:
            return "a reduction with init= cannot be tensorized"
        pairs = list(zip(mine.all_sources, want.all_sources)) + [(mine.condition, want.condition)]
    else:
        pairs = [(mine, want)]
    for a, b in pairs:
        a, b = an.simplify(remap.visit(a)), an.simplify(b)
        if expr_key(a) != expr_key(b):
            return f"the stage computes {a}, the intrinsic {b}"
    return ""


def _min(a, b):
    return Min(a, b, a.dtype)


def _max(a, b):
    return Max(a, b, a.dtype)


def _guard(stmt: Stmt, conds: list) -> Stmt:
    conds = [c for c in conds if not is_const_int(c, 1)]
    return IfThenElse(all_of(*conds), stmt) if conds else stmt
