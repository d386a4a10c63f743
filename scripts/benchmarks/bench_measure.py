"""Measurement throughput: candidates per minute for a 512 matmul task with random configs.

Run with ``python3 scripts/benchmarks/bench_measure.py [candidates]``. Measures the same random
configs with LocalBuilder + LocalRunner and with RayBuilder + RayRunner on a local
Ray instance, each after a warm-up batch that starts its workers (start-up is shown
apart). For each path it prints candidates per minute, the mean build and run
time per candidate, and the share of wall time spent outside the kernels (building,
transfer, loading, process overhead): 1 - kernel seconds / wall seconds, where the
kernel seconds of a candidate are its checked call plus the calls of its timing
loop (replayed from its costs with the native timer's batches).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

import search_spaces
from compiler.runtime.timer import BATCH_NS
from measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOptions, measure_batch

NUMBER, REPEAT, MIN_REPEAT_MS = 4, 3, 50
SHAPE = (512, 512, 512, "float32")


def kernel_seconds(costs: tuple) -> float:
    """Seconds inside the kernel for one candidate: the checked call, the timer's warm-up
    call, then per repeat the batches that run until one measurement lasts MIN_REPEAT_MS."""
    total = 0.0
    for cost in costs:
        calls, batch, spent = 0, NUMBER, 0.0
        while True:
            calls += batch
            spent = calls * cost
            if spent * 1e3 >= MIN_REPEAT_MS:
                break
            if batch * cost * 1e9 < BATCH_NS:
                batch *= 2
        total += spent
    return total + 2 * statistics.mean(costs)


def run(name: str, options: MeasureOptions, inputs: list, warmup: list) -> tuple:
    start = time.perf_counter()
    measure_batch(warmup, options)
    startup = time.perf_counter() - start
    start = time.perf_counter()
    results = measure_batch(inputs, options)
    wall = time.perf_counter() - start
    ok = [r for r in results if r.ok]
    kernels = sum(kernel_seconds(r.costs) for r in ok)
    return (name, len(results), len(ok), startup, wall, 60 * len(results) / wall,
            statistics.mean(r.build_time for r in results),
            statistics.mean(r.run_time for r in ok) if ok else 0,
            statistics.mean(r.run_time - kernel_seconds(r.costs) for r in ok) if ok else 0,
            1 - kernels / wall)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    task = search_spaces.create_task("matmul", SHAPE, "llvm")
    configs = task.config_space.sample(count + 2, rng=np.random.default_rng(0))
    inputs = [MeasureInput(task, c) for c in configs[2:]]
    warmup = [MeasureInput(task, c) for c in configs[:2]]
    runner = {"number": NUMBER, "repeat": REPEAT, "min_repeat_ms": MIN_REPEAT_MS}
    rows = []
    with MeasureOptions(LocalBuilder(), LocalRunner(**runner)) as options:
        rows.append(run("LocalBuilder + LocalRunner", options, inputs, warmup))

    import ray

    from measure.ray import RayBuilder, RayRunner, connect

    connect(None, num_cpus=os.cpu_count())
    with MeasureOptions(RayBuilder(), RayRunner(**runner)) as options:
        rows.append(run("RayBuilder + RayRunner", options, inputs, warmup))
    ray.shutdown()

    print(f"matmul{SHAPE}, {count} random configs, {os.cpu_count()} CPUs; "
          f"runner number={NUMBER} repeat={REPEAT} min_repeat_ms={MIN_REPEAT_MS}")
    head = ("path", "n", "ok", "startup s", "wall s", "cand/min", "build s", "run s", "run-kernel s",
            "outside kernels")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([r[0], str(r[1]), str(r[2]), f"{r[3]:.1f}", f"{r[4]:.1f}", f"{r[5]:.1f}",
                          f"{r[6]:.3f}", f"{r[7]:.3f}", f"{r[8]:.3f}", f"{r[9]:.0%}"]))


if __name__ == "__main__":
    main()
