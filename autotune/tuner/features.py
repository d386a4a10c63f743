"""Features of candidate configs for cost models: ``knob`` and ``itervar``.

``knob`` features are the config's encoding in its space (:meth:`ConfigSpace.encode`:
log2 split sizes, permutations, annotation codes, option values).

``itervar`` features are read off the loop IR of the candidate, lowered with
``simple_mode=True`` so that loops keep their kinds (a vectorized loop is still a
loop, not ramps). Every store is a *statement* with its enclosing loops and the
buffers it touches; for the loop levels of a statement, innermost first, the features
are the loop's extent and kind, and for each buffer the stride of its (flattened)
index along the loop, the bytes it touches in the loops from that level inwards, and
the reuse of those bytes (iterations per touched element); a statement's head adds
its parallel extent, how often its outermost parallel loop is entered (a fork and join
each time) and whether its guards test a vectorized or unrolled loop (tail code inside
a microkernel). Global features count the parallel loops, their entries, the largest
parallel extent and the work outside any parallel loop, so they stay visible when a
stage's outer loops or whole stages fall outside the slots. Statements fill a fixed
number of slots (reductions by work, then other statements by work), so every
config of every template maps to a vector of :data:`ITERVAR_LENGTH` numbers. All
sizes are ``log2(1 + x)``.

Lowering a config takes 5-100 ms (a CUDA convolution's the most), and a model-based
search scores hundreds of new configs at a time, so :class:`FeatureCache` hands them to
worker processes (:mod:`autotune.tuner.feature_worker`) once its features would have taken
longer than :data:`PARALLEL_AFTER_S` to compute here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

import compiler
from compiler.arith import Analyzer
from compiler.tir import expr as E
from compiler.tir import stmt as S
from compiler.tir.builtin import DOUBLE_BUFFER_SCOPE
from compiler.tir.function import IRModule
from compiler.tir.functor import Functor, IRVisitor, children
from measure.errors import MeasureError
from measure.pool import WorkerPool
from search_spaces.task import Task

__all__ = ["FEATURE_TYPES", "ITERVAR_LENGTH", "PARALLEL_AFTER_S", "itervar_features", "itervar_feature_names",
           "loop_rows", "curve_features", "config_features", "default_feature_workers", "check_workers",
           "FeatureCache", "CALLS"]

logger = logging.getLogger(__name__)

# "itervar": features of the statements and loops (:func:`itervar_features`); "knob": the knob
# values (``ConfigSpace.encode``); "curve": AutoTVM's relation feature (:func:`curve_features`).
FEATURE_TYPES = ("itervar", "knob", "curve")

# The workers start once the features of a cache would have taken longer than this to compute
# here (those done and those asked for): a search scores ~1500 new configs, 32 at a time, and a
# CUDA convolution's take 30-100 ms each to lower. Once started, they take every request of
# more than PARALLEL_MIN_S.
PARALLEL_AFTER_S = 2.0
PARALLEL_MIN_S = 0.05
MAX_FEATURE_WORKERS = 8  # each holds the project and its task: ~150 MB
_MAX_CHUNK = 16  # configs per worker call

_MAX_LEVELS = 6        # loop levels per statement, innermost first
_MAX_ACCESSES = 4      # buffers per statement: the stored one, then loads in expression order
_REDUCE_SLOTS = 2      # statements that update their own output (reductions)
_OTHER_SLOTS = 2       # other statements (init, copy-out, packing)
_KINDS = (S.ForKind.SERIAL, S.ForKind.PARALLEL, S.ForKind.VECTORIZED, S.ForKind.UNROLLED)
_STMT_HEAD = ("work", "loops", "guarded", "local_dest", "vector_width", "unroll_length", "parallel_extent",
              "parallel_launches", "guard_vectorized", "guard_unrolled")
_LEVEL = ("extent", *(f"is_{k.value}" for k in _KINDS))
_ACCESS = ("stride", "bytes", "reuse")
_GLOBAL = ("statements", "global_alloc_bytes", "local_alloc_bytes", "shared_alloc_bytes",
           "parallel_loops", "parallel_launches", "parallel_max_extent", "serial_work")
_STMT_LENGTH = len(_STMT_HEAD) + _MAX_LEVELS * (len(_LEVEL) + _MAX_ACCESSES * len(_ACCESS))
ITERVAR_LENGTH = len(_GLOBAL) + (_REDUCE_SLOTS + _OTHER_SLOTS) * _STMT_LENGTH


def _log(x: float) -> float:
    return math.log2(1.0 + abs(x))


# ---------------------------------------------------------------------------- IR walk


@dataclass
class _Loop:
    var_id: int
    extent: int
    kind: S.ForKind
    var: object = None  # the loop variable (for loop_rows)


@dataclass
class _Access:
    buffer: object
    coeffs: dict[int, float]   # loop var id -> stride of the flattened index (elements)
    elem_bytes: int


@dataclass
class _Statement:
    loops: list[_Loop]
    accesses: list[_Access]
    guarded: bool
    guard_vars: frozenset[int]  # ids of the loop vars that the enclosing guards test
    is_update: bool
    dest_scope: str
    order: int
    arith: tuple[int, int, int] = (0, 0, 0)  # adds (and subtracts), multiplies, divides of the value
    work: int = field(init=False)

    def __post_init__(self) -> None:
        self.work = math.prod(lp.extent for lp in self.loops)


def _elem_bytes(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return max(1, int(digits) // 8) if digits else 1


def _coeffs(e, out: dict[int, float], scale: float = 1.0) -> None:
    """Add ``scale`` times the linear coefficients of ``e``'s variables to ``out``.

    Affine parts are exact; ``x // c`` counts as ``x / c`` and ``x % c`` as ``x``
    (strides, not addresses); any other node marks its variables with stride 1.
    """
    _Coeffs(out).add(e, scale)


class _Coeffs(Functor):
    """Accumulates into ``out``; ``scale`` is the coefficient of the node being visited."""

    def __init__(self, out: dict[int, float]):
        self.out = out
        self.scale = 1.0

    def add(self, e, scale: float) -> None:
        saved, self.scale = self.scale, scale
        try:
            self.visit(e)
        finally:
            self.scale = saved

    def visit_Var(self, e):
        self.out[id(e)] = self.out.get(id(e), 0.0) + self.scale

    def visit_IntImm(self, e):
        return

    visit_FloatImm = visit_IntImm

    def visit_Add(self, e):
        self.add(e.a, self.scale)
        self.add(e.b, self.scale)

    def visit_Sub(self, e):
        self.add(e.a, self.scale)
        self.add(e.b, -self.scale)

    def visit_Mul(self, e):
        a, b = E.const_value(e.a), E.const_value(e.b)
        if b is not None:
            self.add(e.a, self.scale * b)
        elif a is not None:
            self.add(e.b, self.scale * a)
        else:
            self.visit_Add(e)

    def visit_FloorDiv(self, e):
        c = E.const_value(e.b)
        self.add(e.a, self.scale / c if c else self.scale)

    visit_Div = visit_FloorDiv

    def visit_FloorMod(self, e):
        self.add(e.a, self.scale)

    def visit_Cast(self, e):
        self.add(e.value, self.scale)

    def visit_Ramp(self, e):
        self.add(e.base, self.scale)

    visit_Broadcast = visit_Cast

    def generic_visit(self, e):  # min/max/select/calls: dependence, stride unknown
        for child in children(e):
            self.add(child, self.scale)


class _Loads(IRVisitor):
    """The buffer loads of an expression, in evaluation order."""

    def __init__(self):
        self.loads: list[E.BufferLoad] = []

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.loads.append(node)


class _Arith(IRVisitor):
    """Counts the adds (and subtracts), multiplies and divides (and modulos) of an expression,
    the indices of its reads included."""

    def __init__(self):
        self.counts = [0, 0, 0]

    def _count(self, slot: int, node) -> None:
        self.counts[slot] += 1
        self.generic_visit(node)

    def visit_Add(self, node) -> None:
        self._count(0, node)

    visit_Sub = visit_Add

    def visit_Mul(self, node) -> None:
        self._count(1, node)

    def visit_Div(self, node) -> None:
        self._count(2, node)

    visit_FloorDiv = visit_FloorMod = visit_Div


class _Collector(IRVisitor):
    """Statements with their loop nests; allocation sizes per scope."""

    def __init__(self):
        self.loops: list[_Loop] = []
        self.guards: list[set[int]] = []  # loop var ids tested by each enclosing guard
        self.statements: list[_Statement] = []
        self.alloc_bytes = {"global": 0, "local": 0, "shared": 0}
        self.double_buffered: set[int] = set()  # ids of the data Vars of double-buffered stages
        self.parallel_loops = 0
        self.parallel_launches = 0  # times parallel loops are entered (a fork and join each)
        self.parallel_max_extent = 0

    def visit_AttrStmt(self, node: S.AttrStmt) -> None:
        if node.key == DOUBLE_BUFFER_SCOPE:
            self.double_buffered.add(id(node.node))
        self.visit(node.body)

    def visit_For(self, node: S.For) -> None:
        extent = E.const_value(node.extent)
        if not isinstance(extent, int):
            extent = _upper_extent(node.extent)
        kind = S.ForKind.PARALLEL if node.kind is S.ForKind.THREAD_BINDING else node.kind
        if kind is S.ForKind.PARALLEL:
            self.parallel_loops += 1
            self.parallel_launches += math.prod(lp.extent for lp in self.loops)
            self.parallel_max_extent = max(self.parallel_max_extent, extent)
        self.loops.append(_Loop(id(node.loop_var), max(1, extent), kind, node.loop_var))
        self.visit(node.body)
        self.loops.pop()

    def visit_IfThenElse(self, node: S.IfThenElse) -> None:
        tested: dict[int, float] = {}
        _coeffs(node.condition, tested)
        self.guards.append(set(tested))
        self.visit(node.then_case)
        if node.else_case is not None:
            self.visit(node.else_case)
        self.guards.pop()

    def visit_Allocate(self, node: S.Allocate) -> None:
        size = math.prod(int(E.const_value(d) or 1) for d in node.buffer.shape)
        scope = node.buffer.scope if node.buffer.scope in self.alloc_bytes else "global"
        copies = 2 if id(node.buffer.data) in self.double_buffered else 1  # what the GPU will hold
        self.alloc_bytes[scope] += copies * size * _elem_bytes(node.buffer.dtype)
        self.visit(node.body)

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        finder = _Loads()
        finder.visit(node.value)
        dest = _access(node.buffer, node.indices)
        accesses = [dest]
        seen = {id(node.buffer.data)}
        is_update = False
        for load in finder.loads:
            if load.buffer.data is node.buffer.data:
                is_update = True
            if id(load.buffer.data) in seen:
                continue
            seen.add(id(load.buffer.data))
            accesses.append(_access(load.buffer, load.indices))
        guard_vars = frozenset().union(*self.guards)
        arith = _Arith()
        arith.visit(node.value)
        self.statements.append(_Statement(list(self.loops), accesses, bool(self.guards), guard_vars,
                                          is_update, node.buffer.scope, len(self.statements),
                                          tuple(arith.counts)))


def _access(buffer, indices) -> _Access:
    coeffs: dict[int, float] = {}
    if len(indices) == 1:
        _coeffs(indices[0], coeffs)
    else:  # not flattened: row-major strides of constant shapes
        stride = 1.0
        for idx, dim in zip(reversed(indices), reversed(buffer.shape)):
            _coeffs(idx, coeffs, stride)
            stride *= float(E.const_value(dim) or 1)
    return _Access(buffer, coeffs, _elem_bytes(buffer.dtype))


def _upper_extent(extent) -> int:
    """A constant upper bound of a symbolic loop extent (1 when none is known)."""
    hi = Analyzer().upper_bound(extent)
    return int(hi) if hi is not None and hi > 0 else 1


# ---------------------------------------------------------------------------- encoding


def _statement_features(st: _Statement) -> list[float]:
    inner = st.loops[::-1][:_MAX_LEVELS]
    vector = math.prod(lp.extent for lp in st.loops if lp.kind is S.ForKind.VECTORIZED)
    unroll = math.prod(lp.extent for lp in st.loops if lp.kind is S.ForKind.UNROLLED)
    parallel = math.prod(lp.extent for lp in st.loops if lp.kind is S.ForKind.PARALLEL)
    first_parallel = next((k for k, lp in enumerate(st.loops) if lp.kind is S.ForKind.PARALLEL), None)
    launches = 0 if first_parallel is None else math.prod(lp.extent for lp in st.loops[:first_parallel])
    out = [_log(st.work), float(len(st.loops)), float(st.guarded), float(st.dest_scope != "global"),
           _log(vector), _log(unroll), _log(parallel), _log(launches),
           *(float(any(lp.kind is k and lp.var_id in st.guard_vars for lp in st.loops))
             for k in (S.ForKind.VECTORIZED, S.ForKind.UNROLLED))]
    for lp in inner:
        out.append(_log(lp.extent))
        out += [float(lp.kind is k) for k in _KINDS]
    out += [0.0] * ((_MAX_LEVELS - len(inner)) * len(_LEVEL))
    for acc in st.accesses[:_MAX_ACCESSES]:
        for level in range(len(inner)):  # the nest grows outwards: this loop and those inside it
            stride, footprint, iters = _footprint(acc, inner[level::-1])
            out += [_log(stride), _log(footprint * acc.elem_bytes), _log(iters / footprint)]
        out += [0.0] * ((_MAX_LEVELS - len(inner)) * len(_ACCESS))
    out += [0.0] * ((_MAX_ACCESSES - len(st.accesses[:_MAX_ACCESSES])) * _MAX_LEVELS * len(_ACCESS))
    return out


def itervar_features(func_or_module) -> np.ndarray:
    """The ``itervar`` feature vector (length :data:`ITERVAR_LENGTH`) of a lowered function.

    Takes a :class:`~compiler.tir.PrimFunc` or an :class:`~compiler.tir.IRModule` (whose
    functions' statements are pooled). Lower with ``simple_mode=True`` to keep loop kinds.
    """
    collector = _collect(func_or_module)
    stmts = collector.statements
    reductions, others = _slots(stmts)
    out = [float(len(stmts))] + [_log(collector.alloc_bytes[s]) for s in ("global", "local", "shared")]
    out += [float(collector.parallel_loops), _log(collector.parallel_launches),
            _log(collector.parallel_max_extent),
            _log(sum(st.work for st in stmts if not any(lp.kind is S.ForKind.PARALLEL for lp in st.loops)))]
    for group, slots in ((reductions, _REDUCE_SLOTS), (others, _OTHER_SLOTS)):
        for st in group:
            out += _statement_features(st)
        out += [0.0] * ((slots - len(group)) * _STMT_LENGTH)
    return np.asarray(out, dtype=np.float32)


def _collect(func_or_module) -> _Collector:
    """The statements of a PrimFunc or of every function of an IRModule."""
    funcs = list(func_or_module.functions.values()) if isinstance(func_or_module, IRModule) \
        else [func_or_module]
    collector = _Collector()
    for f in funcs:
        collector.visit(f.body)
    return collector


def _slots(stmts: list[_Statement]) -> tuple[list[_Statement], list[_Statement]]:
    """The statements that get feature slots: reductions, then the others, each by work."""
    def by_work(group):
        return sorted(group, key=lambda st: (-st.work, st.order))

    return (by_work([st for st in stmts if st.is_update])[:_REDUCE_SLOTS],
            by_work([st for st in stmts if not st.is_update])[:_OTHER_SLOTS])


def _footprint(acc: _Access, loops: list[_Loop]) -> tuple[float, float, float]:
    """``(stride, elements touched, iterations)`` of access ``acc`` in the loops ``loops``
    (those from one loop level inwards): the elements are the smaller of the distinct index
    combinations and the span of the addresses."""
    iters, touched, span = 1, 1, 1.0
    for lp in loops:
        stride = acc.coeffs.get(lp.var_id, 0.0)
        iters *= lp.extent
        if stride:
            touched *= lp.extent
            span += abs(stride) * (lp.extent - 1)
    return (acc.coeffs.get(loops[0].var_id, 0.0) if loops else 0.0), max(1.0, min(float(touched), span)), \
        float(iters)


def loop_rows(func_or_module, take_log: bool = False) -> list[list]:
    """Features of every loop of a lowered function, one row per loop in the order loops are
    first entered, in AutoTVM's layout (``autotvm.feature.get_itervar_feature``)::

        [[loop name, loop var],
         ["_attr_", extent, nest level, iterations down to it (top-down), iterations below it
          (bottom-up), is_serial, is_parallel, is_vectorized, is_unrolled],
         ["_arith_", adds, multiplies, divides],             # run under one entry to the loop
         [buffer name, stride, bytes touched, reuse], ...]   # each buffer used under the loop

    A buffer's numbers are those of its statement under the loop that touches the most
    bytes (of those, the most reused); the stride is of the buffer's flattened index along
    the loop (elements), bytes and reuse (iterations per element touched) cover the loops
    from this one inwards. With ``take_log``, sizes are ``log2(1 + x)``."""
    fn = _log if take_log else float
    loops: dict[int, list] = {}   # var id -> [name, var, attr, arith counts, {buffer name: touch}]
    for st in _collect(func_or_module).statements:
        for level, lp in enumerate(st.loops):
            inner = st.loops[level:]
            row = loops.get(lp.var_id)
            if row is None:
                top = math.prod(x.extent for x in st.loops[:level + 1])
                attr = ["_attr_", fn(lp.extent), float(level), fn(top), 0.0,
                        *(float(lp.kind is k) for k in _KINDS)]
                row = loops[lp.var_id] = [lp.var.name, lp.var, attr, [0, 0, 0], {}]
            bottom = math.prod(x.extent for x in inner)
            row[2][4] = max(row[2][4], fn(bottom))
            row[3] = [total + bottom * n for total, n in zip(row[3], st.arith)]
            for acc in st.accesses:
                stride, touched, iters = _footprint(acc, inner)
                touch = [_log(stride) if take_log else stride, fn(touched * acc.elem_bytes),
                         fn(iters / touched)]
                name = acc.buffer.name
                if name not in row[4] or touch[1:] > row[4][name][1:]:  # most bytes, then most reuse
                    row[4][name] = touch
    return [[[name, var], attr, ["_arith_", *map(fn, arith)],
             *([buf, *touch] for buf, touch in touches.items())]
            for name, var, attr, arith, touches in loops.values()]


def curve_features(func_or_module, sample_n: int = 30) -> np.ndarray:
    """A relation feature of fixed length whatever the loop structure: for each buffer slot
    (:data:`ITERVAR_LENGTH`'s statements and accesses), the bytes it touches and their reuse
    as the loop nest grows from its innermost loop outwards, sampled where the iterations
    reach ``2**0, 2**1, ..., 2**(sample_n - 1)``; both ``log2(1 + x)``. Length
    ``(slots) * accesses * 2 * sample_n``; empty slots are zeros."""
    if sample_n < 1:
        raise ValueError(f"sample_n must be >= 1, got {sample_n}")
    reductions, others = _slots(_collect(func_or_module).statements)
    out: list[float] = []
    for group, slots in ((reductions, _REDUCE_SLOTS), (others, _OTHER_SLOTS)):
        for st in group:
            levels = [_footprint(acc, st.loops[len(st.loops) - k:]) for acc in st.accesses[:_MAX_ACCESSES]
                      for k in range(len(st.loops) + 1)]
            per_access = len(st.loops) + 1
            for a in range(len(st.accesses[:_MAX_ACCESSES])):
                curve = levels[a * per_access:(a + 1) * per_access]  # iterations grow along it
                bytes_at, reuse_at = [], []
                for k in range(sample_n):
                    point = next((c for c in curve if c[2] >= 2 ** k), curve[-1])
                    bytes_at.append(_log(point[1] * st.accesses[a].elem_bytes))
                    reuse_at.append(_log(point[2] / point[1]))
                out += bytes_at + reuse_at
            out += [0.0] * ((_MAX_ACCESSES - len(st.accesses[:_MAX_ACCESSES])) * 2 * sample_n)
        out += [0.0] * ((slots - len(group)) * _MAX_ACCESSES * 2 * sample_n)
    return np.asarray(out, dtype=np.float32)


def itervar_feature_names() -> list[str]:
    """Names of the entries of :func:`itervar_features`, in order."""
    names = list(_GLOBAL)
    slots = [f"reduce{k}" for k in range(_REDUCE_SLOTS)] + [f"other{k}" for k in range(_OTHER_SLOTS)]
    for slot in slots:
        names += [f"{slot}.{h}" for h in _STMT_HEAD]
        for lv in range(_MAX_LEVELS):
            names += [f"{slot}.L{lv}.{x}" for x in _LEVEL]
        for a in range(_MAX_ACCESSES):
            for lv in range(_MAX_LEVELS):
                names += [f"{slot}.buf{a}.L{lv}.{x}" for x in _ACCESS]
    return names


def config_features(task, config, feature_type: str = "itervar") -> np.ndarray | None:
    """Features of ``config`` (a ConfigEntity of ``task``'s space); None when the
    template cannot instantiate or lower it (the config will fail to build)."""
    if feature_type == "knob":
        return task.config_space.encode(config).astype(np.float32)
    if feature_type not in FEATURE_TYPES:
        raise ValueError(f"unknown feature type {feature_type!r}; use one of {FEATURE_TYPES}")
    try:
        s, args = task.instantiate(config)
        mod = compiler.lower(s, args, simple_mode=True)
    except Exception:  # a config the template rejects: no features, predicted worst
        return None
    return curve_features(mod) if feature_type == "curve" else itervar_features(mod)


def default_feature_workers() -> int:
    """Worker processes for features: ``AUTOTUNE_FEATURE_WORKERS`` if set (0 or 1: none),
    else this process's CPUs, at most :data:`MAX_FEATURE_WORKERS`."""
    text = os.environ.get("AUTOTUNE_FEATURE_WORKERS", "").strip()
    if text:
        try:
            return max(0, int(text))
        except ValueError:
            raise ValueError(f"AUTOTUNE_FEATURE_WORKERS must be a whole number, got {text!r}") from None
    return min(MAX_FEATURE_WORKERS, len(os.sched_getaffinity(0)))


def check_workers(workers, name: str = "workers") -> None:
    """Raise ValueError, naming the argument ``name``, unless ``workers`` is None or a whole
    number >= 0."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise ValueError(f"{name} must be a whole number >= 0 (0 or 1: none), got {workers!r}")


class _SharedWorkers:
    """The feature workers of this process: one pool, shared by every cache that uses it
    (``tune_tasks`` makes a tuner, and so a cache, per task) and stopped when the last of
    them is closed. ``lock`` is held while a cache's calls are in the pool."""

    def __init__(self):
        self.lock = threading.RLock()
        self._pool = None
        self._users: set[int] = set()

    def acquire(self, user: int, size: int):
        """The pool (``size`` workers if it has to be made), held for ``user`` (an id)."""
        with self.lock:
            if self._pool is None:
                self._pool = WorkerPool(size, name="features", entry="autotune.tuner.feature_worker")
            self._users.add(user)
            return self._pool

    def release(self, user: int) -> None:
        """``user`` is done with the pool; the last one out stops the workers."""
        with self.lock:
            self._users.discard(user)
            if not self._users and self._pool is not None:
                self._pool.close()
                self._pool = None


_WORKERS = _SharedWorkers()


class FeatureCache:
    """Features by (workload, config index), computed once.

    ``get(task, indices)`` returns ``(matrix, ok)``: one row per index (NaN rows where
    :func:`config_features` gave None) and a bool mask of the rows that have features.
    Rows of knob features are padded with zeros to the longest seen for a template.

    ``itervar`` features missing from the cache are computed by up to ``workers`` worker
    processes (default :func:`default_feature_workers`) once the cache's features would have
    taken longer than :data:`PARALLEL_AFTER_S` to compute here (judged by the time the ones
    computed here took); from then on every request of more than :data:`PARALLEL_MIN_S` goes
    to them, until :meth:`close`. The caches of a process share one set of workers, stopped
    when the last cache using them is closed. Rows a worker fails to give (it crashed, hung
    or could not start) are computed here instead.
    """

    def __init__(self, feature_type: str = "itervar", workers: int | None = None):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"unknown feature type {feature_type!r}; use one of {FEATURE_TYPES}")
        check_workers(workers)
        self.feature_type = feature_type
        self.workers = default_feature_workers() if workers is None else workers
        self._rows: dict[tuple[str, int], np.ndarray | None] = {}
        self._pool = None  # the shared workers, while this cache holds them
        self._seconds, self._computed = 0.0, 0  # time spent on the rows computed here
        self._fill_seconds, self._filled = 0.0, 0  # wall time of fill() and the rows it computed

    def __len__(self) -> int:
        return len(self._rows)

    def row(self, task, index: int) -> np.ndarray | None:
        key = (task.workload_key, int(index))
        if key not in self._rows:
            start = time.perf_counter()
            self._rows[key] = config_features(task, task.config_space.from_index(int(index), check=False),
                                              self.feature_type)
            self._seconds += time.perf_counter() - start
            self._computed += 1
        return self._rows[key]

    def cached(self, task) -> list[int]:
        """The indices of ``task``'s configs whose features are cached (those that have some)."""
        key = task.workload_key
        return [i for (k, i), row in self._rows.items() if k == key and row is not None]

    def missing(self, task, indices) -> list[int]:
        """Those of ``indices`` whose features are not cached yet, each once, in their order."""
        key = task.workload_key
        return list(dict.fromkeys(int(i) for i in indices if (key, int(i)) not in self._rows))

    def fill(self, task, indices) -> None:
        """Compute the features of those of ``indices`` not cached yet (see the class)."""
        missing = self.missing(task, indices)
        if missing:
            start = time.perf_counter()
            self._fill(task, missing)
            self._fill_seconds += time.perf_counter() - start
            self._filled += len(missing)

    @property
    def seconds_per_row(self) -> float | None:
        """Wall seconds a row of features has cost so far (the workers' rows included, in
        parallel as they ran); None before any was computed."""
        return self._fill_seconds / self._filled if self._filled else None

    def _fill(self, task, missing: list[int]) -> None:
        if self.feature_type != "knob" and self.workers > 1 and len(missing) > 1:  # lowering: slow
            if not self._computed:
                self.row(task, missing.pop(0))  # its time is the estimate for the rest
            estimate = len(missing) * self._seconds / self._computed
            started = self._pool is not None or self._seconds + estimate > PARALLEL_AFTER_S
            if started and estimate > PARALLEL_MIN_S:
                missing = self._fill_in_workers(task, missing)
        for i in missing:
            self.row(task, i)

    def get(self, task, indices, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        self.fill(task, indices)
        rows = [self.row(task, i) for i in indices]
        ok = np.array([r is not None for r in rows], dtype=bool)
        if width is None:
            width = max((len(r) for r in rows if r is not None), default=0)
        out = np.full((len(rows), width), np.nan, dtype=np.float32)
        for k, r in enumerate(rows):
            if r is not None:
                out[k, :] = 0.0
                out[k, :min(width, len(r))] = r[:width]
        return out, ok

    def close(self) -> None:
        """Let go of the worker processes (stopped if no other cache uses them; they start
        again when needed)."""
        if self._pool is not None:
            self._pool = None
            self._release()  # the finalizer: runs once

    def _fill_in_workers(self, task, indices: list[int]) -> list[int]:
        """Cache the features of ``indices`` computed by the workers; returns the indices
        they gave none for (to be computed here)."""
        size = max(1, min(_MAX_CHUNK, -(-len(indices) // self.workers)))
        chunks = [indices[k:k + size] for k in range(0, len(indices), size)]
        with _WORKERS.lock:
            self._call_workers(task, chunks, timeout=max(60.0, 20 * size * self._seconds / self._computed))
        return [i for i in indices if (task.workload_key, i) not in self._rows]

    def _call_workers(self, task, chunks: list[list[int]], timeout: float) -> None:
        """Cache what the workers give for each chunk of indices (one call per chunk)."""
        spec = task.to_json(by_value=True)
        try:
            if self._pool is None:
                self._pool = _WORKERS.acquire(id(self), self.workers)
                # A cache dropped without close() lets go of the workers too.
                self._release = weakref.finalize(self, _WORKERS.release, id(self))
            for k, chunk in enumerate(chunks):
                self._pool.submit(k, "features", {"task": spec, "feature_type": self.feature_type,
                                                  "indices": chunk}, timeout)
            pending = set(range(len(chunks)))
            while pending:
                for done in self._pool.wait():
                    pending.discard(done.tag)
                    if done.status != "ok":
                        why = (str(done.value).strip().splitlines() or [""])[-1]
                        logger.warning("a feature worker gave no features (%s: %s); computing them here",
                                       done.status, why)
                        continue
                    for i, r in zip(chunks[done.tag], done.value["rows"], strict=True):
                        self._rows[(task.workload_key, i)] = None if r is None else np.asarray(r, np.float32)
        except MeasureError as exc:  # the workers cannot start here: stop trying
            logger.warning("feature workers unavailable (%s); features are computed in this process", exc)
            self.close()
            self.workers = 0
        except BaseException:  # interrupted: no call of this fill may answer a later one
            if self._pool is not None:
                self._pool.close()  # (it starts afresh for the next call)
            raise


# ---------------------------------------------------------------------------- in a feature worker

_worker_tasks: dict[str, Task] = {}  # the tasks this feature worker has seen, by their JSON


def worker_features(request: dict, phase=None) -> dict:
    """What a feature worker answers: ``{"task": Task.to_json(by_value=True), "feature_type",
    "indices"}`` -> ``{"rows"}``, one list of floats per index, or None where the config has
    no features (computed as :func:`config_features` computes them here)."""
    key = json.dumps(request["task"], sort_keys=True)
    task = _worker_tasks.get(key)
    if task is None:
        task = _worker_tasks[key] = Task.from_json(request["task"], allow_code=True)
    space, kind = task.config_space, request["feature_type"]
    rows = []
    for index in request["indices"]:
        row = config_features(task, space.from_index(int(index), check=False), kind)
        rows.append(None if row is None else row.tolist())
    return {"rows": rows}


#: The calls a feature worker (:mod:`autotune.tuner.feature_worker`) answers.
CALLS = {"features": worker_features}
