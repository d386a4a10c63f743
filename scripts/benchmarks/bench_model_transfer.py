"""How many trials a model's later tasks save by transfer: a shared cost model and borrowed configs.

Run with ``python3 scripts/benchmarks/bench_model_transfer.py`` (ResNet-18; hours on a quiet
8-core machine with the defaults; ``--tasks 3 --trials 8`` is a quick check). Options:
``--model`` (a name of ``model_zoo.MODELS``, exported to ONNX by a child process so that this
one never loads PyTorch, or an ``.onnx`` file), ``--template`` (default: the model's template
with at least two tasks and the most configs over them), ``--tasks N`` (the first N of that
template's tasks, in the model's order), ``--trials`` per task, ``--seeds``, ``--warm-start K``,
``--db-dir`` (where the logs go; kept there, made afresh by every run) and ``--ablate``.

The model is imported (``compiler.frontend.from_onnx``) and its tasks extracted
(``autotune.extract_tasks``); the template's tasks are tuned one after another with the xgb
tuner, ``--trials`` each, without re-measurement, in two modes:

* **alone**: each task into a fresh log of its own: its cost model learns from its own
  measurements only and nothing is borrowed;
* **transfer**: every task into one log: each task's cost model starts from the earlier tasks'
  records (:class:`autotune.tuner.shared.SharedModels`, which ``tune()`` uses) and the run
  measures first the ``K`` configs borrowed from its nearest tuned neighbours
  (``tune(..., warm_start=K)``; they count as trials).

``--ablate`` adds **model only** (one log, no borrowed configs) and **configs only** (one log,
borrowed configs, ``XGBTuner(share_model=False)``: no model transfer), to tell which saves what.

For each task after the first, each mode's *trials to 95%* is the number of trials it took
until one was within 95% of the task's reference throughput; a mode that never got there counts
as its whole budget (shown ``>N``). The table gives them per task and seed with their ratio
(mode / alone) and each mode's best GFLOPS. The figure of the goal is the trials the later tasks
need altogether, transfer over alone (summed over tasks and seeds), at most 0.5: transfer
halves the trials. A median of the per-task ratios would say little: a task whose default
config is already within 95% takes one trial in every mode, a ratio of 1 whatever transfer
does, and a task that gets lucky in one mode swings its ratio from 0.03 to 32.

Two ways to time the trials:

* live (the default): every candidate built and timed, the reference being the better of the
  modes' best trials (so neither mode is judged against its own luck). The machine is checked
  for quietness before and after the tuning (``bench_common``): a busy spell makes fast
  configs look slow, and the verdict is withheld then. Timing noise of a few percent decides
  which config first counts as within 95%, so a live run needs many seeds;
* ``--replay``: from a cost table of real measurements (``cost_table.py``, as
  ``bench_scheduler.py`` does): every config of each task's space is measured ``--passes``
  times, minutes apart, into the log ``--table-db`` and tabled at its least (resumable; larger
  spaces than ``--table-max`` are sampled), and the modes tune
  against the table's costs, so all of them meet the same costs and many seeds take minutes.
  The reference is the table's optimum: the task's best config.

On CPUs ResNet's ``conv2d_nchwc`` spaces are small (4 to 12 configs: the blocking is part of the
workload); the script says so when a task's space holds no more configs than ``--trials``,
where the goal means little. ``--model mobilenet_v2`` (``depthwise_conv2d_nchwc``, up to 174
configs) and ``--model encoder_layer`` (``dense_pack``, about 1200) have larger ones.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import bench_common as B
from cost_table import PASSES, TABLE_MAX, TableBuilder, TableRunner, load_table, measure_table

import autotune
import compiler
from autotune.selection import workload_label
from autotune.tuner import XGBTuner
from compiler.runtime import num_threads
from measure import LocalBuilder, MeasureOptions

_HERE = Path(__file__).resolve()

ALONE, TRANSFER, MODEL_ONLY, CONFIGS_ONLY = "alone", "transfer", "model only", "configs only"
# mode -> (one log for every task, borrowed configs, the model shared through the log)
MODES = {ALONE: (False, False, False), TRANSFER: (True, True, True),
         MODEL_ONLY: (True, False, True), CONFIGS_ONLY: (True, True, False)}
REACH = 0.95  # a task is tuned once a trial is within 95% of its reference throughput
GOAL = 0.5    # transfer needs at most half the trials alone needs (median)


def onnx_file(model: str, workdir: Path) -> Path:
    """The model's ONNX file: ``model`` itself when it is a file, else exported once into
    ``workdir`` by ``model_zoo.py`` in a child process (PyTorch's threads never share this one)."""
    if model.endswith(".onnx"):
        return Path(model)
    path = workdir / f"{model}.onnx"
    if not path.exists():
        subprocess.run([sys.executable, str(_HERE.with_name("model_zoo.py")), model, str(path)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def template_tasks(path: Path, template: str | None, target: str) -> tuple[str, list]:
    """The template's tasks of the model, in the model's order (default template: the one with at
    least two tasks and the most configs over them)."""
    from compiler.frontend import from_onnx

    by_template = defaultdict(list)
    for t in autotune.extract_tasks(from_onnx(str(path)), target).tasks:
        by_template[t.name].append(t)
    if template is None:
        several = {k: v for k, v in by_template.items() if len(v) > 1} or by_template
        template = max(several, key=lambda k: sum(t.config_space.size for t in several[k]))
    if template not in by_template:
        raise SystemExit(f"the model has no {template!r} task; its templates: {', '.join(by_template)}")
    return template, by_template[template]


def log_path(workdir: Path, mode: str, seed: int, task: int) -> Path:
    stem = mode.replace(" ", "_")
    return workdir / (f"{stem}-seed{seed}-task{task}.db" if not MODES[mode][0] else f"{stem}-seed{seed}.db")


def run_mode(mode: str, tasks: list, seed: int, opts) -> list[list[float] | None]:
    """Tune ``tasks`` one after another in ``mode``; the cost of each trial of each task, in
    order (None for the first task alone: it has nothing to be compared with)."""
    shared_log, borrow, share_model = MODES[mode]
    costs: list[list[float] | None] = []
    for i, task in enumerate(tasks):
        if mode == ALONE and i == 0:
            costs.append(None)
            continue
        path = log_path(opts.workdir, mode, seed, i)
        if not shared_log or i == 0:
            path.unlink(missing_ok=True)  # a fresh log: no run resumes another
        print(f"  {mode}, seed {seed}: task {i} {task.workload_name}", flush=True)
        tuner = "xgb" if share_model else XGBTuner(share_model=False)  # the latter: no model transfer
        result = autotune.tune(task, trials=opts.trials, tuner=tuner, db=str(path), seed=seed,
                               measure_option=opts.measure, warm_start=opts.warm_start if borrow else 0,
                               remeasure=False, progress=opts.progress)
        costs.append([t.result.mean_cost for t in result.history])
    return costs


def trials_to_reach(costs: list[float], target: float) -> int | None:
    """The number of trials until one cost at most ``target`` (None: never)."""
    return next((n for n, c in enumerate(costs, 1) if c <= target), None)


def compare(tasks: list, runs: dict[tuple[str, int], list], seeds: list[int], budget: int, modes: list[str],
            optimum: dict[str, float] | None = None):
    """Table rows per (task, seed) after the first task, and each mode's trials to 95% per task
    run (a run that never got there counts as ``budget``). The reference of a task is its
    ``optimum`` (seconds, by workload key) where given, else the better of the modes' best."""
    rows, reached_by_mode = [], defaultdict(list)
    for seed in seeds:
        for i, task in enumerate(tasks[1:], 1):
            per_mode = {m: runs[m, seed][i] for m in modes}
            reference = (optimum[task.workload_key] if optimum is not None else
                         min((c for costs in per_mode.values() for c in costs), default=math.inf))
            if not math.isfinite(reference):
                rows.append((i, seed, task.config_space.size, "no trial succeeded"))
                continue
            first = {m: trials_to_reach(c, reference / REACH) for m, c in per_mode.items()}
            reached = {m: n or budget for m, n in first.items()}
            cells = [f"{'>' if first[m] is None else ''}{reached[m]}" for m in modes]
            cells += [f"{reached[m] / reached[ALONE]:.2f}" for m in modes[1:]]
            for m in modes:
                reached_by_mode[m].append(reached[m])
                best = min(per_mode[m], default=math.inf)
                cells.append(f"{task.flop / best / 1e9:.1f}" if math.isfinite(best) else "-")
            rows.append((i, seed, task.config_space.size, *cells))
    return rows, reached_by_mode


def main() -> None:
    p = argparse.ArgumentParser(description="Trials a model's later tasks save by a shared cost model "
                                            "and borrowed configs.")
    p.add_argument("--model", default="resnet18", help="a model_zoo name or an .onnx file (default resnet18)")
    p.add_argument("--template", default=None, help="the template whose tasks are tuned (default: see above)")
    p.add_argument("--tasks", type=int, default=None, help="the first N tasks of the template (default all)")
    p.add_argument("--trials", type=int, default=64, help="trials per task and mode (default 64)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="tuner seeds (default 0)")
    p.add_argument("--warm-start", type=int, default=8, metavar="K",
                   help="configs borrowed from the nearest tuned tasks, measured first (default 8)")
    p.add_argument("--ablate", action="store_true", help="also tune 'model only' and 'configs only'")
    p.add_argument("--db-dir", default=None, help="where the logs (and the exported model) go "
                                                  "(default: a temporary directory)")
    p.add_argument("--target", default="llvm")
    p.add_argument("--build-timeout", type=float, default=60, help="seconds a candidate's build may take")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty())
    p.add_argument("--replay", action="store_true", help="tune against a cost table of real measurements "
                                                         "instead of timing every trial (see above)")
    p.add_argument("--table-db", default=None, help="the cost table's tuning log (default: cost_table.db "
                                                    "in --db-dir; kept and resumed, unlike the modes' logs)")
    p.add_argument("--table-max", type=int, default=TABLE_MAX,
                   help="spaces larger than this are sampled in the table (default %(default)s)")
    p.add_argument("--passes", type=int, default=PASSES,
                   help="measurements of each config in the table, minutes apart (default %(default)s)")
    opts = p.parse_args()
    if opts.trials < 1 or (opts.tasks is not None and opts.tasks < 2):
        p.error("--trials must be >= 1 and --tasks >= 2 (the first task is tuned with nothing to borrow)")

    modes = [ALONE, TRANSFER] + ([MODEL_ONLY, CONFIGS_ONLY] if opts.ablate else [])
    threads = num_threads()
    print(f"# {platform.processor() or platform.machine()} ({compiler.target.host_cpu_name()}), "
          f"{threads} threads, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_model_transfer_") as tmp:
        opts.workdir = Path(opts.db_dir) if opts.db_dir else Path(tmp)
        opts.workdir.mkdir(parents=True, exist_ok=True)
        template, tasks = template_tasks(onnx_file(opts.model, opts.workdir), opts.template, opts.target)
        tasks = tasks[:opts.tasks]
        if len(tasks) < 2:
            raise SystemExit(f"{opts.model} has only {len(tasks)} {template} task: nothing to transfer")
        print(f"# {opts.model}: {len(tasks)} {template} tasks, {opts.trials} trials each, "
              f"seeds {opts.seeds}, warm start {opts.warm_start}; modes: {', '.join(modes)}", flush=True)
        table = None
        if opts.replay:
            table_db = opts.table_db or str(opts.workdir / "cost_table.db")
            measure_table([(t, 1) for t in tasks], table_db, opts.table_max, opts.passes)
            table = load_table([(t, 1) for t in tasks], table_db)
            measure = MeasureOptions(TableBuilder(), TableRunner(table))
            checks = []
        else:
            checks = [B.measure_quietness(threads)]
            print(f"# before tuning: {checks[0].describe()}", flush=True)
            measure = MeasureOptions(LocalBuilder(timeout=opts.build_timeout))
        runs = {}
        with measure as opts.measure:
            for seed in opts.seeds:
                for mode in modes:
                    runs[mode, seed] = run_mode(mode, tasks, seed, opts)
        if not opts.replay:
            checks.append(B.measure_quietness(threads))
            print(f"# after tuning: {checks[1].describe()}", flush=True)

    print()
    for i, task in enumerate(tasks):
        print(f"# task {i}: {workload_label(task.name, task.args)} ({task.config_space.size} configs)")
    small = [i for i, t in enumerate(tasks[1:], 1) if t.config_space.size <= opts.trials]
    if small:
        print(f"# tasks {', '.join(map(str, small))} have no more configs than --trials: the tuner can "
              "measure them all, and the trials to 95% say little")
    optimum = {t.task.workload_key: t.best for t in table.tasks} if table is not None else None
    rows, reached = compare(tasks, runs, opts.seeds, opts.trials, modes, optimum)
    header = ("task", "seed", "configs", *(f"{m}: trials to {REACH:.0%}" for m in modes),
              *(f"{m} / alone" for m in modes[1:]), *(f"{m} GFLOPS" for m in modes))
    print(B.format_table(header, rows))
    print()
    reference = "the table's optimum" if table is not None else "the best of the modes"
    print(f"# trials to {REACH:.0%} of {reference} over {len(reached[ALONE])} task runs: "
          + ", ".join(f"{m} {sum(reached[m])} (median {statistics.median(reached[m]):g})"
                      for m in modes if reached[m]))
    ratios = {m: sum(reached[m]) / sum(reached[ALONE]) for m in modes[1:] if reached[m]}
    for m, ratio in ratios.items():
        print(f"# {m}: {ratio:.2f}x alone's trials ({1 - ratio:.0%} of the trials saved)")
    verdicts = []
    if TRANSFER in ratios:
        verdicts.append(B.Verdict(f"trials the later tasks need to reach {REACH:.0%} of {reference}, "
                                  "transfer / alone", ratios[TRANSFER], GOAL, at_most=True))
    if table is not None:  # the replay's costs are the table's: no timing to be disturbed
        lines = [v.line() for v in verdicts]
    else:
        lines = B.verdict_lines(verdicts, checks)
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
