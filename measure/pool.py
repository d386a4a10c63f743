"""A small pool of worker processes that outlives its workers.

Each worker is a fresh interpreter, ``python -P -m measure.worker_main``, started with
:class:`subprocess.Popen` (never fork: libgomp cannot run parallel loops in a child
forked after its parent ran one). It never imports the tuner's ``__main__``, so a
tuning script needs no ``if __name__ == "__main__":`` guard, and ``python -c``,
``python -`` and notebooks work alike. The worker takes the tuner's ``sys.path``
(so templates in the script's directory import), imports the project once, says it
is ready, then answers one call at a time.

Parent and worker talk over the worker's stdin and stdout (its own prints go to
stderr) in frames: a 4-byte big-endian length, then a UTF-8 JSON object. The
parent sends ``{"init": {...}}`` once, then ``{"call": name, "request": {...}}``;
the worker answers ``{"ready": worker}`` or ``{"fatal": traceback}`` once, then per
call ``{"reply": {...}}`` or ``{"error": traceback}``, and in between
``{"phase": name, "timeout": s}`` when it enters a phase with a budget of its own
(a run worker that made a task's data starts the candidate's clock).

The parent owns every clock: a call's timeout starts when it is handed to a ready
worker, so start-up (interpreter and imports, about a second) never counts against
a candidate. A worker that runs past its call's timeout is killed; one that dies
(segfault, abort) is noticed by the end of its stdout. Either way the call gets a
``"timeout"`` or ``"crash"`` completion and a fresh worker takes the slot.

Workers stay in the tuner's process group (a signal to the group reaches them) but
ignore SIGINT (Ctrl-C interrupts the tuner, which then stops them). A worker exits
when its stdin closes or its parent dies, even in the middle of a call.

The pool is driven by its caller (:meth:`WorkerPool.submit`, then
:meth:`WorkerPool.wait`); it has no threads of its own.

A pool that times CPU kernels (``bind_threads=True``) binds OpenMP's threads one to each CPU
(:data:`TIMING_BINDING`), unless the user's environment sets a binding. A worker idles between
candidates while the next one builds, and libgomp's threads fall asleep; Linux then often wakes
the pool's thread onto the CPU of the thread that woke it, where both spin at the region's
barriers, and a 2-thread kernel ran 3.5-4.5x slower for a whole measurement (on 2 vCPUs: the
same config of MobileNetV2's stem timed 0.09 and 0.33 ms in one run; a third of the configs
measured twice in a model's log differed by more than 2x). Each thread on its own CPU, none of
a model's configs measured twice differed by more than 1.5x.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass

from compiler.runtime.threads import process_cpus
from measure.errors import MeasureError

__all__ = ["WorkerPool", "Completion", "describe_exit", "encode_frame", "FrameReader", "TIMING_BINDING"]

#: The environment that binds OpenMP's threads one to each CPU, for workers that time CPU kernels.
TIMING_BINDING = {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads"}

_START_FAILURES = 3  # a slot whose worker fails to start this many times in a row: give up
_HEADER = struct.Struct(">I")
_READ_CHUNK = 1 << 20
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where `measure` is imported from
_pools: weakref.WeakSet = weakref.WeakSet()


def encode_frame(message: dict) -> bytes:
    """One frame: the length, then the JSON of ``message``."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Collects bytes as they arrive and gives back the complete messages among them."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict]:
        """Take ``data``; return the messages it completes (none while a frame is partial)."""
        self._buf += data
        out = []
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if len(self._buf) < _HEADER.size + size:
                break
            body = bytes(self._buf[_HEADER.size:_HEADER.size + size])
            del self._buf[:_HEADER.size + size]
            out.append(json.loads(body))
        return out


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe may take it in pieces)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@dataclass
class Completion:
    """How a call ended: ``status`` is "ok" (``value`` is the reply's JSON), "error"
    (``value`` is a traceback: the call raised in the worker), "timeout" or "crash"
    (``value`` says how the worker died). ``phase`` is the last phase the worker
    announced ("" if none) and ``elapsed`` the seconds since it began (since the call
    began without phases)."""

    tag: object
    status: str
    value: object
    worker: str
    elapsed: float
    phase: str = ""


@dataclass
class _Job:
    tag: object
    frame: bytes
    timeout: float
    phase: str = ""


class _Slot:
    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.reader = FrameReader()
        self.ready = False
        self.worker = ""
        self.job: _Job | None = None
        self.started = 0.0
        self.failed_starts = 0
        self.fatal = ""

    @property
    def out(self) -> int:
        return self.process.stdout.fileno()


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


def _worker_env(bind_threads: bool = False) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    if bind_threads and not any(env.get(k, "").strip() for k in TIMING_BINDING):
        env.update(TIMING_BINDING)
    return env


class WorkerPool:
    """``size`` workers (pinned to ``cpus`` when given), started on first use; each runs
    ``python -P -m ENTRY``, by default a measurement worker (:mod:`measure.worker_main`).
    ``bind_threads``: bind OpenMP's threads one to each CPU (see the module), for timing."""

    def __init__(self, size: int, cpus=None, name: str = "measure", entry: str = "measure.worker_main",
                 bind_threads: bool = False):
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        if not sys.executable:
            raise MeasureError("cannot start measurement workers: sys.executable is empty")
        self.size = size
        self.cpus = sorted(cpus) if cpus else None
        self.name, self.entry, self.bind_threads = name, entry, bind_threads
        self._slots = [_Slot() for _ in range(size)]
        self._queue: collections.deque[_Job] = collections.deque()
        self._started = False
        _pools.add(self)

    # ------------------------------------------------------------------ caller's side

    @property
    def busy(self) -> int:
        """Calls submitted and not completed yet."""
        return len(self._queue) + sum(s.job is not None for s in self._slots)

    @property
    def free(self) -> int:
        """How many more calls can start right away (or as soon as a worker is up)."""
        return self.size - self.busy

    def submit(self, tag, call: str, request: dict, timeout: float) -> None:
        """Queue ``call`` (a name the worker knows) with ``request`` (JSON data); it starts on
        the next ready worker and may run ``timeout`` seconds (or what a phase announces)."""
        frame = encode_frame({"call": call, "request": request})
        self._queue.append(_Job(tag, frame, float(timeout)))
        if not self._started:
            self._started = True
            for slot in self._slots:
                self._start(slot)
        self._dispatch()

    def wait(self, timeout: float | None = None) -> list[Completion]:
        """Completions of calls, blocking until there is one or ``timeout`` seconds passed."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self._dispatch()
            done = self._poll(end)
            if done or self.busy == 0 or (end is not None and time.monotonic() >= end):
                return done

    def call(self, call: str, request: dict, timeout: float) -> Completion:
        """Run one call and wait for it (the pool must have nothing else running)."""
        self.submit(None, call, request, timeout)
        while True:
            done = self.wait()
            if done:
                return done[0]

    def close(self) -> None:
        """Stop every worker (a running call is abandoned)."""
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
        # -P: no current directory in front of sys.path, where a user's measure.py would shadow ours.
        proc = subprocess.Popen([sys.executable, "-P", "-m", self.entry, self.name],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, close_fds=True,
                                env=_worker_env(self.bind_threads))
        slot.process, slot.reader, slot.ready, slot.job, slot.fatal = proc, FrameReader(), False, None, ""
        # Unpinned workers still get the process's CPUs: a thread that OpenMP bound to one CPU
        # would hand a child started from it only that one.
        init = {"sys_path": [p for p in sys.path if isinstance(p, str)], "cpus": self.cpus or process_cpus(),
                "parent": os.getpid()}
        self._send(slot, encode_frame({"init": init}))

    def _send(self, slot: _Slot, frame: bytes) -> None:
        try:
            write_all(slot.process.stdin.fileno(), frame)
        except OSError:  # it died: the end of its stdout reports it in _poll
            pass

    def _stop(self, slot: _Slot, kill: bool) -> None:
        proc = slot.process
        slot.process = None
        slot.ready, slot.job = False, None
        if proc is None:
            return
        try:
            if kill:
                proc.kill()
            else:
                proc.stdin.close()  # the worker sees the end of its input and returns
            try:
                proc.wait(timeout=None if kill else 2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass

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
                self._send(slot, job.frame)

    def _poll(self, end: float | None) -> list[Completion]:
        live = [s for s in self._slots if s.process is not None]
        if not live:
            return []
        now = time.monotonic()
        deadlines = [s.started + s.job.timeout for s in live if s.job is not None]
        limit = min(deadlines + ([end] if end is not None else []), default=None)
        wait_s = None if limit is None else max(0.0, limit - now)
        done: list[Completion] = []
        with selectors.DefaultSelector() as sel:
            for s in live:
                sel.register(s.out, selectors.EVENT_READ, s)
            ready = [key.data for key, _ in sel.select(wait_s)]
        for slot in ready:
            try:
                data = os.read(slot.out, _READ_CHUNK)
            except OSError:
                data = b""
            if data:
                for msg in slot.reader.feed(data):
                    self._message(slot, msg, done)
            else:  # the end of its stdout: the worker died
                self._died(slot, done)
        now = time.monotonic()
        for slot in live:
            job = slot.job
            if job is not None and slot.process is not None and now - slot.started >= job.timeout:
                why = f"no result after {job.timeout:g} s; worker killed"
                done.append(Completion(job.tag, "timeout", why, slot.worker, now - slot.started, job.phase))
                self._restart(slot, kill=True)
        return done

    def _message(self, slot: _Slot, msg: dict, done: list) -> None:
        if "ready" in msg:
            slot.ready, slot.worker, slot.failed_starts = True, msg["ready"], 0
        elif "fatal" in msg:  # the worker exits next; _died counts the failure
            slot.fatal = msg["fatal"]
        elif "phase" in msg:
            if slot.job is not None:  # a new phase with a clock of its own
                slot.job.phase, slot.job.timeout = msg["phase"], float(msg["timeout"])
                slot.started = time.monotonic()
        elif slot.job is not None:
            job, slot.job = slot.job, None
            status, value = ("ok", msg["reply"]) if "reply" in msg else ("error", msg.get("error", repr(msg)))
            done.append(Completion(job.tag, status, value, slot.worker, time.monotonic() - slot.started,
                                   job.phase))

    def _died(self, slot: _Slot, done: list) -> None:
        try:
            code = slot.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # closed its stdout but lives on: finish it
            slot.process.kill()
            code = slot.process.wait()
        how = describe_exit(code)
        job = slot.job
        if job is not None:
            done.append(Completion(job.tag, "crash", f"worker {slot.worker or '?'} {how}", slot.worker,
                                   time.monotonic() - slot.started, job.phase))
        elif not slot.ready:
            slot.failed_starts += 1
            if slot.failed_starts >= _START_FAILURES:
                fatal = slot.fatal
                self.close()
                raise MeasureError(f"{self.name} workers cannot start: the worker {how}\n{fatal}")
        failed = slot.failed_starts
        self._restart(slot, kill=False)
        slot.failed_starts = failed


@atexit.register
def _close_all() -> None:
    for pool in list(_pools):
        try:
            pool.close()
        except Exception:
            pass
