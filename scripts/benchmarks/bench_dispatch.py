"""Dispatch benchmark: how large a cluster one tuner keeps busy, on simulated nodes.

Run with ``python3 scripts/benchmarks/bench_dispatch.py [--nodes 4,16,64,128,256] [--cpus 16]
[--build-s 1.5] [--run-s 0.4] [--jitter 0.1] [--seconds 16 | --trials N] [--cap 3] [--tuner xgb]``.

For each cluster size, ``autotune.tune_tasks`` tunes the same tasks (``TASKS``: ResNet-like
``conv2d_nhwc`` layers and matmuls, some 40,000 configs; a real model's extracted tasks are
too few: ResNet-18's 16 spaces hold 136 configs in all) from scratch, with an in-memory log
and no final re-measurement, on a
:class:`measure.simulated.SimulatedCluster`: nodes of ``--cpus`` CPUs that compile and time
nothing but take real time (a build ``--build-s`` on one CPU, a timing ``--run-s`` on the
node's one runner, each ``1 +- --jitter`` times as long), and that pause a node's builds
while it times, as Ray nodes do. The tuner's real work competes with them in real time.
Each size gets the trials that fill its cluster (``MeasureSession.capacity``) and then keep
its runners at their ceiling for one node cycle (``cpus * run_s + build_s``: the first
candidates' timings, whatever the tuner's pace) and ``--seconds`` more (or ``--trials``), and
at most ``--cap`` times that wall time (``time_budget``), for a tuner that cannot keep up.

Columns, over the search's steady state (from one cycle after the first timing to the last
candidate handed out, in whole cycles: :meth:`SimulatedCluster.window`):

* **trials/s**: timings finished per second;
* **nodes busy**: the share of the nodes' time in use, timing (the whole node) or building (a
  CPU each); a cluster is *kept busy* when it is at least 90%;
* **runners**: the runners' busy share, beside the most they can reach while builds pause
  for timing (``runner_ceiling``: ``cpus * run_s / (cpus * run_s + build_s)``);
* **tuner ms/trial**: the tuning loop's own work per trial: proposing candidates (the
  tuners' model fitting and search), recording results and the progress display
  (``TuneResult.tuner_seconds``);
* **budget ms/trial**: what one trial may cost the loop for the runners to stay at their
  ceiling, ``run_s / (nodes * runner_ceiling)``.

The simulated nodes use no CPU of their own: the figures measure the tuner on this host,
whose CPU count is printed; no quietness check is needed, or made.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import bench_common as B

import autotune
import search_spaces  # noqa: F401 - registers the templates
from measure import MeasureOptions, MeasureSession
from measure.local import usable_cpus
from measure.simulated import SimulatedCluster

BUSY = 0.9
TASKS = [("conv2d_nhwc", (1, 64, 56, 56, 64, 3, 3, 1, 1, 1, "float32")),
         ("conv2d_nhwc", (1, 128, 28, 28, 128, 3, 3, 1, 1, 1, "float32")),
         ("conv2d_nhwc", (1, 256, 14, 14, 256, 3, 3, 1, 1, 1, "float32")),
         ("conv2d_nhwc", (1, 512, 7, 7, 512, 3, 3, 1, 1, 1, "float32")),
         ("matmul", (1024, 1024, 1024, "float32")),
         ("matmul", (512, 512, 512, "float32"))]


def one_size(tasks, nodes: int, args) -> dict:
    """Tune ``tasks`` on a simulated cluster of ``nodes`` nodes; its figures."""
    cluster = SimulatedCluster(nodes, args.cpus, args.build_s, args.run_s, jitter=args.jitter, seed=args.seed)
    with MeasureOptions(cluster.builder, cluster.runner) as options:
        capacity = MeasureSession(options).capacity
        # Enough to fill the cluster, then keep its runners at their ceiling for a cycle and --seconds.
        seconds = cluster.cycle + args.seconds + 0.5
        trials = args.trials or capacity + int(seconds * nodes * cluster.runner_ceiling / args.run_s)
        results = autotune.tune_tasks(tasks, trials=trials, time_budget=args.cap * seconds, tuner=args.tuner,
                                      db=None, measure_option=options, progress=False, seed=args.seed,
                                      remeasure=False)
        end = time.monotonic()
    since, until = cluster.window()
    if until <= since:  # not two cycles from the first timing to the last candidate: the whole run
        since, until = cluster.submit_times[0], end
    trials = sum(cluster.runs_per_node())
    return {"nodes": nodes, "trials": trials, "steady_s": until - since,
            "rate": cluster.finished(since, until) / (until - since), "busy": cluster.node_busy(since, until),
            "runners": cluster.utilisation(since, until), "ceiling": cluster.runner_ceiling,
            "tuner_ms": 1e3 * results[0].tuner_seconds / trials,
            "budget_ms": 1e3 * args.run_s / (nodes * cluster.runner_ceiling)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="4,16,64,128,256", help="cluster sizes, comma-separated")
    parser.add_argument("--cpus", type=int, default=16, help="CPUs per node")
    parser.add_argument("--build-s", type=float, default=1.5, help="seconds per build on one CPU")
    parser.add_argument("--run-s", type=float, default=0.4, help="seconds per timing on a node's runner")
    parser.add_argument("--jitter", type=float, default=0.1,
                        help="builds and timings take 1 +- this times as long")
    parser.add_argument("--seconds", type=float, default=16.0,
                        help="steady state per cluster size: the trials that keep its runners at their "
                             "ceiling this long, after filling it and its first cycle")
    parser.add_argument("--trials", type=int, default=None, help="trials per cluster size (instead)")
    parser.add_argument("--cap", type=float, default=3.0,
                        help="stop a size's tuning after this many times --seconds "
                             "(a tuner that cannot keep up)")
    parser.add_argument("--tuner", default="xgb")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]

    print(f"host {platform.node()}: {os.cpu_count()} CPUs, {len(usable_cpus())} usable by the tuner "
          "(the simulated nodes use none)")
    print(f"tuner {args.tuner}; nodes of {args.cpus} CPUs, build {args.build_s:g} s, "
          f"timing {args.run_s:g} s, jitter {args.jitter:g}; " + (f"{args.trials} trials" if args.trials else
                                          f"a cycle and {args.seconds:g} s of work at the runners' ceiling")
          + f" per size, at most {args.cap:g} times that long")
    tasks = [autotune.create_task(name, task_args, "llvm") for name, task_args in TASKS]
    print(f"{len(tasks)} tasks, {sum(len(t.config_space) for t in tasks)} configs")
    rows, kept = [], None
    for nodes in sizes:
        r = one_size(tasks, nodes, args)
        if r["busy"] >= BUSY:
            kept = nodes if kept is None else max(kept, nodes)
        rows.append([nodes, r["trials"], f"{r['steady_s']:.1f}", f"{r['rate']:.1f}", f"{r['busy']:.1%}",
                     f"{r['runners']:.1%} / {r['ceiling']:.1%}", f"{r['tuner_ms']:.2f}",
                     f"{r['budget_ms']:.2f}"])
        print(f"  {nodes} nodes done: {r['trials']} trials", file=sys.stderr, flush=True)
    print(B.format_table(["nodes", "trials", "steady s", "trials/s", "nodes busy", "runners / ceiling",
                          "tuner ms/trial", "budget ms/trial"], rows))
    print(f"largest cluster kept >= {BUSY:.0%} busy: " + (f"{kept} nodes" if kept else "none of these"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
