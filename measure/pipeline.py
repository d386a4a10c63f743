"""Measuring candidates: builder, then runner, with plain records between.

A :class:`MeasureSession` takes candidates at any time and returns them as they finish;
``measure_batch`` and ``measure_stream`` measure one list through one. Builds and runs
overlap: a thread feeds the builder's results into the runner's queue as they finish,
another drains the runner, and the caller receives results as they come. A failed build
becomes a result at once, without a run.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from compiler.runtime import num_threads
from measure.base import Builder, Feed, Runner, error_result
from measure.gate import Gates
from measure.local import LOCAL, LocalBuilder, LocalRunner, usable_cpus
from measure.protocol import BuildReply
from measure.records import ErrorKind, MeasureInput, MeasureResult

__all__ = ["MeasureOptions", "MeasureSession", "measure_batch", "measure_stream"]


class MeasureOptions:
    """A builder and a runner (default ``LocalBuilder()`` and ``LocalRunner()``).

    Reusable across batches; their workers start on first use and stay up until
    :meth:`close` (or the end of a ``with`` block). Picklable (without the workers).

    Where both are local, timing and builds share this machine. If the kernels run
    on fewer threads than there are usable CPUs (``AUTOTUNE_NUM_THREADS``), the run
    worker is pinned to the first ones and the build workers to the rest, and they
    overlap; otherwise builds pause while a candidate is timed (:mod:`measure.gate`).
    """

    def __init__(self, builder: Builder | None = None, runner: Runner | None = None):
        self.builder = builder if builder is not None else LocalBuilder()
        self.runner = runner if runner is not None else LocalRunner()
        self._exclusive: bool | None = None

    def _plan(self) -> bool:
        """Whether builds must pause during timing; pins local workers to disjoint cores if not."""
        if self._exclusive is None:
            self._exclusive = True
            if isinstance(self.builder, LocalBuilder) and isinstance(self.runner, LocalRunner):
                cpus, threads = usable_cpus(), num_threads()
                if threads < len(cpus) and self.builder.cpus is None and self.runner.cpus is None:
                    self.runner.cpus, self.builder.cpus = cpus[:threads], cpus[threads:]
                    self._exclusive = False
        return self._exclusive

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"MeasureOptions(builder={self.builder!r}, runner={self.runner!r})"


def measure_batch(inputs: Iterable[MeasureInput],
                  options: MeasureOptions | None = None) -> list[MeasureResult]:
    """One result per input, in the inputs' order."""
    inputs = list(inputs)
    results: list[MeasureResult | None] = [None] * len(inputs)
    if inputs:
        with MeasureSession(options) as session:
            session.submit(inputs)  # the feed's indices are the inputs' positions
            while session.in_flight:
                for i, result in session._finished():
                    results[i] = result
    return results


def measure_stream(inputs: Iterable[MeasureInput],
                   options: MeasureOptions | None = None) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    """``(input, result)`` pairs as candidates finish."""
    inputs = list(inputs)
    if not inputs:
        return
    with MeasureSession(options) as session:
        session.submit(inputs)
        while session.in_flight:
            yield from session.results()


class MeasureSession:
    """Candidates measured as they are submitted, over one builder and runner kept busy.

    :meth:`submit` hands over inputs at any time; :meth:`results` returns those that
    finished. A tuning loop keeps :attr:`capacity` candidates in flight (submitting more as
    results come back), so that no worker waits for the slowest candidate of a batch.
    :meth:`close` (or the end of a ``with`` block) abandons what is still in flight: its
    builds are cancelled, and it gets no result. Options made here (``options=None``) are
    closed with the session.
    """

    def __init__(self, options: MeasureOptions | None = None):
        self._owned = options is None
        self.options = options if options is not None else MeasureOptions()
        self._feed = Feed()  # what the builder builds: one input per distinct candidate in flight
        self._builds = _SharedBuilds(self._feed)
        self._out: queue.Queue = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._gates: Gates | None = None
        self.in_flight = 0

    @property
    def capacity(self) -> int:
        """How many candidates in flight keep every build and run worker busy: one per build
        slot, plus two per run slot (one timing, one built and waiting)."""
        return self.options.builder.slots() + 2 * self.options.runner.slots()

    def seconds_to_measure(self, build_seconds: float, run_seconds: float) -> float:
        """Seconds that builds taking ``build_seconds`` of a worker's time in all and timings taking
        ``run_seconds`` take with every worker busy: builds spread over the build slots and runs
        over the run slots, one after the other where builds pause while a candidate is timed
        (:class:`MeasureOptions`), side by side otherwise. A candidate submitted again while it
        is in flight is built once (:meth:`submit`)."""
        build = build_seconds / self.options.builder.slots()
        run = run_seconds / self.options.runner.slots()
        return build + run if self.options._plan() else max(build, run)

    @contextmanager
    def holding_cores(self) -> Iterator[None]:
        """A block of the caller's own heavy work (a tuner's model fitting and search) that
        must not overlap a timing: where builds pause while a candidate is timed
        (:class:`MeasureOptions`), it waits for the timing under way, and no timing starts
        until it ends; builds go on beside it. Elsewhere it holds nothing."""
        gates = self._gates
        if gates is None or not gates.exclusive:
            yield
            return
        gate = gates(LOCAL)
        gate.acquire_build()
        try:
            yield
        finally:
            gate.build_done()

    def submit(self, inputs: Iterable[MeasureInput]) -> None:
        """Start measuring ``inputs``. A candidate (task and config) submitted while the same
        candidate is still being built shares its build (with ``build_time`` 0 in its result),
        and is timed after every candidate submitted before it has been built, so that
        measuring the same candidates again in rounds (submitted together) keeps the rounds
        interleaved."""
        inputs = list(inputs)
        if not inputs:
            return
        if not self._threads:
            self._start()
        self.in_flight += len(inputs)
        self._builds.add(inputs)

    def results(self, timeout: float | None = None) -> list[tuple[MeasureInput, MeasureResult]]:
        """The ``(input, result)`` pairs finished since the last call: waits for the first up to
        ``timeout`` seconds (for ever with None) while any is in flight; a worker-side error
        (the builder or runner breaking, not a failed candidate) is raised here."""
        return [(self._builds.inputs[i], result) for i, result in self._finished(timeout)]

    def _finished(self, timeout: float | None = None) -> list[tuple[int, MeasureResult]]:
        """:meth:`results` with each input's index in the order of submission."""
        done = []
        block = self.in_flight > 0
        while self.in_flight:
            try:
                i, item = self._out.get(timeout=timeout) if block else self._out.get_nowait()
            except queue.Empty:
                break
            if i is None:
                raise item
            block = False
            self.in_flight -= 1
            done.append((i, item))
        return done

    def _start(self) -> None:
        options, feed, out, shared = self.options, self._feed, self._out, self._builds
        gates = self._gates = Gates(exclusive=options._plan())
        built: queue.Queue = queue.Queue()

        def failed_build(i, build):
            kind = build.error_kind or ErrorKind.COMPILE_ERROR
            out.put((i, error_result(kind, build.error or "", build.build_time, 0.0, build.worker)))

        def build_side() -> None:
            try:
                for b, build in _builds(options.builder, feed, gates):
                    for i, reply in shared.finished(b, build):
                        if reply.artifact is None:
                            failed_build(i, reply)
                        else:
                            built.put((i, shared.inputs[i], reply))
            except BaseException as exc:
                out.put((None, exc))
            finally:
                built.put(None)

        def run_side() -> None:
            try:
                for i, result in options.runner.run(built, gates):
                    out.put((i, result))
            except BaseException as exc:
                out.put((None, exc))

        self._threads = [threading.Thread(target=build_side, name="measure-build", daemon=True),
                         threading.Thread(target=run_side, name="measure-run", daemon=True)]
        for t in self._threads:
            t.start()

    def close(self) -> None:
        """Stop measuring; candidates still in flight are abandoned."""
        if self._gates is not None and self.in_flight:
            self._gates.stop.set()
        self._feed.close()
        for t in self._threads:
            t.join()
        self._threads = []
        if self._owned:
            self.options.close()

    def __enter__(self) -> MeasureSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _SharedBuilds:
    """A session's inputs (indexed in the order submitted), and the builds they share: an input
    whose candidate (task and config) is already in the builder's feed and not built yet waits
    for that build instead of adding its own. A waiting input is released once every input
    submitted before it has its build, so that timings keep the order of submission."""

    def __init__(self, feed: Feed):
        self.inputs: list[MeasureInput] = []
        self._feed = feed
        self._lock = threading.Lock()
        self._owners: list[int] = []            # feed index -> the input that asked for the build
        self._waiting: dict[int, list[int]] = {}  # feed index -> the later inputs sharing it
        self._building: dict[tuple, int] = {}   # candidate -> its feed index, while it is built
        self._unbuilt: set[int] = set()         # inputs whose build has not finished
        self._held: list[tuple[int, BuildReply]] = []  # sharing inputs built, not yet released

    @staticmethod
    def _candidate(inp: MeasureInput) -> tuple:
        return inp.task.workload_key, json.dumps(inp.config_json, sort_keys=True)

    def add(self, inputs: list[MeasureInput]) -> None:
        """Take ``inputs``; those whose candidates are not being built go into the feed."""
        new = []
        with self._lock:  # the feed's order is the owners' order: put under the same lock
            for inp in inputs:
                i = len(self.inputs)
                self.inputs.append(inp)
                self._unbuilt.add(i)
                key = self._candidate(inp)
                b = self._building.get(key)
                if b is not None:
                    self._waiting[b].append(i)
                    continue
                b = self._building[key] = len(self._owners)
                self._waiting[b] = []
                self._owners.append(i)
                new.append(inp)
            if new:
                self._feed.put(new)

    def finished(self, b: int, build: BuildReply) -> list[tuple[int, BuildReply]]:
        """The inputs that feed input ``b``'s ``build`` releases, with their replies: its own
        input, then the sharing inputs whose every predecessor is built (a failed build fails
        the inputs sharing it at once)."""
        with self._lock:
            owner = self._owners[b]
            self._building.pop(self._candidate(self.inputs[owner]), None)
            shared = replace(build, build_time=0.0)
            waiting = self._waiting.pop(b)
            self._unbuilt.difference_update([owner, *waiting])
            released = [(owner, build)]
            if build.artifact is None:
                released += [(i, shared) for i in waiting]
            else:
                self._held += [(i, shared) for i in waiting]
            first_unbuilt = min(self._unbuilt, default=len(self.inputs))
            ready = sorted((i, r) for i, r in self._held if i < first_unbuilt)
            self._held = [(i, r) for i, r in self._held if i >= first_unbuilt]
        return released + ready


def _builds(builder: Builder, feed: Feed, gates: Gates) -> Iterator[tuple[int, BuildReply]]:
    """The builder's results over a growing feed: given the feed itself if it streams, else
    one closed chunk of the inputs that have arrived at a time."""
    if builder.streams:
        yield from builder.build(feed, gates)
        return
    seen = 0
    while True:
        feed.wait(seen)
        if feed.done(seen) or gates.stop.is_set():
            return
        end = len(feed)
        for j, build in builder.build([feed[i] for i in range(seen, end)], gates):
            yield seen + j, build
        seen = end
