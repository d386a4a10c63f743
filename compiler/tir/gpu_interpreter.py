"""Running CUDA kernels' loop IR on the CPU, thread by thread, with real barrier semantics.

For tests on machines without a GPU: every thread of a block runs (in Python, with the
reference interpreter's semantics, :mod:`compiler.tir.interpreter`) until it reaches a
barrier; once all have, they go on. A barrier that only some threads reach is an error.
Shared buffers start filled with NaN (or a large integer), so reading an element nobody
wrote shows as a wrong result.

Running threads one after another would hide data races: the thread that runs last
wins, and the result can look right. So every access to memory that threads share is
recorded, and an unordered pair of accesses to one element by two threads, at least one
of them a write, raises :class:`DataRaceError` naming the buffer, the element, the two
threads and the kind of race:

* shared memory: two threads of a block touch the same element between two barriers
  (read/write or write/write), whichever of them the simulator runs first;
* global memory, within one launch: two threads write the same element (write/write),
  or a thread reads an element that another wrote earlier in the run (read/write);
  threads of one block are ordered by the barriers between them, threads of different
  blocks never are. (A read that the simulator runs before the conflicting write of
  another block is not seen.)

Writes of one value by several threads are no race: every thread storing the same
result into one shared element (a cooperative copy that not every thread axis splits,
the result of a cross-thread reduction) is well defined on the hardware, whichever
store lands last, and a thread that reads back the value it stored itself reads it
whatever the order of the others' identical stores. Nor is a store that leaves an
element as it was, which no other thread can tell from no store.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes
from ..runtime.cuda import evaluate_size, program_steps
from . import expr as E
from . import stmt as S
from .analysis import stored_buffers
from .buffer import Buffer
from .evaluate import Evaluator
from .function import PrimFunc
from .functor import Functor
from .interpreter import UNBOUND, Interpreter, InterpreterError, restore_binding

__all__ = ["run_kernel", "run_gpu_function", "InterpreterError", "DataRaceError"]


class DataRaceError(InterpreterError):
    """Two threads of a kernel touched one memory element without a barrier between them,
    at least one of them writing."""


def _poison(size: int, dtype: str) -> np.ndarray:
    np_dtype = dtypes.to_numpy(dtype)
    if dtype == "bfloat16":  # the bits of a NaN
        return np.full(size, 0x7FC0, dtype=np_dtype)
    if dtypes.is_float(dtype):
        return np.full(size, np.nan, dtype=np_dtype)
    return np.full(size, np.iinfo(np_dtype).max if dtype != "bool" else 0, dtype=np_dtype)


# ----------------------------------------------------------------------------- race detection


class _Who:
    """One thread of a launch, and how many barriers its block has passed."""

    __slots__ = ("block", "thread", "state")

    def __init__(self, block: tuple, thread: tuple, state: _BlockState):
        self.block, self.thread, self.state = block, thread, state

    def __str__(self) -> str:
        x, y, z = self.thread
        bx, by, bz = self.block
        return f"thread ({x}, {y}, {z}) of block ({bx}, {by}, {bz})"


class _BlockState:
    """What the threads of one block share: the accesses to shared memory since the last
    barrier, and how many barriers they have passed."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.epoch = 0
        self.shared_log = _SharedLog(kernel)

    def barrier(self) -> None:
        self.epoch += 1
        self.shared_log.entries.clear()


def _same(a, b) -> bool:
    return bool(a == b) or (a != a and b != b)  # NaN stays NaN


def _race(kernel: str, scope: str, name: str, index: int, kind: str, first: str,
          second: str) -> DataRaceError:
    return DataRaceError(f"kernel {kernel!r}: data race ({kind}) on {scope} buffer {name!r}, "
                         f"element {index}: {first}, and {second}, with no barrier between them")


class _Touches:
    """What happened to one shared element since the last barrier."""

    __slots__ = ("before", "value", "writers", "blind")

    def __init__(self, before):
        self.before = before  # its value at the barrier
        self.value = None     # the value its writers stored (all the same, or a race was raised)
        self.writers: list = []
        self.blind: list = []  # up to two threads that read it without having written it


class _SharedLog:
    """Accesses to shared memory since the last barrier, per element.

    A write that leaves the value as it was is invisible to other threads, and a thread
    that reads back what it wrote itself sees its own value (every other writer stored the
    same, or the writes race). What remains a race: two writers storing different values,
    and a thread reading an element that another changed without having written it itself.
    """

    def __init__(self, kernel: str):
        self.kernel = kernel
        # (id(array), index) -> _Touches; numpy arrays cannot be keys, and the shared memory
        # of the block holds each array while the log does.
        self.entries: dict = {}

    def _race(self, mem: _Watched, i: int, kind: str, first: str, second: str) -> DataRaceError:
        return _race(self.kernel, "shared", mem.name, i, kind, first, second)

    def read(self, mem: _Watched, i: int, who: _Who) -> None:
        key = (id(mem.array), i)
        t = self.entries.get(key)
        if t is None:
            t = self.entries[key] = _Touches(mem.array[i])
        elif who in t.writers:
            return
        elif t.writers and not _same(t.value, t.before):
            raise self._race(mem, i, "read/write", f"{t.writers[0]} wrote it", f"{who} reads it")
        if len(t.blind) < 2 and who not in t.blind:
            t.blind.append(who)

    def write(self, mem: _Watched, i: int, who: _Who, old, new) -> None:
        key = (id(mem.array), i)
        t = self.entries.get(key)
        if t is None:
            t = self.entries[key] = _Touches(old)
        other = next((w for w in t.writers if w is not who), None)
        if other is not None and not _same(new, t.value):
            raise self._race(mem, i, "write/write", f"{other} wrote {t.value}", f"{who} writes {new}")
        if not _same(new, t.before):
            other = next((r for r in t.blind if r is not who), None)
            if other is not None:
                raise self._race(mem, i, "read/write", f"{other} read it", f"{who} writes it")
        t.value = new
        if who not in t.writers:
            t.writers.append(who)


class _GlobalLog:
    """The writes to each element of the global buffers a launch writes that no later write
    is ordered after: threads of one block are ordered by the barriers between them, threads
    of different blocks never are."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        # (id(array), index) -> [value, [(_Who, epoch of its block then)]]; numpy arrays cannot
        # be keys, and the launch holds each array while the log does.
        self.writes: dict = {}

    @staticmethod
    def _ordered(a: _Who, a_epoch: int, b: _Who) -> bool:
        return a is b or (a.block == b.block and a_epoch != b.state.epoch)

    def read(self, mem: _Watched, i: int, who: _Who) -> None:
        entry = self.writes.get((id(mem.array), i))
        if entry is None or any(w is who for w, _ in entry[1]):
            return  # nobody wrote it, or this thread did (and every unordered writer stored the same)
        for w, epoch in entry[1]:
            if not self._ordered(w, epoch, who):
                raise _race(self.kernel, "global", mem.name, i, "read/write", f"{w} wrote it",
                            f"{who} reads it")

    def write(self, mem: _Watched, i: int, who: _Who, old, new) -> None:
        key = (id(mem.array), i)
        entry = self.writes.get(key)
        mine = (who, who.state.epoch)
        if entry is None:
            self.writes[key] = [new, [mine]]
            return
        value, writers = entry
        racing = [w for w, epoch in writers if not self._ordered(w, epoch, who)]
        if not racing:
            self.writes[key] = [new, [mine]]
        elif not _same(value, new):
            raise _race(self.kernel, "global", mem.name, i, "write/write", f"{racing[-1]} wrote {value}",
                        f"{who} writes {new}")
        elif all(w is not who for w, _ in writers):
            writers.append(mine)


class _Watched:
    """A flat array seen by one thread: every element read and write is reported to a log."""

    __slots__ = ("array", "size", "name", "log", "who")

    def __init__(self, array: np.ndarray, name: str, log, who: _Who):
        self.array, self.size, self.name, self.log, self.who = array, array.size, name, log, who

    def __getitem__(self, i):
        self.log.read(self, i, self.who)
        return self.array[i]

    def __setitem__(self, i, value) -> None:
        old = self.array[i]
        self.array[i] = value
        self.log.write(self, i, self.who, old, self.array[i])


# ----------------------------------------------------------------------------- threads


class _Thread(Interpreter):
    """One GPU thread: statements are generators that yield at every barrier."""

    def __init__(self, memory: dict, shared: dict, scalars: dict, env: dict, who: _Who | None = None):
        super().__init__({}, scalars)
        self.memory = dict(memory)
        self.shared = shared
        self.env = dict(env)
        self.who = who
        self.ev = Evaluator(self.env, self.scalars, self.load)

    def run(self, s: S.Stmt):
        """A generator that runs ``s`` in this thread and yields ``"sync"`` at every barrier."""
        return _Steps(self).visit(s)


class _Steps(Functor):
    """The statements of one thread as generators: every ``visit_<Stmt>`` yields at the
    barriers inside it; statements without barriers run on the thread's interpreter."""

    def __init__(self, thread: _Thread):
        self.t = thread

    def visit_SeqStmt(self, s):
        for c in s.seq:
            yield from self.visit(c)

    def visit_For(self, s):
        t = self.t
        lo = t.ev.eval(s.min)
        hi = lo + t.ev.eval(s.extent)
        old = t.env.get(s.loop_var, UNBOUND)
        for v in range(lo, hi):
            t.env[s.loop_var] = v
            yield from self.visit(s.body)
        restore_binding(t.env, s.loop_var, old)

    def visit_While(self, s):
        while self.t.ev.eval(s.condition):
            yield from self.visit(s.body)

    def visit_Allocate(self, s):
        t = self.t
        buf = s.buffer
        size = int(t.ev.eval(buf.shape[0])) if len(buf.shape) == 1 else \
            int(np.prod([t.ev.eval(d) for d in buf.shape]))
        if buf.scope == "shared":
            mem = t.shared.setdefault(buf.data, _poison(size, buf.dtype))
            if t.who is not None:
                mem = _Watched(mem, buf.name, t.who.state.shared_log, t.who)
        else:
            mem = _poison(size, buf.dtype)
        old = t.memory.get(buf.data)
        t.memory[buf.data] = mem
        yield from self.visit(s.body)
        if old is None:
            del t.memory[buf.data]
        else:
            t.memory[buf.data] = old

    def visit_IfThenElse(self, s):
        if self.t.ev.eval(s.condition):
            yield from self.visit(s.then_case)
        elif s.else_case is not None:
            yield from self.visit(s.else_case)

    def visit_LetStmt(self, s):
        t = self.t
        old = t.env.get(s.var, UNBOUND)
        t.env[s.var] = t.ev.eval(s.value)
        yield from self.visit(s.body)
        restore_binding(t.env, s.var, old)

    def visit_AttrStmt(self, s):
        yield from self.visit(s.body)

    def visit_Evaluate(self, s):
        if isinstance(s.value, E.Call) and "sync" in s.value.op:
            yield "sync"
        else:
            self.t.visit(s)

    def generic_visit(self, s):
        self.t.visit(s)
        yield from ()


def _strip_thread_attrs(body: S.Stmt) -> tuple[dict, S.Stmt]:
    extents = {}
    while isinstance(body, S.AttrStmt) and body.key == "thread_extent":
        extents[body.node.name] = body.node, body.value
        body = body.body
    return extents, body


def run_kernel(kernel: PrimFunc, arrays: dict, scalars: dict | None = None, *,
               check_races: bool = True) -> None:
    """Run device function ``kernel`` on ``arrays`` (by buffer name) for its whole grid.

    With ``check_races`` (the default), raise :class:`DataRaceError` on the first data
    race between threads (see the module's docstring)."""
    scalars = dict(scalars or {})
    memory = {}
    params = {}
    for p in kernel.params:
        if isinstance(p, Buffer):
            if p.name not in arrays:
                raise InterpreterError(f"no array given for buffer {p.name!r}")
            memory[p.data] = arrays[p.name].reshape(-1)
            params[p.data] = p
    env = {p: scalars[p.name] for p in kernel.params if isinstance(p, E.Var)}
    extents, body = _strip_thread_attrs(kernel.body)
    ev = Evaluator(dict(env), scalars, None)
    sizes = {tag: int(ev.eval(ext)) for tag, (_, ext) in extents.items()}
    # Global buffers the kernel writes are watched; those it only reads cannot race.
    watched = stored_buffers(body) & set(params) if check_races else set()
    global_log = _GlobalLog(kernel.name)

    def axis(prefix: str):
        return [range(sizes.get(f"{prefix}.{a}", 1)) for a in "zyx"]

    for bz, by, bx in itertools.product(*axis("blockIdx")):
        shared: dict = {}
        state = _BlockState(kernel.name)
        threads = []
        for tz, ty, tx in itertools.product(*axis("threadIdx")):
            t_env = dict(env)
            values = {"blockIdx.x": bx, "blockIdx.y": by, "blockIdx.z": bz,
                      "threadIdx.x": tx, "threadIdx.y": ty, "threadIdx.z": tz}
            for tag, (var, _) in extents.items():
                t_env[var] = values[tag]
            who = _Who((bx, by, bz), (tx, ty, tz), state) if check_races else None
            t_memory = dict(memory)
            for key in watched:
                t_memory[key] = _Watched(memory[key], params[key].name, global_log, who)
            thread = _Thread(t_memory, shared, scalars, t_env, who)
            threads.append(thread.run(body))
        _lockstep(threads, kernel.name, state)


def _lockstep(threads: list, name: str, state: _BlockState) -> None:
    live = list(threads)
    while live:
        arrived, finished = [], []
        for gen in live:
            try:
                next(gen)
                arrived.append(gen)
            except StopIteration:
                finished.append(gen)
        if arrived and finished:
            raise InterpreterError(f"kernel {name!r}: {len(arrived)} threads wait at a barrier that "
                                   f"{len(finished)} others never reach")
        state.barrier()
        live = arrived


def run_gpu_function(gf, arrays: list, scalars: dict | None = None, *, check_races: bool = True) -> None:
    """Run a :class:`~compiler.transform.split_host_device.GPUFunction` on numpy ``arrays``
    (one per buffer parameter of the host function, in order), launch by launch, host loops
    of launches included.

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
            by_index[i] = np.ascontiguousarray(arrays[k]) if not arrays[k].flags.c_contiguous else arrays[k]
            for dim, n in zip(p.shape, arrays[k].shape, strict=False):
                if isinstance(dim, E.Var):
                    scalars.setdefault(dim.name, int(n))
            k += 1
    workspaces = [_poison(max(0, evaluate_size(w["size"], scalars)), w["dtype"]) for w in gf.workspaces]
    kernels = {kf.name: kf for kf in gf.kernels}
    # The launch program repeats launches inside host loops (the time loop of a scan).
    for index, step_scalars in program_steps(gf.to_json(), scalars):
        launch = gf.launches[index]
        kernel = kernels[launch.kernel]
        named = {}
        for p, (kind, ref) in zip(kernel.params, launch.args, strict=True):
            if kind == "param":
                named[p.name] = by_index[ref]
            elif kind == "workspace":
                named[p.name] = workspaces[ref]
        run_kernel(kernel, named, step_scalars, check_races=check_races)
