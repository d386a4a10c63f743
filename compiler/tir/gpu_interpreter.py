"""Running CUDA kernels' loop IR on the CPU, every thread of a launch at once, with real
barrier semantics.

For machines without a GPU (the ``COMPILER_CUDA_SIMULATOR`` device of
:mod:`compiler.backends.cuda_simulator`, and tests). The threads of a launch run in
lockstep, SIMT fashion: each statement runs for all threads at once on numpy arrays with
one entry per thread (vector values add a dimension for their lanes), under a mask of the
threads that take it. Branches narrow the mask; a loop whose bounds differ between
threads runs until its last thread is done, each thread masked off once it is. A barrier
must be reached by every thread of a block or by none (anything else is an error: a
barrier in code that only some threads of a block run). Values follow
:mod:`compiler.tir.evaluate`: integers wrap to their width, ``FloorDiv``/``FloorMod`` round
towards minus infinity, ``Div`` of integers truncates, floats compute in their own
precision. Every access is checked against its buffer's extent. Shared and local buffers
start filled with NaN (or a large integer), so reading an element nobody wrote shows as a
wrong result. Big grids run a group of blocks at a time.

Running threads in lockstep would hide data races as surely as running them one after
another: whichever order the simulator picks, the result can look right. So every access
to memory that threads share is recorded, and an unordered pair of accesses to one
element by two threads, at least one of them a write, raises :class:`DataRaceError`
naming the kernel, the buffer, the element, the two threads and the kind of race:

* shared memory: two threads of a block touch the same element between two barriers
  (read/write or write/write);
* global memory, within one launch: two threads write the same element (write/write),
  or one thread reads an element that another writes (read/write, whichever comes
  first); threads of one block are ordered by the barriers between them, threads of
  different blocks never are.

Writes of one value by several threads are no race: every thread storing the same
result into one shared element (a cooperative copy that not every thread axis splits,
the result of a cross-thread reduction) is well defined on the hardware, whichever
store lands last, and a thread that reads back the value it stored itself reads it
whatever the order of the others' identical stores. Nor is a store that leaves an
element as it was, which no other thread can tell from no store. Of several racing pairs
found by one statement, the one whose earlier access has the lowest thread (block, then
thread index) is reported.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..runtime.cuda import evaluate_size, program_steps
from . import expr as E
from . import stmt as S
from .analysis import stored_buffers
from .buffer import Buffer
from .evaluate import INTRINSICS, _extern_math
from .function import PrimFunc
from .functor import Functor
from .interpreter import InterpreterError

__all__ = ["run_kernel", "run_gpu_function", "run_plan", "InterpreterError", "DataRaceError",
           "MAX_GROUP_THREADS"]

#: At most this many threads (whole blocks) run in lockstep at a time.
MAX_GROUP_THREADS = 1 << 16
_AXES = ("x", "y", "z")


class DataRaceError(InterpreterError):
    """Two threads of a kernel touched one memory element without a barrier between them,
    at least one of them writing."""


def _np(dtype: str) -> np.dtype:
    """The numpy dtype that values of ``dtype`` are computed in (bfloat16: float32, as the code
    generators compute it; its memory holds bits, see :func:`_memory_np`)."""
    return np.dtype(np.float32) if dtype == "bfloat16" else _memory_np(dtype)


def _memory_np(dtype: str) -> np.dtype:
    """The numpy dtype of memory holding ``dtype`` elements."""
    return np.dtype(dtypes.to_numpy(dtype))


def _poison(size: int, dtype: str) -> np.ndarray:
    np_dtype = _memory_np(dtype)
    if dtype == "bfloat16":  # the bits of a NaN
        return np.full(size, 0x7FC0, dtype=np_dtype)
    if dtypes.is_float(dtype):
        return np.full(size, np.nan, dtype=np_dtype)
    return np.full(size, np.iinfo(np_dtype).max if dtype != "bool" else 0, dtype=np_dtype)


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality where NaN equals NaN (NaN stays NaN)."""
    eq = a == b
    if a.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


# ----------------------------------------------------------------------------- the launch


class _Launch:
    """One launch of a kernel: its grid, the global buffers, and what the race checks
    remember across the groups of blocks it runs in."""

    def __init__(self, kernel: PrimFunc, sizes: dict, memory: dict, watched: dict, check_races: bool):
        self.name = kernel.name
        self.block_dims = tuple(sizes.get(f"threadIdx.{a}", 1) for a in _AXES)
        self.grid_dims = tuple(sizes.get(f"blockIdx.{a}", 1) for a in _AXES)
        self.tpb = int(np.prod(self.block_dims))
        self.nblocks = int(np.prod(self.grid_dims))
        self.memory = memory      # buffer data var -> flat global array
        self.check_races = check_races
        self.epochs = np.zeros(self.nblocks, dtype=np.int64)  # barriers each block has passed
        # data var -> the race log of a global buffer the kernel writes
        self.global_logs = {data: _ElementLog(memory[data], name, shared=False,
                                              span=max(1, self.nblocks * self.tpb))
                            for data, name in watched.items()} if check_races else {}

    def block_coords(self, b: int) -> tuple:
        gx, gy, _ = self.grid_dims
        return b % gx, (b // gx) % gy, b // (gx * gy)

    def thread_coords(self, t: int) -> tuple:
        tx, ty, _ = self.block_dims
        return t % tx, (t // tx) % ty, t // (tx * ty)

    def who(self, g: int) -> str:
        """The name of global thread ``g`` (block-major order)."""
        x, y, z = self.thread_coords(g % self.tpb)
        bx, by, bz = self.block_coords(g // self.tpb)
        return f"thread ({x}, {y}, {z}) of block ({bx}, {by}, {bz})"

    def race(self, scope: str, name: str, index: int, kind: str, first: str, second: str) -> DataRaceError:
        return DataRaceError(f"kernel {self.name!r}: data race ({kind}) on {scope} buffer {name!r}, "
                             f"element {index}: {first}, and {second}, with no barrier between them")


class _ElementLog:
    """The accesses to the elements of one buffer that no barrier has ordered yet.

    Per element: one thread that wrote it (``w1``; ``multi`` when more did, all storing the
    same value ``wval``, else a race was raised), the barrier epoch of its block then, the
    value at the last barrier (``before``, shared memory only), and up to two threads that
    read it without having written it (``r1``, ``r2``, with their blocks' epochs then).
    ``keys`` hold ``element * span + thread`` of the writes to elements with several
    writers, to tell whether a thread is among them.
    """

    def __init__(self, array: np.ndarray, name: str, shared: bool, span: int = 1 << 40):
        n = array.size
        self.array, self.name, self.shared, self.span = array, name, shared, span
        self.w1 = np.full(n, -1, dtype=np.int64)
        self.wepoch = np.zeros(n, dtype=np.int64)
        self.wval = np.empty(n, dtype=array.dtype)
        self.multi = np.zeros(n, dtype=bool)
        self.r1 = np.full(n, -1, dtype=np.int64)
        self.r2 = np.full(n, -1, dtype=np.int64)
        self.r1epoch = np.zeros(n, dtype=np.int64)
        self.r2epoch = np.zeros(n, dtype=np.int64)
        self.before = array.copy() if shared else None
        self.keys: list[np.ndarray] = []

    def clear(self, elements: slice | None = None) -> None:
        """Forget the accesses to ``elements`` (all by default): a barrier ordered them."""
        sl = slice(None) if elements is None else elements
        self.w1[sl] = -1
        self.multi[sl] = False
        self.r1[sl] = -1
        self.r2[sl] = -1
        if self.before is not None:
            self.before[sl] = self.array[sl]
        if elements is None:
            self.keys = []
        elif self.keys:
            k = np.concatenate(self.keys)
            e = k // self.span
            self.keys = [k[(e < sl.start) | (e >= sl.stop)]]

    def is_writer(self, idx: np.ndarray, thr: np.ndarray) -> np.ndarray:
        mine = self.w1[idx] == thr
        several = self.multi[idx] & ~mine
        if several.any():
            keys = np.concatenate(self.keys) if self.keys else np.empty(0, np.int64)
            mine[several] = np.isin(idx[several] * self.span + thr[several], keys)
        return mine

    def other_writer(self, e: int, t: int) -> int:
        """A thread other than ``t`` that wrote element ``e`` (for messages)."""
        if self.w1[e] != t:
            return int(self.w1[e])
        for k in np.concatenate(self.keys):
            if k // self.span == e and k % self.span != t:
                return int(k % self.span)
        return int(self.w1[e])


def _first(bad: np.ndarray, others: np.ndarray, lanes: np.ndarray) -> int:
    """The position among ``bad`` to report: the lowest other thread, then the lowest lane."""
    pos = np.flatnonzero(bad)
    return int(pos[np.lexsort((lanes[pos], others[pos]))[0]])


# ----------------------------------------------------------------------------- groups of blocks


class _Group:
    """The threads of some consecutive blocks of a launch, running in lockstep."""

    def __init__(self, launch: _Launch, first_block: int, nblocks: int, env: dict, thread_vars: dict):
        self.launch = launch
        self.first_block = first_block
        self.nblk = nblocks
        tpb = launch.tpb
        self.T = nblocks * tpb
        lane = self.lanes = np.arange(self.T, dtype=np.int64)
        self.lane_block = lane // tpb                          # block index within the group
        self.gthread = lane + first_block * tpb                 # thread index within the launch
        self.gblock = self.lane_block + first_block             # block index within the launch
        self.all = np.ones((self.T, 1), dtype=bool)
        self.env = dict(env)
        t = lane % tpb
        b = self.gblock
        tx, ty, _ = launch.block_dims
        gx, gy, _ = launch.grid_dims
        coords = {"threadIdx.x": t % tx, "threadIdx.y": (t // tx) % ty, "threadIdx.z": t // (tx * ty),
                  "blockIdx.x": b % gx, "blockIdx.y": (b // gx) % gy, "blockIdx.z": b // (gx * gy)}
        for tag, var in thread_vars.items():
            self.env[var] = coords[tag].astype(_np(var.dtype)).reshape(-1, 1)
        self.memory: dict = {}    # data var -> (flat array, per-thread base (T, 1) or None, size, kind)
        for data, arr in launch.memory.items():
            self.memory[data] = (arr, None, arr.size, "global")
        self.shared: dict = {}    # data var -> (flat array, size), kept for the whole group
        self.shared_logs: dict = {}  # data var -> _ElementLog

    # -- memory ------------------------------------------------------------------

    def allocate(self, buf: Buffer, size: int):
        if buf.scope == "shared":
            held = self.shared.get(buf.data)
            if held is None:
                arr = _poison(self.nblk * size, buf.dtype)
                held = self.shared[buf.data] = (arr, size)
                if self.launch.check_races:
                    self.shared_logs[buf.data] = _ElementLog(arr, buf.name, shared=True, span=self.T)
            arr, size = held
            base = (self.lane_block * size).reshape(-1, 1)
            return arr, base, size, "shared"
        arr = _poison(self.T * size, buf.dtype)
        base = (np.arange(self.T, dtype=np.int64) * size).reshape(-1, 1)
        return arr, base, size, "local"

    def locate(self, buf: Buffer, flat: np.ndarray, m: np.ndarray, what: str):
        """The flat positions of ``buf[flat]`` for the threads and lanes of mask ``m``
        (broadcast to ``flat``), checked against the buffer's extent: the memory, its kind,
        the positions, the thread of each, and the mask of the (threads, lanes) they are for
        (None for one lane in every thread)."""
        try:
            arr, base, size, kind = self.memory[buf.data]
        except KeyError:
            raise InterpreterError(f"kernel {self.launch.name!r}: buffer {buf.name!r} is neither a "
                                   "parameter nor allocated") from None
        if flat.shape[1] == 1 and (m is self.all or m.all()):  # the common case: a scalar in every thread
            sel = flat.reshape(-1) if flat.shape[0] == self.T else np.full(self.T, flat[0, 0])
            sel = sel.astype(np.int64, copy=False)
            rows, mask = self.lanes, None
        else:
            shape = np.broadcast_shapes(flat.shape, m.shape, (self.T, 1))
            mask = np.broadcast_to(m, shape)
            sel = np.broadcast_to(flat, shape)[mask].astype(np.int64, copy=False)
            rows = np.nonzero(mask)[0]
        if sel.size and (sel.min() < 0 or sel.max() >= size):
            bad = sel[(sel < 0) | (sel >= size)][0]
            raise InterpreterError(f"kernel {self.launch.name!r}: {what} of {buf.name}[{bad}] out of "
                                   f"bounds (size {size})")
        pos = sel if base is None else sel + base[rows, 0]
        return arr, kind, pos, rows, mask

    def log_of(self, buf: Buffer, kind: str):
        if kind == "shared":
            return self.shared_logs.get(buf.data)
        if kind == "global":
            return self.launch.global_logs.get(buf.data)
        return None

    def check_read(self, buf: Buffer, kind: str, pos: np.ndarray, rows: np.ndarray) -> None:
        log = self.log_of(buf, kind)
        if log is None or not pos.size:
            return
        launch = self.launch
        thr = rows if kind == "shared" else self.gthread[rows]
        w = log.w1[pos]
        written = w >= 0
        mine = log.is_writer(pos, thr) if written.any() else np.zeros(pos.size, bool)
        if log.shared:
            changed = ~_same(log.wval[pos], log.before[pos])
            bad = written & ~mine & changed
        else:
            wblock = w // launch.tpb
            rblock = self.gblock[rows]
            ordered = (wblock == rblock) & (log.wepoch[pos] != launch.epochs[rblock])
            bad = written & ~mine & ~ordered
        if bad.any():
            k = _first(bad, np.where(w >= 0, w, 0), thr)
            e, t = int(pos[k]), int(thr[k])
            writer = log.other_writer(e, t)
            raise launch.race(kind, buf.name, self._element(log, e), "read/write",
                              f"{self._who(log, writer)} wrote it", f"{self._who(log, t)} reads it")
        # Remember up to two threads that read without having written (with their blocks' epochs).
        blind = ~mine
        p, t = pos[blind], thr[blind]
        epoch = launch.epochs[self.gblock[rows[blind]]]
        free = log.r1[p] < 0
        log.r1[p[free]] = t[free]
        log.r1epoch[p[free]] = epoch[free]
        second = (log.r1[p] != t) & (log.r2[p] < 0)
        log.r2[p[second]] = t[second]
        log.r2epoch[p[second]] = epoch[second]

    def check_write(self, buf: Buffer, kind: str, pos: np.ndarray, rows: np.ndarray, new: np.ndarray):
        log = self.log_of(buf, kind)
        if log is None or not pos.size:
            return
        launch = self.launch
        thr = rows if kind == "shared" else self.gthread[rows]
        # Within the statement: lanes of different threads storing different values to one element.
        order = np.lexsort((thr, pos))
        ps, ts, vs = pos[order], thr[order], new[order]
        dup = (ps[1:] == ps[:-1]) & (ts[1:] != ts[:-1]) & ~_same(vs[1:], vs[:-1])
        if dup.any():
            k = int(np.flatnonzero(dup)[0])
            raise launch.race(kind, buf.name, self._element(log, int(ps[k])), "write/write",
                              f"{self._who(log, int(ts[k]))} wrote {vs[k]}",
                              f"{self._who(log, int(ts[k + 1]))} writes {vs[k + 1]}")
        shared_by = ps[1:][(ps[1:] == ps[:-1]) & (ts[1:] != ts[:-1])]  # stored by several threads here
        w = log.w1[pos]
        if log.shared:
            unordered = (w >= 0) & (w != thr) | log.multi[pos]
        else:
            wblock = w // launch.tpb
            block = self.gblock[rows]
            ordered = (w == thr) | ((wblock == block) & (log.wepoch[pos] != launch.epochs[block]))
            unordered = (w >= 0) & ~ordered
        differs = unordered & ~_same(new, log.wval[pos])
        if differs.any():
            k = _first(differs, w, thr)
            e, t = int(pos[k]), int(thr[k])
            raise launch.race(kind, buf.name, self._element(log, e), "write/write",
                              f"{self._who(log, log.other_writer(e, t))} wrote {log.wval[e]}",
                              f"{self._who(log, t)} writes {new[k]}")
        if log.shared:
            changed = ~_same(new, log.before[pos])
            r1, r2 = log.r1[pos], log.r2[pos]
            other = np.where((r1 >= 0) & (r1 != thr), r1, np.where((r2 >= 0) & (r2 != thr), r2, -1))
            bad = changed & (other >= 0)
            if bad.any():
                k = _first(bad, other, thr)
                raise launch.race(kind, buf.name, self._element(log, int(pos[k])), "read/write",
                                  f"{self._who(log, int(other[k]))} read it",
                                  f"{self._who(log, int(thr[k]))} writes it")
            log.multi[pos] |= unordered
            first = w < 0
            log.w1[pos[first]] = thr[first]
        else:
            # A store that changes what a thread of another block (or of this block, since
            # its last barrier) has read.
            changed = ~_same(new, log.array[pos])
            for r, r_epoch in ((log.r1[pos], log.r1epoch[pos]), (log.r2[pos], log.r2epoch[pos])):
                rblock = r // launch.tpb
                ordered_r = (r == thr) | ((rblock == block) & (r_epoch != launch.epochs[block]))
                bad = changed & (r >= 0) & ~ordered_r
                if bad.any():
                    k = _first(bad, r, thr)
                    reader, writer = launch.who(int(r[k])), launch.who(int(thr[k]))
                    raise launch.race(kind, buf.name, int(pos[k]), "read/write", f"{reader} read it",
                                      f"{writer} writes it")
            log.multi[pos] = unordered
            fresh = ~unordered
            log.w1[pos[fresh]] = thr[fresh]
            log.wepoch[pos[fresh]] = launch.epochs[self.gblock[rows[fresh]]]
        log.multi[shared_by] = True
        log.wval[pos] = new
        several = log.multi[pos]  # only elements with several writers need to know them all
        if several.any():
            log.keys.append(pos[several] * log.span + thr[several])

    def _element(self, log: _ElementLog, e: int) -> int:
        # Shared memory of the group's blocks lies side by side: name the element in its block.
        return e % (log.array.size // self.nblk) if log.shared else e

    def _who(self, log: _ElementLog, t: int) -> str:
        return self.launch.who(t + self.first_block * self.launch.tpb if log.shared else t)

    # -- barriers ------------------------------------------------------------------

    def barrier(self, m: np.ndarray) -> None:
        launch = self.launch
        arrived = np.bincount(self.lane_block[m[:, 0]], minlength=self.nblk)
        partial = (arrived > 0) & (arrived < launch.tpb)
        if partial.any():
            b = int(np.flatnonzero(partial)[0])
            raise InterpreterError(f"kernel {launch.name!r}: {arrived[b]} threads of block "
                                   f"{launch.block_coords(b + self.first_block)} wait at a barrier that "
                                   f"{launch.tpb - arrived[b]} others never reach")
        blocks = np.flatnonzero(arrived)
        launch.epochs[blocks + self.first_block] += 1
        for data, log in self.shared_logs.items():
            size = self.shared[data][1]
            if len(blocks) == self.nblk:
                log.clear()
            else:
                for b in blocks:
                    log.clear(slice(int(b) * size, (int(b) + 1) * size))


# ----------------------------------------------------------------------------- compiling to closures


def _uniform(v: np.ndarray) -> bool:
    return v.shape[0] == 1


def _div_guard(b: np.ndarray) -> np.ndarray:
    # Threads masked off may divide by zero; their result is never used.
    return np.where(b == 0, np.ones_like(b), b)


def _trunc_div(a, b):
    b = _div_guard(b)
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(q.dtype)


_INT_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: _trunc_div,
            E.FloorDiv: lambda a, b: np.floor_divide(a, _div_guard(b)),
            E.FloorMod: lambda a, b: np.remainder(a, _div_guard(b)), E.Min: np.minimum, E.Max: np.maximum}
_FLOAT_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide,
              E.FloorDiv: np.floor_divide, E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum}
_CMP_OPS = {E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater,
            E.GE: np.greater_equal}


class _Compiler(Functor):
    """Turns a kernel's statements into closures ``f(group, mask)`` and its expressions into
    closures ``f(group, mask) -> array`` (one row per thread, or one row for all)."""

    # -- expressions ----------------------------------------------------------------

    def generic_visit(self, node):
        raise InterpreterError(f"the GPU simulator cannot run {type(node).__name__} nodes")

    def visit_Var(self, e: E.Var):
        def var(g, m):
            try:
                return g.env[e]
            except KeyError:
                raise InterpreterError(f"no value for variable {e.name!r}") from None
        return var

    def visit_IntImm(self, e):
        arr = np.array([[e.value]]).astype(_np(e.dtype)) if e.dtype != "bool" else np.array([[bool(e.value)]])
        return lambda g, m: arr

    visit_FloatImm = visit_IntImm

    def visit_BinaryOp(self, e: E.BinaryOp):
        fa, fb = self.visit(e.a), self.visit(e.b)
        if isinstance(e, E.CmpOp):
            op = _CMP_OPS[type(e)]
            return lambda g, m: op(fa(g, m), fb(g, m))
        out = _np(e.dtype)
        op = (_FLOAT_OPS if dtypes.is_float(e.dtype) else _INT_OPS)[type(e)]

        def binary(g, m):
            return op(fa(g, m), fb(g, m)).astype(out, copy=False)
        return binary

    def visit_And(self, e):
        fa, fb = self.visit(e.a), self.visit(e.b)
        is_and = isinstance(e, E.And)

        def logical(g, m):
            # Short-circuit like the generated code: the right side may be undefined otherwise.
            a = fa(g, m).astype(bool)
            sub = m & a if is_and else m & ~a
            if _uniform(a) and not sub.any():
                return a
            b = fb(g, sub).astype(bool)
            return (a & b) if is_and else (a | b)
        return logical

    visit_Or = visit_And

    def visit_Not(self, e):
        fa = self.visit(e.a)
        return lambda g, m: ~fa(g, m).astype(bool)

    def visit_Cast(self, e: E.Cast):
        fv, out = self.visit(e.value), _np(e.dtype)
        if e.dtype == "bool":
            return lambda g, m: fv(g, m) != 0

        return lambda g, m: fv(g, m).astype(out)

    def _select(self, fc, ft, ff):
        def select(g, m):
            c = fc(g, m).astype(bool)
            if _uniform(c) and c.shape[1] == 1:
                return ft(g, m) if c[0, 0] else ff(g, m)
            t = ft(g, m & c) if (m & c).any() else None
            f = ff(g, m & ~c) if (m & ~c).any() else None
            if t is None:
                return f if f is not None else ft(g, m & c)
            return t if f is None else np.where(c, t, f)
        return select

    def visit_Select(self, e: E.Select):
        return self._select(self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value))

    def visit_Call(self, e: E.Call):
        if e.op == "if_then_else":
            return self._select(*(self.visit(a) for a in e.args))
        if e.op in ("call_extern", "call_pure_extern"):
            fn, args = _extern_math(e.args[0].value), e.args[1:]
        else:
            fn, args = INTRINSICS.get(e.op), e.args
        if fn is None:
            name = e.args[0].value if e.op.endswith("extern") else e.op
            raise NotImplementedError(f"the GPU simulator cannot evaluate intrinsic {name!r}")
        fargs = [self.visit(a) for a in args]
        out = _np(e.dtype)

        return lambda g, m: np.asarray(fn(*(f(g, m) for f in fargs))).astype(out, copy=False)

    def visit_Let(self, e: E.Let):
        fv, fb = self.visit(e.value), self.visit(e.body)

        def let(g, m):
            g.env[e.var] = fv(g, m)
            try:
                return fb(g, m)
            finally:
                del g.env[e.var]
        return let

    def visit_Ramp(self, e: E.Ramp):
        fb, fs = self.visit(e.base), self.visit(e.stride)
        steps = np.arange(e.lanes).reshape(1, -1)
        out = _np(e.dtype)
        return lambda g, m: (fb(g, m) + fs(g, m) * steps).astype(out)

    def visit_Broadcast(self, e: E.Broadcast):
        fv = self.visit(e.value)
        return lambda g, m: np.repeat(fv(g, m), e.lanes, axis=1)

    def _flat_index(self, buf: Buffer, indices: tuple):
        """A closure for the flattened element index of ``buf[indices]``."""
        fi = [self.visit(i) for i in indices]
        if buf.strides:
            fs = [self.visit(s) for s in buf.strides]
        elif len(indices) == 1:
            fs = None
        else:
            if len(indices) != len(buf.shape):
                raise InterpreterError(f"{len(indices)} indices for the {len(buf.shape)}-d buffer "
                                       f"{buf.name!r}")
            dims = [self.visit(d) for d in buf.shape]
            fs = []
            for k in range(len(dims)):
                fs.append(_product(dims[k + 1:]))
        fo = None if buf.elem_offset is None else self.visit(buf.elem_offset)

        def flat(g, m):
            total = fi[0](g, m).astype(np.int64)
            if fs is not None:
                total = total * fs[0](g, m)
                for f, s in zip(fi[1:], fs[1:], strict=True):
                    total = total + f(g, m).astype(np.int64) * s(g, m)
            if fo is not None:
                total = total + fo(g, m)
            return total
        return flat

    def visit_BufferLoad(self, e: E.BufferLoad):
        buf = e.buffer
        flat = self._flat_index(buf, e.indices)
        fp = None if e.predicate is None else self.visit(e.predicate)
        widen = buf.dtype == "bfloat16"  # computed in float32, as the code generators do
        out = _np(e.dtype)

        def load(g, m):
            idx = flat(g, m)
            mask = m if fp is None else m & fp(g, m).astype(bool)
            arr, kind, pos, rows, full = g.locate(buf, idx, mask, "read")
            if g.launch.check_races:
                g.check_read(buf, kind, pos, rows)
            values = dtypes.bfloat16_to_float(arr[pos]) if widen else arr[pos]
            if full is None:
                return values.reshape(-1, 1)
            result = np.zeros(full.shape, dtype=out)
            result[full] = values
            return result
        return load

    # -- statements -----------------------------------------------------------------

    def visit_SeqStmt(self, s):
        steps = [self.visit(c) for c in s.seq]

        def seq(g, m):
            for f in steps:
                f(g, m)
        return seq

    def visit_For(self, s: S.For):
        flo, fext, body, var = self.visit(s.min), self.visit(s.extent), self.visit(s.body), s.loop_var
        dtype = _np(var.dtype)

        def loop(g, m):
            lo, ext = flo(g, m), fext(g, m)
            old = g.env.get(var)
            if _uniform(lo) and _uniform(ext):
                start = int(lo[0, 0])
                for v in range(start, start + int(ext[0, 0])):
                    g.env[var] = np.array([[v]], dtype=dtype)
                    body(g, m)
            else:  # bounds differ between threads: run until the last one is done
                ext = np.broadcast_to(ext, m.shape)
                n = int(ext[m].max()) if m.any() else 0
                for k in range(n):
                    mk = m & (k < ext)
                    if mk.any():
                        g.env[var] = (lo + k).astype(dtype)
                        body(g, mk)
            _restore(g.env, var, old)
        return loop

    def visit_While(self, s: S.While):
        fc, body = self.visit(s.condition), self.visit(s.body)

        def loop(g, m):
            # Each thread leaves the loop when its own condition fails; the others go on.
            active = m
            while True:
                active = active & np.broadcast_to(fc(g, active).astype(bool), m.shape)
                if not active.any():
                    return
                body(g, active)
        return loop

    def visit_BufferStore(self, s: S.BufferStore):
        buf = s.buffer
        fv = self.visit(s.value)
        flat = self._flat_index(buf, s.indices)
        fp = None if s.predicate is None else self.visit(s.predicate)
        out = _memory_np(buf.dtype)
        narrow = buf.dtype == "bfloat16"  # stores round to bfloat16's bits

        def store(g, m):
            value = fv(g, m)
            idx = flat(g, m)
            mask = m if fp is None else m & fp(g, m).astype(bool)
            arr, kind, pos, rows, full = g.locate(buf, idx, mask, "write")
            if full is None:
                new = value.reshape(-1) if value.shape == (g.T, 1) else np.full(g.T, value[0, 0])
            else:
                new = np.broadcast_to(value, full.shape)[full]
            new = dtypes.float_to_bfloat16(new) if narrow else new.astype(out, copy=False)
            if g.launch.check_races:
                g.check_write(buf, kind, pos, rows, new)
            arr[pos] = new
        return store

    def visit_Allocate(self, s: S.Allocate):
        buf, body = s.buffer, self.visit(s.body)
        dims = [self.visit(d) for d in buf.shape]

        def allocate(g, m):
            size = 1
            for d in dims:
                v = d(g, m)
                if not _uniform(v):
                    raise InterpreterError(f"buffer {buf.name!r} has a size that differs between threads")
                size *= int(v[0, 0])
            old = g.memory.get(buf.data)
            g.memory[buf.data] = g.allocate(buf, size)
            body(g, m)
            _restore(g.memory, buf.data, old)
        return allocate

    def visit_IfThenElse(self, s: S.IfThenElse):
        fc, then = self.visit(s.condition), self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)

        def branch(g, m):
            c = fc(g, m).astype(bool)
            if _uniform(c):
                if c[0, 0]:
                    then(g, m)
                elif other is not None:
                    other(g, m)
                return
            mt = m & c
            if mt.any():
                then(g, mt)
            if other is not None:
                mf = m & ~c
                if mf.any():
                    other(g, mf)
        return branch

    def visit_LetStmt(self, s: S.LetStmt):
        fv, body, var = self.visit(s.value), self.visit(s.body), s.var

        def let(g, m):
            old = g.env.get(var)
            g.env[var] = fv(g, m)
            body(g, m)
            _restore(g.env, var, old)
        return let

    def visit_AttrStmt(self, s: S.AttrStmt):
        return self.visit(s.body)

    def visit_Evaluate(self, s: S.Evaluate):
        v = s.value
        if isinstance(v, E.Call) and "sync" in v.op:
            return lambda g, m: g.barrier(m)
        fv = self.visit(v)

        def evaluate(g, m):
            fv(g, m)
        return evaluate


def _product(fs: list):
    def prod(g, m):
        out = np.ones((1, 1), dtype=np.int64)
        for f in fs:
            out = out * f(g, m)
        return out
    return prod


def _restore(d: dict, key, old) -> None:
    if old is None:
        d.pop(key, None)
    else:
        d[key] = old


def _thread_extents(body: S.Stmt) -> dict:
    """tag -> (thread variable, extent) of every ``thread_extent`` attribute in ``body``."""
    out: dict = {}

    def walk(s):
        if isinstance(s, S.AttrStmt):
            if s.key == "thread_extent":
                out.setdefault(s.node.name, (s.node, s.value))
            walk(s.body)
        elif isinstance(s, S.SeqStmt):
            for c in s.seq:
                walk(c)
        elif isinstance(s, S.IfThenElse):
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif isinstance(s, (S.For, S.Allocate, S.LetStmt)):
            walk(s.body)
    walk(body)
    return out


def _scalar_env(kernel: PrimFunc, scalars: dict) -> dict:
    env = {}
    for p in kernel.params:
        if isinstance(p, E.Var):
            if p.name not in scalars:
                raise InterpreterError(f"no value for scalar parameter {p.name!r}")
            env[p] = np.array([[scalars[p.name]]]).astype(_np(p.dtype))
    return env


class _Scalars:
    """What launch sizes are evaluated in: the kernel's scalar parameters, no threads."""

    def __init__(self, env: dict):
        self.env = env
        self.all = np.ones((1, 1), dtype=bool)


def run_kernel(kernel: PrimFunc, arrays: dict, scalars: dict | None = None, *,
               check_races: bool = True) -> None:
    """Run device function ``kernel`` on ``arrays`` (flat or shaped numpy arrays, by buffer
    name, updated in place) for its whole grid.

    With ``check_races`` (the default), raise :class:`DataRaceError` on the first data
    race between threads (see the module's docstring)."""
    scalars = dict(scalars or {})
    memory, names = {}, {}
    for p in kernel.params:
        if isinstance(p, Buffer):
            if p.name not in arrays:
                raise InterpreterError(f"no array given for buffer {p.name!r}")
            arr = arrays[p.name]
            if not arr.flags.c_contiguous:
                raise InterpreterError(f"array for buffer {p.name!r} must be C-contiguous")
            memory[p.data] = arr.reshape(-1)
            names[p.data] = p.name
    env = _scalar_env(kernel, scalars)
    extents = _thread_extents(kernel.body)
    compiler = _Compiler()
    at_launch = _Scalars(env)
    sizes = {tag: int(compiler.visit(ext)(at_launch, at_launch.all).reshape(-1)[0])
             for tag, (_, ext) in extents.items()}
    body = compiler.visit(kernel.body)
    # Global buffers the kernel writes are watched; those it only reads cannot race.
    watched = {d: names[d] for d in stored_buffers(kernel.body) & set(memory)}
    launch = _Launch(kernel, sizes, memory, watched, check_races)
    if launch.nblocks == 0 or launch.tpb == 0:
        return
    per_group = max(1, MAX_GROUP_THREADS // launch.tpb)
    thread_vars = {tag: var for tag, (var, _) in extents.items()}
    with np.errstate(all="ignore"):  # as on the GPU: inf, NaN and wrapped integers, no warnings
        for first in range(0, launch.nblocks, per_group):
            group = _Group(launch, first, min(per_group, launch.nblocks - first), env, thread_vars)
            body(group, group.all)


def run_gpu_function(gf, arrays: list, scalars: dict | None = None, *, check_races: bool = True) -> None:
    """Run a :class:`~compiler.transform.split_host_device.GPUFunction` on numpy ``arrays``
    (one per buffer parameter of the host function, in order, updated in place), launch by
    launch, host loops of launches included.

    With ``check_races`` (the default), a data race between threads of a launch raises
    :class:`DataRaceError`."""
    scalars = dict(scalars or {})
    params = list(gf.host.params)
    buffers = [p for p in params if isinstance(p, Buffer)]
    if len(arrays) != len(buffers):
        raise InterpreterError(f"{len(buffers)} arrays expected, got {len(arrays)}")
    by_index = {}
    k = 0
    for i, p in enumerate(params):
        if isinstance(p, Buffer):
            by_index[i] = arrays[k]
            for dim, n in zip(p.shape, arrays[k].shape, strict=False):
                if isinstance(dim, E.Var):
                    scalars.setdefault(dim.name, int(n))
            k += 1
    run_plan(gf.to_json(), gf.kernels, by_index, scalars, check_races=check_races)


def run_plan(plan: dict, kernels, arrays: dict, scalars: dict, *, check_races: bool = True) -> None:
    """Run the launch plan ``plan`` of a host function (its JSON form, as a CUDA module keeps
    it) with the device functions ``kernels``: ``arrays`` maps the position of each buffer
    argument of the host function to its numpy array (updated in place), ``scalars`` its
    scalar arguments and symbolic sizes by name. Workspaces are made here, poisoned."""
    by_name = {k.name: k for k in kernels}
    for i, arr in arrays.items():
        if not arr.flags.c_contiguous:
            raise InterpreterError(f"the array of argument {i} must be C-contiguous")
    workspaces = [_poison(max(0, evaluate_size(w["size"], scalars)), w["dtype"]) for w in plan["workspaces"]]
    # The launch program repeats launches inside host loops (the time loop of a scan).
    for index, step_scalars in program_steps(plan, scalars):
        launch = plan["launches"][index]
        try:
            kernel = by_name[launch["kernel"]]
        except KeyError:
            raise InterpreterError(f"no device function {launch['kernel']!r} to simulate") from None
        named = {}
        for p, (kind, ref) in zip(kernel.params, launch["args"], strict=True):
            if kind == "param":
                named[p.name] = arrays[ref]
            elif kind == "workspace":
                named[p.name] = workspaces[ref]
        run_kernel(kernel, named, step_scalars, check_races=check_races)
