"""A small pool of worker processes that outlives its workers.

Each worker is a "spawn" process (never fork: libgomp cannot run parallel loops in
a child forked after its parent ran one) connected by a pipe. It imports the
project once, says it is ready, then runs one job at a time: ``fn(*args)`` with
``fn`` a module-level function. The parent owns every clock: a job's timeout
starts when it is handed to a ready worker, so start-up (spawn and imports, about a
second) never counts against a candidate. A worker that runs past its job's
timeout is killed; one that dies (segfault, abort) is noticed through its process
sentinel. Either way the job gets a ``"timeout"`` or ``"crash"`` completion and a
fresh worker takes the slot; the pool goes on.

The pool is driven by its caller (:meth:`WorkerPool.submit`, then
:meth:`WorkerPool.wait`); it has no threads of its own.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import pickle
import signal
import socket
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_ready

from measure.errors import MeasureError

__all__ = ["WorkerPool", "Completion", "describe_exit"]

_START_FAILURES = 3  # a slot whose worker fails to start this many times in a row: give up


@dataclass
class Completion:
    """How a job ended: ``status`` is "ok" (``value`` is what ``fn`` returned), "error"
    (``value`` is a traceback: the job could not even be called), "timeout" or "crash"
    (``value`` says how the worker died)."""

    tag: object
    status: str
    value: object
    worker: str
    elapsed: float


@dataclass
class _Job:
    tag: object
    payload: bytes
    timeout: float


class _Slot:
    def __init__(self):
        self.process = None
        self.conn = None
        self.ready = False
        self.worker = ""
        self.job: _Job | None = None
        self.started = 0.0
        self.failed_starts = 0
        self.fatal = ""


def describe_exit(exitcode: int | None) -> str:
    """``"killed by SIGSEGV"`` / ``"exited with status 3"``."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def _serve(conn, cpus) -> None:
    """The worker's main loop (runs in the child)."""
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import measure.worker  # noqa: F401  (compiler, llvmlite, search_spaces: once, before any job)
    except BaseException:
        conn.send(("fatal", traceback.format_exc()))
        return
    conn.send(("ready", f"{socket.gethostname()}:{os.getpid()}"))
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):  # the parent went away
            return
        try:
            fn, args = pickle.loads(data)
            reply = ("ok", fn(*args))
        except BaseException:
            reply = ("error", traceback.format_exc())
        try:
            conn.send(reply)
        except Exception:  # a result that does not pickle
            conn.send(("error", traceback.format_exc()))


class WorkerPool:
    """``size`` spawn workers (pinned to ``cpus`` when given), started on first use."""

    def __init__(self, size: int, cpus=None, name: str = "measure"):
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        self.size = size
        self.cpus = sorted(cpus) if cpus else None
        self.name = name
        self._ctx = multiprocessing.get_context("spawn")
        self._slots = [_Slot() for _ in range(size)]
        self._queue: collections.deque[_Job] = collections.deque()
        self._started = False

    # ------------------------------------------------------------------ caller's side

    @property
    def busy(self) -> int:
        """Jobs submitted and not completed yet."""
        return len(self._queue) + sum(s.job is not None for s in self._slots)

    @property
    def free(self) -> int:
        """How many more jobs can start right away (or as soon as a worker is up)."""
        return self.size - self.busy

    def submit(self, tag, fn, args: tuple, timeout: float) -> Completion | None:
        """Queue ``fn(*args)``; it starts on the next ready worker. Returns an "error"
        completion at once if the job cannot be pickled."""
        try:
            payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            return Completion(tag, "error", traceback.format_exc(), "", 0.0)
        self._queue.append(_Job(tag, payload, float(timeout)))
        if not self._started:
            self._started = True
            for slot in self._slots:
                self._start(slot)
        self._dispatch()
        return None

    def wait(self, timeout: float | None = None) -> list[Completion]:
        """Completions of jobs, blocking until there is one or ``timeout`` seconds passed."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self._dispatch()
            done = self._poll(end)
            if done or self.busy == 0 or (end is not None and time.monotonic() >= end):
                return done

    def close(self) -> None:
        """Stop every worker (a running job is abandoned)."""
        for slot in self._slots:
            self._stop(slot, kill=slot.job is not None)
        self._queue.clear()
        self._started = False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ inside

    def _start(self, slot: _Slot) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_serve, args=(child, self.cpus), name=f"{self.name}-worker",
                                 daemon=True)
        proc.start()
        child.close()
        slot.process, slot.conn, slot.ready, slot.job = proc, parent, False, None

    def _stop(self, slot: _Slot, kill: bool) -> None:
        proc, conn = slot.process, slot.conn
        slot.process = slot.conn = None
        slot.ready, slot.job = False, None
        if proc is None:
            return
        try:
            if kill:
                proc.kill()
            else:
                conn.close()  # the worker sees EOF and returns
            proc.join(timeout=None if kill else 2)
            if proc.is_alive():
                proc.kill()
                proc.join()
        finally:
            conn.close()

    def _restart(self, slot: _Slot, kill: bool) -> None:
        self._stop(slot, kill)
        self._start(slot)

    def _dispatch(self) -> None:
        for slot in self._slots:
            if not self._queue:
                return
            if slot.ready and slot.job is None:
                job = self._queue.popleft()
                slot.job, slot.started = job, time.monotonic()
                try:
                    slot.conn.send_bytes(job.payload)
                except OSError:  # died between jobs: the sentinel reports it in _poll
                    pass

    def _poll(self, end: float | None) -> list[Completion]:
        live = [s for s in self._slots if s.process is not None]
        if not live:
            return []
        now = time.monotonic()
        deadlines = [s.started + s.job.timeout for s in live if s.job is not None]
        limit = min(deadlines + ([end] if end is not None else []), default=None)
        wait_s = None if limit is None else max(0.0, limit - now)
        handles = {}
        for s in live:
            handles[s.conn] = s
            handles[s.process.sentinel] = s
        ready = wait_ready(list(handles), wait_s)
        done: list[Completion] = []
        for handle in ready:
            slot = handles[handle]
            if handle is slot.conn:
                self._drain(slot, done)
        for slot in live:
            if slot.process is not None and not slot.process.is_alive():
                self._drain(slot, done)  # what it sent before it died counts
                self._died(slot, done)
        now = time.monotonic()
        for slot in live:
            job = slot.job
            if job is not None and slot.process is not None and now - slot.started >= job.timeout:
                why = f"no result after {job.timeout:g} s; worker killed"
                done.append(Completion(job.tag, "timeout", why, slot.worker, now - slot.started))
                self._restart(slot, kill=True)
        return done

    def _drain(self, slot: _Slot, done: list) -> None:
        try:
            while slot.conn.poll():
                self._message(slot, slot.conn.recv(), done)
        except (EOFError, OSError):  # the worker died; the sentinel tells
            pass

    def _message(self, slot: _Slot, msg, done: list) -> None:
        kind, value = msg
        if kind == "ready":
            slot.ready, slot.worker, slot.failed_starts = True, value, 0
        elif kind == "fatal":  # the worker exits next; _died counts the failure
            slot.fatal = value
        elif slot.job is not None:
            job, slot.job = slot.job, None
            done.append(Completion(job.tag, kind, value, slot.worker, time.monotonic() - slot.started))

    def _died(self, slot: _Slot, done: list) -> None:
        how = describe_exit(slot.process.exitcode)
        job = slot.job
        if job is not None:
            done.append(Completion(job.tag, "crash", f"worker {slot.worker or '?'} {how}", slot.worker,
                                   time.monotonic() - slot.started))
        elif not slot.ready:
            slot.failed_starts += 1
            if slot.failed_starts >= _START_FAILURES:
                raise MeasureError(f"{self.name} workers cannot start: the worker {how}\n{slot.fatal}")
        failed = slot.failed_starts
        self._restart(slot, kill=False)
        slot.failed_starts = failed
