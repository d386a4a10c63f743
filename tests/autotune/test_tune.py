"""tune() and tune_tasks() with real workers and a real SQLite log."""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict

import pytest

import autotune
import db
import measure
from autotune.selection import best
from measure import (
    Artifact,
    Builder,
    BuildReply,
    ErrorKind,
    MeasureOptions,
    MeasureResult,
    MeasureSession,
    Runner,
)


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
    # two rounds of the best three and the default, and of any config rising into them meanwhile
    # (3 passes), and of the winner and the default while they duel (3 passes more at most)
    assert result.trials == 8 and result.remeasured in range(2 * 3, 2 * (3 * 3 + 1) + 3 * 2 * 2 + 1, 2)
    with db.open(tmp_path / "t.db") as log:
        # every trial, then the final re-measurement of the best few: measurements, not trials
        records = log.records(task)
        assert [r.kind for r in records] == [db.TRIAL] * 8 + [db.REMEASURE] * result.remeasured
        assert {r.config_index for r in records[8:]} <= {t.config.index for t in result.history}
        assert log.summary()[0].trials == 8
        runs = log.runs()
        assert runs and runs[-1].status == "budget"


def test_tune_result_and_autotune_best_show_one_figure(tmp_path, task):
    """TuneResult, the report's summary and `autotune best` name one config with one cost:
    the median of the top-ranked config's measurements."""
    from autotune.report import summarize
    from autotune.selection import knobs_of

    costs = [4e-3, 2e-3, 3e-3, 2.5e-3, 5e-3, 6e-3]
    with MeasureOptions(_NoBuild(), _ScriptedRunner(costs)) as options:
        result = autotune.tune(task, trials=len(costs), tuner="grid", db=tmp_path / "t.db",
                               measure_option=options, batch_size=2, progress=False)
    with db.open(tmp_path / "t.db") as log:
        (summary,) = summarize(log)
        (best,) = autotune.selection.best(log, task)
    assert summary.best_cost == pytest.approx(result.best_cost) == pytest.approx(2e-3)
    assert best.median == pytest.approx(result.best_cost)
    assert knobs_of(best.config) == summary.best_config == result.best_config.to_json()["knobs"]


def test_a_measure_result_becomes_a_log_record(task):
    from autotune.selection import record_of
    from compiler.target import Target

    cfg = task.config_space.default_config
    ok = MeasureResult((2e-3, 4e-3), None, "", 0.5, 0.25, 1.7e9, "worker-1")
    r = record_of(task, cfg, ok, run_id="ab" * 8, kind=db.REMEASURE, host="node")
    assert (r.workload_key, r.template, r.target) == (task.workload_key, "matmul", "llvm")
    assert r.args == [32, 32, 32, "float32"]
    assert (r.target_model, r.config, r.config_index) == (Target("llvm").model, cfg.to_json(), cfg.index)
    assert (r.costs, r.error_kind, r.build_time, r.run_time) == ([2e-3, 4e-3], None, 0.5, 0.25)
    assert (r.host, r.device, r.timestamp) == ("node", "worker-1", 1.7e9)
    assert (r.run_id, r.kind) == ("ab" * 8, db.REMEASURE)
    assert r.gflops == pytest.approx(task.flop / 3e-3 / 1e9)
    failed = record_of(task, cfg, MeasureResult((), ErrorKind.RUNTIME_ERROR, "boom", 0.5, 0.0, 1.7e9, "w"))
    assert (failed.costs, failed.error_kind, failed.error_msg) == ([], ErrorKind.RUNTIME_ERROR.value, "boom")
    assert failed.gflops is None and failed.kind == db.TRIAL and failed.run_id is None


def test_resume_measures_nothing_twice(tmp_path, task, options):
    log_path = tmp_path / "t.db"
    first = autotune.tune(task, trials=6, tuner="random", db=log_path, measure_option=options,
                          batch_size=3, seed=1, progress=False)
    second = autotune.tune(task, trials=6, tuner="random", db=log_path, measure_option=options,
                           batch_size=3, seed=1, progress=False)
    assert second.resumed == 6  # the first run's trials; its re-measurements are no trials
    before = {t.config.index for t in first.history}
    after = {t.config.index for t in second.history}
    assert not before & after
    assert len(after) == 6


class _NoBuild(Builder):
    """Hands every candidate on uncompiled: the scripted runner below needs no code."""

    def build(self, inputs, gates):
        for i, _ in enumerate(inputs):
            yield i, BuildReply(Artifact("none", b""), None, 0.0)


class _ScriptedRunner(Runner):
    """Costs from a script, never from a clock: the k-th config measured gets ``script[k]``
    (None: a failed run) and keeps it when measured again."""

    def __init__(self, script):
        self.script = list(script)
        self.cost_of: dict[int, float | None] = {}

    def run(self, jobs, gates):
        while (job := jobs.get()) is not None:
            i, inp, _ = job
            if inp.config.index not in self.cost_of:
                self.cost_of[inp.config.index] = self.script[len(self.cost_of)]
            cost = self.cost_of[inp.config.index]
            if cost is None:
                yield i, MeasureResult((), ErrorKind.RUNTIME_ERROR, "scripted failure", 0.0, 0.0,
                                       time.time(), "script")
            else:
                yield i, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "script")


# Best so far after each trial: 5, 4, 4, 4, 3, 3, 3, 3, 1. Trials without improvement since
# the last one: 0, 0, 1, 2, 0, 1 (a tie is no improvement), 2 (a failure neither), 3, 0.
_SCRIPT = [5e-3, 4e-3, 4.5e-3, 6e-3, 3e-3, 3e-3, None, 8e-3, 1e-3]


@pytest.mark.parametrize("patience, trials_run", [(1, 3), (2, 4), (3, 8), (None, 9)])
def test_early_stopping_after_n_trials_without_improvement(task, patience, trials_run):
    runner = _ScriptedRunner(_SCRIPT)
    with MeasureOptions(_NoBuild(), runner) as options:
        result = autotune.tune(task, trials=len(_SCRIPT), tuner="grid", db=None, measure_option=options,
                               batch_size=1, early_stopping=patience, progress=False)
    # The run stops proposing at trial ``trials_run``; the candidates already in flight then
    # (the measure session's capacity, builder slots + 2 x runner slots, and one batch) finish.
    in_flight = MeasureSession(options).capacity + 1 - 1
    assert trials_run <= len(result.history) <= min(len(_SCRIPT), trials_run + in_flight)
    assert result.stopped == ("budget" if patience is None else "early_stopping")
    costs = [t.result.mean_cost for t in result.history]
    made = _SCRIPT[:len(result.history)]
    assert costs == [math.inf if c is None else c for c in made]
    # the best config measured once and twice more at the end, always at its scripted cost
    assert result.best_cost == pytest.approx(min(c for c in made if c is not None))


class _SlowAfterFirstRunner(_ScriptedRunner):
    """The k-th config measured takes ``script[k]`` the first time and ten times as long at
    every later measurement: its trial met a fast moment of the machine, its re-measurements
    a slow one. With ``slow``, only the first ``slow`` configs' re-measurements meet it (the
    others keep their cost), each ``pause`` seconds of wall time too."""

    def __init__(self, script, slow: int | None = None, pause: float = 0.0):
        super().__init__(script)
        self.slow, self.pause = slow, pause

    def run(self, jobs, gates):
        while (job := jobs.get()) is not None:
            i, inp, _ = job
            first = inp.config.index not in self.cost_of
            if first:
                self.cost_of[inp.config.index] = self.script[len(self.cost_of)]
            cost = self.cost_of[inp.config.index]
            if not first and (self.slow is None or list(self.cost_of).index(inp.config.index) < self.slow):
                time.sleep(self.pause)
                cost *= 10
            yield i, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "script")


class _ColdDefaultRunner(Runner):
    """The default config is timed slow once (a cold first measurement), then 1.0 ms for good; the
    first other config is timed fast once (luck), then 1.2 ms; every other config 2 ms."""

    def __init__(self, default_index: int):
        self.default, self.lucky = default_index, None
        self.seen: dict[int, int] = {}

    def run(self, jobs, gates):
        while (job := jobs.get()) is not None:
            i, inp, _ = job
            index = inp.config.index
            n = self.seen[index] = self.seen.get(index, 0) + 1
            if index == self.default:
                cost = 3e-3 if n == 1 else 1e-3
            elif self.lucky in (None, index):
                self.lucky = index
                cost = [0.5e-3, 0.95e-3][n - 1] if n <= 2 else 1.2e-3
            else:
                cost = 2e-3
            yield i, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "script")


def test_a_tuned_result_is_never_slower_than_the_default_timed_alike(tmp_path, task):
    # Pooled, the lucky config's costs (0.5, 0.95, 1.2) beat the default's (3, 1, 1) only by its
    # one lucky time; timed alike in the re-measurements the default is faster, so both are
    # measured again until the ranking agrees.
    default = task.config_space.default_config
    runner = _ColdDefaultRunner(default.index)
    with MeasureOptions(_NoBuild(), runner) as options:
        result = autotune.tune(task, trials=6, tuner="random", db=tmp_path / "t.db", measure_option=options,
                               batch_size=6, seed=0, progress=False)
    assert result.best_config.index == default.index
    assert runner.seen[runner.lucky] > 3  # the duel measured it again after its first re-measurements
    with db.open(tmp_path / "t.db") as log, autotune.apply_history_best(log):
        from search_spaces.dispatch import current_context

        assert current_context().query(task.target, task).index == default.index


def test_the_chosen_config_has_been_measured_again(tmp_path, task):
    """Configs that rise into the best few once the first ones were re-measured (and met a slow
    moment) are re-measured too, so the config the log ranks first was never timed only once."""
    script = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3]
    with MeasureOptions(_NoBuild(), _SlowAfterFirstRunner(script)) as options:
        result = autotune.tune(task, trials=len(script), tuner="grid", db=tmp_path / "t.db",
                               measure_option=options, batch_size=len(script), progress=False)
    with db.open(tmp_path / "t.db") as log:
        chosen = autotune.selection.best(log, task, k=3)
    for entry in chosen:
        assert db.REMEASURE in [r.kind for r in entry.records], f"{entry.config} was timed once only"
    assert result.best_config.index == task.config_space.from_json(chosen[0].config).index
    # Pass 1 re-measures the 1, 2 and 3 ms configs (medians now 10, 20 and 30 ms), pass 2 the
    # 4, 5 and 6 ms ones that rose past them, pass 3 the 7 ms one: two rounds each.
    assert result.remeasured == 2 * (3 + 3 + 1)
    assert result.best_cost == pytest.approx(10e-3)


@pytest.mark.parametrize("budget", [None, 2.0])
def test_past_the_time_budget_only_the_winner_is_measured_again(tmp_path, task, budget):
    """The first pass re-measures the best three (1, 2 and 3 ms) at a slow moment, which ranks
    the 4, 5 and 6 ms configs above them. Without a time budget the second pass measures those
    three again; with the budget spent during the first pass (it includes the re-measurement),
    only the one ranked first: the chosen config was still measured again."""
    script = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3]
    with MeasureOptions(_NoBuild(), _SlowAfterFirstRunner(script, slow=3, pause=0.5)) as options:
        result = autotune.tune(task, trials=len(script), tuner="grid", db=tmp_path / "t.db",
                               measure_option=options, batch_size=len(script), time_budget=budget,
                               progress=False)
    assert len(result.history) == len(script)
    assert result.remeasured == 2 * 3 + 2 * (3 if budget is None else 1)
    assert result.best_cost == pytest.approx(4e-3)
    with db.open(tmp_path / "t.db") as log:
        (chosen,) = autotune.selection.best(log, task)
    assert db.REMEASURE in [r.kind for r in chosen.records]


def _interrupt_after(n: int):
    """A tuning callback that raises KeyboardInterrupt (as Ctrl-C does) at the ``n``-th result."""
    count = 0

    def callback(inp, res):
        nonlocal count
        count += 1
        if count == n:
            raise KeyboardInterrupt

    return callback


def test_interrupt_keeps_every_finished_trial(tmp_path, task, options):
    result = autotune.tune(task, trials=12, tuner="random", db=tmp_path / "t.db", measure_option=options,
                           batch_size=4, seed=3, callbacks=[_interrupt_after(3)], progress=False)
    assert result.stopped == "interrupted"
    assert len(result.history) == 3
    assert result.remeasured == 0
    with db.open(tmp_path / "t.db") as log:
        assert log.count(task) == 3  # no final re-measurement after an interrupt
        assert log.runs()[-1].status == "interrupted"


def test_total_finishes_the_budget_of_a_run_cut_short(tmp_path, task):
    log_path = tmp_path / "t.db"

    def tune(callbacks=(), **kwargs):
        with MeasureOptions(_NoBuild(), _ScriptedRunner([float(k + 1) * 1e-3 for k in range(16)])) as opts:
            return autotune.tune(task, trials=6, tuner="random", db=log_path, measure_option=opts, seed=9,
                                 batch_size=1, callbacks=callbacks, progress=False, **kwargs)

    # Interrupted at the second result: the results back with it are kept too (2 to 4 of them).
    cut = tune([_interrupt_after(2)], total=True)
    assert cut.stopped == "interrupted" and 2 <= cut.trials < 6 and cut.resumed == 0
    with db.open(log_path) as log:
        assert log.count(task, kind=db.TRIAL) == cut.trials
    finished = tune(total=True)  # the same call again: the trials left of 6 in all
    assert (finished.stopped, finished.trials, finished.resumed) == ("budget", 6 - cut.trials, cut.trials)
    assert finished.remeasured > 0
    with db.open(log_path) as log:
        assert log.count(task, kind=db.TRIAL) == 6
        before = log.count(task)
    spent = tune(total=True)  # the budget is spent: nothing is measured, not even again
    assert (spent.stopped, spent.trials, spent.resumed, spent.remeasured) == ("budget", 0, 6, 0)
    assert spent.best_config is not None and spent.best_config.index == finished.best_config.index
    more = tune()  # without total: 6 trials more
    assert (more.trials, more.resumed) == (6, 6)
    with db.open(log_path) as log:
        assert log.count(task, kind=db.TRIAL) == 12
        assert log.count(task, kind=db.REMEASURE) == before - 6 + more.remeasured
        assert [r.options["total"] for r in log.runs()] == [True, True, True, False]


def test_a_spent_budget_measures_again_the_best_figures_of_older_code(tmp_path, task):
    """Once the code changed (``measure.code_version``), a run with no trials left times the
    best configs again: their figures become today's alone. Today's timings here are all slower
    than the older ones, so older configs keep rising to the top: each is measured again in
    turn, past the usual passes, until the winner's figure is today's. A second such run
    measures nothing."""
    first = tmp_path / "first.db"
    with MeasureOptions(_NoBuild(), _ScriptedRunner([float(k + 1) * 1e-3 for k in range(40)])) as opts:
        autotune.tune(task, trials=30, tuner="random", db=first, measure_option=opts, seed=9, batch_size=6,
                      progress=False, remeasure=False)
    with db.open(first) as log:  # the same measurements, as an earlier version of the code made them
        older = [db.Record(**{**r.to_dict(), "code_version": "0.0.9+older"}) for r in log.records(task)]
    path = tmp_path / "t.db"
    with db.open(path) as log:
        log.add(older)

    def spent_run():
        with MeasureOptions(_NoBuild(), _ScriptedRunner([float(k + 50) * 1e-3 for k in range(40)])) as opts:
            return autotune.tune(task, trials=30, tuner="random", db=path, measure_option=opts, seed=9,
                                 batch_size=6, progress=False, total=True)

    again = spent_run()
    assert (again.trials, again.resumed) == (0, 30)
    # more configs than the usual passes reach (3 passes and 3 duels of 3 at most, and the default)
    assert again.remeasured > 2 * (6 * 3 + 1)
    with db.open(path) as log:
        assert log.count(task, kind=db.TRIAL) == 30  # no trial: measurements of configs it held
        top = best(log, task, k=3)
        today = measure.code_version()
        for entry in top:  # the best few as today's code times them, the older costs left out
            assert entry.code_version == today and all(r.code_version == today for r in entry.records)
            assert min(entry.costs) >= 50e-3 and entry.median == statistics.median(entry.costs)
        assert again.best_cost == top[0].median
        held = log.count(task)
    assert spent_run().remeasured == 0  # today's figures: nothing to measure again
    with db.open(path) as log:
        assert log.count(task) == held


class _BrokenRunner(Runner):
    """A runner that fails outright (not a failed candidate: the measuring itself breaks)."""

    def run(self, jobs, gates):
        raise RuntimeError("the runner broke")


def test_a_run_stopped_by_an_error_is_recorded_as_failed(tmp_path, task):
    with MeasureOptions(_NoBuild(), _BrokenRunner()) as opts, pytest.raises(RuntimeError, match="broke"):
        autotune.tune(task, trials=4, tuner="random", db=tmp_path / "t.db", measure_option=opts,
                      progress=False)
    with db.open(tmp_path / "t.db") as log:
        (run,) = log.runs()
    assert run.status == "failed" and run.ended is not None


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
    # The default config is measured in the first batch, so the config the log applies has a
    # confident cost (median of all its costs, raised by 10% / sqrt(count)) no worse than the
    # default's, by the same measurements; its median is then at most 10% above the default's.
    from search_spaces.dispatch import current_context

    task = autotune.create_task("matmul", (64, 64, 64, "float32"), "llvm")
    autotune.tune(task, trials=10, tuner="random", db=tmp_path / "t.db", measure_option=options,
                  batch_size=5, seed=5, progress=False)
    default = task.config_space.default_config
    with db.open(tmp_path / "t.db") as log:
        pooled = defaultdict(list)
        for r in log.records(task, errors=False):
            pooled[r.config_index] += r.costs
        with autotune.apply_history_best(log):
            chosen = current_context().query(task.target, task)
    assert default.index in pooled
    confident = {i: statistics.median(c) * (1 + 0.1 / math.sqrt(len(c))) for i, c in pooled.items()}
    assert chosen.index == min(confident, key=confident.get)
    assert confident[chosen.index] <= confident[default.index]
    assert statistics.median(pooled[chosen.index]) <= 1.1 * statistics.median(pooled[default.index])


def test_without_remeasure_the_log_holds_the_trials_only(tmp_path, task):
    with MeasureOptions(_NoBuild(), _ScriptedRunner([3e-3, 2e-3, 1e-3, 4e-3])) as options:
        result = autotune.tune(task, trials=4, tuner="grid", db=tmp_path / "t.db", measure_option=options,
                               batch_size=2, remeasure=False, progress=False)
    assert result.trials == 4 and result.remeasured == 0
    with db.open(tmp_path / "t.db") as log:
        assert [r.kind for r in log.records(task)] == [db.TRIAL] * 4


def test_warm_start_measures_borrowed_configs_first_never_held_ones(task, monkeypatch):
    from autotune import transfer

    log = db.open(":memory:")
    try:
        with MeasureOptions(_NoBuild(), _ScriptedRunner([5e-3] * 20)) as options:
            first = autotune.tune(task, trials=2, tuner="grid", db=log, measure_option=options,
                                  batch_size=2, remeasure=False, progress=False)
            held = [t.config.index for t in first.history]
            proposals = autotune.get_tuner("random", task, seed=3).next_batch(6)
            others = [c for c in proposals if c.index not in held]
            fresh = [c.index for c in others[:2]]
            calls = []

            def warm_start_configs(log_, task_, k):
                calls.append((log_, task_, k))
                return [first.history[0].config, *others[:2]]

            monkeypatch.setattr(transfer, "warm_start_configs", warm_start_configs)
            second = autotune.tune(task, trials=4, tuner="grid", db=log, measure_option=options,
                                   batch_size=2, warm_start=3, remeasure=False, progress=False)
        assert calls == [(log, task, 3)]
        order = [t.config.index for t in second.history]
        assert order[:2] == fresh  # the borrowed configs first, the one the log holds left out
        assert len(order) == 4 and not set(order) & set(held) and len(set(order)) == 4
        with pytest.raises(autotune.AutotuneError, match="warm_start"):
            autotune.tune(task, trials=1, db=log, warm_start=-1, progress=False)
    finally:
        log.close()


def test_warm_start_borrows_from_a_tuned_neighbour(tmp_path, task, options):
    from autotune.transfer import warm_start_configs

    with db.open(tmp_path / "t.db") as log:
        neighbour = autotune.create_task("matmul", (32, 32, 16, "float32"), "llvm")
        autotune.tune(neighbour, trials=4, tuner="random", db=log, measure_option=options, batch_size=4,
                      seed=0, remeasure=False, progress=False)
        borrowed = [c.index for c in warm_start_configs(log, task, 2)]
        assert borrowed
        result = autotune.tune(task, trials=3, tuner="random", db=log, measure_option=options,
                               batch_size=3, seed=0, warm_start=2, remeasure=False, progress=False)
    # The run's one batch of 3: the baseline and the borrowed configs, whichever finished first
    # (history is in the order results arrive).
    measured = [t.config.index for t in result.history]
    default = task.config_space.default_config.index
    assert len(set(measured)) == 3 and {default, *borrowed} <= set(measured), (measured, borrowed)


@pytest.mark.parametrize("tuner", ["grid", "random"])
def test_every_config_of_a_small_space_is_measured_once_the_default_first(tuner):
    task = autotune.create_task("matmul", (16, 16, 8, "float32"), "llvm")
    size = len(task.config_space)
    with MeasureOptions(_NoBuild(), _ScriptedRunner([1e-3 + k * 1e-5 for k in range(size)])) as options:
        result = autotune.tune(task, trials=size + 8, tuner=tuner, db=None, measure_option=options,
                               batch_size=8, seed=2, remeasure=False, progress=False)
    measured = [t.config.index for t in result.history]
    assert measured[0] == task.config_space.default_config.index
    assert sorted(measured) == sorted(task.config_space.valid_indices()) and result.stopped == "exhausted"


def test_the_progress_bar_ends_on_the_ranked_best_not_the_fastest_trial(tmp_path, task, capsys):
    """The fastest single trial (1 ms) is slow when timed again (10 ms): the bar's last figure is
    the median of the config ranked first after the final re-measurements, as the summary's,
    and the re-measurements have a progress line of their own."""
    script = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3]
    with MeasureOptions(_NoBuild(), _SlowAfterFirstRunner(script)) as options:
        result = autotune.tune(task, trials=len(script), tuner="grid", db=tmp_path / "t.db",
                               measure_option=options, batch_size=len(script), progress=True)
    err = capsys.readouterr().err
    assert result.best_cost == pytest.approx(10e-3)
    last = err.replace("\r", "\n").strip().splitlines()
    figures = [line for line in last if "best (ranked median)" in line]
    assert figures and "best (ranked median) 10 ms" in figures[-1]
    assert "best (ranked median) 1 ms" in err  # what it showed before the re-measurements
    assert "re-measuring the best configs: 100%" in err and f"{result.remeasured}/{result.remeasured}" in err
