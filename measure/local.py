"""Measuring on this machine: a pool of build processes and one run process.

:class:`LocalBuilder` builds in ``n_parallel`` spawn workers (:mod:`measure.pool`).
:class:`LocalRunner` times in one spawn worker, one candidate at a time, so a crash
in generated code takes down that worker, never the tuner; the worker is replaced
and the candidate gets a runtime-error result. Builds and timing do not share cores
(see :mod:`measure.gate`).
"""

from __future__ import annotations

import os
import queue
import time
from collections import deque
from collections.abc import Iterator, Sequence

from measure.base import Builder, Runner, error_result
from measure.gate import Gates
from measure.pool import Completion, WorkerPool
from measure.records import BuildResult, ErrorKind, MeasureInput, MeasureResult

__all__ = ["LocalBuilder", "LocalRunner", "LOCAL"]

LOCAL = "local"          # the gate of this machine
_POLL_S = 0.02           # how often a blocked builder looks at the gate again


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def build_completion(c: Completion) -> BuildResult:
    """The BuildResult of a finished build job, whatever became of its worker."""
    if c.status == "ok":
        return c.value
    if c.status == "timeout":
        return BuildResult(None, f"build {c.value}", c.elapsed, ErrorKind.BUILD_TIMEOUT, c.worker)
    if c.status == "crash":
        return BuildResult(None, f"the build {c.value}", c.elapsed, ErrorKind.WORKER_CRASH, c.worker)
    return BuildResult(None, f"the build job failed:\n{c.value}", c.elapsed, ErrorKind.COMPILE_ERROR,
                       c.worker)


class LocalBuilder(Builder):
    """Builds candidates in ``n_parallel`` worker processes (default: one per usable CPU).

    A build that runs past ``timeout`` seconds is killed (build-timeout result); a
    worker that crashes is replaced (worker-crash result). Either way the pool goes on.
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 10):
        if n_parallel is not None and n_parallel < 1:
            raise ValueError(f"n_parallel must be positive, got {n_parallel}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.n_parallel = n_parallel
        self.timeout = timeout
        self.cpus: list[int] | None = None  # set by MeasureOptions when builds get their own cores
        self._pool: WorkerPool | None = None

    def _workers(self) -> WorkerPool:
        if self._pool is None:
            n = self.n_parallel or len(self.cpus or _usable_cpus())
            self._pool = WorkerPool(n, self.cpus, name="build")
        return self._pool

    def build(self, inputs: Sequence[MeasureInput], gates: Gates) -> Iterator[tuple[int, BuildResult]]:
        from measure.worker import build_candidate

        pool, gate = self._workers(), gates(LOCAL)
        todo = deque(range(len(inputs)))
        running = 0
        try:
            while todo or running:
                if gates.stop.is_set():
                    todo.clear()
                while todo and pool.free and gate.try_build():
                    i = todo.popleft()
                    running += 1
                    failed = pool.submit(i, build_candidate, (inputs[i].task, inputs[i].config.to_json()),
                                         self.timeout)
                    if failed is not None:
                        running -= 1
                        gate.build_done()
                        yield i, build_completion(failed)
                if not running:
                    if todo:
                        gate.wait_open(_POLL_S)
                    continue
                for c in pool.wait(_POLL_S if todo else None):
                    running -= 1
                    gate.build_done()
                    yield c.tag, build_completion(c)
        finally:
            for _ in range(running):  # abandoned (the consumer went away): free the gate
                gate.build_done()
            if running:
                self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __getstate__(self):
        return {**self.__dict__, "_pool": None}

    def __repr__(self) -> str:
        return f"LocalBuilder(n_parallel={self.n_parallel}, timeout={self.timeout})"


class LocalRunner(Runner):
    """Checks and times candidates in a separate process, one at a time.

    Each candidate is called once on the task's inputs and its outputs compared with
    the expected ones (``check_correctness``), then timed with the runtime's native
    timer: ``repeat`` measurements of ``number`` calls each (more calls until one
    measurement takes ``min_repeat_ms``), ``cooldown_ms`` apart, evicting the caches
    before each call with ``cache_flush``. A run past ``timeout`` seconds is killed.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 50, timeout: float = 10,
                 cooldown_ms: float = 0, cache_flush: bool = False, check_correctness: bool = True):
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be positive, got number={number}, repeat={repeat}")
        if timeout <= 0 or min_repeat_ms < 0 or cooldown_ms < 0:
            raise ValueError("timeout must be positive; min_repeat_ms and cooldown_ms not negative")
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.timeout = timeout
        self.cooldown_ms = cooldown_ms
        self.cache_flush = cache_flush
        self.check_correctness = check_correctness
        self.cpus: list[int] | None = None  # set by MeasureOptions when timing gets its own cores
        self._pool: WorkerPool | None = None
        self._broken: dict = {}  # task key -> why its reference data cannot be made

    @property
    def options(self) -> dict:
        return {"number": self.number, "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms,
                "cooldown_ms": self.cooldown_ms, "cache_flush": self.cache_flush,
                "check_correctness": self.check_correctness}

    @property
    def prepare_timeout(self) -> float:
        """Seconds allowed to make a task's inputs and expected outputs (once per task and worker)."""
        return max(60.0, 6 * self.timeout)

    def _worker(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(1, self.cpus, name="run")
        return self._pool

    def _call(self, fn, args: tuple, timeout: float) -> Completion:
        pool = self._worker()
        failed = pool.submit(None, fn, args, timeout)
        if failed is not None:
            return failed
        while True:
            done = pool.wait()
            if done:
                return done[0]

    def measure_one(self, task, build: BuildResult) -> MeasureResult:
        """Check and time one built candidate in the run worker."""
        from measure.worker import prepare_task, run_candidate, task_key

        key = task_key(task, self.check_correctness)
        if key in self._broken:
            return error_result(ErrorKind.RUNTIME_ERROR, self._broken[key], build.build_time)
        args = (task, build.artifact, self.options)
        c = self._call(run_candidate, args, self.timeout)
        if c.status == "ok" and c.value == ("unprepared",):
            p = self._call(prepare_task, (task, self.check_correctness), self.prepare_timeout)
            if p.status != "ok":
                why = p.value if p.status == "error" else f"the worker {p.status}: {p.value}"
                self._broken[key] = f"cannot make the inputs and expected outputs of {task}: {why}"
                return error_result(ErrorKind.RUNTIME_ERROR, self._broken[key], build.build_time,
                                    p.elapsed, p.worker)
            c = self._call(run_candidate, args, self.timeout)
        return _run_result(c, build.build_time)

    def run(self, jobs: queue.Queue, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        gate = gates(LOCAL)
        holding = False
        try:
            while True:
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    if holding:  # nothing queued: let the builds use the cores
                        gate.release_timing()
                        holding = False
                    job = jobs.get()
                if job is None:
                    return
                if gates.stop.is_set():
                    continue
                i, inp, build = job
                if not holding:
                    gate.acquire_timing()
                    holding = True
                yield i, self.measure_one(inp.task, build)
        finally:
            if holding:
                gate.release_timing()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __getstate__(self):
        return {**self.__dict__, "_pool": None, "_broken": {}}

    def __repr__(self) -> str:
        return (f"LocalRunner(number={self.number}, repeat={self.repeat}, "
                f"min_repeat_ms={self.min_repeat_ms}, "
                f"timeout={self.timeout}, cooldown_ms={self.cooldown_ms}, cache_flush={self.cache_flush}, "
                f"check_correctness={self.check_correctness})")


def _run_result(c: Completion, build_time: float) -> MeasureResult:
    now = time.time()
    if c.status == "ok":
        if c.value[0] == "ok":
            return MeasureResult(tuple(c.value[1]), None, "", build_time, c.elapsed, now, c.worker)
        _, kind, message = c.value
        return MeasureResult((), ErrorKind(kind), message, build_time, c.elapsed, now, c.worker)
    if c.status == "timeout":
        return MeasureResult((), ErrorKind.RUN_TIMEOUT, f"run {c.value}", build_time, c.elapsed, now,
                             c.worker)
    if c.status == "crash":
        return MeasureResult((), ErrorKind.RUNTIME_ERROR, f"the candidate crashed the run worker: {c.value}",
                             build_time, c.elapsed, now, c.worker)
    return MeasureResult((), ErrorKind.RUNTIME_ERROR, f"the run job failed:\n{c.value}", build_time,
                         c.elapsed, now, c.worker)
