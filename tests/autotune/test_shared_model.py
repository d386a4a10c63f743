"""Tasks of one template tuned together share one cost model (autotune.tuner.shared)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from scipy.stats import spearmanr

import autotune
import db
import search_spaces
from autotune.selection import record_of
from autotune.tuner import RandomTuner, XGBTuner
from autotune.tuner.cost_model import XGBCostModel
from autotune.tuner.shared import SharedModels, log_records
from measure import MeasureOptions, MeasureResult

TARGET = "llvm -mcpu=znver4"  # a pinned CPU: the same spaces on every machine
FAST = {"feature_type": "knob", "min_train": 8, "plan_size": 16, "sa_chains": 8, "sa_iters": 15}


@dataclass
class Input:
    config: object


@dataclass
class Result:
    costs: list = field(default_factory=list)
    error_kind: str | None = None


def matmul(m: int, n: int = 64, k: int = 64):
    return search_spaces.create_task("matmul", (m, n, k, "float32"), TARGET)


def fake_cost(task, config, scale: float = 1.0) -> float:
    """Seconds of a matmul config: the same knobs are fast for every shape (an 8-row microkernel,
    A unpacked, rows in parallel), the work scales with the shape."""
    penalty = (1 + abs(math.log2(config["mr"].val) - 3)) * (1.3 if config["pack_a"].val else 1.0)
    penalty *= {"rows": 1.0, "cols": 1.4, "none": 2.0}[config["parallel_axis"].val]
    return scale * task.flop * 1e-12 * penalty


def measure(tuner, configs, scale: float = 1.0) -> None:
    tuner.update([Input(c) for c in configs], [Result([fake_cost(tuner.task, c, scale)]) for c in configs])


def history(task, indices, scale: float = 1.0) -> list:
    """``(config, seconds)`` pairs of ``indices`` of ``task``'s space, for ``load_history``."""
    space = task.config_space
    return [(space.from_index(i), fake_cost(task, space.from_index(i), scale)) for i in indices]


@pytest.fixture
def count_fits(monkeypatch):
    """The number of cost-model fits made so far (every XGBCostModel in the test)."""
    calls = []
    fit = XGBCostModel.fit

    def counted(self, groups):
        calls.append(self)
        return fit(self, groups)

    monkeypatch.setattr(XGBCostModel, "fit", counted)
    return calls


def test_two_tasks_share_one_model_fitted_once_per_round(count_fits):
    def rounds(share: bool, n: int) -> list[list[int]]:
        shared = SharedModels()
        tuners = [XGBTuner(matmul(m), seed=0, share_model=share, **FAST) for m in (64, 128)]
        assert [shared.attach(t) for t in tuners] == [share, share]
        batches = []
        for _ in range(n):  # both propose, then both are measured: a round of a pipelined run
            proposed = [t.next_batch(8) for t in tuners]
            for t, configs in zip(tuners, proposed):
                measure(t, configs)
            batches.append([c.index for configs in proposed for c in configs])
        assert (tuners[0].model is tuners[1].model) == share
        return batches

    shared = rounds(True, 4)
    assert len(count_fits) == 3  # rounds 2, 3 and 4: one fit each, on both tasks' results
    assert len(set(map(id, count_fits))) == 1
    count_fits.clear()
    rounds(False, 4)
    assert len(count_fits) == 6 and len(set(map(id, count_fits))) == 2  # one model each
    assert rounds(True, 4) == shared  # the same seed, the same batches


def test_the_model_is_fitted_again_once_its_data_grew_by_a_quarter(count_fits):
    task = matmul(64)
    tuner = XGBTuner(task, seed=0, **FAST)
    SharedModels().attach(tuner)
    tuner.load_history(history(task, task.config_space.sample_indices(40, np.random.default_rng(1))))
    grown = []
    for _ in range(4):  # 40 records, then 44, 48, 52: REFIT_GROWTH more than 40 is 50
        count_fits.clear()
        measure(tuner, tuner.next_batch(4))
        grown.append(len(count_fits))
    assert grown == [1, 0, 0, 1]


def test_a_task_without_data_searches_with_its_siblings_model():
    a, b = matmul(64), matmul(128)
    shared = SharedModels()
    tuned = XGBTuner(a, seed=0, **FAST)
    shared.attach(tuned)
    tuned.load_history(history(a, a.config_space.sample_indices(40, np.random.default_rng(1))))
    new = XGBTuner(b, seed=0, epsilon=0.0, **FAST)
    shared.attach(new)
    alone = XGBTuner(b, seed=0, epsilon=0.0, **FAST)

    picks = new.next_batch(8)  # no measurement of b yet: the model trained on a's picks them
    assert new.model.trained and not new.measured
    alone.next_batch(8)
    assert not alone.model.trained  # alone, the first batch is random
    costs = [fake_cost(b, c) for c in picks]
    everything = [fake_cost(b, c) for c in b.config_space]
    assert np.mean(costs) < np.quantile(everything, 0.25), (costs, np.median(everything))


@pytest.mark.parametrize("loss_type", ["reg", "rank"])
def test_a_slow_workloads_records_do_not_swamp_a_fast_ones_ranking(loss_type):
    """Each workload's labels are relative to its own best: scaling a sibling's costs a
    thousandfold (a slow workload) changes nothing of the model, and with ten times as many
    records as the fast workload it still ranks the fast one's configs by their own costs."""
    slow, fast = matmul(128), matmul(64)
    rng = np.random.default_rng(2)
    slow_indices = slow.config_space.sample_indices(200, rng)
    fast_indices = fast.config_space.sample_indices(100, rng)
    train, held_out = fast_indices[:20], fast_indices[20:]

    def scores(scale: float) -> np.ndarray:
        shared = SharedModels()
        tuners = [XGBTuner(t, seed=0, loss_type=loss_type, **FAST) for t in (slow, fast)]
        for t in tuners:
            shared.attach(t)
        tuners[0].load_history(history(slow, slow_indices, scale))
        tuners[1].load_history(history(fast, train))
        tuners[1].next_batch(1)  # fits the model
        return tuners[1].model.predict(fast, held_out)

    same, slower = scores(1.0), scores(1000.0)
    np.testing.assert_allclose(same, slower)
    truth = [-fake_cost(fast, fast.config_space.from_index(i)) for i in held_out]
    assert spearmanr(slower, truth).statistic > 0.5


def _log_with(task, indices) -> db.TuningLog:
    log = db.open(":memory:")
    for config, cost in history(task, indices):
        log.add(record_of(task, config, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "test")))
    return log


def test_the_logs_nearest_workloads_warm_start_the_model_first():
    """Where the log holds more records than the model takes, it takes the nearest shapes'."""
    far, nearer, tuned = matmul(512, 256, 256), matmul(128), matmul(96)
    log = db.open(":memory:")
    for task in (far, nearer):
        for config, cost in history(task, task.config_space.sample_indices(20, np.random.default_rng(1))):
            log.add(record_of(task, config, MeasureResult((cost,), None, "", 0.0, 0.0, time.time(), "test")))
    with log:
        keys = lambda records: {task.workload_key for _, task, _ in records}  # noqa: E731
        assert keys(log_records(log, "matmul", "llvm", set(), 20, near=[tuned.args])) == {nearer.workload_key}
        assert keys(log_records(log, "matmul", "llvm", set(), 20, near=[far.args])) == {far.workload_key}
        both = log_records(log, "matmul", "llvm", {nearer.workload_key}, 100, near=[tuned.args])
        assert keys(both) == {far.workload_key} and len(both) == 20  # an excluded workload is skipped

        tuner = XGBTuner(tuned, seed=0, **FAST)
        SharedModels(log, limit=20).attach(tuner)
        tuner.next_batch(4)
        assert set(tuner.shared.others) == {nearer.workload_key}


def test_the_shared_model_starts_from_the_logs_other_workloads():
    tuned, new = matmul(64), matmul(128)
    with _log_with(tuned, tuned.config_space.sample_indices(40, np.random.default_rng(3))) as log:
        tuner = XGBTuner(new, seed=0, epsilon=0.0, **FAST)
        assert SharedModels(log).attach(tuner)
        picks = tuner.next_batch(8)
        assert tuner.model.trained and not tuner.measured
        everything = [fake_cost(new, c) for c in new.config_space]
        assert np.mean([fake_cost(new, c) for c in picks]) < np.quantile(everything, 0.25)
        # The log's records of another template train nothing.
        softmax = XGBTuner(search_spaces.create_task("softmax", (8, 32, "float32"), TARGET), seed=0, **FAST)
        SharedModels(log).attach(softmax)
        softmax.next_batch(4)
        assert not softmax.model.trained
    # Nor do those of the tuner's own workload: they are its history (tune() loads them as such).
    with _log_with(new, new.config_space.sample_indices(40, np.random.default_rng(3))) as log:
        own = XGBTuner(new, seed=0, **FAST)
        SharedModels(log).attach(own)
        own.next_batch(4)
        assert not own.model.trained


def test_pretrain_on_an_attached_tuner_trains_its_siblings_too():
    a, b, other = matmul(64), matmul(128), matmul(64, 64, 128)
    shared = SharedModels()
    first, second = XGBTuner(a, seed=0, **FAST), XGBTuner(b, seed=0, **FAST)
    shared.attach(first)
    shared.attach(second)
    indices = other.config_space.sample_indices(30, np.random.default_rng(4))
    first.pretrain([(c, other, cost) for c, cost in history(other, indices)])
    second.next_batch(4)
    assert second.model.trained and first.model is second.model


def test_only_learning_tuners_attach():
    shared = SharedModels()
    assert not shared.attach(RandomTuner(matmul(64), seed=0))
    assert not shared.attach(XGBTuner(matmul(64), seed=0, share_model=False, **FAST))
    assert shared.attach(XGBTuner(matmul(64), seed=0, **FAST))
    knob, itervar = XGBTuner(matmul(128), seed=0, **FAST), XGBTuner(matmul(128), seed=0)
    assert shared.attach(knob) and shared.attach(itervar)
    assert knob.model is not itervar.model  # other features: another model


class _FastXGB(XGBTuner):
    """The xgb tuner with a short search, remembering every instance made."""

    made: list = []

    def __init__(self, task=None, seed=None, **options):
        super().__init__(task, seed, **{**FAST, "min_train": 4, "plan_size": 8, **options})
        _FastXGB.made.append(self)


def test_tune_tasks_shares_one_model_with_real_workers(tmp_path):
    tasks = [autotune.create_task("matmul", (16, 16, k, "float32"), "llvm") for k in (16, 32)]
    _FastXGB.made = []
    with MeasureOptions() as options:
        results = autotune.tune_tasks(tasks, trials=16, tuner=_FastXGB, db=tmp_path / "t.db",
                                      measure_option=options, batch_size=4, seed=0, remeasure=False,
                                      progress=False)
        assert all(r.trials >= 4 and r.best_gflops > 0 for r in results)
        assert sum(r.trials for r in results) == 16
        first, second = _FastXGB.made
        assert first.model is second.model and first.model.trained
        # A later run's task starts from the log's records of both: trained before its own min_train.
        new = autotune.create_task("matmul", (16, 32, 16, "float32"), "llvm")
        autotune.tune(new, trials=4, tuner=_FastXGB, db=tmp_path / "t.db", measure_option=options,
                      batch_size=4, seed=0, remeasure=False, progress=False)
    # Its one batch was proposed before any result of its own: only the log can have trained it.
    late = _FastXGB.made[-1]
    assert late.task == new and len(late.measured) == 4
    assert late.model.trained and late.model is not first.model


def test_pre_training_takes_only_the_records_whose_features_it_can_afford(monkeypatch):
    """Each record of another workload costs a lowering before the first fit: the model takes the
    first records (the nearest shapes') that fit PRETRAIN_SECONDS, never fewer than PRETRAIN_MIN,
    and all of them where features are cheap."""
    import autotune.tuner.shared as shared_module

    tuned, new = matmul(64), matmul(128)
    options = {**FAST, "feature_type": "itervar", "feature_workers": 0}
    with _log_with(tuned, tuned.config_space.sample_indices(40, np.random.default_rng(3))) as log:
        # Affordable whatever the machine: a first lowering in a busy worker took 0.9 s in CI,
        # where 20 s had then afforded only 22 of the 40.
        monkeypatch.setattr(shared_module, "PRETRAIN_SECONDS", 1e9)
        everything = XGBTuner(new, seed=0, **options)
        SharedModels(log).attach(everything)
        everything.next_batch(4)
        assert [len(g.indices) for g in everything.shared.others.values()] == [40]

        monkeypatch.setattr(shared_module, "PRETRAIN_SECONDS", 1e-9)  # a lowering costs more than that
        afforded = XGBTuner(new, seed=0, **options)
        SharedModels(log).attach(afforded)
        afforded.next_batch(4)
        (group,) = afforded.shared.others.values()
        assert len(group.indices) == shared_module.PRETRAIN_MIN
        first = list(everything.shared.others.values())[0]
        assert group.indices == first.indices[:shared_module.PRETRAIN_MIN]
        assert afforded.model.trained


def test_a_fit_computes_only_the_features_it_can_afford_and_the_rest_join_later(monkeypatch):
    """A run resumed from a large log: the first fit computes the features of the newest records
    that fit FIT_FEATURE_SECONDS (never fewer than FIT_MIN_NEW_ROWS) instead of all of them, and
    the fits that follow add more, until every record is trained on."""
    import autotune.tuner.shared as shared_module
    from autotune.tuner.cost_model import Group
    from autotune.tuner.shared import SharedCostModel

    monkeypatch.setattr(shared_module, "FIT_FEATURE_SECONDS", 1e-9)  # a lowering costs more than that
    monkeypatch.setattr(shared_module, "FIT_MIN_NEW_ROWS", 6)
    task = matmul(64)
    indices = task.config_space.sample_indices(40, np.random.default_rng(5))
    costs = [cost for _, cost in history(task, indices)]
    model = XGBCostModel("itervar", feature_workers=0, num_rounds=10)
    shared = SharedCostModel(model, task.template)
    group = Group(task, list(indices[:30]), costs[:30])  # the 30 records the log held
    shared.join(group)

    assert shared.refresh(min_train=1)
    # one row timed to price the rest, then 6: the newest 7 records
    assert sorted(model.features.cached(task)) == sorted(indices[23:30])
    assert len(group.indices) == 30  # the records left out stay for later fits

    trained = []
    for k in range(30, 40, 2):  # new results, two at a time: a fit adds the 6 newest it lacks
        shared.record(group, list(indices[k:k + 2]), costs[k:k + 2])
        if shared.refresh(min_train=1):
            cached = set(model.features.cached(task))
            assert set(indices[k:k + 2]) <= cached  # the new results first
            trained.append(len(cached))
    assert len(trained) >= 2 and trained == sorted(set(trained)) and trained[-1] < 40

    monkeypatch.setattr(shared_module, "FIT_FEATURE_SECONDS", 1e9)  # features cheap: all at the next fit
    shared.record(group, [], [])  # a change: the data it can train on now grew by a quarter at least
    assert shared.refresh(min_train=1)
    assert sorted(model.features.cached(task)) == sorted(set(indices))
