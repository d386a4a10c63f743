"""tune() and tune_tasks() with real workers and a real SQLite log."""

from __future__ import annotations

import pytest

import autotune
import db
from measure import MeasureOptions


@pytest.fixture(scope="module")
def options():
    with MeasureOptions() as opts:
        yield opts


@pytest.fixture
def task():
    return autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")


def test_tune_measures_writes_and_reports(tmp_path, task, options):
    seen = []
    result = autotune.tune(task, trials=8, tuner="random", db=tmp_path / "t.db", measure_option=options,
                           batch_size=4, seed=0, callbacks=[lambda inp, res: seen.append(inp.config.index)],
                           progress=False)
    assert len(result.history) == 8 and result.stopped == "budget"
    assert sorted(seen) == sorted(t.config.index for t in result.history)  # once per result
    assert len(set(seen)) == 8
    assert result.best_config is not None and task.config_space.is_valid(result.best_config.index)
    assert result.best_cost > 0 and result.best_gflops > 0
    with db.open(tmp_path / "t.db") as log:
        # every trial, plus the final re-measurement of the best few
        assert log.count(task) == 8 + 2 * 3
        runs = log.runs()
        assert runs and runs[-1].status == "budget"


def test_resume_measures_nothing_twice(tmp_path, task, options):
    log_path = tmp_path / "t.db"
    first = autotune.tune(task, trials=6, tuner="random", db=log_path, measure_option=options,
                          batch_size=3, seed=1, progress=False)
    second = autotune.tune(task, trials=6, tuner="random", db=log_path, measure_option=options,
                           batch_size=3, seed=1, progress=False)
    assert second.resumed >= 6
    before = {t.config.index for t in first.history}
    after = {t.config.index for t in second.history}
    assert not before & after
    assert len(after) == 6


def test_early_stopping(tmp_path, task, options):
    result = autotune.tune(task, trials=40, tuner="random", db=None, measure_option=options,
                           batch_size=4, seed=2, early_stopping=0, progress=False)
    assert result.stopped == "early_stopping"
    assert len(result.history) == 4


def test_interrupt_keeps_every_finished_trial(tmp_path, task, options):
    count = 0

    def stop_after_three(inp, res):
        nonlocal count
        count += 1
        if count == 3:
            raise KeyboardInterrupt

    result = autotune.tune(task, trials=12, tuner="random", db=tmp_path / "t.db", measure_option=options,
                           batch_size=4, seed=3, callbacks=[stop_after_three], progress=False)
    assert result.stopped == "interrupted"
    assert len(result.history) == 3
    with db.open(tmp_path / "t.db") as log:
        assert log.count(task) == 3  # no final re-measurement after an interrupt
        assert log.runs()[-1].status == "interrupted"


def test_tune_tasks_shares_one_budget(tmp_path, options):
    tasks = [autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm"),
             autotune.create_task("softmax", (8, 32, "float32"), "llvm")]
    results = autotune.tune_tasks(tasks, trials=12, tuner="random", db=tmp_path / "t.db",
                                  measure_option=options, batch_size=3, seed=4, progress=False)
    assert len(results) == 2
    assert sum(len(r.history) for r in results) == 12
    assert all(len(r.history) >= 3 for r in results)  # round-robin warm-up
    assert all(r.best_gflops > 0 for r in results)


def test_applied_log_is_never_slower_than_the_default(tmp_path, options):
    # The default config is measured in the first batch, so the config the log applies
    # has a confident median no worse than the default's, by the same measurements.
    from autotune.selection import rank_configs
    from search_spaces.dispatch import current_context

    task = autotune.create_task("matmul", (64, 64, 64, "float32"), "llvm")
    autotune.tune(task, trials=10, tuner="random", db=tmp_path / "t.db", measure_option=options,
                  batch_size=5, seed=5, progress=False)
    default = task.config_space.default_config
    with db.open(tmp_path / "t.db") as log:
        records = log.records(task, errors=False)
        assert any(r.config_index == default.index for r in records)
        ranked = rank_configs((r.config, r.costs) for r in records)
        with autotune.apply_history_best(log):
            chosen = current_context().query(task.target, task)
    score = {task.config_space.from_json(e.config).index: e for e in ranked}
    assert chosen.index == task.config_space.from_json(ranked[0].config).index
    assert score[chosen.index].median <= score[default.index].median * 1.05
