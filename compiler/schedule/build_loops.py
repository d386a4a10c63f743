"""From a schedule to a loop nest: the statements of every stage, placed where it is attached."""

from __future__ import annotations

from .. import dtypes
from ..arith import Analyzer
from ..errors import LoweringError, ScheduleError
from ..te.tensor import ComputeOp, ExternOp, ScanOp, Tensor
from ..tir.analysis import contains, free_vars, substitute
from ..tir.buffer import Buffer, decl_buffer
from ..tir.builtin import DOUBLE_BUFFER_SCOPE, PRAGMA_PREFIX, PREFETCH_SCOPE, SCAN_LOOP, sync_stmt
from ..tir.expr import (
    EQ,
    LT,
    Broadcast,
    BufferLoad,
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    ProducerLoad,
    Ramp,
    Reduce,
    StringImm,
    Var,
    all_of,
    const,
    expr_lanes,
    is_const_int,
)
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ..tir.stmt import Allocate, AttrStmt, BufferStore, For, ForKind, IfThenElse, LetStmt, Stmt, seq
from .bound import StageBounds, infer_bounds
from .loop_nest import LoopNestContext, RebindBuffers, bind_buffer, buffer_key
from .schedule import Schedule, Stage
from .tensorize import tensorize_stmt

__all__ = ["schedule_to_primfunc"]


class _ToBufferLoads(IRMutator):
    """Replace tensor reads by reads of the buffers that hold them, shifted by each region's start."""

    memoize = True

    def __init__(self, sch: Schedule, buffers: dict, mins: dict):
        self.sch, self.buffers, self.mins = sch, buffers, mins

    def visit_ProducerLoad(self, node: ProducerLoad):
        indices = [self.visit(i) for i in node.indices]
        key = buffer_key(self.sch, node.producer)
        buf = self.buffers.get(key)
        if buf is None:
            raise LoweringError(
                f"tensor {node.producer.name!r} is read but is neither an argument nor computed "
                "by the schedule; add it to the argument list")
        mins = self.mins.get(key)
        if mins is not None:
            indices = [i - m if not is_const_int(m, 0) else i for i, m in zip(indices, mins)]
        return BufferLoad(buf, tuple(indices), node.dtype, node.lanes)


def _tensor_buffer(shape, dtype: str, name: str, lanes_of: dict, strides=(), scope: str = "global") -> Buffer:
    """The buffer that holds a tensor of ``shape`` and ``dtype``. A tensor of a vector dtype
    (``float32x4``) is held as its elements' scalars, its lanes in a trailing dimension (the layout
    of TVM's arrays of that dtype); ``lanes_of`` records its data variable for :class:`_LaneIndex`."""
    base, lanes = dtypes.split_lanes(dtype)
    if lanes == 1:
        return decl_buffer(shape, dtype, name, strides=strides, scope=scope)
    if strides:
        strides = [*(st * lanes for st in strides), 1]
    buf = decl_buffer((*shape, lanes), base, name, strides=strides, scope=scope)
    lanes_of[buf.data] = lanes
    return buf


class _LaneIndex(IRMutator):
    """Complete the accesses to the buffers of vector-dtype tensors, which the loop nest indexes
    like their tensors: the lanes' dimension is a ``Ramp`` over all lanes, a vector access."""

    def __init__(self, lanes_of: dict):
        self.lanes_of = lanes_of

    def _lanes(self, buf: Buffer, indices: tuple) -> int | None:
        lanes = self.lanes_of.get(buf.data)
        return lanes if lanes is not None and len(indices) == len(buf.shape) - 1 else None

    @staticmethod
    def _ramp(indices: tuple, lanes: int) -> Ramp:
        dt = indices[0].dtype if indices else "int32"
        return Ramp(IntImm(0, dt), IntImm(1, dt), lanes, dt)

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        lanes = self._lanes(node.buffer, node.indices)
        if lanes is None:
            return node
        return BufferLoad(node.buffer, (*node.indices, self._ramp(node.indices, lanes)), node.dtype, lanes,
                          node.predicate)

    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        lanes = self._lanes(node.buffer, node.indices)
        if lanes is None:
            return node
        value = node.value
        width = expr_lanes(value)
        if width == 1:  # a scalar stored in every lane (a reduction's identity)
            value = Broadcast(value, lanes, value.dtype)
        elif width != lanes:
            raise LoweringError(f"a vector of {width} lanes is stored into {node.buffer.name!r}, whose "
                                f"elements have {lanes}")
        return BufferStore(node.buffer, value, (*node.indices, self._ramp(node.indices, lanes)),
                           node.predicate)


class _LoopBuilder:
    """Buffers and their regions' starts are filed by :func:`~.loop_nest.buffer_key`:
    ``(stage, output index)``."""

    def __init__(self, sch: Schedule, infos: dict, prefix: dict, buffers: dict, mins: dict,
                 allocated: set, analyzer: Analyzer):
        self.sch = sch
        self.infos = infos
        self.prefix = prefix
        self.buffers = buffers
        self.mins = mins
        self.allocated = allocated
        self.analyzer = analyzer
        self.children: dict[tuple[Stage, IterVar], list[Stage]] = {}  # by (stage, its loop)
        for st in sch.stages:
            if st in infos and st.attach_type == "scope":
                key = (st.attach_stage, st.attach_ivar)
                self.children.setdefault(key, []).append(st)

    def _with_allocs(self, stages: list[Stage], body: Stmt) -> Stmt:
        for st in reversed(stages):
            for k in reversed(range(st.op.num_outputs)):
                if (st, k) in self.allocated:
                    buf = self.buffers[(st, k)]
                    body = Allocate(buf, body)
                    if st.double_buffered:  # for inject_double_buffer (GPU lowering)
                        body = AttrStmt(buf.data, DOUBLE_BUFFER_SCOPE, const(1), body)
        return body

    def place(self, stages: list[Stage], rest: Stmt | None) -> Stmt:
        """The given producers' statements, then ``rest``, inside their allocations."""
        return self._with_allocs(stages, seq(*[self.stage_stmt(s) for s in stages], rest))

    def stage_stmt(self, st: Stage) -> Stmt:
        if isinstance(st.op, ScanOp):
            # Its init stages are roots placed before it; its body runs at every step.
            axis = st.op.scan_axis
            loop = self._loop(st, axis, self.place(self.children.get((st, axis), []), None))
            return AttrStmt(axis.var, SCAN_LOOP, const(1), loop)
        if isinstance(st.op, ExternOp):
            return self._extern_stmt(st)
        tloc = _tensorized_leaf(st)
        if tloc is not None:
            return tensorize_stmt(self._context(st), tloc)
        info: StageBounds = self.infos[st]
        op: ComputeOp = st.op
        values = {r.var: info.value[r] for r in op.root_iter_vars}
        to_buf = _ToBufferLoads(self.sch, self.buffers, self.mins)

        def lower_expr(e: PrimExpr) -> PrimExpr:
            return substitute(to_buf.visit(e), values)

        # One (buffer, index) per output; every output is stored at the same point.
        outs = []
        for k in range(op.num_outputs):
            mins = self.mins[(st, k)]
            outs.append((self.buffers[(st, k)],
                         tuple(lower_expr(iv.var - m if not is_const_int(m, 0) else iv.var)
                               for iv, m in zip(op.axis, mins))))
        spatial_guards = [c for c, red in info.guards if not red]
        reduce_guards = [c for c, red in info.guards if red]
        body = info.body
        leaves = st.leaf_iter_vars
        cross = self._cross_thread_leaf(st) if isinstance(body, Reduce) else None
        store_guards = self._store_predicate(st, lower_expr, cross)
        if isinstance(body, Reduce):
            if cross is not None:
                return self._cross_thread_stmt(st, cross, outs, lower_expr, spatial_guards,
                                               reduce_guards, store_guards)

            current = tuple(BufferLoad(buf, index, buf.dtype) for buf, index in outs)
            sources = tuple(lower_expr(x) for x in body.all_sources)
            cond = lower_expr(body.condition)
            update = _guard(_store_all(outs, body.combiner.combine_all(current, sources), st.op.name),
                            spatial_guards + store_guards + reduce_guards + [cond])
            # The reduction starts from its init= values where given (TVM's Reduce.init), else
            # from the combiner's identity.
            start = (tuple(lower_expr(x) for x in body.init) if body.init
                     else body.combiner.identities(tuple(b.dtype for b in info.bodies)))
            init = _guard(seq(*[BufferStore(buf, v, index) for (buf, index), v in zip(outs, start)]),
                          spatial_guards + store_guards)
            first_reduce = next((k for k, iv in enumerate(leaves)
                                 if iv.iter_type is IterType.COMM_REDUCE), len(leaves))
        else:
            update = _guard(seq(*[BufferStore(buf, lower_expr(b), index)
                                  for (buf, index), b in zip(outs, info.bodies)]),
                            spatial_guards + store_guards)
            init = None
            first_reduce = len(leaves)
        stmt = update
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            inner = self.place(self.children.get((st, iv), []), stmt)
            stmt = self._loop(st, iv, inner)
            if init is not None and k == first_reduce:
                stmt = seq(self._init_nest(st, leaves[k:], init), stmt)
        if init is not None and first_reduce == len(leaves):
            stmt = seq(init, stmt)  # a reduction with every reduce loop removed (extent 1)
        return stmt

    def _context(self, st: Stage) -> LoopNestContext:
        """The loop nest as the lowering of stage ``st`` elsewhere sees it."""
        return LoopNestContext(
            stage=st, bounds=self.infos[st], buffers=self.buffers, mins=self.mins,
            attached=lambda iv: self.children.get((st, iv), []), place=self.place,
            loop=lambda iv, body: self._loop(st, iv, body),
            store_predicate=lambda lower_expr: self._store_predicate(st, lower_expr, None))

    def _extern_stmt(self, st: Stage) -> Stmt:
        """An extern op's body, its buffers bound to those that hold its tensors (TVM's
        ``buffer_bind_scope``): a buffer declared with symbolic strides, shape or
        ``elem_offset`` (``in_buffers=``/``out_buffers=``) takes those of the tensor's buffer,
        which may itself be strided or offset (an argument bound to such a buffer, a stage
        with ``storage_align``)."""
        op: ExternOp = st.op
        pairs = [(ph, t) for ph, t in zip(op.input_placeholders, op.inputs)]
        pairs += [(ph, op.output(k)) for k, ph in enumerate(op.output_placeholders)]
        mapping, vmap = {}, {}

        def fail(what: str) -> LoweringError:
            return LoweringError(f"extern {op.name!r}: {what}")

        for ph, tensor in pairs:
            key = buffer_key(self.sch, tensor)
            buf = self.buffers.get(key)
            if buf is None:
                raise fail(f"it reads tensor {tensor.name!r}, which is neither an argument nor computed by "
                           "the schedule; add it to the argument list")
            mins = self.mins.get(key)
            if buf.scope != "global" or (mins is not None and not all(is_const_int(m, 0) for m in mins)):
                raise fail(f"tensor {tensor.name!r} must be whole, in global memory (compute it at the root)")
            region = [(const(0, d.dtype), d) for d in tensor.shape]
            mapping[ph.data] = bind_buffer(ph, buf, None, region, tensor.name, vmap, self.analyzer, fail)
        inputs = {ph.data for ph in op.input_placeholders}
        return substitute(RebindBuffers(mapping, inputs).visit(op.body), vmap)

    def _store_predicate(self, st: Stage, lower_expr, cross) -> list:
        """The stage's store predicate in terms of its loops (``[]`` without one).

        A thread axis in it stands for the loop around the stage bound to that thread
        axis (its position from the loop's start). Reduction loops cannot appear in it,
        but for the one bound to threadIdx.x of a reduction across threads (``cross``),
        whose result is stored after every thread has its part.
        """
        pred = st.store_predicate
        if pred is None:
            return []
        owners = self._loop_owners()
        by_tag = {}
        for iv in list(self.prefix.get(st, [])) + list(st.leaf_iter_vars):
            attr = owners[iv].iter_attrs.get(iv)
            if attr is not None and attr.bind is not None:
                lo = self.infos[owners[iv]].loop_min[iv]
                by_tag[attr.bind.thread_tag] = iv.var if is_const_int(lo, 0) else iv.var - lo
        threads = {}
        used = set(free_vars(pred))
        for other in self.sch.stages:
            for attr in other.iter_attrs.values():
                if attr.bind is None or attr.bind.var not in used:
                    continue
                tag = attr.bind.thread_tag
                if tag not in by_tag:
                    raise ScheduleError(f"stage {st.op.name!r}: the store predicate uses {tag}, but no "
                                        f"loop around the stage is bound to {tag}")
                threads[attr.bind.var] = by_tag[tag]
        pred = lower_expr(substitute(pred, threads))
        reduce_vars = {iv.var: iv.var.name for iv in (*st.op.reduce_axis, *st.leaf_iter_vars)
                       if iv.iter_type is IterType.COMM_REDUCE and iv is not cross}
        used = [reduce_vars[v] for v in free_vars(pred) if v in reduce_vars]
        if used:
            raise ScheduleError(f"stage {st.op.name!r}: the store predicate uses the reduction "
                                f"axis {used[0]!r}; a store predicate may only use the axes the "
                                "result is stored over and the thread axes around it")
        return [pred]

    def _loop_owners(self) -> dict[IterVar, Stage]:
        """The stage of every leaf loop of the stages being built."""
        return {iv: s for s in self.sch.stages if s in self.infos for iv in s.leaf_iter_vars}

    # ------------------------------------------------------------------ cross-thread reduction

    def _cross_thread_leaf(self, st: Stage):
        """The reduction leaf of ``st`` bound to threadIdx.x, if any."""
        for iv in st.leaf_iter_vars:
            attr = st.iter_attrs.get(iv)
            if iv.iter_type is IterType.COMM_REDUCE and attr is not None and attr.bind is not None:
                return iv
        return None

    def _cross_thread_stmt(self, st: Stage, tiv, outs: list, lower_expr,
                           spatial_guards: list, reduce_guards: list, store_guards: list) -> Stmt:
        """A reduction whose leaf ``tiv`` is bound to threadIdx.x, as a shared-memory tree.

        Every thread folds its share (the other reduction leaves, serial) into a local
        accumulator and stores it at ``red[tid]``; then ``log2(n)`` steps halve the live
        threads, ``red[tid] = combine(red[tid], red[tid + s])`` for ``tid < s``, with a
        barrier after each (a first step folds the tail in when ``n`` is not a power of
        two). Thread 0 writes ``red[0]`` to a global result; every thread writes it to a
        shared or local one, which other stages of the kernel then read in the same thread.
        The data-parallel leaves and ``tiv`` enclose the tree in their order (a serial
        data-parallel loop inside ``tiv`` runs one tree per iteration); the other
        reduction leaves go inside, around the serial part. A tuple reduction has one
        ``red`` and one ``acc`` buffer per value, combined together.
        """

        info: StageBounds = self.infos[st]
        red_body: Reduce = info.body
        if red_body.init:
            raise LoweringError(f"stage {st.op.name!r}: a reduction with init= cannot reduce across "
                                f"threads (axis {tiv.var.name!r} is bound to threadIdx.x); reduce it "
                                "in one thread, or compute the init in a stage of its own and add it")
        n = info.extent[tiv]
        n = self.analyzer.simplify(n)
        if not is_const_int(n):
            raise LoweringError(f"stage {st.op.name!r}: the reduction axis {tiv.var.name!r} bound to "
                                f"threadIdx.x needs a constant extent, got {n}")
        n = n.value
        types = tuple(b.dtype for b in info.bodies)
        combiner = red_body.combiner
        groups, group = self._reduction_groups(st, tiv)
        suffix = [""] if len(types) == 1 else [f".v{k}" for k in range(len(types))]
        reds = [decl_buffer((groups * n,), t, f"{st.op.name}.red{x}", scope="shared")
                for t, x in zip(types, suffix)]
        accs = [decl_buffer((1,), t, f"{st.op.name}.acc{x}", scope="local") for t, x in zip(types, suffix)]
        zero = const(0, "int32")
        tmin = info.loop_min[tiv]
        tid = tiv.var if is_const_int(tmin, 0) else tiv.var - tmin
        base = None if group is None else group * n
        sources = tuple(lower_expr(x) for x in red_body.all_sources)
        cond = lower_expr(red_body.condition)
        acc_at = [(acc, (zero,)) for acc in accs]
        acc_loads = tuple(BufferLoad(acc, (zero,), t) for acc, t in zip(accs, types))
        update = _guard(_store_all(acc_at, combiner.combine_all(acc_loads, sources), st.op.name),
                        spatial_guards + reduce_guards + [cond])
        leaves = st.leaf_iter_vars
        serial = [iv for iv in leaves if iv.iter_type is IterType.COMM_REDUCE and iv is not tiv]
        stmt = update
        for iv in reversed(serial):
            stmt = self._loop(st, iv, self.place(self.children.get((st, iv), []), stmt))
        def at(offset=None):  # red[group * n + tid + offset]
            pos = tid if offset is None else tid + offset
            return (pos if base is None else base + pos,)

        steps = [*[BufferStore(acc, v, (zero,)) for acc, v in zip(accs, combiner.identities(types))],
                 stmt, *[BufferStore(red, load, at()) for red, load in zip(reds, acc_loads)],
                 sync_stmt()]
        width = 1 << (n.bit_length() - 1)  # the largest power of two <= n
        offsets = ([(n - width, width)] if width < n else []) + \
            [(s, s) for s in _halvings(width)]
        for live, offset in offsets:
            mine = tuple(BufferLoad(red, at(), t) for red, t in zip(reds, types))
            other = tuple(BufferLoad(red, at(offset), t) for red, t in zip(reds, types))
            combined = _store_all([(red, at()) for red in reds], combiner.combine_all(mine, other),
                                  st.op.name)
            steps.append(IfThenElse(LT(tid, const(live, tid.dtype), "bool"), combined))
            steps.append(sync_stmt())
        first_slot = (zero if base is None else base,)
        result = seq(*[BufferStore(buf, BufferLoad(red, first_slot, t), index)
                       for (buf, index), red, t in zip(outs, reds, types)])
        first = [] if info.scope != "global" else [EQ(tid, const(0, tid.dtype), "bool")]
        steps.append(_guard(result, first + spatial_guards + store_guards))
        stmt = seq(*steps)
        for buf in reversed(reds + accs):
            stmt = Allocate(buf, stmt)
        for iv in reversed([iv for iv in leaves if iv is tiv or iv.iter_type is not IterType.COMM_REDUCE]):
            stmt = self._loop(st, iv, self.place(self.children.get((st, iv), []), stmt))
        return stmt

    def _reduction_groups(self, st: Stage, tiv) -> tuple[int, PrimExpr | None]:
        """How many reductions a block runs side by side, and which one this thread's is.

        The loops around the tree that are bound to threadIdx.y/z (this stage's own, or
        those of the stages it is computed in) each run one reduction per thread index;
        each gets its own row of the shared buffer.
        """
        owners = self._loop_owners()
        loops = list(self.prefix.get(st, [])) + [iv for iv in st.leaf_iter_vars if iv is not tiv]
        groups, group = 1, None
        for iv in loops:
            owner = owners[iv]
            attr = owner.iter_attrs.get(iv)
            tag = attr.bind.thread_tag if attr is not None and attr.bind is not None else ""
            if not tag.startswith("threadIdx") and tag != "vthread":
                continue
            if tag in ("threadIdx.x", "vthread"):
                raise LoweringError(f"stage {st.op.name!r}: its reduction across threadIdx.x runs inside "
                                    f"loop {iv.var.name!r}, bound to {tag}; compute it outside the "
                                    f"{tag} loops (compute_at an outer loop)")
            info = self.infos[owner]
            ext = self.analyzer.simplify(info.extent[iv])
            if not is_const_int(ext):
                raise LoweringError(f"stage {st.op.name!r}: loop {iv.var.name!r} bound to {tag} needs a "
                                    f"constant extent, got {ext}")
            lo = info.loop_min[iv]
            pos = iv.var if is_const_int(lo, 0) else iv.var - lo
            group = pos if group is None else group * ext.value + pos
            groups *= ext.value
        return groups, group

    def _init_nest(self, st: Stage, inner_leaves: list, init: Stmt) -> Stmt:
        stmt = init
        for iv in reversed(inner_leaves):
            if iv.iter_type is not IterType.COMM_REDUCE:
                stmt = self._loop(st, iv, stmt, prefetch=False)
        return stmt

    def _loop(self, st: Stage, iv, body: Stmt, prefetch: bool = True) -> Stmt:
        info = self.infos[st]
        attr = st.iter_attrs.get(iv)
        if prefetch and attr is not None and attr.prefetches:
            body = self._prefetch_scopes(st, iv, attr.prefetches, body)
        kind = attr.kind if attr is not None else ForKind.SERIAL
        tag = attr.bind.thread_tag if attr is not None and attr.bind is not None else ""
        loop: Stmt = For(iv.var, info.loop_min[iv], info.extent[iv], kind, body, tag)
        # Pragmas scope the loop itself and everything inside it (unroll_loops reads them).
        for key, value in reversed(list(attr.pragmas.items()) if attr is not None else []):
            loop = AttrStmt(iv.var, PRAGMA_PREFIX + key, StringImm(value) if isinstance(value, str)
                            else const(value), loop)
        return loop

    def _prefetch_scopes(self, st: Stage, iv, prefetches: list, body: Stmt) -> Stmt:
        """``body`` inside one ``PREFETCH_SCOPE`` per prefetched tensor (see
        :mod:`compiler.transform.inject_prefetch`)."""
        for tensor, offset in reversed(prefetches):
            buf = self.buffers.get(buffer_key(self.sch, tensor))
            reads = buf is not None and contains(
                body, lambda n, data=buf.data: isinstance(n, BufferLoad) and n.buffer.data is data)
            if not reads:
                raise LoweringError(f"stage {st.op.name!r}, axis {iv.var.name!r}: prefetch of tensor "
                                    f"{tensor.name!r}, which the stage does not read inside that axis")
            body = AttrStmt(buf.data, PREFETCH_SCOPE, const(offset), body)
        return body


def _tensorized_leaf(st: Stage) -> int | None:
    """The position of the stage's tensorized leaf axis, or None."""
    for k, iv in enumerate(st.leaf_iter_vars):
        attr = st.iter_attrs.get(iv)
        if attr is not None and attr.tensor_intrin is not None:
            return k
    return None


def _halvings(width: int) -> list[int]:
    """``width / 2, width / 4, ..., 1`` (empty for 1)."""
    out = []
    while width > 1:
        width //= 2
        out.append(width)
    return out


def _store_all(outs: list, values: tuple, name: str) -> Stmt:
    """Store ``values[k]`` at ``outs[k]`` (a buffer and an index). Several values are all
    computed before the first store, since each may read what another overwrites (the
    update of a tuple reduction reads every accumulator)."""
    if len(outs) == 1:
        (buf, index), = outs
        return BufferStore(buf, values[0], index)
    temps = [Var(f"{name}.v{k}.next", v.dtype) for k, v in enumerate(values)]
    stmt = seq(*[BufferStore(buf, t, index) for (buf, index), t in zip(outs, temps)])
    for t, v in reversed(list(zip(temps, values))):
        stmt = LetStmt(t, v, stmt)
    return stmt


def _guard(stmt: Stmt, conds: list) -> Stmt:
    conds = [c for c in conds if not (isinstance(c, IntImm) and c.value == 1)]
    if not conds:
        return stmt
    return IfThenElse(all_of(*conds), stmt)


def _strides(shape: list, aligns: list) -> list | None:
    """Row-major strides with the padding that storage_align asks for (None: compact)."""
    if not aligns:
        return None
    by_axis = {a.axis_index: a for a in aligns}
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        stride = strides[k + 1] * shape[k + 1]
        align = by_axis.get(k)
        if align is not None:
            if not isinstance(stride, int):
                raise ScheduleError("storage_align needs constant buffer extents")
            stride += (align.offset - stride % align.factor) % align.factor
        strides[k] = stride
    return strides


def schedule_to_primfunc(sch: Schedule, args: list, name: str, binds: dict | None) -> PrimFunc:
    """Lower a schedule to a PrimFunc with multi-dimensional buffer accesses."""
    if not isinstance(args, (list, tuple)) or not args:  # None or empty
        raise LoweringError("lower/build of a schedule needs the argument list: [A, B, ..., C]")
    binds = dict(binds or {})
    analyzer = Analyzer()
    infos, prefix = infer_bounds(sch, analyzer)
    buffers: dict[tuple, Buffer] = {}  # by buffer_key
    mins: dict[tuple, list] = {}
    lanes_of: dict[Var, int] = {}  # the data of the buffers of vector-dtype tensors -> their lanes
    params: list = []
    for a in args:
        if isinstance(a, Var):
            params.append(a)
            continue
        if isinstance(a, Buffer):
            raise LoweringError("pass tensors as arguments and map them to buffers with binds=")
        if not isinstance(a, Tensor):
            raise LoweringError(f"arguments must be tensors or te.var scalars, got {a!r}")
        buf = binds.get(a)
        if buf is None:
            buf = _tensor_buffer(a.shape, a.dtype, a.name, lanes_of)
        elif dtypes.split_lanes(a.dtype)[1] > 1:
            raise LoweringError(f"binds: tensor {a.name!r} is of the vector dtype {a.dtype}, which "
                                "binds= does not support; leave it to the default buffer")
        elif len(buf.shape) != a.ndim:
            raise LoweringError(f"binds: buffer for {a.name!r} has {len(buf.shape)} dimensions, "
                                f"the tensor has {a.ndim}")
        key = buffer_key(sch, a)
        if key in buffers:
            raise LoweringError(f"tensor {a.name!r} appears twice in the argument list")
        buffers[key] = buf
        params.append(buf)
        if a in sch and isinstance(sch[a].op, ComputeOp):
            # An inlined stage that is also an argument is not stored: as in TVM, its
            # buffer is left as the caller passed it, and its readers recompute its values.
            mins[key] = [iv.dom.min for iv in sch[a].op.axis]
    allocated: set[tuple] = set()
    loop_vars = {iv.var for st in sch.stages if st in infos for iv in st.leaf_iter_vars}
    aliases = _scan_aliases(sch)
    for st in sch.stages:
        if st not in infos:
            continue
        info = infos[st]
        op = st.op
        if isinstance(op, ComputeOp):
            region = [info.root_range[iv] for iv in op.axis]
        for k in range(op.num_outputs):
            key = (st, k)
            if key in buffers or key in aliases:
                continue
            if not isinstance(op, ComputeOp):  # a scan's or extern op's outputs: whole tensors
                shape = [analyzer.simplify(e) for e in op.output_shape(k)]
                buffers[key] = _tensor_buffer(shape, op.output_dtype(k), op.output(k).name, lanes_of)
                mins[key] = [const(0, e.dtype) for e in shape]
                allocated.add(key)
                continue
            shape = [_alloc_extent(st, r.extent, analyzer, loop_vars) for r in region]
            strides = _strides([s.value if is_const_int(s) else s for s in shape], st.storage_aligns)
            buffers[key] = _tensor_buffer(shape, op.output_dtype(k), op.output(k).name, lanes_of,
                                          strides=strides, scope=info.scope)
            mins[key] = [r.min for r in region]
            allocated.add(key)
    for key, (target, tensor) in aliases.items():
        if key in buffers:
            raise LoweringError(f"tensor {tensor.name!r} is part of a scan, which stores it in the scan's "
                                "output; pass the scan's output as the argument instead")
        buffers[key] = buffers[target]
        mins[key] = [const(0, e.dtype) for e in tensor.shape]
    builder = _LoopBuilder(sch, infos, prefix, buffers, mins, allocated, analyzer)
    roots = [st for st in sch.stages if st in infos and st.attach_type != "scope"]
    body = builder.place(roots, None)
    if lanes_of:
        body = _LaneIndex(lanes_of).visit(body)
    return PrimFunc(tuple(params), body, name, {"from_schedule": True})


def _scan_aliases(sch: Schedule) -> dict:
    """The tensors a scan stores in its outputs, as TVM does: its init, update and state
    tensors all name output ``k``. Maps their key to (the output's key, the tensor)."""
    aliases = {}
    for st in sch.stages:
        if isinstance(st.op, ScanOp):
            op: ScanOp = st.op
            for k in range(op.num_outputs):
                for t in (op.init[k], op.update[k], op.state_placeholder[k]):
                    aliases[buffer_key(sch, t)] = ((st, k), t)
    return aliases


def _alloc_extent(st: Stage, extent: PrimExpr, analyzer: Analyzer, loop_vars: set) -> PrimExpr:
    """A size for the buffer of ``st`` that holds its region wherever it is computed."""
    extent = analyzer.simplify(extent)
    if is_const_int(extent):
        return extent
    lo, hi = analyzer.const_int_bound(extent)
    if hi is not None:
        return const(hi, extent.dtype)
    if any(v in loop_vars for v in free_vars(extent)):
        raise LoweringError(f"cannot size the buffer of stage {st.op.name!r}: its extent {extent} "
                            "depends on loop variables and has no constant bound")
    return extent
