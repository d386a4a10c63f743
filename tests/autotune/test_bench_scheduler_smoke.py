"""scripts/benchmarks/bench_scheduler.py: its replay runs end to end on two small hand-made tasks
with a hand-made cost table (both schedulers spend exactly the budget, their latency curves never
rise, nothing is compiled) and its report and table reader say what the runs and the log hold;
``cost_table`` measures each config once per pass and keeps the least."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

import autotune
import compiler
import db
from autotune.selection import record_of
from measure import ErrorKind, LocalBuilder, MeasureResult

_DIR = Path(__file__).resolve().parents[2] / "scripts" / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(_DIR))  # bench_common and cost_table, imported by the script
    try:
        spec = importlib.util.spec_from_file_location("bench_scheduler", _DIR / "bench_scheduler.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(_DIR))
        sys.modules.pop("bench_scheduler", None)


@pytest.fixture(scope="module")
def tables(bench):
    """scripts/benchmarks/cost_table.py, as the script imported it."""
    return sys.modules["cost_table"]


@pytest.fixture(scope="module")
def tasks():
    # spaces of 12 and 6 configs (the target pinned: the spaces follow its vector width);
    # weights 3 and 1
    target = "llvm -mcpu=skylake-avx512"
    return [(autotune.create_task("matmul", (16, 16, 16, "float32"), target), 3),
            (autotune.create_task("matmul", (8, 8, 8, "float32"), target), 1)]


def _cost(task, config) -> float:
    """A cost per config: the big task's configs get faster with the index, one config fails."""
    n = len(task.config_space)
    if task.args[0] == 16 and config.index == task.config_space.get(n - 1).index:
        return math.inf
    return (1e-3 if task.args[0] == 16 else 1e-4) * (1 + (config.index * 7919) % 11)


def _no_compiling(*args, **kwargs):
    raise AssertionError("the table replay compiled something")


def test_both_schedulers_spend_the_budget_from_the_table_alone(bench, tables, tasks, monkeypatch):
    monkeypatch.setattr(compiler, "build", _no_compiling)
    monkeypatch.setattr(compiler, "lower", _no_compiling)
    monkeypatch.setattr(LocalBuilder, "build", _no_compiling)
    table = tables.table_from_costs(tasks, _cost)
    assert table.space_sizes == 18 and table.tabled == 18
    budget = bench.default_budget(table)
    assert budget == int(0.75 * 18)  # 2 x 2 tasks x 8 = 32, capped at 75% of the configs
    runs = {}
    for name in (bench.BASELINE, bench.CONTENDER, "gradient-ordered", "gradient-scored"):
        r = bench.replay(table, bench.make_scheduler(name), budget, seed=0, batch_size=4)
        runs[name, 0] = r
        assert len(r.curve) == r.builds == r.runs == sum(r.trials.values()) == budget
        assert all(b <= a for a, b in zip(r.curve, r.curve[1:]))  # never rises
        assert table.optimum <= r.curve[-1] <= r.curve[0] <= table.default_latency
    lines = bench.report("two matmuls", table, budget, runs)
    text = "\n".join(lines)
    assert f"budget B = {budget} trials" in text
    assert sum(line.startswith(("  PASS: ", "  FAIL: ")) for line in lines) == 3


def test_the_report_counts_trials_to_reach_round_robin(bench, tables, tasks):
    table = tables.table_from_costs(tasks, _cost)

    def run(name, curve):
        return bench.Replay(name, 0, curve, {}, len(curve), len(curve), 0.0)

    runs = {("round-robin", 0): run("round-robin", [5.0, 4.0, 3.0, 3.0]),
            ("gradient", 0): run("gradient", [5.0, 3.0, 3.0, 2.0]),
            ("round-robin", 1): run("round-robin", [5.0, 4.0, 3.0, 2.0]),
            ("gradient", 1): run("gradient", [5.0, 4.0, 4.0, 3.0]),
            ("round-robin", 2): run("round-robin", [5.0, 4.0, 3.0, 1.0]),
            ("gradient", 2): run("gradient", [5.0, 1.0005, 1.0005, 1.0005])}  # 0.05% short of it
    (first, second, third) = bench.compare(runs, 4, ["gradient"])
    assert (first.target, first.reached["gradient"], first.ratio("gradient", 4)) == (3.0, 2, 0.5)
    assert (second.target, second.reached["gradient"], second.ratio("gradient", 4)) == (2.0, None, math.inf)
    assert (third.reached["gradient"], third.strict["gradient"]) == (2, None)  # within 0.1%, never exactly
    assert third.ratio("gradient", 4, strict=True) == math.inf
    lines = bench.report("m", table, 4, runs)
    assert lines[-1] == ("  PASS: gradient reaches round-robin's final latency (within 0.1%) in a median "
                         "0.50 of B over 3 seeds (0.50, not reached, 0.50); goal <= 0.70; exactly: median "
                         "not reached")
    assert run("x", [3.0, 2.0]).at(0.25, 4) == 3.0 and run("x", [3.0, 2.0]).at(1.0, 2) == 2.0


def test_the_table_is_each_configs_least_pass_median_in_the_log(tables, tasks, tmp_path):
    task, _ = tasks[1]
    space = task.config_space
    a, b = space.get(0), space.get(1)
    quiet = MeasureResult((1e-3, 3e-3, 2e-3), None, "", 0.0, 0.0, 1.0, "w")  # median 2 ms
    busy = MeasureResult((9e-3, 2e-2), None, "", 0.0, 0.0, 1.0, "w")         # a pass while busy
    failed = MeasureResult((), ErrorKind.RUNTIME_ERROR, "boom", 0.0, 0.0, 1.0, "w")
    with db.open(tmp_path / "t.db") as log:
        for cfg, result in [(a, busy), (a, quiet), (b, failed)]:
            log.add(record_of(task, cfg, result))
    table = tables.load_table([(task, 2)], tmp_path / "t.db")
    (t,) = table.tasks
    assert t.sampled and len(t.costs) == 2  # 2 of the space's 6 configs are in the log
    assert table.cost(task, a) == pytest.approx(2e-3)  # the quiet pass's median, not the busy one's
    assert table.cost(task, b) == math.inf and table.cost(task, space.get(2)) is None


def test_the_table_measures_each_config_once_per_pass_and_resumes(tables, tmp_path):
    cost_table = tables
    task = autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")
    sample = cost_table.table_configs(task, table_max=3)
    assert len(sample) == 3 and len({c.index for c in sample}) == 3
    assert [c.index for c in cost_table.table_configs(task, table_max=3)] == [c.index for c in sample]
    assert len(cost_table.table_configs(task, table_max=100)) == len(task.config_space)
    said = []
    cost_table.measure_table([(task, 1)], tmp_path / "t.db", table_max=3, passes=2, say=said.append)
    with db.open(tmp_path / "t.db") as log:
        records = log.records(task)
    assert sorted(r.config_index for r in records) == sorted(2 * [c.index for c in sample])
    assert sum(line.startswith("measuring the cost table, pass") for line in said) == 2
    said.clear()
    cost_table.measure_table([(task, 1)], tmp_path / "t.db", table_max=3, passes=2, say=said.append)
    assert said == []  # both passes are in the log: nothing measured again
    table = cost_table.load_table([(task, 1)], tmp_path / "t.db")
    assert len(table.tasks[0].costs) == 3 and all(0 < c < math.inf for c in table.tasks[0].costs.values())
