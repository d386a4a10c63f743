"""Task schedulers against each other: "gradient" and "round-robin" at equal budgets, on whole models.

Run with ``python3 scripts/benchmarks/bench_scheduler.py`` (ResNet-18 and MobileNetV2 of
``model_zoo``, 3 seeds each). Comparing allocation policies with real timing would take hours on
a small machine and mix timing noise into the comparison, so the benchmark has two steps:

1. **A cost table of real measurements** (``cost_table.py``). Each distinct task of the model
   (``autotune.extract_tasks`` of the model exported to ONNX as ``bench_model.py`` does) is
   measured with the local builder and runner into the tuning log ``--table-db``: every config
   of its space when the space has at most ``--table-max`` configs, else a fixed random sample
   of ``--table-max`` (the report says which tasks were sampled), ``--passes`` times, a pass
   over every task before the next. The log is resumable: a rerun measures only what is
   missing. The table maps each (workload, config knobs) to the least of its passes' medians:
   a busy spell on a shared machine makes a timing up to ten times slower, never faster.
2. **Replay.** ``autotune.tune_tasks(tasks, trials=B, tuner="xgb", weights=..., scheduler=S,
   seed=k, db=None)`` with a builder that compiles nothing and a runner that returns each
   config's tabled cost (``cost_table``'s :class:`TableBuilder` and :class:`TableRunner`). A
   config outside the table (only in a sampled space) is a failed candidate ("not in the cost
   table"), as is one that failed when the table was measured. After every trial the model's
   estimated latency is recorded: the sum over the tasks of weight x the table cost of the
   best config found so far (the default config's table cost before a task has a result),
   table costs only, so timing noise plays no part in the comparison.

The report, per model: the optimum (weight x best table cost, summed), the latency at the
default configs, ``B`` (default ``2 x tasks x 8`` trials, capped at 75% of the sum of the
space sizes so that the comparison is not "both measured every config"); per seed, both
schedulers' latency at 25/50/75/100% of ``B``, round-robin's final latency and the number of
trials the gradient scheduler needs to first reach it (its ratio to ``B``). The goal: the
median ratio over the seeds at most :data:`GOAL` (0.70). "Reaching" means coming within
:data:`TOLERANCE` (0.1%) of it; the report gives the trials to reach it exactly too. Tuning a
model moves its latency by a few percent at most (the report says how much: default configs
against the optimum), and the table's costs are timings whose two passes differ by several
percent: two latencies within 0.1% are the same latency, and the exact figure only says which
replay happened on the table's last microsecond. The report also gives the trials of
one batch per task (the gradient scheduler's warm-up, which is round-robin's first round
config for config: both take the tasks in order, and a task's tuner is seeded alike) and
round-robin's distance to the optimum after it and at ``B``. ``--variants`` adds the scheduler
variants of this file (:data:`VARIANTS`) to the comparison, each judged against round-robin
the same way; ``--tuner`` and ``--batch-size`` change the replays' tuner and batch;
``--allocation`` prints each task's trials under each scheduler (seed 0).

Example (about 20 minutes to measure both tables twice on a 2-core machine, then about a minute
per model and scheduler for 3 seeds)::

    python3 scripts/benchmarks/bench_scheduler.py --workdir /tmp/bench_sched --allocation
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import bench_common as B
from cost_table import PASSES, TABLE_MAX, CostTable, TableBuilder, TableRunner, load_table, measure_table

import autotune
from autotune.scheduler import GradientScheduler, TaskScheduler
from measure import MeasureOptions

GOAL = 0.70  # gradient's trials to reach round-robin's final latency, over B (median of the seeds)
TOLERANCE = 1e-3  # "reaching" a latency: within 0.1% of it (see the docstring)
SMALL_GAIN = 0.05  # a model whose tuning gains less than this is said to leave the comparison little
SEEDS = 3
TRIALS_PER_TASK = 8  # B = 2 x tasks x this, ...
BUDGET_CAP = 0.75    # ... at most this share of the sum of the space sizes
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
TUNER = "xgb"
BASELINE, CONTENDER = "round-robin", "gradient"

_HERE = Path(__file__).resolve()


# ----------------------------------------------------------------------------- the replay


class LatencyCurve:
    """A ``tune_tasks`` callback: the model's estimated latency after every trial, from table costs
    (each task at its best config so far, at its default config before it has one); and each
    task's trials."""

    def __init__(self, table: CostTable):
        self.table = table
        self.best = {key: t.default_cost for key, t in table.by_key.items()}
        self.points: list[float] = []
        self.trials: Counter = Counter()

    def __call__(self, inp, res) -> None:
        key = inp.task.workload_key
        self.trials[key] += 1
        if res.error_kind is None:
            self.best[key] = min(self.best[key], self.table.cost(inp.task, inp.config))
        self.points.append(sum(t.weight * self.best[k] for k, t in self.table.by_key.items()))


@dataclass
class Replay:
    """One replayed run: its latency after each trial, each task's trials, and what the table
    builder and runner saw."""

    scheduler: str
    seed: int
    curve: list[float]
    trials: Counter
    builds: int
    runs: int
    seconds: float

    def at(self, fraction: float, budget: int) -> float:
        """The latency after ``fraction`` of ``budget`` trials (the last point if the run ended early)."""
        n = max(1, math.ceil(fraction * budget))
        return self.curve[min(n, len(self.curve)) - 1]

    def first_reaching(self, latency: float, tolerance: float = 0.0) -> int | None:
        """The number of trials after which the latency is first at most ``latency`` (plus
        ``tolerance`` of it)."""
        for n, v in enumerate(self.curve, 1):
            if v <= latency * (1 + tolerance + 1e-12):
                return n
        return None


def replay(table: CostTable, scheduler, budget: int, seed: int, tuner=TUNER,
           batch_size: int | None = None) -> Replay:
    """``tune_tasks`` over the table's tasks with ``budget`` trials, measured from the table."""
    curve = LatencyCurve(table)
    builder, runner = TableBuilder(), TableRunner(table)
    name = scheduler if isinstance(scheduler, str) else scheduler.name
    t0 = time.monotonic()
    with MeasureOptions(builder, runner) as options:
        autotune.tune_tasks([t.task for t in table.tasks], trials=budget, tuner=tuner,
                            weights=[t.weight for t in table.tasks], scheduler=scheduler, seed=seed,
                            db=None, progress=False, remeasure=False, measure_option=options,
                            batch_size=batch_size, callbacks=[curve])
    return Replay(name, seed, curve.points, curve.trials, builder.builds, runner.runs, time.monotonic() - t0)


# ----------------------------------------------------------------------------- scheduler variants


class WeightedWarmupScheduler(GradientScheduler):
    """The gradient scheduler with its warm-up in order of each task's weight x FLOPs (the
    weighted cost it can be expected to have), largest first, instead of the tasks' order."""

    name = "gradient-ordered"

    def pick(self, tasks, weights):
        active = [k for k, t in enumerate(tasks) if t.stopped is None]
        cold = [k for k in active if not tasks[k].best_curve and not tasks[k].in_flight]
        if cold:
            return max(cold, key=lambda k: (weights[k] * tasks[k].task.flop, -k))
        return super().pick(tasks, weights)


class ScoredWarmupScheduler(GradientScheduler):
    """The gradient scheduler without a blind warm-up: a task with no result yet is judged like
    the others, its cost guessed from its FLOPs at the median speed (FLOP/s) of the tasks
    measured so far, as if it had had one trial. The first batch goes to the largest weight x
    FLOPs."""

    name = "gradient-scored"

    def pick(self, tasks, weights):
        active = [k for k, t in enumerate(tasks) if t.stopped is None]
        if not active:
            return None
        speeds = [t.task.flop / t.best_curve[-1] for t in tasks
                  if t.best_curve and t.best_curve[-1] < math.inf and t.task.flop]
        if not speeds:  # nothing measured yet: the task expected to weigh most
            cold = [k for k in active if not tasks[k].in_flight] or active
            return max(cold, key=lambda k: (weights[k] * tasks[k].task.flop, -k))
        speed = statistics.median(speeds)

        def gain(k):
            t = tasks[k]
            if t.best_curve:
                return self.gain(t, weights[k])
            if t.in_flight:
                return 0.0
            return weights[k] * max(t.task.flop, 1.0) / speed  # cost / 1 trial, the optimistic guess
        return max(active, key=lambda k: (gain(k), -(len(tasks[k].best_curve) + tasks[k].in_flight), -k))


#: Scheduler variants of this benchmark, by name (``--variants``).
VARIANTS: dict[str, Callable[[], TaskScheduler]] = {
    "gradient-ordered": WeightedWarmupScheduler,
    "gradient-scored": ScoredWarmupScheduler,
}


def _default_batch(tuner: str) -> int:
    """The tuner's own batch size (16 for "xgb" and "ga", 8 for the others)."""
    return 16 if tuner in ("xgb", "ga") else 8


def make_scheduler(name: str):
    return VARIANTS[name]() if name in VARIANTS else name


# ----------------------------------------------------------------------------- the report


def default_budget(table: CostTable, per_task: int = TRIALS_PER_TASK) -> int:
    """``2 x tasks x per_task`` trials, at most :data:`BUDGET_CAP` of the sum of the space sizes."""
    return max(1, min(2 * len(table.tasks) * per_task, int(BUDGET_CAP * table.space_sizes)))


@dataclass
class SeedRow:
    seed: int
    target: float               # round-robin's final latency
    reached: dict[str, int | None]  # contender -> trials to reach it (within TOLERANCE)
    strict: dict[str, int | None] = field(default_factory=dict)  # ... to reach it exactly

    def ratio(self, name: str, budget: int, strict: bool = False) -> float:
        n = (self.strict if strict else self.reached)[name]
        return math.inf if n is None else n / budget


def compare(runs: dict[tuple[str, int], Replay], budget: int, contenders: Sequence[str],
            tolerance: float = TOLERANCE) -> list[SeedRow]:
    """Per seed: round-robin's final latency and each contender's trials to first reach it
    (within ``tolerance`` of it, and exactly)."""
    rows = []
    for seed in sorted({s for _, s in runs}):
        target = runs[BASELINE, seed].curve[-1]
        within = {c: runs[c, seed].first_reaching(target, tolerance) for c in contenders}
        exactly = {c: runs[c, seed].first_reaching(target) for c in contenders}
        rows.append(SeedRow(seed, target, within, exactly))
    return rows


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}" if math.isfinite(seconds) else "inf"


def _trials(n: int | None) -> str:
    return "not reached" if n is None else str(n)


def _ratio(r: float) -> str:
    return f"{r:.2f}" if math.isfinite(r) else "not reached"


def report(model: str, table: CostTable, budget: int, runs: dict[tuple[str, int], Replay],
           table_note: str = "", batch_size: int | None = None, tuner: str = TUNER) -> list[str]:
    """The report's lines for one model."""
    schedulers = list(dict.fromkeys(name for name, _ in runs))
    contenders = [s for s in schedulers if s != BASELINE]
    gain = 1 - table.optimum / table.default_latency
    lines = [f"{model}: {len(table.tasks)} tasks, sum of weights {sum(t.weight for t in table.tasks):g}, "
             f"{table.space_sizes} configs in their spaces, {table.tabled} tabled"
             + (f" ({table_note})" if table_note else ""),
             f"  latency at default configs {_ms(table.default_latency)} ms, "
             f"optimum {_ms(table.optimum)} ms (tuning can gain {gain:.1%}); "
             f"budget B = {budget} trials "
             f"({budget / table.space_sizes:.0%} of the configs), tuner {tuner}, "
             f"batch {batch_size or 'default'}"]
    if gain < SMALL_GAIN:
        lines.append(f"  tuning can gain only {gain:.1%} on this model: the schedulers differ within that, "
                     "and the comparison says little")
    if budget >= table.space_sizes:
        lines.append("  B is at least the sum of the space sizes: every space can be measured whole, the "
                     "comparison says little")
    batch = batch_size or _default_batch(tuner)
    warmup = sum(min(batch, t.size) for t in table.tasks)
    if warmup <= budget:
        after = statistics.median(r.curve[warmup - 1] for (name, _), r in runs.items() if name == BASELINE)
        finals = statistics.median(r.curve[-1] for (name, _), r in runs.items() if name == BASELINE)
        lines.append(f"  one batch per task (gradient warm-up = round-robin round 1): {warmup} trials "
                     f"({warmup / budget:.0%} of B), round-robin then at {_ms(after)} ms "
                     f"({after / table.optimum - 1:+.2%} over the optimum), at B {_ms(finals)} ms "
                     f"({finals / table.optimum - 1:+.2%}) (medians of the seeds)")
    sampled = [t.task.workload_name for t in table.tasks if t.sampled]
    if sampled:
        lines.append(f"  sampled spaces (configs outside the table fail): {', '.join(sampled)}")
    header = (["seed", "scheduler"] + [f"@{f:.0%} ms" for f in FRACTIONS]
              + [f"reaches RR final (within {TOLERANCE:.1%})", "ratio", "exactly", "ratio"])
    rows = []
    seed_rows = compare(runs, budget, contenders)
    for sr in seed_rows:
        for name in schedulers:
            r = runs[name, sr.seed]
            reach = ("-",) * 4 if name == BASELINE else (
                _trials(sr.reached[name]), _ratio(sr.ratio(name, budget)),
                _trials(sr.strict[name]), _ratio(sr.ratio(name, budget, strict=True)))
            rows.append((sr.seed, name, *(_ms(r.at(f, budget)) for f in FRACTIONS), *reach))
    lines += ["  " + ln for ln in B.format_table(header, rows).splitlines()]
    for name in contenders:
        ratios = [sr.ratio(name, budget) for sr in seed_rows]
        strict = [sr.ratio(name, budget, strict=True) for sr in seed_rows]
        median = statistics.median(ratios)
        verdict = "PASS" if median <= GOAL else "FAIL"
        lines.append(f"  {verdict}: {name} reaches round-robin's final latency (within {TOLERANCE:.1%}) in a "
                     f"median {_ratio(median)} of B over {len(ratios)} seeds "
                     f"({', '.join(_ratio(r) for r in ratios)}); goal <= {GOAL:.2f}; exactly: median "
                     f"{_ratio(statistics.median(strict))}")
    return lines


def allocation(table: CostTable, runs: dict[tuple[str, int], Replay], seed: int) -> list[str]:
    """Each task's weight, default and best cost, and each scheduler's trials on it in ``seed``'s runs."""
    schedulers = list(dict.fromkeys(name for name, _ in runs))
    header = ["task", "w", "size", "w x default ms", "w x best ms"] + schedulers
    rows = []
    for t in sorted(table.tasks, key=lambda t: -t.weight * t.default_cost):
        key = t.task.workload_key
        rows.append((t.task.workload_name.split("@")[0][:60], f"{t.weight:g}", t.size,
                     _ms(t.weight * t.default_cost), _ms(t.weight * t.best),
                     *(runs[s, seed].trials[key] for s in schedulers)))
    table_lines = B.format_table(header, rows).splitlines()
    return [f"  trials per task (seed {seed}):"] + ["  " + ln for ln in table_lines]


def run_model(table: CostTable, budget: int, seeds: Sequence[int], schedulers: Sequence[str],
              batch_size: int | None = None, tuner: str = TUNER, say=print) -> dict[tuple[str, int], Replay]:
    runs = {}
    for seed in seeds:
        for name in schedulers:
            r = replay(table, make_scheduler(name), budget, seed, tuner=tuner, batch_size=batch_size)
            runs[name, seed] = r
            say(f"  replayed {name} seed {seed}: {len(r.curve)} trials in {r.seconds:.1f} s")
    return runs


# ----------------------------------------------------------------------------- models


def model_tasks(name: str, workdir: Path, opset: int = 17):
    """The model's tasks with their weights (``autotune.extract_tasks`` of its ONNX export)."""
    import bench_model

    from compiler.frontend import from_onnx

    path = bench_model.export(name, workdir, opset)
    found = autotune.extract_tasks(from_onnx(str(path)), "llvm")
    return [(t.task, t.weight) for t in found]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet18,mobilenet_v2")
    p.add_argument("--seeds", type=int, default=SEEDS)
    p.add_argument("--budget", type=int, default=None, help="trials per run (default: see the docstring)")
    p.add_argument("--table-db", default=None, help="the cost table's tuning log (default: in --workdir)")
    p.add_argument("--table-max", type=int, default=TABLE_MAX,
                   help="spaces larger than this are sampled (this many random configs)")
    p.add_argument("--variants", default="", help=f"scheduler variants to compare too: {', '.join(VARIANTS)}")
    p.add_argument("--tuner", default=TUNER, help="the tuner of the replays (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"the tuner's batch (default: {TUNER}'s own, 16)")
    p.add_argument("--allocation", action="store_true", help="print each scheduler's trials per task")
    p.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "bench_scheduler"))
    p.add_argument("--passes", type=int, default=PASSES,
                   help="measurements of each config in the table, minutes apart (default %(default)s)")
    opts = p.parse_args(argv)
    workdir = Path(opts.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    table_db = opts.table_db or str(workdir / "cost_table.db")
    variants = [v for v in opts.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    schedulers = [BASELINE, CONTENDER, *variants]
    out = []
    for name in opts.models.split(","):
        tw = model_tasks(name, workdir)
        measure_table(tw, table_db, opts.table_max, opts.passes)
        table = load_table(tw, table_db)
        budget = opts.budget or default_budget(table)
        print(f"{name}: replaying {len(schedulers)} schedulers x {opts.seeds} seeds, B = {budget}")
        runs = run_model(table, budget, range(opts.seeds), schedulers, opts.batch_size, opts.tuner)
        lines = report(name, table, budget, runs, table_note=f"table: {table_db}", batch_size=opts.batch_size,
                       tuner=opts.tuner)
        if opts.allocation:
            lines += allocation(table, runs, 0)
        out += lines + [""]
        print("\n".join(lines), flush=True)
    print("\n" + "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
