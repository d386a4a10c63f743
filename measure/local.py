"""Measuring on this machine: a pool of build processes and one run process (per GPU).

:class:`LocalBuilder` builds in ``n_parallel`` workers (:mod:`measure.pool`: fresh
interpreters that never import the tuner's ``__main__``), sending each a
:class:`~measure.protocol.BuildRequest`. :class:`LocalRunner` sends each built
candidate as a :class:`~measure.protocol.RunRequest` to one worker, one at a time, so a crash
in generated code takes down that worker, never the tuner; the worker is replaced
and the candidate gets a runtime-error result. Builds and timing do not share cores
(see :mod:`measure.gate`). CUDA candidates (``"ptx"`` artifacts) run in one worker per
GPU, one candidate per GPU at a time, several GPUs side by side; the GPUs are
``devices=`` or every GPU this process sees.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterator, Sequence

from compiler import backends
from compiler.runtime.threads import process_cpus
from compiler.runtime.timer import check_cache_flush
from measure.artifact import device_count, device_type_of
from measure.base import Builder, Feed, Runner, as_feed, error_result
from measure.errors import refuse_simulated
from measure.gate import Gates
from measure.pool import Completion, WorkerPool
from measure.protocol import BuildReply, BuildRequest, RunReply, RunRequest
from measure.records import ErrorKind, MeasureInput, MeasureResult

__all__ = ["LocalBuilder", "LocalRunner", "LOCAL", "usable_cpus"]

LOCAL = "local"          # the gate of this machine
_POLL_S = 0.02           # how often a blocked builder looks at the gate again


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, sorted (:func:`compiler.runtime.threads.process_cpus`:
    its affinity, and every CPU OpenMP binds threads to)."""
    return process_cpus()


def build_completion(c: Completion) -> BuildReply:
    """The BuildReply of a finished build call, whatever became of its worker."""
    if c.status == "ok":
        return BuildReply.from_json(c.value)
    if c.status == "timeout":
        return BuildReply(None, f"build {c.value}", c.elapsed, ErrorKind.BUILD_TIMEOUT, c.worker)
    if c.status == "crash":
        return BuildReply(None, f"the build {c.value}", c.elapsed, ErrorKind.WORKER_CRASH, c.worker)
    return BuildReply(None, f"the build call failed:\n{c.value}", c.elapsed, ErrorKind.COMPILE_ERROR,
                      c.worker)


def run_completion(c: Completion, task_name: str) -> RunReply:
    """The RunReply of a finished run call (of a candidate of ``task_name``), whatever became
    of its worker."""
    if c.status == "ok":
        return RunReply.from_json(c.value)
    if c.phase != "run":  # it never got to the candidate: making the task's data failed
        how = c.value if c.status == "timeout" else f"crashed the run worker: {c.value}"
        return RunReply.failure(ErrorKind.RUNTIME_ERROR, f"making the inputs and expected outputs of "
                                f"{task_name}: {how}", c.elapsed, c.worker)
    if c.status == "timeout":
        return RunReply.failure(ErrorKind.RUN_TIMEOUT, f"run {c.value}", c.elapsed, c.worker)
    if c.status == "crash":
        return RunReply.failure(ErrorKind.RUNTIME_ERROR, f"the candidate crashed the run worker: {c.value}",
                                c.elapsed, c.worker)
    return RunReply.failure(ErrorKind.RUNTIME_ERROR, f"the run call failed:\n{c.value}", c.elapsed, c.worker)


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
            n = self.n_parallel or len(self.cpus or usable_cpus())
            self._pool = WorkerPool(n, self.cpus, name="build")
        return self._pool

    streams = True

    def slots(self) -> int:
        return self.n_parallel or len(self.cpus or usable_cpus())

    def build(self, inputs: Sequence[MeasureInput] | Feed, gates: Gates) -> Iterator[tuple[int, BuildReply]]:
        pool, gate = self._workers(), gates(LOCAL)
        feed = as_feed(inputs)
        todo: deque[int] = deque()
        seen = running = 0
        try:
            while True:
                if len(feed) > seen:
                    n = len(feed)
                    todo.extend(range(seen, n))
                    seen = n
                if gates.stop.is_set():
                    todo.clear()
                if not todo and not running:
                    if feed.done(seen) or gates.stop.is_set():
                        return
                    feed.wait(seen, _POLL_S)
                    continue
                while todo and pool.free and gate.try_build():
                    i = todo.popleft()
                    running += 1
                    pool.submit(i, "build", BuildRequest.of(feed[i]).to_json(), self.timeout)
                if not running:
                    gate.wait_open(_POLL_S)
                    continue
                for c in pool.wait(_POLL_S if todo or not feed.closed else None):
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
    measurement takes ``min_repeat_ms``), ``cooldown_ms`` apart, evicting its arguments but
    the first (its input) from the caches before each call with ``cache_flush=True``, as TVM's
    ``enable_cpu_cache_flush`` does, or all but the first and the last (its output) with
    ``cache_flush="weights"``, as its weights are inside a model, or, with ``cache_flush="model"``
    (:func:`autotune.tune_model`'s default), those evicted and the input then written by the
    thread pool, as the kernel before leaves it inside a model. A run past ``timeout`` seconds
    is killed.

    CUDA candidates are timed with CUDA events (``cache_flush`` does not apply), in one
    worker per GPU of ``devices`` (CUDA device ordinals; by default every GPU that this
    process sees, which ``CUDA_VISIBLE_DEVICES`` limits), one candidate per GPU at a time.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 50, timeout: float = 10,
                 cooldown_ms: float = 0, cache_flush: bool | str = False, check_correctness: bool = True,
                 devices: Sequence[int] | None = None):
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be positive, got number={number}, repeat={repeat}")
        if timeout <= 0 or min_repeat_ms < 0 or cooldown_ms < 0:
            raise ValueError("timeout must be positive; min_repeat_ms and cooldown_ms not negative")
        if devices is not None:
            devices = [int(d) for d in devices]
            if not devices or any(d < 0 for d in devices) or len(set(devices)) != len(devices):
                raise ValueError(f"devices must be distinct GPU ordinals (>= 0), got {devices}")
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.timeout = timeout
        self.cooldown_ms = cooldown_ms
        self.cache_flush = check_cache_flush(cache_flush)
        self.check_correctness = check_correctness
        self.devices = devices
        self.cpus: list[int] | None = None  # set by MeasureOptions when timing gets its own cores
        self._pool: WorkerPool | None = None
        self._gpu_pools: dict[int, WorkerPool] = {}
        self._gpu_ids: list[int] | None = None
        self._broken: dict = {}  # task key -> why its reference data cannot be made

    def slots(self) -> int:
        return len(self.devices) if self.devices else 1

    @property
    def prepare_timeout(self) -> float:
        """Seconds allowed to make a task's inputs and expected outputs (once per task and worker)."""
        return max(60.0, 6 * self.timeout)

    def _worker(self, device: int | None = None) -> WorkerPool:
        if device is not None:
            pool = self._gpu_pools.get(device)
            if pool is None:
                pool = self._gpu_pools[device] = WorkerPool(1, self.cpus, name=f"run-gpu{device}")
            return pool
        if self._pool is None:
            self._pool = WorkerPool(1, self.cpus, name="run", bind_threads=True)
        return self._pool

    def gpu_ids(self) -> list[int]:
        """The GPUs that CUDA candidates run on: ``devices``, or those this process sees (at least [0])."""
        if self._gpu_ids is None:
            if self.devices is not None:
                self._gpu_ids = list(self.devices)
            else:
                self._gpu_ids = list(range(accelerator_count())) or [0]  # without a GPU, candidates say why
        return self._gpu_ids

    def request(self, task, build: BuildReply, device: int | None = None) -> RunRequest:
        """The RunRequest that checks and times ``build`` with this runner's settings (on GPU
        ``device``, default the first, for a CUDA candidate)."""
        if _is_cuda(build):
            refuse_simulated(device_type_of(build.artifact))
            device = self.gpu_ids()[0] if device is None else device
        else:
            device = None
        return RunRequest(task.to_json(by_value=True), build.artifact, self.number, self.repeat,
                          self.min_repeat_ms, self.cooldown_ms, self.cache_flush, self.check_correctness,
                          self.timeout, self.prepare_timeout, device)

    def call(self, request: RunRequest) -> RunReply:
        """Send ``request`` to the run worker (of its GPU for a CUDA candidate) and wait for the
        reply; a worker that dies or hangs is replaced and the reply says what happened."""
        key = request.task_key
        if key in self._broken:
            return RunReply.failure(ErrorKind.RUNTIME_ERROR, self._broken[key])
        pool = self._worker(request.device_id if device_type_of(request.artifact) != "cpu" else None)
        c = pool.call("run", request.to_json(), request.prepare_timeout)
        reply = run_completion(c, request.task.get("template", "?"))
        if c.status in ("timeout", "crash") and c.phase != "run":  # each new worker would fail the same way
            self._broken[key] = reply.message
        if reply.replace_worker:  # e.g. the worker's CUDA context is spoilt
            pool.close()
        return reply

    def measure_one(self, task, build: BuildReply, device: int | None = None) -> MeasureResult:
        """Check and time one built candidate in the run worker (of GPU ``device``, default the
        first, for a CUDA candidate)."""
        return self.call(self.request(task, build, device)).result(build.build_time)

    def _run_gpu(self, jobs: queue.Queue, first, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        """Run CUDA jobs (``first``, then the rest of ``jobs``) on every GPU at once, one
        candidate per GPU; CPU jobs among them run as usual, in between."""
        free = list(self.gpu_ids())
        done: queue.Queue = queue.Queue()
        running = 0
        pending, closed = first, False  # pending: a job taken from the queue, not started yet

        def work(i, inp, build, device):
            try:
                result = self.measure_one(inp.task, build, device)
            except BaseException as exc:  # noqa: BLE001 - reported, never lost
                result = error_result(ErrorKind.RUNTIME_ERROR, f"the run failed: {type(exc).__name__}: {exc}",
                                      build.build_time)
            done.put((i, result, device))

        while pending is not None or not closed or running:
            if pending is not None:
                i, inp, build = pending
                if gates.stop.is_set():
                    pending = None
                elif not _is_cuda(build):
                    pending = None
                    yield from self._run_cpu(i, inp, build, gates)
                elif free:
                    pending = None
                    running += 1
                    threading.Thread(target=work, args=(i, inp, build, free.pop(0)), name="measure-gpu",
                                     daemon=True).start()
            if pending is None and not closed:
                try:
                    item = jobs.get(timeout=_POLL_S) if running else jobs.get()
                except queue.Empty:
                    item = ()
                if item is None:
                    closed = True
                elif item:
                    pending = item
            block = pending is not None or closed
            while running:
                try:
                    i, result, device = done.get(timeout=_POLL_S) if block else done.get_nowait()
                except queue.Empty:
                    break
                running -= 1
                free.append(device)
                block = False
                yield i, result

    def _run_cpu(self, i, inp, build, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        gate = gates(LOCAL)
        gate.acquire_timing()
        try:
            result = self.measure_one(inp.task, build)
        finally:
            gate.release_timing()
        yield i, result

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
                if _is_cuda(build):  # GPU timing leaves the cores to the builds
                    # On a simulator: the measurement breaks here, before anything is timed or recorded.
                    refuse_simulated(device_type_of(build.artifact))
                    if holding:
                        gate.release_timing()
                        holding = False
                    yield from self._run_gpu(jobs, job, gates)
                    return
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
        for pool in self._gpu_pools.values():
            pool.close()
        self._gpu_pools = {}

    def __getstate__(self):
        return {**self.__dict__, "_pool": None, "_gpu_pools": {}, "_gpu_ids": None, "_broken": {}}

    def __repr__(self) -> str:
        return (f"LocalRunner(number={self.number}, repeat={self.repeat}, "
                f"min_repeat_ms={self.min_repeat_ms}, "
                f"timeout={self.timeout}, cooldown_ms={self.cooldown_ms}, cache_flush={self.cache_flush}, "
                f"check_correctness={self.check_correctness}"
                + (f", devices={self.devices})" if self.devices is not None else ")"))


def _is_cuda(build: BuildReply) -> bool:
    """Whether ``build`` runs on a device other than the host (a GPU): then it is timed on the
    device's own worker, one candidate per device at a time."""
    return build.artifact is not None and device_type_of(build.artifact) != "cpu"


def accelerator_count() -> int:
    """How many devices (GPUs) this process sees, of the first registered backend whose code
    runs on a device other than the host."""
    device_types = [b.device_type for b in backends.registered() if b.device_type != "cpu"]
    return device_count(device_types[0]) if device_types else 0
