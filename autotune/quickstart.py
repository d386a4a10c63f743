"""Quick start: tune a matrix multiply for this CPU, build it, check it, time it.

Run with ``python3 -m autotune.quickstart`` from an installed package, or
``python3 scripts/examples/quickstart.py`` from a checkout (under two minutes on two cores;
``--size`` and ``--trials`` make it smaller). It

1. tunes the ``matmul`` template on 512x512x512 float32 for 64 trials, keeping every
   measurement in ``tuning.db`` (run it again and tuning resumes from the log);
2. builds the kernel with the best config in the log (``autotune.build``);
3. checks the result against numpy;
4. times the tuned kernel, the template's untuned default config and numpy's ``a @ b``,
   each in a fresh process, interleaved over rounds, and prints the speedups, or why they are
   not this machine's figures: other processes took CPU time during the timings, or the rounds
   disagree.

Each contender is timed in a process of its own because libraries that run parallel loops
keep their threads spinning for a while after a call: timed right after numpy's ``a @ b`` in
one process, a parallel kernel gets half the cores (see ``docs/deploy.md``).

The same from the command line::

    autotune tune matmul --args 512,512,512,float32 --trials 64 --db tuning.db
    autotune build matmul --args 512,512,512,float32 --db tuning.db -o matmul.so
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

import numpy as np

import autotune
import compiler
from compiler.runtime.threads import num_threads
from measure.contention import BUSY_SHARE, CpuSample

__all__ = ["main"]

ROUNDS, REPEAT, MIN_MS = 3, 3, 50.0
#: Rounds of one contender further apart than this (max / min - 1) say the machine changed.
MAX_SPREAD = 0.15


class FreshTiming(NamedTuple):
    """One contender's timing in a fresh process: median seconds per call, and the share of a
    core that other processes took meanwhile (:meth:`measure.contention.CpuSample.others_busy`)."""

    seconds: float
    busy: float


def numpy_seconds(a: np.ndarray, b: np.ndarray) -> float:
    """Median seconds of ``np.matmul(a, b, out=c)`` over ``REPEAT`` timings of >= MIN_MS each."""
    c = np.empty((a.shape[0], b.shape[1]), a.dtype)
    np.matmul(a, b, out=c)
    start = time.perf_counter()
    np.matmul(a, b, out=c)
    number = max(1, int(MIN_MS / 1e3 / max(time.perf_counter() - start, 1e-7)))
    runs = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        for _ in range(number):
            np.matmul(a, b, out=c)
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def kernel_seconds(f, *args) -> float:
    """Median seconds of one call of compiled module ``f``, from its native timer."""
    return f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=REPEAT,
                            min_repeat_ms=MIN_MS)(*args).median


def compare(timers: dict) -> dict:
    """``{name: [FreshTiming of each round]}`` over ``ROUNDS`` rounds that time each contender in
    turn, so that a change in the machine's load touches them alike."""
    runs: dict = {name: [] for name in timers}
    for _ in range(ROUNDS):
        for name, timer in timers.items():
            runs[name].append(timer())
    return runs


def disturbance(runs: dict) -> str | None:
    """Why the timings of :func:`compare` are not this machine's quiet figures, or None: other
    processes took more than :data:`~measure.contention.BUSY_SHARE` of a core during one, or one
    contender's rounds spread more than :data:`MAX_SPREAD`."""
    busiest = max(t.busy for r in runs.values() for t in r)
    if busiest > BUSY_SHARE:
        return f"other processes took up to {busiest:.0%} of a core during the timings"
    spreads = {name: max(t.seconds for t in r) / min(t.seconds for t in r) - 1 for name, r in runs.items()}
    name = max(spreads, key=spreads.get)
    if spreads[name] > MAX_SPREAD:
        return f"the rounds of {name!r} disagree by {spreads[name]:.0%}"
    return None


def seconds_in_fresh_process(n: int, library: str | None) -> FreshTiming:
    """One ``n``-cubed matmul timed in a new Python process (median seconds per call, and how
    busy other processes kept the CPUs meanwhile): the exported kernel ``library``, or numpy's
    when it is None."""
    code = f"from autotune.quickstart import _timed_here; print(*_timed_here({n}, {library!r}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"timing {library or 'numpy'} in a fresh process failed:\n{proc.stderr}")
    seconds, busy = proc.stdout.split()[-2:]
    return FreshTiming(float(seconds), float(busy))


def _timed_here(n: int, library: str | None) -> FreshTiming:
    before = CpuSample.now()
    seconds = _seconds_here(n, library)
    return FreshTiming(seconds, before.others_busy(CpuSample.now(), num_threads()))


def _seconds_here(n: int, library: str | None) -> float:
    rng = np.random.default_rng(0)
    a_np = rng.random((n, n), dtype=np.float32)
    b_np = rng.random((n, n), dtype=np.float32)
    if library is None:
        return numpy_seconds(a_np, b_np)
    f = compiler.runtime.load_module(library)
    dev = compiler.cpu(0)
    a, b = compiler.nd.array(a_np, dev), compiler.nd.array(b_np, dev)
    return kernel_seconds(f, a, b, compiler.nd.empty((n, n), "float32", dev))


def main(argv: list[str] | None = None) -> None:
    """Run the quick start; ``argv`` as on the command line (default: ``sys.argv[1:]``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=512, help="N of the NxNxN matmul (default 512)")
    parser.add_argument("--trials", type=int, default=64, help="tuning trials (default 64)")
    parser.add_argument("--db", default="tuning.db", help="tuning log (default tuning.db)")
    opts = parser.parse_args(argv)
    n, args = opts.size, (opts.size, opts.size, opts.size, "float32")
    start = time.perf_counter()

    # 1. Tune: every trial is compiled and timed in worker processes and stored in the log.
    task = autotune.create_task("matmul", args, target="llvm")
    print(f"Tuning {task.workload_name}: {len(task.config_space):,} configs, {opts.trials} trials, "
          f"log {opts.db}", flush=True)
    result = autotune.tune(task, trials=opts.trials, tuner="xgb", db=opts.db, seed=0)
    tune_s = time.perf_counter() - start

    # 2. Build with the best config in the log; and, for comparison, with the default one.
    tuned = autotune.build("matmul", args, target="llvm", db=opts.db)
    schedule, tensors = task.instantiate(task.config_space.default_config)
    default = compiler.build(schedule, tensors, target="llvm", name="matmul_default")

    # 3. Check both against numpy.
    rng = np.random.default_rng(0)
    a_np = rng.random((n, n), dtype=np.float32)
    b_np = rng.random((n, n), dtype=np.float32)
    expected = a_np @ b_np
    dev = compiler.cpu(0)
    a, b = compiler.nd.array(a_np, dev), compiler.nd.array(b_np, dev)
    c = compiler.nd.empty((n, n), "float32", dev)
    for f in (tuned, default):
        f(a, b, c)
        np.testing.assert_allclose(c.numpy(), expected, rtol=1e-4, atol=1e-4)

    # 4. Time all three, each in a fresh process, interleaved over rounds.
    with tempfile.TemporaryDirectory(prefix="quickstart_") as tmp:
        libraries = {name: os.path.join(tmp, f"{name}.so") for name in ("tuned", "default")}
        tuned.export_library(libraries["tuned"])
        default.export_library(libraries["default"])
        runs = compare({"tuned": lambda: seconds_in_fresh_process(n, libraries["tuned"]),
                         "default": lambda: seconds_in_fresh_process(n, libraries["default"]),
                         "numpy": lambda: seconds_in_fresh_process(n, None)})
    t_tuned, t_default, t_numpy = (statistics.median(t.seconds for t in runs[name])
                                   for name in ("tuned", "default", "numpy"))
    flop = 2.0 * n ** 3

    print()
    print(f"matmul {n}x{n}x{n} float32 on {compiler.target.host_cpu_name()} "
          f"(results match numpy to rtol=1e-4)")
    print(f"tuning: {result.trials} trials, {sum(result.errors.values())} errors, {tune_s:.0f} s; "
          f"best config {result.best_config.knob_values()}")
    print(f"{'':<22}{'median ms':>10}{'GFLOPS':>9}   (each the median of {ROUNDS} fresh processes)")
    for name, t in (("tuned (best in log)", t_tuned), ("default config", t_default),
                    ("numpy a @ b", t_numpy)):
        print(f"{name:<22}{t * 1e3:>10.3f}{flop / t / 1e9:>9.1f}")
    print(f"speedup of the tuned kernel: {t_default / t_tuned:.2f}x over the default config, "
          f"{t_numpy / t_tuned:.2f}x over numpy")
    why = disturbance(runs)
    if why:
        print(f"not this machine's quiet speed: {why}; run again when nothing else runs "
              "(the log keeps every trial: a rerun adds its trials to them)")
    print(f"done in {time.perf_counter() - start:.0f} s. Next: autotune best --db {opts.db}; "
          f"autotune report --db {opts.db} --out report.html")


if __name__ == "__main__":
    main()
