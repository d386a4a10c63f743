"""Cost tables: real measurements of every config of a model's tasks, replayed instead of timed.

Comparing tuning policies (task schedulers, transfer between tasks) with live timing would
take hours on a small machine and mix timing noise into the comparison. So the benchmarks that
compare them first measure a *cost table* (:func:`measure_table`): every config of each task's
space, or a random sample of a large one, into a tuning log; the table maps each (workload,
config knobs) to the median of every cost the log holds for it (:func:`load_table`). Then they
tune with :class:`TableBuilder` and :class:`TableRunner`, which compile and time nothing: each
config costs what the table says, so every policy meets the same costs.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import db as tuning_db
from autotune.selection import record_of
from db.stats import usable_costs
from measure import (
    Artifact,
    Builder,
    BuildReply,
    ErrorKind,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
    Runner,
    measure_batch,
)
from measure.base import error_result

__all__ = ["TABLE_MAX", "PASSES", "TaskCosts", "CostTable", "table_from_costs", "table_configs",
           "measure_table", "load_table", "TableBuilder", "TableRunner"]

TABLE_MAX = 200  # spaces larger than this are sampled
PASSES = 2       # measurements of each config, minutes apart; the table keeps the least


@dataclass
class TaskCosts:
    """One task of the table: its weight and the cost of each tabled config (the least of its
    passes' medians; inf: it failed), keyed by the config's knob fingerprint."""

    task: object
    weight: float
    costs: dict[str, float]
    default_cost: float
    sampled: bool = False

    @property
    def size(self) -> int:
        return len(self.task.config_space)

    @property
    def best(self) -> float:
        return min(self.costs.values(), default=math.inf)


@dataclass
class CostTable:
    """The tasks of a model with every tabled config's cost (seconds)."""

    tasks: list[TaskCosts]
    by_key: dict[str, TaskCosts] = field(init=False)

    def __post_init__(self):
        self.by_key = {t.task.workload_key: t for t in self.tasks}

    def cost(self, task, config) -> float | None:
        """The tabled cost of ``config`` of ``task`` (inf: failed), None outside the table."""
        return self.by_key[task.workload_key].costs.get(tuning_db.knobs_fingerprint(config.to_json()))

    @property
    def optimum(self) -> float:
        return sum(t.weight * t.best for t in self.tasks)

    @property
    def default_latency(self) -> float:
        return sum(t.weight * t.default_cost for t in self.tasks)

    @property
    def space_sizes(self) -> int:
        return sum(t.size for t in self.tasks)

    @property
    def tabled(self) -> int:
        return sum(len(t.costs) for t in self.tasks)


def table_from_costs(tasks_weights: Sequence[tuple[object, float]], costs: Callable) -> CostTable:
    """A table of every config of each task's space at ``costs(task, config)`` seconds (inf: a
    failure): a hand-made table, for tests."""
    out = []
    for task, weight in tasks_weights:
        space = task.config_space
        table = {tuning_db.knobs_fingerprint(space.get(i).to_json()): costs(task, space.get(i))
                 for i in range(len(space))}
        out.append(_task_costs(task, weight, table, sampled=False))
    return CostTable(out)


def _task_costs(task, weight, costs: dict[str, float], sampled: bool) -> TaskCosts:
    default = costs.get(tuning_db.knobs_fingerprint(task.config_space.default_config.to_json()), math.inf)
    if not math.isfinite(default):  # unmeasured or failed: count the task at its worst working config
        default = max((c for c in costs.values() if math.isfinite(c)), default=math.inf)
    return TaskCosts(task, float(weight), costs, default, sampled)


def table_configs(task, table_max: int = TABLE_MAX) -> list:
    """The configs of ``task`` that its table holds: the whole space when it has at most
    ``table_max`` configs, else a random sample of ``table_max`` (the same every time)."""
    space = task.config_space
    n = len(space)
    indices = range(n) if n <= table_max else sorted(random.Random(0).sample(range(n), table_max))
    return [space.get(i) for i in indices]


def measure_table(tasks_weights: Sequence[tuple[object, float]], log_path, table_max: int = TABLE_MAX,
                  passes: int = PASSES, say=print) -> None:
    """Measure each task's table configs (:func:`table_configs`) into the log ``log_path``,
    ``passes`` times: one pass over every task, then the next, so that the passes of a config
    lie minutes apart. Resumes what the log holds (a config measured ``k`` times has had ``k``
    passes)."""
    with tuning_db.open(log_path) as log:
        for p in range(1, passes + 1):
            todo = []
            for task, _ in tasks_weights:
                measured = Counter(tuning_db.knobs_fingerprint(r.config) for r in log.records(task))
                missing = [c for c in table_configs(task, table_max)
                           if measured[tuning_db.knobs_fingerprint(c.to_json())] < p]
                if missing:
                    todo.append((task, missing))
            if not todo:
                continue
            say(f"measuring the cost table, pass {p} of {passes}: {sum(len(m) for _, m in todo)} configs of "
                f"{len(todo)} tasks into {log_path}")
            with MeasureOptions() as options:
                for k, (task, configs) in enumerate(todo):
                    t0 = time.monotonic()
                    results = measure_batch([MeasureInput(task, c) for c in configs], options)
                    log.add([record_of(task, c, r) for c, r in zip(configs, results)])
                    say(f"  [{k + 1}/{len(todo)}] {task.workload_name}: {len(configs)} configs in "
                        f"{time.monotonic() - t0:.0f} s, load average {os.getloadavg()[0]:.2f}")


def load_table(tasks_weights: Sequence[tuple[object, float]], log_path) -> CostTable:
    """The cost table of ``tasks_weights`` from the log: each config's least cost over its
    measurements (each measurement's median; inf where it only failed). Another process taking
    a core can make one measurement ten times slower; it never makes one faster, so the least
    of passes that lie minutes apart is the config's cost on a quiet machine."""
    out = []
    with tuning_db.open(log_path) as log:
        for task, weight in tasks_weights:
            costs: dict[str, float] = {}
            for r in log.records(task):
                key = tuning_db.knobs_fingerprint(r.config)
                usable = usable_costs(r.costs) if r.error_kind is None else []
                costs[key] = min(costs.get(key, math.inf), statistics.median(usable) if usable else math.inf)
            out.append(_task_costs(task, weight, costs, sampled=len(costs) < len(task.config_space)))
    return CostTable(out)


class TableBuilder(Builder):
    """Builds nothing: every candidate goes on to the runner with an empty artifact."""

    def __init__(self):
        self.builds = 0

    def build(self, inputs, gates):
        for i, _ in enumerate(inputs):
            self.builds += 1
            yield i, BuildReply(Artifact("table", b""), None, 0.0, None, "table")


class TableRunner(Runner):
    """Times nothing: every candidate costs what the table says, or fails where it holds no
    cost (outside a sampled space) or a failure."""

    def __init__(self, table: CostTable):
        self.table, self.runs = table, 0

    def run(self, jobs, gates):
        while (job := jobs.get()) is not None:
            i, inp, _ = job
            self.runs += 1
            cost = self.table.cost(inp.task, inp.config)
            if cost is None:
                yield i, error_result(ErrorKind.RUNTIME_ERROR,
                                      "not in the cost table (its space was sampled)", worker="table")
            elif not math.isfinite(cost):
                yield i, error_result(ErrorKind.RUNTIME_ERROR, "failed when the cost table was measured",
                                      worker="table")
            else:
                yield i, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "table")
