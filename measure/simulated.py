"""A simulated cluster: a builder and a runner that take known times and compile nothing.

It plans past this machine: how many nodes one tuner keeps busy, and what its own work per
trial costs, is read off a cluster that exists only as a clock::

    cluster = SimulatedCluster(nodes=64, cpus_per_node=16, build_s=0.8, run_s=0.2)
    with MeasureOptions(cluster.builder, cluster.runner) as options:
        autotune.tune_tasks(tasks, trials=4000, measure_option=options, ...)
    cluster.node_busy()        # the nodes' time in use (timing or building) in the steady state
    cluster.utilisation()      # the runners' busy share, at most cluster.runner_ceiling

Builds and timings take real wall time (the tuner's real work competes with them), but
nothing is compiled nor run: a build returns a placeholder artifact after ``build_s``
seconds, a timing returns a cost that is a deterministic function of the config after
``run_s`` seconds. Where work goes follows :mod:`measure.ray` decision for decision:

* builds go to the nodes in order, up to ``cpus_per_node`` at a time on each, while
  that node's gate (:mod:`measure.gate`, the real one) lets builds start;
* each node has one runner, which times one candidate at a time: a built candidate goes
  to the first idle runner whose node's gate it gets (asking it stops new builds on
  that node; it is granted once the node's running builds end); a runner keeps its gate
  while candidates wait, and gives it back once none does;
* a lost node (:meth:`SimulatedCluster.lose_node`) gets no more work; each build it was
  running is built again on another node, and the candidate it was timing is timed again
  on another node (a second loss of the same candidate is a worker-crash result), as
  Ray's builder and runner retry a lost task or actor call once elsewhere.

One scheduler thread keeps every build and timing in flight on a heap of completion
times, so a cluster of 256 nodes of 16 CPUs costs one thread, not 4096. The cluster
records when each node built and timed, for :meth:`SimulatedCluster.utilisation` and
:meth:`SimulatedCluster.node_busy`.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from measure.base import Builder, Feed, Runner, as_feed, error_result
from measure.gate import CoreGate, Gates
from measure.protocol import BuildReply
from measure.records import Artifact, ErrorKind, MeasureInput, MeasureResult

__all__ = ["SimulatedCluster", "SimulatedBuilder", "SimulatedRunner", "knob_cost"]


def knob_cost(config, flop: float = 1e9, seed: int = 0) -> float:
    """Seconds per run of ``config``: ``flop`` at 20 GFLOPS, slowed down by a factor between
    1 and 2 per knob, drawn from a hash of the knob's name and value (and ``seed``).

    Deterministic in every process, and a product over the knobs (a sum in log space), so a
    cost model has something to learn.
    """
    slowdown = 1.0
    for name, value in config.knob_values().items():
        key = json.dumps([seed, name, value], sort_keys=True).encode()
        u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2.0 ** 64
        slowdown *= 1.0 + u
    return max(float(flop), 1.0) / 20e9 * slowdown


@dataclass(eq=False)
class _Node:
    """One simulated machine: its CPUs' builds, its one runner, and their history."""

    index: int
    name: str
    builds: int = 0                      # builds running on its CPUs
    run: _Run | None = None              # the candidate its runner times
    held: CoreGate | None = None         # the gate its runner holds (timing has the node)
    asked: CoreGate | None = None        # the gate its runner asked for, not granted yet
    lost: bool = False
    build_spans: list = field(default_factory=list)  # (start, end) of each build
    run_spans: list = field(default_factory=list)    # (start, end) of each timing


@dataclass(eq=False)
class _Build:
    call: _BuildCall
    index: int                # into the call's feed
    attempt: int = 0
    avoid: int | None = None  # the node where the first attempt was lost
    node: _Node | None = None
    start: float = 0.0
    cancelled: bool = False


@dataclass(eq=False)
class _Run:
    call: _RunCall
    index: int
    input: MeasureInput
    build: BuildReply
    attempt: int = 0
    avoid: int | None = None
    node: _Node | None = None
    start: float = 0.0
    cancelled: bool = False


class _BuildCall:
    """The state of one :meth:`SimulatedBuilder.build` call."""

    def __init__(self, feed: Feed, gates: Gates):
        self.feed, self.gates = feed, gates
        self.seen = 0
        self.todo: deque[_Build] = deque()
        self.running: set[int] = set()   # id() of its running _Build jobs
        self.fed = False                 # the feed is done: no more inputs will come
        self.out: queue.Queue = queue.Queue()
        self.ended = False


class _RunCall:
    """The state of one :meth:`SimulatedRunner.run` call."""

    def __init__(self, jobs: queue.Queue, gates: Gates):
        self.jobs, self.gates = jobs, gates
        self.pending: deque[_Run] = deque()
        self.running = 0
        self.fed = False                 # None came: no more candidates
        self.out: queue.Queue = queue.Queue()
        self.ended = False


class SimulatedCluster:
    """``nodes`` simulated machines of ``cpus_per_node`` CPUs each.

    A build takes ``build_s`` seconds on one CPU, a timing ``run_s`` seconds on a node's
    runner (each times ``1 +- jitter`` as long, drawn from ``seed``). A timing's result
    costs ``cost(config)`` seconds per run (default :func:`knob_cost` of the config and
    its task's FLOPs). ``builder`` and ``runner`` go into a
    :class:`~measure.pipeline.MeasureOptions`.
    """

    def __init__(self, nodes: int, cpus_per_node: int = 16, build_s: float = 1.5, run_s: float = 0.4,
                 cost: Callable | None = None, jitter: float = 0.0, seed: int = 0):
        if nodes < 1 or cpus_per_node < 1:
            raise ValueError(f"nodes and cpus_per_node must be positive, got {nodes}, {cpus_per_node}")
        if build_s < 0 or run_s < 0 or not 0 <= jitter < 1:
            raise ValueError(f"build_s and run_s must not be negative and 0 <= jitter < 1, got "
                             f"{build_s}, {run_s}, {jitter}")
        self.cpus_per_node, self.build_s, self.run_s, self.jitter = cpus_per_node, build_s, run_s, jitter
        self.cost = cost
        self.seed = seed
        self.nodes = [_Node(k, f"sim-node-{k}") for k in range(nodes)]
        self.builder = SimulatedBuilder(self)
        self.runner = SimulatedRunner(self)
        self.builds_retried = 0       # builds lost with a node and sent to another
        self.runs_retried = 0         # timings lost with a node and sent to another
        self.submit_times: list[float] = []  # when each candidate reached the builder
        self._rng = random.Random(seed)
        self._cv = threading.Condition()
        self._heap: list = []         # (time, seq, job) of every build and timing in flight
        self._seq = itertools.count()
        self._build_calls: list[_BuildCall] = []
        self._run_calls: list[_RunCall] = []
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ reading the record

    @property
    def runner_ceiling(self) -> float:
        """The busy share a runner can reach at best when builds pause while it times: a node
        timing ``cpus_per_node`` candidates needs their builds, ``build_s`` with every CPU
        building, during which it cannot time."""
        timing = self.cpus_per_node * self.run_s
        return timing / (timing + self.build_s) if timing else 0.0

    @property
    def cycle(self) -> float:
        """A node's cycle at best, in seconds: its CPUs build a candidate each, then it times them."""
        return self.cpus_per_node * self.run_s + self.build_s

    def window(self) -> tuple[float, float]:
        """The search's steady state (``time.monotonic()`` seconds), cut to a whole number of
        :attr:`cycle` (where it spans one): from one cycle after the first timing's start to
        the last candidate handed to the builder. The first cycle times the candidates a tuner
        hands out at once at the start, whatever its pace after; after the last one, the
        cluster drains. (0, 0) while there is none.

        The nodes go in step (all build, then all time), so a window that ended within a
        cycle would over- or under-state how busy they were."""
        with self._cv:
            starts = [n.run_spans[0][0] for n in self.nodes if n.run_spans]
            starts += [n.run.start for n in self.nodes if n.run is not None and not n.run_spans]
            if not starts or not self.submit_times:
                return 0.0, 0.0
            since = min(starts) + self.cycle
            cycles = int((self.submit_times[-1] - since) / self.cycle) if self.cycle else 0
            return (since, since + cycles * self.cycle) if cycles > 0 else (0.0, 0.0)

    def node_utilisation(self, since: float | None = None, until: float | None = None) -> list[float]:
        """Each node's runner-busy share of ``[since, until]`` (default :meth:`window`)."""
        since, until = self._span(since, until)
        with self._cv:
            now = time.monotonic()
            return [_overlap(n.run_spans + ([(n.run.start, now)] if n.run else []), since, until)
                    / (until - since) for n in self.nodes]

    def utilisation(self, since: float | None = None, until: float | None = None) -> float:
        """Runner-busy time over ``len(nodes) x`` the wall time of ``[since, until]``
        (default :meth:`window`): how busy the tuner kept the cluster's timing."""
        shares = self.node_utilisation(since, until)
        return sum(shares) / len(shares)

    def node_busy(self, since: float | None = None, until: float | None = None) -> float:
        """The share of the nodes' time in use over ``[since, until]`` (default
        :meth:`window`): timing (which has the whole node) or building (a CPU each)."""
        since, until = self._span(since, until)
        with self._cv:
            now = time.monotonic()
            used = 0.0
            for n in self.nodes:
                used += _overlap(n.run_spans + ([(n.run.start, now)] if n.run else []), since, until)
                running = [(j.start, now) for _, _, j in self._heap
                           if isinstance(j, _Build) and j.node is n and not j.cancelled]
                used += _overlap(n.build_spans + running, since, until) / self.cpus_per_node
            return used / (len(self.nodes) * (until - since))

    def finished(self, since: float | None = None, until: float | None = None) -> int:
        """How many timings finished within ``[since, until]`` (default :meth:`window`)."""
        since, until = self._span(since, until)
        with self._cv:
            return sum(since <= end <= until for n in self.nodes for _, end in n.run_spans)

    def runs_per_node(self) -> list[int]:
        """How many timings each node's runner finished (or lost)."""
        with self._cv:
            return [len(n.run_spans) for n in self.nodes]

    def _span(self, since, until) -> tuple[float, float]:
        if since is None or until is None:
            w = self.window()
            since = w[0] if since is None else since
            until = w[1] if until is None else until
        if until <= since:
            raise ValueError(f"an empty time window: [{since}, {until}]")
        return since, until

    # ------------------------------------------------------------------ failure

    def lose_node(self, k: int) -> tuple[int, int]:
        """Node ``k`` goes away: it gets no more work; the builds it was running are built
        again elsewhere, and the candidate it was timing is timed again elsewhere (a
        candidate lost a second time gets a worker-crash result). Returns how many builds
        and timings (0 or 1) it had in flight."""
        with self._cv:
            node = self.nodes[k]
            if node.lost:
                return 0, 0
            node.lost = True
            now = time.monotonic()
            lost = node.builds, int(node.run is not None)
            for _, _, job in self._heap:
                if isinstance(job, _Build) and job.node is node and not job.cancelled:
                    job.cancelled = True
                    node.builds -= 1
                    node.build_spans.append((job.start, now))
                    job.call.running.discard(id(job))
                    job.call.gates(node.name).build_done()
                    if job.attempt == 0:
                        self.builds_retried += 1
                        job.call.todo.appendleft(_Build(job.call, job.index, 1, k))
                    else:
                        job.call.out.put((job.index, BuildReply(None, "the build worker died twice",
                                                                now - job.start, ErrorKind.WORKER_CRASH,
                                                                node.name)))
            job = node.run
            if job is not None:
                job.cancelled = True
                node.run = None
                node.run_spans.append((job.start, now))
                job.call.running -= 1
                if job.attempt == 0:
                    self.runs_retried += 1
                    job.call.pending.appendleft(_Run(job.call, job.index, job.input, job.build, 1, k))
                else:
                    crash = error_result(ErrorKind.WORKER_CRASH, "the run actor died twice",
                                         job.build.build_time, now - job.start, node.name)
                    job.call.out.put((job.index, crash))
            self._forget_gate(node)
            self._cv.notify_all()
            return lost

    # ------------------------------------------------------------------ calls

    def _serve(self, call) -> Iterator:
        """The results of a build or run call as they come; its work is dropped when the
        consumer stops (or it ends)."""
        self._open(call)
        try:
            while (item := call.out.get()) is not None:
                yield item
        finally:
            self._close(call)

    def _open(self, call) -> None:
        """Register a build or run call and start the thread that feeds it (and the scheduler)."""
        with self._cv:
            (self._build_calls if isinstance(call, _BuildCall) else self._run_calls).append(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._schedule, name="simulated-cluster", daemon=True)
                self._thread.start()
        feeder = self._watch_feed if isinstance(call, _BuildCall) else self._watch_jobs
        threading.Thread(target=feeder, args=(call,), name="simulated-feed", daemon=True).start()

    def _close(self, call) -> None:
        """The end of a call (finished, or abandoned by its consumer): its work is dropped."""
        with self._cv:
            call.ended = True
            if isinstance(call, _BuildCall):
                call.todo.clear()
                for _, _, job in self._heap:
                    if isinstance(job, _Build) and job.call is call and not job.cancelled:
                        job.cancelled = True
                        job.node.builds -= 1
                        call.gates(job.node.name).build_done()
                self._build_calls.remove(call)
            else:
                call.pending.clear()
                for node in self.nodes:
                    if node.run is not None and node.run.call is call:
                        node.run.cancelled = True
                        node.run = None
                    self._forget_gate(node, call.gates)
                self._run_calls.remove(call)
            self._cv.notify_all()

    def _watch_feed(self, call: _BuildCall) -> None:
        """Hand the inputs of a build call's feed to the scheduler as they come."""
        feed = call.feed
        while not call.ended:
            feed.wait(call.seen, 0.5)
            with self._cv:
                n = len(feed)
                if n > call.seen:
                    now = time.monotonic()
                    self.submit_times.extend([now] * (n - call.seen))
                    call.todo.extend(_Build(call, i) for i in range(call.seen, n))
                    call.seen = n
                if feed.done(call.seen) or call.gates.stop.is_set():
                    call.fed = True
                self._cv.notify_all()
                if call.fed:
                    return

    def _watch_jobs(self, call: _RunCall) -> None:
        """Hand the built candidates of a run call's queue to the scheduler as they come."""
        while not call.ended:
            try:
                item = call.jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            with self._cv:
                if item is None:
                    call.fed = True
                elif not call.gates.stop.is_set():
                    i, inp, build = item
                    call.pending.append(_Run(call, i, inp, build))
                self._cv.notify_all()
                if call.fed:
                    return

    # ------------------------------------------------------------------ the scheduler

    def _schedule(self) -> None:
        """The scheduler thread: finish what is due, start what can start, sleep until the next
        completion (or until a call, a loss or new work wakes it); ends when nothing is left."""
        with self._cv:
            while self._build_calls or self._run_calls or self._heap:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, _, job = heapq.heappop(self._heap)
                    if not job.cancelled:
                        (self._built if isinstance(job, _Build) else self._timed)(job, now)
                self._dispatch_runs(now)
                self._dispatch_builds(now)
                self._end_calls()
                self._cv.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
            self._thread = None

    def _duration(self, seconds: float) -> float:
        return seconds * self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else seconds

    def _built(self, job: _Build, now: float) -> None:
        node, call = job.node, job.call
        node.builds -= 1
        node.build_spans.append((job.start, now))
        call.running.discard(id(job))
        call.gates(node.name).build_done()
        artifact = Artifact("simulated", b"", {"node": node.name})
        call.out.put((job.index, BuildReply(artifact, None, now - job.start, None, node.name)))

    def _timed(self, job: _Run, now: float) -> None:
        node, call = job.node, job.call
        node.run = None
        node.run_spans.append((job.start, now))
        call.running -= 1
        config = job.input.config
        if self.cost is not None:
            seconds = self.cost(config)
        else:
            seconds = knob_cost(config, job.input.task.flop, self.seed)
        call.out.put((job.index, MeasureResult((seconds,), None, "", job.build.build_time, now - job.start,
                                               time.time(), node.name)))

    def _dispatch_runs(self, now: float) -> None:
        """RayRunner's choice: each waiting candidate goes to the first idle runner whose node's
        gate it gets; a runner keeps its gate while candidates wait, and gives it back once none does."""
        alive = [n for n in self.nodes if not n.lost]
        for call in self._run_calls:
            if call.gates.stop.is_set():
                call.pending.clear()
            idle = [n for n in alive if n.run is None]
            blocked = False  # no idle runner got its gate for a candidate that may go anywhere
            for job in list(call.pending):
                if not idle:
                    break
                if blocked and job.avoid is None:
                    continue
                choice = [n for n in idle if n.index != job.avoid] or (idle if len(alive) == 1 else [])
                node = next((n for n in choice if self._gate_open(n, call.gates)), None)
                if node is None:
                    blocked = blocked or job.avoid is None
                    continue
                call.pending.remove(job)
                idle.remove(node)
                job.node, job.start = node, now
                node.run = job
                call.running += 1
                heapq.heappush(self._heap, (now + self._duration(self.run_s), next(self._seq), job))
        if not any(call.pending for call in self._run_calls):
            for node in self.nodes:
                if node.held is not None and node.run is None:
                    node.held.release_timing()
                    node.held = None

    def _gate_open(self, node: _Node, gates: Gates) -> bool:
        gate = gates(node.name)
        if node.held is gate:
            return True
        if node.held is not None:  # held for another session's candidates
            return False
        if node.asked is not gate:
            gate.request_timing()
            node.asked = gate
        if gate.try_timing():
            node.asked, node.held = None, gate
        return node.held is gate

    def _forget_gate(self, node: _Node, gates: Gates | None = None) -> None:
        """Give back the gate a node's runner holds or asked for (of ``gates``, or any)."""
        if node.held is not None and (gates is None or node.held is gates(node.name)):
            node.held.release_timing()
            node.held = None
        if node.asked is not None and (gates is None or node.asked is gates(node.name)):
            node.asked.try_timing() and node.asked.release_timing()
            node.asked = None

    def _dispatch_builds(self, now: float) -> None:
        """RayBuilder's choice: the nodes in order, each filled up to its CPUs while its gate
        lets builds start; a build lost once avoids the node it was lost on."""
        alive = [n for n in self.nodes if not n.lost]
        for call in self._build_calls:
            if call.gates.stop.is_set():
                call.todo.clear()
            for node in alive:
                if not call.todo:
                    break
                gate = call.gates(node.name)
                while call.todo and node.builds < self.cpus_per_node:
                    job = next((j for j in call.todo if j.avoid != node.index or len(alive) == 1), None)
                    if job is None or not gate.try_build():
                        break
                    call.todo.remove(job)
                    job.node, job.start = node, now
                    node.builds += 1
                    call.running.add(id(job))
                    heapq.heappush(self._heap, (now + self._duration(self.build_s), next(self._seq), job))

    def _end_calls(self) -> None:
        """Tell each call that has nothing left that it is over."""
        for call in self._build_calls:
            if call.fed and not call.todo and not call.running and not call.ended:
                call.ended = True
                call.out.put(None)
        for call in self._run_calls:
            if call.fed and not call.pending and not call.running and not call.ended:
                call.ended = True
                call.out.put(None)


def _overlap(spans, since: float, until: float) -> float:
    """Seconds of ``spans`` (``(start, end)`` pairs) inside ``[since, until]``."""
    return sum(max(0.0, min(end, until) - max(start, since)) for start, end in spans)


class SimulatedBuilder(Builder):
    """Builds nothing: each candidate takes ``build_s`` on one CPU of a node of its
    :class:`SimulatedCluster` and comes back with a placeholder artifact."""

    streams = True

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster

    def slots(self) -> int:
        """Every CPU of every node that is not lost."""
        return max(1, sum(not n.lost for n in self.cluster.nodes) * self.cluster.cpus_per_node)

    def build(self, inputs: Sequence[MeasureInput] | Feed, gates: Gates) -> Iterator[tuple[int, BuildReply]]:
        yield from self.cluster._serve(_BuildCall(as_feed(inputs), gates))

    def __repr__(self) -> str:
        c = self.cluster
        return f"SimulatedBuilder(nodes={len(c.nodes)}, cpus_per_node={c.cpus_per_node}, build_s={c.build_s})"


class SimulatedRunner(Runner):
    """Times nothing: each candidate takes ``run_s`` on one node's runner of its
    :class:`SimulatedCluster` (builds on that node pause meanwhile) and costs what the
    cluster's cost function says."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster

    def slots(self) -> int:
        """One per node that is not lost."""
        return max(1, sum(not n.lost for n in self.cluster.nodes))

    def run(self, jobs: queue.Queue, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        yield from self.cluster._serve(_RunCall(jobs, gates))

    def __repr__(self) -> str:
        c = self.cluster
        return f"SimulatedRunner(nodes={len(c.nodes)}, run_s={c.run_s})"
