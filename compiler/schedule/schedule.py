"""Schedules: one stage per operation, and the primitives that reshape their loop nests.

Each primitive is a small, checked transformation: it validates its arguments
and raises :class:`~compiler.errors.ScheduleError` naming the stage, the axis and
what was wrong. Graph-rewriting primitives (cache_read, cache_write, rfactor)
live in :mod:`compiler.schedule.dataflow`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..te.tensor import ComputeOp, ExternOp, Operation, ScanOp, Tensor
from ..te.tensor_intrin import TensorIntrin
from ..tir.buffer import SCOPES
from ..tir.expr import IterType, IterVar, PrimExpr, StringImm, Var, convert, is_const_int
from ..tir.indexing import index_dtype
from ..tir.stmt import ForKind

# dataflow.py holds the graph-rewriting primitives and reads this module's names only when
# called, so the two may import each other.
from . import dataflow, group
from .group import GroupStage
from .relations import Fuse, Relation, Singleton, Split

__all__ = ["Schedule", "Stage", "GroupStage", "Split", "Fuse", "Singleton", "IterAttr", "IterVarAttr",
           "PRAGMAS", "LOOP_PRAGMAS", "create_schedule"]


@dataclass
class IterAttr:
    kind: ForKind = ForKind.SERIAL
    bind: IterVar | None = None
    pragmas: dict = field(default_factory=dict)  # pragma name -> int value (a string for import_llvm)
    tensor_intrin: object = None  # the TensorIntrin that replaces the loop nest from this axis inward
    prefetches: list = field(default_factory=list)  # (tensor, offset) of Stage.prefetch, in call order


#: The pragmas ``Stage.pragma`` knows, with TVM's meaning: the loop nest under the axis
#: auto-unrolls loops whose constant trip count times the statements of their body is at
#: most ``auto_unroll_max_step``; ``unroll_explicit`` (default 1) unrolls them in the loop
#: IR, 0 leaves them as loops that ask the code generator (LLVM) to unroll them.
#: ``import_llvm`` (a string: LLVM IR text, or the path of a ``.ll``/``.bc`` file) links that
#: code into the module built for the CPU, so that ``call_extern`` can call the functions it
#: defines (the C kernels of tensor intrinsics, see :meth:`Stage.tensorize`).
PRAGMAS = ("auto_unroll_max_step", "unroll_explicit", "import_llvm")
#: Pragmas that TVM's ``Stage.pragma`` turns into the loop annotations of the same name.
LOOP_PRAGMAS = ("unroll", "vectorize", "parallel")


class IterVarAttr:
    """A read-only view of the annotations of one axis of a stage, under TVM's names
    (``s[T].iter_var_attrs[xi].iter_type``). ``iter_type`` is TVM's number for the kind of
    loop: 5 unrolled, 6 vectorized, 7 parallel, 8 tensorized, 1 bound to a thread, else
    the axis' own kind (0 data-parallel, 2 reduction)."""

    __slots__ = ("_iv", "_attr")

    DataPar, ThreadIndex, CommReduce, Ordered, DimInfo = (
        IterVar.DataPar, IterVar.ThreadIndex, IterVar.CommReduce, IterVar.Ordered, IterVar.DimInfo)
    Unrolled, Vectorized, Parallelized, Tensorized = (
        IterVar.Unrolled, IterVar.Vectorized, IterVar.Parallelized, IterVar.Tensorized)

    def __init__(self, iv: IterVar, attr: IterAttr):
        self._iv, self._attr = iv, attr

    @property
    def iter_type(self) -> int:
        a = self._attr
        if a.tensor_intrin is not None:
            return self.Tensorized
        if a.bind is not None:
            return self.ThreadIndex
        kinds = {ForKind.UNROLLED: self.Unrolled, ForKind.VECTORIZED: self.Vectorized,
                 ForKind.PARALLEL: self.Parallelized}
        return kinds.get(a.kind, int(self._iv.iter_type))

    @property
    def bind_thread(self) -> IterVar | None:
        """The thread axis the axis is bound to (``Stage.bind``), or None."""
        return self._attr.bind

    @property
    def tensor_intrin(self):
        """The tensor intrinsic that replaces the loop nest from this axis (``Stage.tensorize``)."""
        return self._attr.tensor_intrin

    @property
    def prefetch_data(self) -> tuple:
        """The tensors prefetched at this axis (``Stage.prefetch``)."""
        return tuple(t for t, _ in self._attr.prefetches)

    @property
    def prefetch_offset(self) -> tuple:
        """How many iterations ahead each of :attr:`prefetch_data` is prefetched."""
        return tuple(convert(k) for _, k in self._attr.prefetches)

    @property
    def pragma_keys(self) -> tuple:
        """The pragmas given with ``Stage.pragma``, as string immediates (``.value``)."""
        return tuple(StringImm(k) for k in self._attr.pragmas)

    @property
    def pragma_values(self) -> tuple:
        """The values of :attr:`pragma_keys`, in the same order."""
        return tuple(StringImm(v) if isinstance(v, str) else convert(v) for v in self._attr.pragmas.values())

    def __repr__(self) -> str:
        return f"IterVarAttr({_axis_name(self._iv)}, iter_type={self.iter_type})"


@dataclass
class StorageAlign:
    axis_index: int
    factor: int
    offset: int


class Stage:
    """How one operation is computed: its loop nest, where it is placed, where it is stored."""

    def __init__(self, op: Operation, schedule: Schedule):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.relations: list[Relation] = []  # in the order the primitives created them
        self.iter_attrs: dict[IterVar, IterAttr] = {}
        # Where the stage itself is computed: "root", "inline" or "scope" (at _attach_stage's loop
        # _attach_ivar). Inside a group (Schedule.create_group) "root" is the group's root, so
        # attach_type/attach_stage/attach_ivar give where the group is computed.
        self.group = None  # the GroupStage this stage belongs to, if any
        self._attach_type = "root"
        self._attach_stage: Stage | None = None
        self._attach_ivar: IterVar | None = None
        # The storage scope given by set_scope/cache_read/cache_write; "" lets bound inference
        # pick one from where the stage is computed (compiler.schedule.bound.storage_scope).
        self.scope = ""
        self.is_output = False
        self.storage_aligns: list[StorageAlign] = []
        self.store_predicate = None  # see set_store_predicate
        self.double_buffered = False
        # The scan stage whose time loop computes this stage (a stage of a scan's body), or None.
        self.scan_stage: Stage | None = None
        self._reset_iter_vars()

    def _reset_iter_vars(self) -> None:
        roots = list(self.op.root_iter_vars)
        self.all_iter_vars: list[IterVar] = list(roots)
        self.leaf_iter_vars: list[IterVar] = list(roots)
        self.relations = []
        self.iter_attrs = {}

    # ------------------------------------------------------------------ attachment

    def _attach_spec(self):
        """The stage or group whose own attachment places this stage: the stage itself,
        unless it is at the root of its group, which then decides (as TVM's GetAttachSpec)."""
        spec = self
        while spec._attach_type == "root" and spec.group is not None:
            spec = spec.group
        return spec

    @property
    def attach_type(self) -> str:
        """Where the stage is computed: "root", "inline" or "scope" (at ``attach_stage``'s
        loop ``attach_ivar``), its group's placement if it sits at its group's root."""
        return self._attach_spec()._attach_type

    @property
    def attach_stage(self) -> Stage | None:
        return self._attach_spec()._attach_stage

    @property
    def attach_ivar(self) -> IterVar | None:
        return self._attach_spec()._attach_ivar

    def _set_attach(self, kind: str, stage: Stage | None = None, ivar: IterVar | None = None) -> None:
        self._attach_type, self._attach_stage, self._attach_ivar = kind, stage, ivar

    @property
    def iter_var_attrs(self) -> dict:
        """The annotated axes, each with a read-only :class:`IterVarAttr` (TVM's name)."""
        return {iv: IterVarAttr(iv, a) for iv, a in self.iter_attrs.items()}

    # ------------------------------------------------------------------ helpers

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.op.name})"

    def _fail(self, what: str, axis=None) -> ScheduleError:
        where = f"stage {self.op.name!r}"
        if axis is not None:
            where += f", axis {_axis_name(axis)!r}"
        return ScheduleError(f"{where}: {what}")

    def _require_compute(self, primitive: str) -> None:
        if isinstance(self.op, ScanOp):
            raise self._fail(f"cannot {primitive} a scan stage: schedule its init and update stages "
                             "(the time loop scan_axis stays serial)")
        if isinstance(self.op, ExternOp):
            raise self._fail(f"cannot {primitive} an extern stage: its body is a call, it has no loops")
        if not isinstance(self.op, ComputeOp):
            raise self._fail(f"cannot {primitive} a placeholder (an input has no loops)")

    def _leaf_index(self, iv, primitive: str) -> int:
        self._require_compute(primitive)
        if not isinstance(iv, IterVar):
            raise self._fail(f"{primitive} needs an IterVar (an axis of this stage), got {iv!r}")
        for k, leaf in enumerate(self.leaf_iter_vars):
            if leaf is iv:
                return k
        if any(v is iv for v in self.all_iter_vars):
            raise self._fail(f"{primitive}: the axis was already split or fused; use the axes "
                             "that split/fuse returned", iv)
        owner = self.schedule._owner_of(iv)
        if owner is not None:
            raise self._fail(f"{primitive}: the axis belongs to stage {owner.op.name!r}", iv)
        raise self._fail(f"{primitive}: the axis is not an axis of this stage", iv)

    def _attr(self, iv: IterVar) -> IterAttr:
        return self.iter_attrs.setdefault(iv, IterAttr())

    def _new_iv(self, name: str, like: IterVar) -> IterVar:
        return IterVar(None, Var(name, like.var.dtype), like.iter_type)

    # ------------------------------------------------------------------ primitives

    def split(self, parent: IterVar, factor=None, nparts=None) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into ``(outer, inner)`` with ``inner``'s extent ``factor``
        (or ``outer``'s extent ``nparts``). Non-dividing factors are guarded."""
        k = self._leaf_index(parent, "split")
        if (factor is None) == (nparts is None):
            raise self._fail("split needs exactly one of factor= or nparts=", parent)
        value = factor if factor is not None else nparts
        value = _split_factor(value, self, parent, "factor" if factor is not None else "nparts")
        attr = self._attr(parent)
        if attr.kind is not ForKind.SERIAL or attr.bind is not None or attr.pragmas or attr.tensor_intrin:
            raise self._fail("split an axis before annotating it (vectorize/unroll/parallel/bind/"
                             "pragma/tensorize)", parent)
        base = parent.var.name
        outer = self._new_iv(f"{base}.outer", parent)
        inner = self._new_iv(f"{base}.inner", parent)
        self.relations.append(Split(parent, outer, inner,
                                    value if factor is not None else None,
                                    value if nparts is not None else None))
        self.all_iter_vars += [outer, inner]
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        return outer, inner

    def fuse(self, *args: IterVar) -> IterVar:
        """Fuse consecutive leaf axes (outermost first) into one axis."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            return self._singleton()
        indices = [self._leaf_index(iv, "fuse") for iv in args]
        if len(set(indices)) != len(indices):
            raise self._fail("fuse was given the same axis twice")
        if indices != list(range(indices[0], indices[0] + len(indices))):
            raise self._fail("fuse needs adjacent axes in loop order, outermost first: "
                             + ", ".join(_axis_name(a) for a in args))
        kinds = {iv.iter_type for iv in args}
        if len(kinds) > 1:
            raise self._fail("cannot fuse a reduction axis with a data-parallel axis: "
                             + ", ".join(_axis_name(a) for a in args))
        fused = args[0]
        for inner in args[1:]:
            name = f"{fused.var.name}.{inner.var.name}.fused"
            new = IterVar(None, Var(name, self._fused_dtype(fused, inner)), inner.iter_type)
            self.relations.append(Fuse(fused, inner, new))
            self.all_iter_vars.append(new)
            k = _index_of(self.leaf_iter_vars, fused)
            self.leaf_iter_vars[k:k + 2] = [new]
            fused = new
        return fused

    def _singleton(self) -> IterVar:
        """``fuse()`` of no axes, as TVM: a new outermost loop of one iteration, which a
        stage without axes (a rank-0 compute) can then split or bind like any other."""
        self._require_compute("fuse")
        iv = IterVar(None, Var("singleton", "int32"), IterType.DATA_PAR)
        self.relations.append(Singleton(iv))
        self.all_iter_vars.append(iv)
        self.leaf_iter_vars.insert(0, iv)
        return iv

    def _fused_dtype(self, outer: IterVar, inner: IterVar) -> str:
        """The dtype that counts over ``outer`` x ``inner`` without wrapping (as te.compute
        chooses one for a shape, :func:`compiler.tir.indexing.index_dtype`)."""
        extents = [self._static_extent(outer), self._static_extent(inner)]
        if any(e is None for e in extents):
            return "int64" if "int64" in (outer.var.dtype, inner.var.dtype) else inner.var.dtype
        dtype = index_dtype(extents)
        return "int64" if "int64" in (dtype, outer.var.dtype, inner.var.dtype) else inner.var.dtype

    def _static_extent(self, iv: IterVar):
        """The extent of ``iv`` over its whole domain, from the relations (None if unknown)."""
        if iv.dom is not None:
            return iv.dom.extent
        for rel in self.relations:
            if rel.defines(iv):
                return rel.static_extent(iv, self._static_extent)
        return None

    def reorder(self, *args: IterVar) -> None:
        """Put the given leaf axes in this order, in the positions they occupy."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        indices = [self._leaf_index(iv, "reorder") for iv in args]
        if len(set(indices)) != len(indices):
            raise self._fail("reorder was given the same axis twice")
        for pos, iv in zip(sorted(indices), args, strict=True):
            self.leaf_iter_vars[pos] = iv

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor, y_factor):
        """Split two axes and order them ``x.outer, y.outer, x.inner, y.inner``."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def _annotate(self, iv: IterVar, kind: ForKind, primitive: str) -> None:
        self._leaf_index(iv, primitive)
        attr = self._attr(iv)
        if attr.bind is not None:
            raise self._fail(f"cannot {primitive} an axis bound to {attr.bind.thread_tag}", iv)
        if attr.kind is not ForKind.SERIAL and attr.kind is not kind:
            raise self._fail(f"axis is already marked {attr.kind.value}; cannot also {primitive}", iv)
        attr.kind = kind

    def vectorize(self, iv: IterVar) -> None:
        """Run this (innermost, constant-extent) axis as vector lanes."""
        if iv.iter_type is IterType.COMM_REDUCE:
            raise self._fail("cannot vectorize a reduction axis; vectorize a data-parallel axis "
                             "(or rfactor the reduction first)", iv)
        self._annotate(iv, ForKind.VECTORIZED, "vectorize")

    def unroll(self, iv: IterVar) -> None:
        """Unroll this axis completely (it needs a constant extent)."""
        self._annotate(iv, ForKind.UNROLLED, "unroll")

    def parallel(self, iv: IterVar) -> None:
        """Run iterations of this axis on several threads."""
        if iv.iter_type is IterType.COMM_REDUCE:
            raise self._fail("cannot parallelize a reduction axis (iterations would race); "
                             "rfactor the reduction first", iv)
        self._annotate(iv, ForKind.PARALLEL, "parallel")

    def pragma(self, iv: IterVar, pragma_type: str, pragma_value=None) -> None:
        """Annotate the loop nest from axis ``iv`` inward, as TVM's ``Stage.pragma``.

        ``"auto_unroll_max_step"``: unroll every loop under (and including) ``iv`` whose
        constant trip count, times those of the loops unrolled inside it, times the
        statements of its body, is at most ``pragma_value``, and which holds no loop left
        rolled. ``"unroll_explicit"``: with a true value (the default) such loops are
        unrolled in the loop IR; with 0 they stay loops that ask the code generator to
        unroll them (LLVM's ``llvm.loop.unroll.full``, CUDA's ``#pragma unroll``).
        ``"unroll"``, ``"vectorize"`` and ``"parallel"`` are the primitives of those names.
        ``"import_llvm"``: ``pragma_value`` is LLVM IR text (or a ``.ll``/``.bc`` path) that the
        CPU build links into its module, for the ``call_extern`` of a tensor intrinsic;
        a function several imports define takes the last one's definition.
        """
        self._leaf_index(iv, "pragma")
        if pragma_type in LOOP_PRAGMAS:  # TVM's spelling of the loop annotations
            getattr(self, pragma_type)(iv)
            return
        if pragma_type not in PRAGMAS:
            raise self._fail(f"unknown pragma {pragma_type!r}; the known pragmas are "
                             + ", ".join(repr(p) for p in PRAGMAS + LOOP_PRAGMAS), iv)
        if pragma_type == "import_llvm":
            if not isinstance(pragma_value, str) or not pragma_value.strip():
                raise self._fail(f"pragma 'import_llvm' needs LLVM IR text or the path of a .ll/.bc file, "
                                 f"got {pragma_value!r}", iv)
            self._attr(iv).pragmas[pragma_type] = pragma_value
            return
        value = 1 if pragma_value is None else pragma_value
        if hasattr(value, "dtype") and is_const_int(convert(value)):
            value = convert(value).value
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int) or value < 0 or (pragma_type == "unroll_explicit"
                                                        and value not in (0, 1)):
            allowed = "0 or 1" if pragma_type == "unroll_explicit" else "an int >= 0"
            raise self._fail(f"pragma {pragma_type!r} needs {allowed}, got {pragma_value!r}", iv)
        self._attr(iv).pragmas[pragma_type] = value

    def tensorize(self, iv: IterVar, intrin) -> None:
        """Replace the loop nest from axis ``iv`` inward by the tensor intrinsic ``intrin``
        (:func:`compiler.te.decl_tensor_intrin`), as TVM's ``Stage.tensorize``.

        Lowering checks that the nest computes what ``intrin.op`` declares (the same
        expression once the nest's axes are renamed to the intrinsic's, with the same
        extents), binds the intrinsic's buffers to the regions of the stage's inputs and
        outputs that the nest covers, and emits the intrinsic's statement in its place. When
        reduction loops remain outside ``iv``, the intrinsic's ``reduce_reset`` runs before
        them and ``reduce_update`` inside them (or, without a reset, its ``body`` at their
        first iteration and ``reduce_update`` at the others), as in TVM.
        """
        k = self._leaf_index(iv, "tensorize")
        if not isinstance(intrin, TensorIntrin):
            raise self._fail(f"tensorize needs a tensor intrinsic (te.decl_tensor_intrin), got {intrin!r}",
                             iv)
        for other in self.leaf_iter_vars:
            attr = self.iter_attrs.get(other)
            if attr is not None and attr.tensor_intrin is not None and other is not iv:
                raise self._fail(f"tensorize: axis {_axis_name(other)!r} is already tensorized; a stage "
                                 "has one tensorized loop nest", iv)
        for inner in self.leaf_iter_vars[k:]:
            attr = self.iter_attrs.get(inner)
            if attr is not None and attr.bind is not None:
                raise self._fail(f"tensorize: axis {_axis_name(inner)!r} inside the tensorized nest is "
                                 f"bound to {attr.bind.thread_tag}", iv)
        self._attr(iv).tensor_intrin = intrin

    def bind(self, iv: IterVar, thread_ivar: IterVar) -> None:
        """Map this axis to a GPU thread axis (``te.thread_axis("threadIdx.x")``).

        A reduction axis may be bound to threadIdx.x: the threads then reduce together
        (each its share, then a tree in shared memory; see
        :meth:`compiler.schedule.build_loops._LoopBuilder._cross_thread_stmt`)."""
        self._leaf_index(iv, "bind")
        if not isinstance(thread_ivar, IterVar) or thread_ivar.iter_type is not IterType.THREAD_INDEX:
            raise self._fail("bind needs a thread axis made with te.thread_axis(...)", iv)
        attr = self._attr(iv)
        if attr.kind is not ForKind.SERIAL:
            raise self._fail(f"cannot bind an axis marked {attr.kind.value}", iv)
        if iv.iter_type is IterType.COMM_REDUCE:
            self._check_reduce_bind(iv, thread_ivar.thread_tag)
        for other_iv, other in self.iter_attrs.items():
            if other.bind is not None and other_iv is not iv and (
                    other.bind.thread_tag == thread_ivar.thread_tag and thread_ivar.thread_tag != "vthread"):
                raise self._fail(f"{thread_ivar.thread_tag} is already bound to another axis", iv)
        attr.bind = thread_ivar
        attr.kind = ForKind.THREAD_BINDING

    def _check_reduce_bind(self, iv: IterVar, tag: str) -> None:
        """A reduction axis may go to threadIdx.x only (lowered to a cross-thread tree reduction)."""
        if tag.startswith("blockIdx"):
            raise self._fail(f"cannot bind a reduction axis to {tag}: blocks cannot combine their "
                             "partial results; bind it to threadIdx.x (a cross-thread reduction), or "
                             "rfactor the reduction and bind the factored (data-parallel) axis", iv)
        if tag != "threadIdx.x":
            raise self._fail(f"cannot bind a reduction axis to {tag}: cross-thread reductions are only "
                             "implemented for threadIdx.x; bind it to threadIdx.x, or rfactor the "
                             "reduction and bind the factored (data-parallel) axis", iv)

    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop ``iv``, for just the region it needs there."""
        self._require_compute("compute_at")
        if not isinstance(parent, Stage):
            raise self._fail(f"compute_at needs a stage (s[T]), got {parent!r}")
        if parent is self:
            raise self._fail("cannot compute_at a stage inside itself", iv)
        if parent.schedule is not self.schedule:
            raise self._fail(f"compute_at: stage {parent.op.name!r} belongs to another schedule "
                             "(s[T] of the schedule this stage is part of)")
        parent._leaf_index(iv, "compute_at")
        if self.is_output:
            raise self._fail("an output stage cannot be computed at another stage")
        if parent.attach_type == "inline":
            raise self._fail(f"cannot compute_at stage {parent.op.name!r}: it is inlined")
        sch = self.schedule
        if not sch._depends_on(parent, self):
            raise self._fail(
                f"compute_at: stage {parent.op.name!r} does not read this stage's result "
                "(directly or through inlined stages), so it cannot host it")
        # A cycle: the parent (or a stage it is attached inside) sits inside this stage.
        cur = parent
        while cur is not None:
            if cur is self:
                raise self._fail(f"compute_at into {parent.op.name!r} would form a cycle: "
                                 f"{parent.op.name!r} is already computed inside this stage")
            cur = cur.attach_stage
        if self.scan_stage is not None and parent.scan_stage is not self.scan_stage:
            raise self._fail(f"compute_at: the stage is computed at every step of scan "
                             f"{self.scan_stage.op.name!r}; it can only be computed at a stage of that "
                             f"scan's body, not at {parent.op.name!r}")
        if self.group is not None and not self.group.contains(parent):
            raise self._fail(f"compute_at: the stage belongs to a group (Schedule.create_group) that "
                             f"{parent.op.name!r} is not part of; a stage of a group can only be computed "
                             "at a stage of the same group (compute_at the group itself instead)")
        self._set_attach("scope", parent, iv)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers instead of storing it."""
        self._require_compute("compute_inline")
        if self.op.reduce_axis:
            raise self._fail("cannot inline a reduction; use compute_at instead")
        if self.is_output:
            raise self._fail("cannot inline an output stage")
        for st in self.schedule.stages:
            if isinstance(st.op, (ScanOp, ExternOp)) and any(
                    t.op is self.op for t in st.op.input_tensors):
                raise self._fail(f"cannot inline: {type(st.op).__name__} {st.op.name!r} reads the "
                                 "stored result")
            if st.attach_stage is self:
                raise self._fail(f"cannot inline: stage {st.op.name!r} is computed inside it")
        self._set_attach("inline")

    def compute_root(self) -> None:
        """Compute this stage at the top level (undoes compute_at/compute_inline); a stage of
        a scan's body goes back to the scan's time loop, a stage of a group to wherever the
        group is computed."""
        self._require_compute("compute_root")
        if self.scan_stage is not None:
            self._attach_to_scan(self.scan_stage)
            return
        self._set_attach("root")

    def _attach_to_scan(self, scan: Stage) -> None:
        """Compute this stage at every step of ``scan``'s time loop (part of its body)."""
        self.scan_stage = scan
        self._set_attach("scope", scan, scan.op.scan_axis)

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the stride of ``axis``'s dimension so that ``stride % factor == offset``."""
        self._require_compute("storage_align")
        k = next((pos for pos, root in enumerate(self.op.axis) if root is axis), None)
        if k is None:
            raise self._fail("storage_align needs one of the stage's original (data-parallel) axes",
                             axis)
        factor = _positive_int(factor, self, axis, "factor")
        if not isinstance(offset, int) or not 0 <= offset < factor:
            raise self._fail(f"storage_align offset must be an int in [0, {factor}), got {offset!r}",
                             axis)
        self.storage_aligns.append(StorageAlign(k, factor, offset))

    def double_buffer(self) -> None:
        """Keep two copies of this (shared-memory) stage's buffer: in the loop it is computed
        in, the next iteration's copy is loaded while the current one is read, with one
        barrier per iteration instead of two (CUDA). Lowering checks that the stage is
        computed at the start of a serial loop's body and only read after it."""
        self._require_compute("double_buffer")
        if self.scope != "shared":
            where = f"is stored in {self.scope!r}" if self.scope else "has no scope set"
            raise self._fail(f"double_buffer needs a shared-memory stage (cache_read(..., 'shared', ...) "
                             f"or set_scope('shared')); this one {where}")
        self.double_buffered = True

    def set_store_predicate(self, predicate) -> None:
        """Store this stage's results only where ``predicate`` holds, as TVM's
        ``set_store_predicate``: for threads that compute the same values, let one store them
        (``s[B].set_store_predicate(tx.var.equal(0))``).

        The predicate may use the stage's axes, its loops, the loops it is computed in and
        thread axes (``te.thread_axis``) bound to loops around it. A reduction's initial value
        and updates are stored under it; a reduction across threads computes in every thread
        and stores its result under it.
        """
        self._require_compute("set_store_predicate")
        if not isinstance(predicate, (PrimExpr, IterVar)) or convert(predicate).dtype != "bool":
            raise self._fail(f"set_store_predicate needs a boolean expression, got {predicate!r}")
        self.store_predicate = convert(predicate)

    def prefetch(self, tensor, var, offset) -> None:
        """Prefetch ``tensor`` ``offset`` iterations of axis ``var`` ahead, as TVM's
        ``Stage.prefetch``: at the start of each iteration of ``var``, the part of ``tensor``
        that the loop's body (this stage and the stages computed inside it) reads in iteration
        ``var + offset``, every loop inside ``var`` taken whole, is asked into the caches, one
        prefetch instruction per 64-byte line.

        Each iteration asks for its whole region at once: a prefetch at an inner axis asks for
        less at a time. A prefetch never faults, so the last iterations ask for memory past
        the tensor harmlessly. CPU targets (LLVM's ``llvm.prefetch``, into every cache level);
        inside a GPU kernel it is left out.
        """
        self._leaf_index(var, "prefetch")
        if not isinstance(tensor, Tensor):
            raise self._fail(f"prefetch needs a tensor this stage reads, got {tensor!r}", var)
        if not isinstance(offset, (int, PrimExpr)) or isinstance(offset, bool) \
                or not is_const_int(convert(offset)) or convert(offset).value < 1:
            raise self._fail(f"prefetch offset must be a positive int (iterations ahead), got {offset!r}",
                             var)
        self._attr(var).prefetches.append((tensor, convert(offset).value))

    def env_threads(self, threads) -> None:
        """Refused: TVM launches GPU threads around a scan's whole time loop with it; here a
        scan on CUDA runs its time loop on the host, launching the update kernels at every
        step, so bind the axes of the update stages instead."""
        raise self._fail("env_threads is not supported: a scan's time loop runs on the host on CUDA "
                         "(one launch of its update kernels per step); bind the axes of the scan's "
                         "update stages to thread axes instead")

    def set_scope(self, scope: str) -> None:
        """Store this stage's result in ``scope`` ("global", "shared" or "local").

        Without it, a stage computed under ``threadIdx``/``vthread`` loops is ``local``,
        one computed under ``blockIdx`` loops only ``shared``, any other ``global``."""
        if scope not in SCOPES:
            raise self._fail(f"unknown storage scope {scope!r}; use one of {SCOPES}")
        self.scope = scope


def _index_of(items: list, item) -> int:
    for k, x in enumerate(items):
        if x is item:
            return k
    raise ValueError("not found")


def _axis_name(iv) -> str:
    if isinstance(iv, IterVar):
        return iv.var.name
    return getattr(iv, "name", repr(iv))


def _split_factor(value, stage: Stage, axis, what: str) -> int | PrimExpr:
    """A split's factor: a positive int, or (as TVM allows) an integer expression that is not
    a constant, such as a ``te.var`` passed to the function; it is assumed positive."""
    if isinstance(value, (PrimExpr, IterVar)) and not is_const_int(convert(value)):
        e = convert(value)
        if not e.dtype.startswith(("int", "uint")) or "x" in e.dtype:
            raise stage._fail(f"{what} must be a positive int or an integer expression, got {e} of "
                              f"dtype {e.dtype}", axis)
        return e
    return _positive_int(value, stage, axis, what)


def _positive_int(value, stage: Stage, axis, what: str) -> int:
    if hasattr(value, "dtype") and is_const_int(convert(value)):
        value = convert(value).value
    if isinstance(value, bool) or not isinstance(value, int):
        raise stage._fail(f"{what} must be a positive int, got {value!r}", axis)
    if value < 1:
        raise stage._fail(f"{what} must be >= 1, got {value}", axis)
    return value


@dataclass(eq=False)
class Schedule:
    """A schedule for a graph of operations: ``s[tensor]`` is the stage of its operation."""

    outputs: list
    stages: list = field(default_factory=list)
    _stage_of: dict = field(default_factory=dict)  # operation -> the stage that computes it
    groups: list = field(default_factory=list)  # the groups made by create_group, in order

    @property
    def stage_map(self) -> dict:
        """Each operation with the stage that computes it (TVM's ``Schedule.stage_map``)."""
        return dict(self._stage_of)

    def normalize(self) -> Schedule:
        """Refused: TVM's ``normalize`` rebases every loop to start at 0 before its own
        bound inference; lowering here does that itself, and ``compiler.lower`` and
        ``compiler.build`` take the schedule as it is."""
        raise ScheduleError("Schedule.normalize is not supported (nor needed): pass the schedule to "
                            "compiler.lower or compiler.build as it is; they rebase the loops themselves")

    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        stage = self._stage_of.get(op) if isinstance(op, Operation) else None
        if stage is None:
            name = getattr(op, "name", repr(op))
            raise ScheduleError(f"{name!r} is not part of this schedule; the schedule covers "
                                + ", ".join(repr(s.op.name) for s in self.stages))
        return stage

    def __contains__(self, key) -> bool:
        op = key.op if isinstance(key, Tensor) else key
        return isinstance(op, Operation) and op in self._stage_of

    def stage_of_tensor(self, tensor: Tensor) -> Stage:
        return self[tensor]

    def add_stage(self, op: Operation, *, before: Stage | None = None, after: Stage | None = None) -> Stage:
        """A new stage computing ``op``, placed right before or right after another stage
        (last with neither), in that stage's group as TVM's cache and rfactor stages are;
        ``s[op]`` names it from now on."""
        stage = Stage(op, self)
        if before is not None:
            self.stages.insert(_index_of(self.stages, before), stage)
        elif after is not None:
            self.stages.insert(_index_of(self.stages, after) + 1, stage)
        else:
            self.stages.append(stage)
        neighbour = before if before is not None else after
        if neighbour is not None and neighbour.group is not None:
            stage.group = neighbour.group
            stage.group.members.append(stage)
        self._stage_of[op] = stage
        return stage

    def replace_op(self, stage: Stage, op: Operation, *, reset_loops: bool) -> None:
        """Make ``stage`` compute ``op`` instead (a graph rewrite: its old operation keeps naming
        it). With ``reset_loops`` its loops start again from ``op``'s axes, without relations or
        annotations; otherwise ``op`` must have the same axes as the operation it replaces."""
        stage.op = op
        self._stage_of[op] = stage
        if reset_loops:
            stage._reset_iter_vars()

    def _owner_of(self, iv: IterVar) -> Stage | None:
        for st in self.stages:
            if any(v is iv for v in st.all_iter_vars):
                return st
        return None

    def consumers(self, stage: Stage) -> list[Stage]:
        """Stages whose operation reads ``stage``'s result directly."""
        out = []
        for st in self.stages:
            if isinstance(st.op, ComputeOp) and any(
                    self[t] is stage for t in st.op.input_tensors):
                out.append(st)
        return out

    def _depends_on(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``'s result, directly or through other stages."""
        seen: set[Stage] = set()
        todo = [consumer]
        while todo:
            st = todo.pop()
            if not isinstance(st.op, ComputeOp):
                continue
            for t in st.op.input_tensors:
                dep = self[t]
                if dep is producer:
                    return True
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return False

    # Graph-rewriting primitives are defined in dataflow.py.
    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """Read ``tensor`` through a copy in ``scope`` for the given reader stages."""
        return dataflow.cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor, scope: str):
        """Compute ``tensor`` into a buffer in ``scope`` first, then copy it to its destination.

        For an operation with several outputs, give the list of them; a list comes back."""
        return dataflow.cache_write(self, tensor, scope)

    def create_group(self, outputs, inputs, include_inputs: bool = False) -> GroupStage:
        """Group the stages on a path from ``inputs`` to ``outputs`` (tensors or lists of
        them; the stages of ``inputs`` only with ``include_inputs``), as TVM's
        ``create_group``: ``g.compute_at(s[D], xo)`` then computes all of them in ``D``'s loop
        ``xo``. A member computed at a stage outside the group goes back to the group's root;
        members may be computed at one another."""
        return group.create_group(self, outputs, inputs, include_inputs)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
        """Factor a reduction over ``axis`` into a data-parallel stage of partial results
        (a tensor, or a tuple of them for a tuple reduction)."""
        return dataflow.rfactor(self, tensor, axis, factor_axis)


def create_schedule(ops) -> Schedule:
    """A default schedule for the graph ending in ``ops`` (an operation or a list of them)."""
    if isinstance(ops, (Operation, Tensor)):
        ops = [ops]
    ops = [o.op if isinstance(o, Tensor) else o for o in ops]
    for o in ops:
        if not isinstance(o, Operation):
            raise ScheduleError(f"create_schedule needs operations (tensor.op), got {o!r}")
    sch = Schedule(outputs=list(ops))
    visited: set[Operation] = set()

    def visit(op: Operation) -> None:
        if op in visited:
            return
        visited.add(op)
        for t in op.input_tensors:
            visit(t.op)
        sch.add_stage(op)

    for o in ops:
        visit(o)
    for o in ops:
        sch[o].is_output = True
    for st in sch.stages:
        if isinstance(st.op, ComputeOp) and st.op.intrin_call is not None:
            # A compute whose body calls a tensor intrinsic: its loops outside the intrinsic
            # (the data-parallel ones, then the reductions) and the intrinsic in their place.
            intrin, first = st.op.intrin_call
            n_own_reduce = len(intrin.op.reduce_axis)
            outer_reduce = st.op.reduce_axis[:len(st.op.reduce_axis) - n_own_reduce]
            st.reorder(*st.op.axis[:first], *outer_reduce, *st.op.axis[first:],
                       *st.op.reduce_axis[len(outer_reduce):])
            if first < len(st.op.axis):
                st.tensorize(st.op.axis[first], intrin)
        if isinstance(st.op, ScanOp):
            for op in _scan_body(st.op):
                sch[op]._attach_to_scan(st)
    return sch


def _scan_body(scan: ScanOp) -> list[Operation]:
    """The operations a scan computes at every step, as TVM's group of a scan: those on a
    path from its states (or its declared inputs) to its updates, the updates included."""
    sources = {t.op for t in (*scan.state_placeholder, *scan.inputs)}
    memo: dict[Operation, bool] = {}
    body: list[Operation] = []

    def reaches(op: Operation) -> bool:
        if op in sources:
            return True
        if op in memo:
            return memo[op]
        memo[op] = False  # no cycles in a graph of operations; this only ends recursion
        found = False
        if isinstance(op, ComputeOp):
            for t in op.input_tensors:
                found = reaches(t.op) or found
        memo[op] = found
        if found:
            body.append(op)
        return found

    for t in scan.update:  # te.scan made sure they are computes
        if not reaches(t.op):
            body.append(t.op)  # an update that reads no state still runs at every step
            memo[t.op] = True
    return body
