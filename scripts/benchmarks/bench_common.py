"""What the CPU benchmarks share: the quietness check, fresh-process timing, verdicts, tables.

A figure is only worth printing next to a peer's if both were measured in the same
conditions, and a verdict (PASS/FAIL against a goal) only if those conditions were a
quiet machine:

* :func:`measure_quietness` times the FP32 FMA peak kernel of ``cpu_kernels`` on one
  thread and on every thread. On a quiet machine ``T`` threads do at least
  :data:`QUIET_SCALING` ``* T`` times the work of one; a core busy with other work
  breaks that (two threads on a two-core machine with one core taken do about what
  one does). Work spread over every core slows one thread and ``T`` alike, so the
  ``T`` threads must also get :data:`QUIET_CPU_SHARE` of ``T`` cores' time (the
  process's CPU time over the wall time they ran). The benchmarks check before and
  after their timings. The check also times how much longer a thread takes to read a block
  that another thread has just written than its own (:func:`cross_core_cost`): on a
  virtual machine the host may move its vCPUs between core complexes while it runs, and
  kernels whose threads pass data to each other (a Winograd convolution's transforms)
  then run up to twice as slow while the FMA peak does not change. When that cost moved
  between the checks by more than :data:`PLACEMENT_CHANGE`, no verdict is given either.
  Last, it reads a block far larger than the caches several times over a second
  (:func:`memory_reads`): another tenant's memory traffic leaves the FMA peak alone but slows
  every kernel that streams its weights, and shows as reads that disagree. Reads further
  apart than :data:`QUIET_READ_SPREAD` within a check, or checks whose median reads are,
  give no verdict.
* :func:`time_interleaved` times each contender (our exported kernel, numpy, PyTorch)
  in a fresh process of its own, one after the other, over several rounds
  (A B A B ...), and reports each one's median over the rounds: slow drifts of the
  machine hit every contender alike, and no contender inherits another's thread pool,
  caches or allocator state. Every child sets the C heap alike (:func:`steady_heap`).
  Given a placement check (:func:`placement_check`), it also measures the cross-core cost
  before the first child and after each; a round whose check before or after came out more
  than :data:`PLACEMENT_CHANGE` times off the median of the run's checks saw the vCPUs moved,
  and the medians leave it out (:meth:`Timing.kept`): a host that moves them every few
  seconds would otherwise leave no verdict in a long run. Such a run is judged by its rounds,
  not by the checks before and after it (``verdict_lines(..., by_round=True)``).
* :func:`verdict_lines` prints PASS/FAIL only when every quietness check passed.

Run as a script, this module is the child process of one timing:
``python scripts/benchmarks/bench_common.py '<spec JSON>'`` prints ``{"seconds": ..., "info": ...}``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["QUIET_SCALING", "QUIET_CPU_SHARE", "PLACEMENT_CHANGE", "MAX_SPREAD", "MIN_KEPT_ROUNDS", "REPEAT",
           "ROUNDS", "Quietness", "Contender", "Timing", "Verdict", "measure_quietness", "fma_peak_flops",
           "cross_core_cost", "placement_check", "time_interleaved", "run_child", "child_reply",
           "verdict_lines", "busy_note", "memory_reads", "QUIET_READ_SPREAD", "format_table", "module_spec",
           "print_rounds", "matmul_peers", "thread_env", "steady_heap"]

QUIET_SCALING = 0.9  # T threads must do at least 0.9 * T times the FMA work of one (1.8x on 2 cores)
QUIET_CPU_SHARE = 0.9  # ... and get at least 90% of T cores' time while they run
# Reading another core's block took 1.4x a core's own on a 2-vCPU Zen 4 guest with its vCPUs
# in one core complex, 2.8x while the host had them in two (a cache line's round trip 55 ns,
# then 320 ns): checks further apart than this saw the vCPUs move.
PLACEMENT_CHANGE = 1.4
EXCHANGE_FLOATS = 64 * 1024  # each thread's block: 256 KiB, in its core's L2 on every CPU we target
# A streaming read of a block far past the last-level cache runs at the memory's speed, which
# moves little on a machine of one's own; on a 2-vCPU Zen 4 guest whose FMA checks passed,
# other tenants' traffic moved 12 such reads over two seconds 1.2-2.5x apart, and weight-bound
# layers ran up to twice as slow between them, where on a calmer hour eight reads 0.1 s apart
# agreed within 1.08-1.21x. Reads further apart than this saw that traffic.
QUIET_READ_SPREAD = 1.25
READ_MIB = 256
READS = 8
READ_PAUSE = 0.1  # seconds between reads: the traffic comes in bursts of a fraction of a second
# Our kernel's fresh processes agree within a few percent on a quiet machine (the middle 3 of
# 5 within 1-10% in quiet runs); rounds further apart than this saw the machine change between
# the quietness checks.
MAX_SPREAD = 0.10
MIN_KEPT_ROUNDS = 3  # rounds with the vCPUs placed as usual that a median needs; else all count
REPEAT = 7  # timings per child process; the child reports their median
ROUNDS = 5  # child processes per contender, interleaved
MIN_REPEAT_MS = 200.0  # each timing runs the kernel for at least this long
FMA_ITERATIONS = 200_000

_HERE = Path(__file__).resolve()


# ----------------------------------------------------------------------------- quietness


@dataclass(frozen=True)
class Quietness:
    """The FMA peak on one thread and on ``threads`` threads (FLOP/s), and what they say."""

    threads: int
    one: float
    many: float
    cpu_share: float = 1.0  # the CPU time the threads got, as a share of ``threads`` cores
    exchange: float | None = None  # :func:`cross_core_cost` (None: not measured, or one thread)
    reads: tuple[float, ...] = ()  # :func:`memory_reads`, bytes per second (empty: not measured)

    @classmethod
    def from_dict(cls, fields: dict) -> Quietness:
        """The check :func:`dataclasses.asdict` gave as ``fields`` (as it comes back from JSON)."""
        return cls(**{**fields, "reads": tuple(fields.get("reads", ()))})

    @property
    def scaling(self) -> float:
        """How many times the one-thread work ``threads`` threads did."""
        return self.many / self.one

    @property
    def read_spread(self) -> float | None:
        """The fastest memory read over the slowest (None: not measured)."""
        return max(self.reads) / min(self.reads) if self.reads else None

    @property
    def quiet(self) -> bool:
        """Whether every thread had a core to itself: the peak scaled with the threads, and
        the threads got (nearly) all of their cores' time; and the memory reads agreed."""
        return (self.scaling >= QUIET_SCALING * self.threads and self.cpu_share >= QUIET_CPU_SHARE
                and (self.read_spread is None or self.read_spread <= QUIET_READ_SPREAD))

    def describe(self) -> str:
        """One line: both peaks, their ratio, the CPU share, what quiet needs, and the outcome."""
        state = "quiet" if self.quiet else "BUSY"
        exchange = ("" if self.exchange is None else
                    f"; another core's block read in {self.exchange:.2f}x the time of a core's own")
        reads = ("" if not self.reads else
                 f"; memory read at {min(self.reads) / 1e9:.1f}-{max(self.reads) / 1e9:.1f} GB/s, "
                 f"{self.read_spread:.2f}x apart (quiet needs <= {QUIET_READ_SPREAD:.2f}x)")
        return (f"FMA peak {self.one / 1e9:.1f} GFLOPS on 1 thread, {self.many / 1e9:.1f} on "
                f"{self.threads}: {self.scaling:.2f}x, {self.cpu_share:.0%} of {self.threads} cores' time "
                f"(quiet needs >= {QUIET_SCALING * self.threads:.2f}x and >= {QUIET_CPU_SHARE:.0%}){reads}: "
                f"{state}{exchange}")


def fma_peak_flops(threads: int, iterations: int = FMA_ITERATIONS, repeat: int = 2 * REPEAT) -> float:
    """FP32 FLOP/s of ``cpu_kernels.fma_peak`` on ``threads`` threads: its fastest timing
    (a peak is an upper bound; other work on the machine only slows a timing down)."""
    return _fma_peak(threads, iterations, repeat)[0]


def _fma_peak(threads: int, iterations: int = FMA_ITERATIONS,
              repeat: int = 2 * REPEAT) -> tuple[float, float]:
    """:func:`fma_peak_flops`, and the CPU time the process got while timing it as a share
    of ``threads`` cores' wall time."""
    import cpu_kernels as K
    import numpy as np

    import compiler
    from compiler.simd import vector_lanes

    lanes = vector_lanes("float32", "llvm")
    f = compiler.build(K.fma_peak(iterations, threads, lanes), target="llvm -fast-math")
    out = np.zeros((threads, lanes), np.float32)
    # warm up for 100 ms (thread pool started, code paged in, clocks up), not a whole timing
    f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=2, min_repeat_ms=50)(out, 0.5, 1.0)
    timer = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=repeat, min_repeat_ms=50)
    wall, cpu = time.perf_counter(), time.process_time()
    seconds = timer(out, 0.5, 1.0).min
    share = (time.process_time() - cpu) / (threads * (time.perf_counter() - wall))
    return threads * iterations * K.fma_flops_per_step(lanes) / seconds, share


def cross_core_cost(threads: int, floats: int = EXCHANGE_FLOATS, rounds: int = 5) -> float:
    """How many times longer ``threads`` threads take to write a block each and then read the
    block the next thread wrote than to read their own (``cpu_kernels.core_exchange``): the
    median over ``rounds`` of the two timed in turn (each its fastest of :data:`REPEAT`)."""
    import cpu_kernels as K
    import numpy as np

    import compiler

    a = np.random.default_rng(0).random((threads, floats), dtype=np.float32)
    out = np.empty(threads, np.float32)
    timers = []
    for swap in (False, True):
        f = compiler.build(*K.core_exchange(threads, floats, swap))
        timers.append(f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=REPEAT,
                                       min_repeat_ms=10))
    ratios = []
    for _ in range(rounds):
        own, other = (timer(a, out).min for timer in timers)
        ratios.append(other / own)
    return statistics.median(ratios)


def memory_reads(threads: int, mib: int = READ_MIB, reads: int = READS,
                 pause: float = READ_PAUSE) -> tuple[float, ...]:
    """Bytes per second of ``threads`` threads summing a ``mib`` MiB block's rows
    (``cpu_kernels.row_sum``), ``reads`` times, ``pause`` seconds apart: each read streams the
    block from memory (it is far larger than the caches), at the speed other tenants leave."""
    import cpu_kernels as K
    import numpy as np

    import compiler

    rows = 8 * threads
    a = np.ones((rows, (mib << 20) // (4 * rows) // 64 * 64), np.float32)
    out = np.empty(rows, np.float32)
    f = compiler.build(*K.row_sum(*a.shape))
    timer = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=1, min_repeat_ms=0)
    timer(a, out)  # pages touched, thread pool started
    speeds = []
    for _ in range(reads):
        time.sleep(pause)
        speeds.append(a.nbytes / timer(a, out).median)
    return tuple(speeds)


def placement_check(threads: int) -> float:
    """:func:`cross_core_cost` on ``threads`` threads, in a fresh process (about a second): the
    caller may have loaded PyTorch, whose idle threads spin on the cores ours would be timed on."""
    return float(child_reply({"kind": "exchange"}, thread_env(threads), timeout=300)["exchange"])


def measure_quietness(threads: int | None = None) -> Quietness:
    """Time the FMA peak on one thread and on ``threads`` (default: the runtime's thread count),
    with two or more threads what passing data between cores costs (:func:`cross_core_cost`), and
    how fast ``threads`` threads read memory (:func:`memory_reads`)."""
    from compiler.runtime import num_threads

    threads = threads or num_threads()
    one = fma_peak_flops(1)
    many, share = _fma_peak(threads)
    return Quietness(threads, one, many, share, cross_core_cost(threads) if threads > 1 else None,
                     memory_reads(threads))


#: Seconds between :func:`wait_until_quiet`'s checks.
QUIET_WAIT_INTERVAL_S = 30.0


def wait_until_quiet(check: Callable[[], Quietness], minutes: float,
                     interval_s: float = QUIET_WAIT_INTERVAL_S,
                     say: Callable[[str], None] = print) -> Quietness:
    """``check()``, and while it finds the machine busy, again every ``interval_s`` seconds until
    ``minutes`` have passed, saying each time what it found: the last check. On a shared host
    other work comes and goes in bursts; timings started in one get no verdict, where waiting a
    few minutes for it to pass gets one. ``minutes`` 0: one check."""
    deadline = time.monotonic() + 60.0 * minutes
    found = check()
    while not found.quiet and time.monotonic() + interval_s <= deadline:
        say(f"# waiting for a quiet machine ({found.describe()}); checking again in {interval_s:.0f} s")
        time.sleep(interval_s)
        found = check()
    return found


def busy_note(checks: Sequence[Quietness], by_round: bool = False) -> str:
    """Empty when every check found the machine quiet and the cores where they were, else a
    line saying which check did not and why. ``by_round``: the timings checked where the cores
    were round by round (:func:`time_interleaved`'s ``placement``), so the checks before and
    after need not agree on it."""
    busy = [f"{when}" for when, q in zip(("before", "after", "later"), checks) if not q.quiet]
    if busy:
        return (f"MACHINE BUSY ({' and '.join(busy)} the timings): the figures below measure the load as "
                "much as the kernels; no PASS/FAIL verdict")
    reads = [statistics.median(q.reads) for q in checks if q.reads]
    if len(reads) > 1 and max(reads) > QUIET_READ_SPREAD * min(reads):
        seen = ", ".join(f"{r / 1e9:.1f}" for r in reads)
        return (f"MEMORY BUSY: the checks read memory at {seen} GB/s (more than {QUIET_READ_SPREAD:.2f}x "
                "apart): other work's memory traffic changed during the timings, and kernels that "
                "stream their data ran at another speed; no PASS/FAIL verdict")
    costs = [] if by_round else [q.exchange for q in checks if q.exchange is not None]
    if len(costs) > 1 and max(costs) > PLACEMENT_CHANGE * min(costs):
        seen = ", ".join(f"{c:.2f}x" for c in costs)
        return (f"THE CORES MOVED: reading another core's data cost {seen} a core's own in the checks "
                f"(more than {PLACEMENT_CHANGE:.1f}x apart): the host moved the vCPUs between core "
                "complexes, and kernels that pass data between threads ran at another speed in "
                "between; no PASS/FAIL verdict")
    return ""


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """A goal: ``value`` must be at least ``goal`` (``at_most=True``: at most; ``within=r``:
    within ``r`` of ``goal`` either way, as a share of it). ``withheld`` says why the figures
    cannot judge it (the line then gives no PASS or FAIL)."""

    what: str
    value: float
    goal: float
    at_most: bool = False
    unit: str = "x"
    within: float | None = None
    withheld: str = ""

    @property
    def met(self) -> bool:
        """Whether ``value`` reaches ``goal``."""
        if self.within is not None:
            return abs(self.value - self.goal) <= self.within * self.goal
        return self.value <= self.goal if self.at_most else self.value >= self.goal

    def line(self) -> str:
        """The goal, the value and PASS or FAIL (or why neither), on one line."""
        if self.within is not None:
            goal = f"within {self.within:.0%} of {self.goal:.2f}{self.unit}"
        else:
            goal = f"{'<=' if self.at_most else '>='} {self.goal:.2f}{self.unit}"
        outcome = f"NO VERDICT: {self.withheld}" if self.withheld else "PASS" if self.met else "FAIL"
        return f"{self.what}: {self.value:.2f}{self.unit} (goal {goal}) {outcome}"


def verdict_lines(verdicts: Sequence[Verdict], checks: Sequence[Quietness],
                  by_round: bool = False) -> list[str]:
    """PASS/FAIL per goal when every quietness check passed; otherwise only why there is none
    (``by_round``: as :func:`busy_note` takes it)."""
    note = busy_note(checks, by_round)
    if note:
        return [note]
    if not checks:
        return ["the machine was not checked for quietness: no PASS/FAIL verdict"]
    return [v.line() for v in verdicts]


# ----------------------------------------------------------------------------- fresh-process timing


@dataclass(frozen=True)
class Contender:
    """One implementation to time: a child spec (see :func:`_child_main`) and extra environment."""

    label: str
    spec: dict
    env: dict = field(default_factory=dict)


@dataclass
class Timing:
    """A contender's per-round seconds (one fresh process each), or why it could not run; with
    the placement checked, whether the vCPUs had moved in each round (``moved``)."""

    label: str
    rounds: list[float] = field(default_factory=list)
    info: str = ""
    error: str = ""
    moved: list[bool] = field(default_factory=list)

    def _marks(self) -> list[bool]:
        """Whether each round ran with the vCPUs moved (none, where the placement was not checked)."""
        return self.moved if len(self.moved) == len(self.rounds) else [False] * len(self.rounds)

    @property
    def too_few_kept(self) -> bool:
        """Whether some rounds ran with the vCPUs moved and fewer than :data:`MIN_KEPT_ROUNDS`
        did not: the figures then use every round and get no verdict."""
        marks = self._marks()
        return any(marks) and len(marks) - sum(marks) < MIN_KEPT_ROUNDS

    def kept_indices(self) -> list[int]:
        """The rounds the figures use: those with the vCPUs placed as usual in the run, unless
        too few of them were (:attr:`too_few_kept`): then all."""
        marks = self._marks()
        return [i for i, moved in enumerate(marks) if not moved or self.too_few_kept]

    def kept(self) -> list[float]:
        """The seconds of :meth:`kept_indices`' rounds."""
        return [self.rounds[i] for i in self.kept_indices()]

    @property
    def median(self) -> float | None:
        """The median over the kept rounds (``None`` when none ran)."""
        return statistics.median(self.kept()) if self.rounds else None

    def middle(self) -> list[float]:
        """The kept rounds, sorted, without the fastest and the slowest quarter (``n // 4`` of
        each; of 5 rounds the middle 3): a lone outlier, which the median ignores, is left out."""
        kept = self.kept()
        cut = len(kept) // 4
        ordered = sorted(kept)
        return ordered[cut:len(ordered) - cut]

    @property
    def spread(self) -> float | None:
        """``(slowest - fastest) / median`` of the :meth:`middle` rounds: how much the processes
        disagree (``None`` when none ran)."""
        middle = self.middle()
        return (middle[-1] - middle[0]) / self.median if middle else None

    def noise(self) -> str:
        """Why the rounds cannot be trusted: too few kept the vCPUs placed as usual, or their
        middle spreads more than :data:`MAX_SPREAD` ("" if neither)."""
        if self.too_few_kept:
            return (f"the vCPUs moved during {sum(self.moved)} of the {len(self.rounds)} rounds of "
                    f"{self.label}, fewer than {MIN_KEPT_ROUNDS} rounds left")
        if self.spread is None or self.spread <= MAX_SPREAD:
            return ""
        return (f"the middle {len(self.middle())} rounds of {self.label} spread {self.spread:.0%} "
                f"(more than {MAX_SPREAD:.0%}): the machine changed")

    def describe(self) -> str:
        """One line: each round's milliseconds in the order run (``*``: the vCPUs had moved), and
        the spread of the middle ones."""
        if not self.rounds:
            return f"{self.label}: did not run ({self.error})"
        marks = self._marks()
        times = " ".join(f"{s * 1e3:.3f}{'*' if m else ''}" for s, m in zip(self.rounds, marks))
        if not any(marks):
            moved = ""
        elif self.too_few_kept:
            moved = "; * the vCPUs had moved, too few rounds left: all counted"
        else:
            moved = f"; * the vCPUs had moved, {sum(marks)} left out"
        return f"{self.label}: {times} ms (middle {len(self.middle())} spread {self.spread:.0%}{moved})"


def thread_env(threads: int) -> dict:
    """The environment that gives every library in a child ``threads`` threads."""
    n = str(threads)
    return {"AUTOTUNE_NUM_THREADS": n, "OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
            "MKL_NUM_THREADS": n}


def run_child(spec: dict, env: dict, timeout: float = 900) -> tuple[float, str]:
    """Time ``spec`` in a fresh interpreter; ``(seconds, info)``, or RuntimeError with its reason."""
    reply = child_reply(spec, env, timeout)
    return float(reply["seconds"]), str(reply.get("info", ""))


def child_reply(spec: dict, env: dict, timeout: float, command: Sequence[str] | None = None) -> dict:
    """``command`` (default: this module, :func:`_child_main`) run on ``spec`` (JSON, its last
    argument) in a fresh interpreter with ``env`` added: the last line it prints, parsed as JSON,
    or RuntimeError with the last line of its error."""
    command = list(command) if command is not None else [sys.executable, str(_HERE)]
    proc = subprocess.run([*command, json.dumps(spec)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_interleaved(contenders: Sequence[Contender], threads: int, rounds: int = ROUNDS,
                     runner: Callable[[dict, dict], tuple[float, str]] = run_child,
                     placement: Callable[[], float] | None = None,
                     extra_rounds: int | None = None) -> dict[str, Timing]:
    """Each contender timed in ``rounds`` fresh processes, interleaved A B A B ...

    A contender whose process fails once is dropped (its :attr:`Timing.error` says why);
    the others go on. With ``placement`` (a cross-core cost, :func:`placement_check`), it is
    measured before the first process and after each, and each round is marked moved where the
    check before or after it came out more than :data:`PLACEMENT_CHANGE` times off the median of
    the run's checks, either way; while a contender has too few rounds left
    (:attr:`Timing.too_few_kept`), every contender runs one more round, up to ``extra_rounds``
    more (default: ``rounds``), so that a host that moves the vCPUs now and then still leaves
    each contender enough rounds to judge.
    """
    timings = {c.label: Timing(c.label) for c in contenders}
    checks = {c.label: [] for c in contenders}  # per round: the cost before and after
    last = placement() if placement else None

    def one_round() -> None:
        nonlocal last
        for c in contenders:
            t = timings[c.label]
            if t.error:
                continue
            try:
                seconds, t.info = runner(c.spec, {**thread_env(threads), **c.env})
            except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
                t.error, t.rounds = str(e) or type(e).__name__, []
                continue
            t.rounds.append(seconds)
            if placement:
                now = placement()
                checks[c.label].append((last, now))
                last = now

    for _ in range(rounds):
        one_round()
    _mark_moved(timings, checks)
    extra = rounds if extra_rounds is None else extra_rounds
    while placement and extra > 0 and any(t.too_few_kept for t in timings.values() if not t.error):
        one_round()
        _mark_moved(timings, checks)
        extra -= 1
    return timings


def _mark_moved(timings: dict[str, Timing], checks: dict[str, list]) -> None:
    """Each timing's rounds marked moved by the checks around them (see :func:`time_interleaved`)."""
    costs = [cost for pairs in checks.values() for pair in pairs for cost in pair]
    if not costs:
        return
    usual = statistics.median(costs)  # the placement most of the run had
    for label, t in timings.items():
        if len(checks[label]) == len(t.rounds):
            t.moved = [max(pair) > PLACEMENT_CHANGE * usual or min(pair) * PLACEMENT_CHANGE < usual
                       for pair in checks[label]]


def print_rounds(timings: dict[str, Timing]) -> None:
    """Print each contender's rounds (:meth:`Timing.describe`), indented under its workload."""
    for timing in timings.values():
        print(f"  {timing.describe()}", flush=True)


def module_spec(path: str | os.PathLike, arrays: Sequence, repeat: int = REPEAT,
                min_ms: float = MIN_REPEAT_MS) -> dict:
    """The child spec that loads an exported module and times it on arrays shaped like ``arrays``."""
    return {"kind": "module", "path": str(path), "args": [[list(a.shape), str(a.dtype)] for a in arrays],
            "repeat": repeat, "min_ms": min_ms}


def matmul_peers(n: int, l: int, m: int) -> list[Contender]:
    """The peers of an ``n x l @ l x m`` matmul this machine can run: numpy's OpenBLAS as it
    loads; its AVX-512 kernels where the CPU has them; PyTorch (MKL)."""
    import importlib.util

    import llvmlite.binding as llvm

    spec = {"kind": "numpy", "op": "matmul", "shape": [n, l, m]}
    peers = [Contender("numpy a @ b", spec)]
    if llvm.get_host_cpu_features().get("avx512f"):
        peers.append(Contender("numpy SkylakeX", dict(spec), {"OPENBLAS_CORETYPE": "SkylakeX"}))
    if importlib.util.find_spec("torch") is not None:
        peers.append(Contender("torch a @ b", {**spec, "kind": "torch"}))
    return peers


# ----------------------------------------------------------------------------- tables


def format_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """Columns padded to their widest cell."""
    rows = [[str(v) for v in r] for r in [header, *rows]]
    widths = [max(len(r[k]) for r in rows) for k in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows)


# ----------------------------------------------------------------------------- the child process


def _openblas_core() -> str:
    """The kernels OpenBLAS picked when it loaded (its "core"), or "?"."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line and ".so" in line}
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            for sym in ("openblas_get_corename", "scipy_openblas_get_corename64_",
                        "openblas_get_corename64_"):
                fn = getattr(lib, sym, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    return fn().decode()
    except OSError:
        pass
    return "?"


def _numpy_peer(spec: dict, rng):
    import numpy as np

    op = spec["op"]
    if op == "matmul":
        n, l, m = spec["shape"]
        a, b = rng.random((n, l), dtype=np.float32), rng.random((l, m), dtype=np.float32)
        c = np.empty((n, m), np.float32)
        fn = lambda: np.matmul(a, b, out=c)  # noqa: E731
        fn()
        return fn, f"numpy {np.__version__}, OpenBLAS core {_openblas_core()}"
    x = rng.random(spec["shape"], dtype=np.float32)
    if op == "add":
        y, out = rng.random(x.shape, dtype=np.float32), np.empty_like(x)
        return (lambda: np.add(x, y, out=out)), f"numpy {np.__version__}"
    if op == "row_sum":
        return (lambda: x.sum(axis=1)), f"numpy {np.__version__}"
    if op == "softmax":
        def softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return softmax, f"numpy {np.__version__}"
    raise ValueError(f"unknown numpy peer {op!r}")


def _torch_peer(spec: dict, rng, threads: int):
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    info = f"torch {torch.__version__}"
    if spec["op"] == "matmul":
        n, l, m = spec["shape"]
        a = torch.from_numpy(rng.random((n, l), dtype=np.float32))
        b = torch.from_numpy(rng.random((l, m), dtype=np.float32))
        c = torch.empty((n, m))
        return (lambda: torch.matmul(a, b, out=c)), info
    if spec["op"] == "conv2d":
        x = torch.from_numpy(rng.random(spec["x"], dtype=np.float32))
        w = torch.from_numpy(rng.random(spec["w"], dtype=np.float32))
        conv = torch.nn.functional.conv2d
        kw = {k: spec[k] for k in ("stride", "padding", "dilation", "groups")}
        return (lambda: conv(x, w, **kw)), info
    raise ValueError(f"unknown torch peer {spec['op']!r}")


def _time_module(spec: dict, rng) -> tuple[float, str]:
    import numpy as np

    import compiler

    f = compiler.runtime.load_module(spec["path"])
    arrays = [(rng.random(shape) + 0.5).astype(dtype) for shape, dtype in spec["args"]]
    result = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=spec["repeat"],
                              min_repeat_ms=spec["min_ms"])(*arrays)
    return result.median, f"{Path(spec['path']).name}, numpy {np.__version__}"


# glibc's mallopt parameters, and the values every timing child runs with (see steady_heap).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_MMAP_THRESHOLD = 32 << 20  # glibc's largest
_HEAP_TRIM_THRESHOLD = 64 << 20


def steady_heap() -> bool:
    """Make glibc's heap keep and reuse freed blocks below 32 MiB, as it comes to in a process
    that has run a while, so that buffers a contender allocates on every call (ours above the
    stack's limit, PyTorch's output and its oneDNN reorders) are not mapped and faulted in
    afresh each call. By default glibc maps every block over 128 KiB and raises that limit only
    after freeing a larger mapped block: which contender happened to do that before timing
    decided whether it paid a page fault per 4 KiB per call (PyTorch's 64x56x56 convolution: 2.1
    against 1.1 ms on a quiet machine). False where the C library has no ``mallopt`` (not glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _HEAP_MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, _HEAP_TRIM_THRESHOLD))


def _child_main(spec: dict) -> dict:
    """Time what ``spec`` names in this process: our exported module, or a numpy/PyTorch peer,
    each on the same heap settings (:func:`steady_heap`)."""
    steady_heap()
    import numpy as np

    rng = np.random.default_rng(0)
    threads = int(os.environ.get("AUTOTUNE_NUM_THREADS", "0")) or os.cpu_count() or 1
    kind = spec["kind"]
    if kind == "exchange":
        return {"exchange": cross_core_cost(threads)}
    if kind == "module":
        seconds, info = _time_module(spec, rng)
    elif kind in ("numpy", "torch"):
        from compiler.runtime.timer import time_calls

        fn, info = _numpy_peer(spec, rng) if kind == "numpy" else _torch_peer(spec, rng, threads)
        seconds = time_calls(fn, number=1, repeat=spec.get("repeat", REPEAT),
                             min_repeat_ms=spec.get("min_ms", MIN_REPEAT_MS)).median
    else:
        raise ValueError(f"unknown contender kind {kind!r}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise RuntimeError(f"timing gave {seconds!r} seconds")
    return {"seconds": seconds, "info": info}


if __name__ == "__main__":
    print(json.dumps(_child_main(json.loads(sys.argv[1]))))
