"""Tune on a Ray cluster, with PostgreSQL as the shared tuning log.

Every machine needs this project installed (``pip install -e .``; ``pip install -e
'.[postgres]'`` on the machine that runs the tuner) and the same Python and Ray
versions. Then:

1. Start PostgreSQL once, somewhere every node can reach (here with Docker)::

       docker run -d --name autotune-pg -p 5432:5432 \\
           -e POSTGRES_USER=autotune -e POSTGRES_PASSWORD=secret -e POSTGRES_DB=autotune postgres:16

   The log is then ``postgresql://autotune:secret@DB_HOST:5432/autotune``; its tables are
   created on first use.

2. Start the Ray head on one machine, and a worker on each of the others::

       ray start --head --port=6379 --num-cpus=$(nproc)            # on the head
       ray start --address=HEAD_HOST:6379 --num-cpus=$(nproc)      # on every worker

   Builds run as Ray tasks on every CPU of the cluster; each node times candidates in
   one actor of its own, so no two timings share a machine. Tune for the hardware
   you deploy on: every node should be the same CPU model (the log records it).

3. Point the tuner at the cluster, from the head (``--address auto``) or from any
   machine through Ray Client (``--address ray://HEAD_HOST:10001``)::

       python3 scripts/examples/tune_on_ray_cluster.py --address auto \\
           --db postgresql://autotune:secret@DB_HOST:5432/autotune --trials 500

   or, one workload at a time, with the command line::

       autotune tune matmul --args 1024,1024,1024,float32 --trials 500 --cluster auto \\
           --db postgresql://autotune:secret@DB_HOST:5432/autotune

4. Read the results from anywhere that reaches the database::

       autotune best --db postgresql://autotune:secret@DB_HOST:5432/autotune
       autotune report --db postgresql://autotune:secret@DB_HOST:5432/autotune --out report.html

Without ``--address`` this script starts a one-machine Ray instance, and without
``--db`` it writes ``tuning.db``: a way to try it out on a laptop. ``--workload NAME
ARGS`` (repeatable, ARGS as ``autotune tune --args`` takes them) tunes other
workloads than the three below.
"""

from __future__ import annotations

import argparse
import time

import autotune
import db
import search_spaces
from autotune.cli_args import bind_template_args, parse_args_text
from autotune.report import format_table, summarize, summary_table
from measure import MeasureOptions
from search_spaces.template import target_kind

TARGET = "llvm"
WORKLOADS = [
    ("matmul", "1024,1024,1024,float32"),
    ("conv2d_nchw", "1,64,56,56,64,3,3,1,1,1,float32"),
    ("dense", "16,1024,1024,float32"),
]


def make_task(name: str, args_text: str):
    """The task of template ``name`` on ``args_text``, read as ``autotune tune --args`` reads it."""
    positional, keywords = parse_args_text(args_text)
    func = search_spaces.get_template(name).impl(target_kind(TARGET)).func
    return autotune.create_task(name, bind_template_args(name, func, positional, keywords), target=TARGET)


def main() -> None:
    p = argparse.ArgumentParser(description="Tune a few workloads on a Ray cluster into a shared log.")
    p.add_argument("--address", default=None,
                   help="'auto' (on a cluster node), 'ray://HEAD:10001' (Ray Client), "
                        "or none: start Ray here")
    p.add_argument("--db", default="tuning.db", help="tuning log; postgresql://user:pw@host/db on a cluster")
    p.add_argument("--trials", type=int, default=500, help="trials shared by all workloads")
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--batch-size", type=int, default=None,
                   help="candidates measured per batch (default: the tuner's)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per build and per run")
    p.add_argument("--workload", nargs=2, action="append", metavar=("NAME", "ARGS"),
                   help="a template and its arguments, e.g. --workload matmul 512,512,512,float32 "
                        "(repeatable; default: matmul, conv2d_nchw and dense of ResNet-like sizes)")
    opts = p.parse_args()

    from measure.ray import RayBuilder, RayRunner  # imports ray

    tasks = [make_task(name, args) for name, args in opts.workload or WORKLOADS]
    options = MeasureOptions(RayBuilder(address=opts.address, timeout=opts.timeout),
                             RayRunner(address=opts.address, timeout=opts.timeout))
    print(f"tuning {len(tasks)} workloads, {opts.trials} trials in all, on Ray "
          f"{opts.address or '(started here)'}; log {db.hide_passwords(opts.db)}")
    start = time.perf_counter()
    try:
        # One budget for all tasks: each batch goes where the end-to-end time should fall most.
        results = autotune.tune_tasks(tasks, trials=opts.trials, tuner=opts.tuner, db=opts.db,
                                      measure_option=options, batch_size=opts.batch_size)
    finally:
        options.close()
    print(f"done in {time.perf_counter() - start:.0f} s")
    for r in results:
        print(f"  {r.task.workload_name}: {r.trials} trials, {r.best_gflops:.1f} GFLOPS, "
              f"errors {r.errors or 'none'}")

    with db.open(opts.db) as log:
        print(format_table(summary_table(summarize(log))))


if __name__ == "__main__":
    main()
