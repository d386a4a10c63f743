"""Running CUDA kernels' loop IR on the CPU, thread by thread, with real barrier semantics.

For tests on machines without a GPU: every thread of a block runs (in Python, with the
reference interpreter's semantics, :mod:`compiler.tir.interpreter`) until it reaches a
barrier; once all have, they go on. A missing barrier therefore shows up as a wrong
result (a thread reads shared memory that others have not written yet, or overwrites
what they still need), and a barrier that only some threads reach is an error. Shared
buffers start filled with NaN (or a large integer), so reading an element nobody wrote
shows too.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .interpreter import InterpreterError, _Interpreter, _restore

__all__ = ["run_kernel", "run_gpu_function", "InterpreterError"]

_MISSING = object()


def _poison(size: int, dtype: str) -> np.ndarray:
    np_dtype = dtypes.to_numpy(dtype)
    if dtypes.is_float(dtype):
        return np.full(size, np.nan, dtype=np_dtype)
    return np.full(size, np.iinfo(np_dtype).max if dtype != "bool" else 0, dtype=np_dtype)


class _Thread(_Interpreter):
    """One GPU thread: statements are generators that yield at every barrier."""

    def __init__(self, memory: dict, shared: dict, scalars: dict, env: dict):
        super().__init__({}, scalars)
        from ..arith.evaluate import Evaluator

        self.memory = dict(memory)
        self.shared = shared
        self.env = dict(env)
        self.ev = Evaluator(self.env, self.scalars, self.load)

    def run(self, s: S.Stmt):
        if isinstance(s, S.SeqStmt):
            for c in s.seq:
                yield from self.run(c)
        elif isinstance(s, S.For):
            lo = self.ev.eval(s.min)
            hi = lo + self.ev.eval(s.extent)
            old = self.env.get(id(s.loop_var), _MISSING)
            for v in range(lo, hi):
                self.env[id(s.loop_var)] = v
                yield from self.run(s.body)
            _restore(self.env, s.loop_var, old)
        elif isinstance(s, S.Allocate):
            buf = s.buffer
            size = int(self.ev.eval(buf.shape[0])) if len(buf.shape) == 1 else \
                int(np.prod([self.ev.eval(d) for d in buf.shape]))
            if buf.scope == "shared":
                mem = self.shared.setdefault(id(buf.data), _poison(size, buf.dtype))
            else:
                mem = _poison(size, buf.dtype)
            old = self.memory.get(id(buf.data))
            self.memory[id(buf.data)] = mem
            yield from self.run(s.body)
            if old is None:
                del self.memory[id(buf.data)]
            else:
                self.memory[id(buf.data)] = old
        elif isinstance(s, S.IfThenElse):
            if self.ev.eval(s.condition):
                yield from self.run(s.then_case)
            elif s.else_case is not None:
                yield from self.run(s.else_case)
        elif isinstance(s, S.LetStmt):
            old = self.env.get(id(s.var), _MISSING)
            self.env[id(s.var)] = self.ev.eval(s.value)
            yield from self.run(s.body)
            _restore(self.env, s.var, old)
        elif isinstance(s, S.AttrStmt):
            yield from self.run(s.body)
        elif isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and "sync" in s.value.op:
            yield "sync"
        else:
            self.visit(s)


def _strip_thread_attrs(body: S.Stmt) -> tuple[dict, S.Stmt]:
    extents = {}
    while isinstance(body, S.AttrStmt) and body.key == "thread_extent":
        extents[body.node.name] = body.node, body.value
        body = body.body
    return extents, body


def run_kernel(kernel: PrimFunc, arrays: dict, scalars: dict | None = None) -> None:
    """Run device function ``kernel`` on ``arrays`` (by buffer name) for its whole grid."""
    from ..arith.evaluate import Evaluator

    scalars = dict(scalars or {})
    memory = {}
    for p in kernel.params:
        if isinstance(p, Buffer):
            if p.name not in arrays:
                raise InterpreterError(f"no array given for buffer {p.name!r}")
            memory[id(p.data)] = arrays[p.name].reshape(-1)
    env = {id(p): scalars[p.name] for p in kernel.params if isinstance(p, E.Var)}
    extents, body = _strip_thread_attrs(kernel.body)
    ev = Evaluator(dict(env), scalars, None)
    sizes = {tag: int(ev.eval(ext)) for tag, (_, ext) in extents.items()}

    def axis(prefix: str):
        return [range(sizes.get(f"{prefix}.{a}", 1)) for a in "zyx"]

    for bz, by, bx in itertools.product(*axis("blockIdx")):
        shared: dict = {}
        threads = []
        for tz, ty, tx in itertools.product(*axis("threadIdx")):
            t_env = dict(env)
            values = {"blockIdx.x": bx, "blockIdx.y": by, "blockIdx.z": bz,
                      "threadIdx.x": tx, "threadIdx.y": ty, "threadIdx.z": tz}
            for tag, (var, _) in extents.items():
                t_env[id(var)] = values[tag]
            thread = _Thread(memory, shared, scalars, t_env)
            threads.append(thread.run(body))
        _lockstep(threads, kernel.name)


def _lockstep(threads: list, name: str) -> None:
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
        live = arrived


def run_gpu_function(gf, arrays: list, scalars: dict | None = None) -> None:
    """Run a :class:`~compiler.tir.transform.split_host_device.GPUFunction` on numpy ``arrays``
    (one per buffer parameter of the host function, in order), launch by launch."""
    from ..runtime.cuda import evaluate_size

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
    for launch in gf.launches:
        kernel = kernels[launch.kernel]
        named = {}
        for p, (kind, ref) in zip(kernel.params, launch.args, strict=True):
            if kind == "param":
                named[p.name] = by_index[ref]
            elif kind == "workspace":
                named[p.name] = workspaces[ref]
        run_kernel(kernel, named, scalars)
