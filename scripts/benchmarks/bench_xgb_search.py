"""The xgb tuner's search with and without its knob-feature surrogate, tuning for real.

Run with ``python3 scripts/benchmarks/bench_xgb_search.py [--trials 128] [--seeds 3]
[--workloads conv56,mm1024] [--shortlists 0,2]``.

The xgb tuner scores a config by its loop features, which means lowering it. Its search
visits hundreds of configs per plan, so it walks a surrogate on knob features instead and
lowers only the surrogate's best ``sa_shortlist`` times the plan (``sa_shortlist=0``: the
model scores everything the search visits, as before the surrogate). This benchmark tunes
the same workloads with each ``--shortlists`` value from scratch (in-memory log, local
builder and runner, no final re-measurement), seeds interleaved so that a drift of the
machine falls on every variant alike, and prints per variant the median over seeds of the
best GFLOPS after k trials (min-max beside it), of the tuner's own seconds (model fits and
searches: ``TuneResult.tuner_seconds``) and of each run's wall time.

The workloads: ``conv56`` (``conv2d_nhwc``, 64 channels at 56x56, 3x3: 11,520 configs, so the
search anneals) and ``mm1024`` (``matmul`` 1024: 1,714 configs, few enough that the search
scores every unvisited one). Best-of-k figures are single timings, so the machine must be
quiet: the FMA check runs before and after (:func:`bench_common.measure_quietness`) and a
busy machine is said so in place of the figures' verdict line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import bench_common as B
from bench_tuners import best_curve

import autotune
import search_spaces  # noqa: F401 - registers the templates
from autotune.tuner import XGBTuner
from measure import MeasureOptions

WORKLOADS = {
    "conv56": ("conv2d_nhwc", (1, 64, 56, 56, 64, 3, 3, 1, 1, 1, "float32")),
    "conv28": ("conv2d_nhwc", (1, 128, 28, 28, 128, 3, 3, 1, 1, 1, "float32")),
    "mm1024": ("matmul", (1024, 1024, 1024, "float32")),
}
CHECKPOINTS = (16, 32, 64, 128, 256)


def one_run(task, shortlist: float, seed: int, trials: int, options) -> dict:
    """Tune ``task`` from scratch with ``sa_shortlist=shortlist``; its curve and seconds."""
    start = time.perf_counter()
    result = autotune.tune(task, trials=trials, tuner=XGBTuner(seed=seed, sa_shortlist=shortlist), db=None,
                           measure_option=options, seed=seed, progress=False, remeasure=False)
    return {"curve": best_curve(task, result.history), "tuner_s": result.tuner_seconds,
            "wall_s": time.perf_counter() - start}


def cell(values: list[float], fmt: str = ".1f") -> str:
    """``median [min-max]`` of ``values``."""
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workloads", default="conv56,mm1024", help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--shortlists", default="0,2", help="sa_shortlist values to compare")
    args = parser.parse_args(argv)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if args.trials < 1 or args.seeds < 1 or not names or set(names) - set(WORKLOADS):
        parser.error(f"--trials and --seeds must be >= 1 and --workloads some of {', '.join(WORKLOADS)}")
    try:
        shortlists = [float(s) for s in args.shortlists.split(",")]
    except ValueError:
        parser.error(f"--shortlists takes numbers, got {args.shortlists!r}")
    points = [k for k in CHECKPOINTS if k < args.trials] + [args.trials]

    before = B.measure_quietness()
    print(f"# before tuning: {before.describe()}", flush=True)
    runs: dict[tuple[str, float], list[dict]] = {}
    with MeasureOptions() as options:
        for name in names:
            task = autotune.create_task(*WORKLOADS[name], "llvm")
            for seed in range(args.seeds):
                for shortlist in shortlists:  # interleaved: each seed runs every variant in turn
                    run = one_run(task, shortlist, seed, args.trials, options)
                    runs.setdefault((name, shortlist), []).append(run)
                    print(f"  {name} sa_shortlist={shortlist:g} seed {seed}: best {run['curve'][-1]:.1f} "
                          f"GFLOPS, tuner {run['tuner_s']:.1f} s, wall {run['wall_s']:.0f} s",
                          file=sys.stderr, flush=True)
    after = B.measure_quietness()
    print(f"# after tuning: {after.describe()}", flush=True)

    header = ["workload", "sa_shortlist", *(f"GFLOPS @{k}" for k in points), "tuner s", "wall s"]
    rows = []
    for (name, shortlist), rs in runs.items():
        at = [cell([r["curve"][min(k, len(r["curve"])) - 1] for r in rs]) for k in points]
        rows.append([name, f"{shortlist:g}", *at, cell([r["tuner_s"] for r in rs]),
                     cell([r["wall_s"] for r in rs], ".0f")])
    print(f"xgb, {args.trials} trials x {args.seeds} seeds; medians over seeds [min-max]")
    print(B.format_table(header, rows))
    note = B.busy_note([before, after])
    print(note or "machine quiet before and after: the figures stand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
