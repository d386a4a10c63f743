"""Tuners: valid, fresh configs within budget; determinism; history, transfer and the registry."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import optuna
import pytest

import search_spaces
from autotune.errors import AutotuneError
from autotune.tuner import TUNERS, GATuner, OptunaTuner, Tuner, XGBTuner, get_tuner
from compiler import te

# Fast settings: knob features and a short annealing search (itervar has its own test).
FAST = {
    "random": {}, "grid": {}, "ga": {"pop_size": 12},
    "xgb": {"feature_type": "knob", "min_train": 8, "plan_size": 16, "sa_chains": 8, "sa_iters": 15},
    "optuna": {},
}


@dataclass
class Input:
    config: object
    task: object = None


@dataclass
class Result:
    costs: list = field(default_factory=list)
    error_kind: str | None = None


def fake_cost(config) -> float | None:
    """A smooth synthetic cost of a matmul config; None (a failure) for a few configs.

    Fastest for a microkernel of 8 x 32 with unblocked K and A unpacked; each step away costs more.
    """
    if config.index % 11 == 0:
        return None
    if "mr" not in config:  # the tiny template
        return 1e-3 * (1 + config.index)
    tile = math.log2(config["mr"].val * config["nr"].val)
    blocked_k = config["kc"].val < 128
    return 1e-3 * (1 + abs(tile - 8)) * (1.5 if blocked_k else 1.0) * (1.2 if config["pack_a"].val else 1.0)


def measure(configs):
    inputs = [Input(c) for c in configs]
    results = []
    for c in configs:
        cost = fake_cost(c)
        results.append(Result([cost]) if cost is not None else Result([], "build"))
    return inputs, results


def run(tuner, budget: int, batch: int) -> list[list[int]]:
    """Drive ``tuner`` like tune() does; checks every batch and returns their indices."""
    batches = []
    seen: set[int] = set()
    while budget > 0 and tuner.has_next():
        configs = tuner.next_batch(min(batch, budget))
        assert configs, "has_next() was True but the batch is empty"
        assert len(configs) <= min(batch, budget)
        for c in configs:
            assert tuner.space.is_valid(c.index)
            assert c.index not in seen and c.index not in tuner.measured
            assert c.knob_values() == tuner.space.from_index(c.index).knob_values()
        seen.update(c.index for c in configs)
        tuner.update(*measure(configs))
        budget -= len(configs)
        batches.append([c.index for c in configs])
    return batches


@pytest.fixture(scope="module")
def task():
    # A pinned CPU: the same space, so the same batches, on every machine.
    return search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm -mcpu=znver4")


@pytest.fixture(scope="module")
def tiny_task():
    """A template with 8 valid configs: a 5-way split and a flag, minus two by a constraint."""

    @search_spaces.template("test_tuners_tiny")
    def tiny(n: int):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        cfg = search_spaces.get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg.define_knob("unroll", [False, True])
        cfg.add_constraint(lambda c: not (c["unroll"].val and c["tile"].size[-1] > 4),
                           knobs=["tile", "unroll"], name="small_unroll")
        _, xi = cfg["tile"].apply(s, B, B.op.axis[0])
        if cfg["unroll"].val:
            s[B].unroll(xi)
        return s, [A, B]

    yield search_spaces.create_task("test_tuners_tiny", (16,), "llvm")
    search_spaces.unregister_template("test_tuners_tiny")


@pytest.mark.parametrize("name", list(TUNERS))
def test_valid_fresh_configs_within_budget(name, task):
    tuner = get_tuner(name, task, seed=0, **FAST[name])
    batches = run(tuner, budget=45, batch=16)
    assert [len(b) for b in batches] == [16, 16, 13]
    assert len(tuner.measured) == 45
    assert tuner.best_cost == min(c for c in map(fake_cost, map(task.config_space.from_index, tuner.measured))
                                  if c is not None)


@pytest.mark.parametrize("name", list(TUNERS))
def test_same_seed_same_batches(name, task):
    first = run(get_tuner(name, task, seed=3, **FAST[name]), budget=40, batch=10)
    again = run(get_tuner(name, task, seed=3, **FAST[name]), budget=40, batch=10)
    assert first == again
    if name != "grid":
        other = run(get_tuner(name, task, seed=4, **FAST[name]), budget=40, batch=10)
        assert other != first


@pytest.mark.parametrize("name", list(TUNERS))
def test_exhausts_a_small_space_once(name, tiny_task):
    space = tiny_task.config_space
    assert space.size == 8
    tuner = get_tuner(name, tiny_task, seed=0, **(FAST[name] if name != "xgb" else
                                                   {"min_train": 2, "sa_chains": 4, "sa_iters": 5}))
    proposed = []
    while tuner.has_next():
        configs = tuner.next_batch(3)
        assert configs
        proposed += [c.index for c in configs]
        tuner.update([Input(c) for c in configs], [Result([1e-3 * (1 + c.index)]) for c in configs])
    assert sorted(proposed) == sorted(c.index for c in space)
    assert tuner.next_batch(3) == []


def test_grid_walks_index_order(tiny_task):
    space = tiny_task.config_space
    tuner = get_tuner("grid", tiny_task)
    walked = [c.index for c in tuner.next_batch(8)]
    assert walked == [c.index for c in space] == [space.get(i).index for i in range(len(space))]
    assert len(set(walked)) == len(space) < space.raw_size


def test_load_history_marks_configs_measured(task):
    space = task.config_space
    earlier = space.sample(30, np.random.default_rng(9))
    pairs = [(c.to_json() if k % 2 else c, Result([1e-3 + k * 1e-5])) for k, c in enumerate(earlier)]
    pairs.append((earlier[0].to_json() | {"knobs": {"tile_y": [1, 1, 1]}}, 1.0))  # not in the space: skipped
    for name in TUNERS:
        tuner = get_tuner(name, task, seed=1, **FAST[name])
        tuner.load_history(pairs)
        assert tuner.measured == {c.index for c in earlier}
        assert tuner.best_config == earlier[0] and tuner.best_cost == pytest.approx(1e-3)
        batch = tuner.next_batch(20)
        assert len(batch) == 20 and not {c.index for c in batch} & tuner.measured


def test_failures_count_as_slowest(task):
    tuner = GATuner(task, seed=0, pop_size=8)
    configs = tuner.next_batch(8)
    tuner.update([Input(c) for c in configs],
                 [Result([], "runtime")] + [Result([1e-3])] * 6 + [Result([2e-4], None)])
    assert tuner.best_config == configs[-1] and tuner.costs[configs[0].index] is None
    # The next generation breeds from the successes only (fitness 0 is never drawn).
    tuner.next_batch(8)
    assert tuner.best_cost == pytest.approx(2e-4)


def test_registry_and_binding(task, tiny_task):
    assert set(TUNERS) == {"random", "grid", "ga", "xgb", "optuna"}
    for name in TUNERS:
        tuner = get_tuner(name, task, seed=0)
        assert isinstance(tuner, Tuner) and tuner.name == name and tuner.task is task
    with pytest.raises(AutotuneError, match="unknown tuner 'annealing'"):
        get_tuner("annealing", task)
    with pytest.raises(AutotuneError, match="a tuner is a name"):
        get_tuner(42, task)
    assert isinstance(get_tuner(XGBTuner, task, seed=0, feature_type="knob"), XGBTuner)

    unbound = OptunaTuner(sampler=optuna.samplers.RandomSampler(seed=5))
    with pytest.raises(AutotuneError, match="not bound to a task"):
        unbound.next_batch(2)
    bound = get_tuner(unbound, task, seed=0)
    assert bound is unbound and len(bound.next_batch(4)) == 4
    with pytest.raises(AutotuneError, match="make one tuner per task"):
        get_tuner(bound, tiny_task)
    with pytest.raises(TypeError, match="unknown options: colour"):
        get_tuner("random", task, colour="blue")


def test_optuna_tells_failures_and_constraints(tiny_task):
    from optuna.trial import TrialState

    tuner = OptunaTuner(tiny_task, seed=0)
    configs = tuner.next_batch(4)
    tuner.update([Input(c) for c in configs], [Result([], "build")] + [Result([1e-3])] * 3)
    states = [t.state for t in tuner.sampler_study.trials]
    assert states.count(TrialState.FAIL) == 1 and states.count(TrialState.COMPLETE) >= 3
    run(tuner, budget=4, batch=4)  # the rest of the space; invalid asks are pruned, never returned
    assert not tuner.has_next()
    assert TrialState.PRUNED in {t.state for t in tuner.sampler_study.trials}


def test_optuna_accepts_other_samplers(task):
    tuner = get_tuner(OptunaTuner(sampler=optuna.samplers.NSGAIISampler(seed=0),
                                  knob_distribution="int"), task, seed=0)
    assert len(run(tuner, budget=24, batch=8)) == 3


def test_xgb_itervar_search(task):
    tuner = XGBTuner(task, seed=0, min_train=8, plan_size=16, sa_chains=6, sa_iters=8, epsilon=0.25)
    first = run(tuner, budget=32, batch=16)
    assert tuner.model.trained and len(tuner.model.features) > 32  # the search scored unmeasured configs
    again = run(XGBTuner(task, seed=0, min_train=8, plan_size=16, sa_chains=6, sa_iters=8, epsilon=0.25),
                budget=32, batch=16)
    assert first == again


def test_xgb_search_lowers_only_the_surrogates_shortlist(task):
    """Scoring a config by itervar features lowers it: the knob-feature surrogate scores what the
    search visits, and only its best two plans' worth are lowered and ranked by the model."""
    settings = dict(seed=0, min_train=8, plan_size=8, sa_chains=6, sa_iters=8, epsilon=0.0)
    tuner = XGBTuner(task, sa_shortlist=2, **settings)
    run(tuner, budget=16, batch=8)
    surrogate = tuner.shared.surrogate()
    assert surrogate is not None and surrogate.features.feature_type == "knob"
    state, lowered = tuner.rng.bit_generator.state, len(tuner.model.features)
    plan = tuner._search(8)
    assert len(plan) == 8 and not set(plan) & tuner._visited
    assert 0 < len(tuner.model.features) - lowered <= 2 * 8
    tuner.rng.bit_generator.state = state  # the same walk again: the shortlist the search ranked
    shortlist = tuner._candidates(surrogate, 2 * 8)
    # The model ranked the shortlist with the unvisited configs lowered before, for free.
    ranked = [i for i in tuner.model.features.cached(task) if i not in tuner._visited]
    assert set(shortlist) <= set(ranked) and set(plan) <= set(ranked)
    scores = dict(zip(ranked, tuner.model.predict(task, ranked)))
    assert min(scores[i] for i in plan) >= max(scores[i] for i in ranked if i not in plan)

    plain = XGBTuner(task, sa_shortlist=0, **settings)  # the model scores every config visited
    run(plain, budget=16, batch=8)
    assert plain.shared.surrogate() is not None  # (it exists; the tuner does not ask for it)
    lowered = len(plain.model.features)
    plain._search(8)
    assert len(plain.model.features) - lowered > 2 * 8


def test_xgb_shortlist_shrinks_to_what_features_cost(task, monkeypatch):
    """Where lowering a config for its features is slow, the model ranks only as many of the
    surrogate's best as SEARCH_FEATURE_SECONDS allows, and never fewer than a batch."""
    import autotune.tuner.xgb_tuner as xgb_module

    settings = dict(seed=0, min_train=8, plan_size=32, sa_chains=6, sa_iters=8, epsilon=0.0, sa_shortlist=2)
    tuner = XGBTuner(task, **settings)
    run(tuner, budget=16, batch=8)
    per_row = tuner.model.features.seconds_per_row
    assert per_row is not None and per_row > 0
    # Cheap features (a budget of a thousand rows, whatever this machine's speed): the whole shortlist.
    monkeypatch.setattr(xgb_module, "SEARCH_FEATURE_SECONDS", per_row * 1000)
    assert tuner._shortlist_size(32) == 64
    monkeypatch.setattr(xgb_module, "SEARCH_FEATURE_SECONDS", per_row * 20)
    assert tuner._shortlist_size(32) in (19, 20, 21)  # (the estimate moves as rows are computed)
    monkeypatch.setattr(xgb_module, "SEARCH_FEATURE_SECONDS", 1e-9)
    assert tuner._shortlist_size(32) == tuner.default_batch_size
    lowered = len(tuner.model.features)
    plan = tuner._search(32)
    assert 0 < len(tuner.model.features) - lowered <= tuner.default_batch_size
    assert len(plan) >= tuner.default_batch_size and not set(plan) & tuner._visited


def test_xgb_plans_the_models_best_of_a_small_space(task):
    """Where the space holds no more unvisited configs than an annealing search would score,
    the plan is the model's best of all of them."""
    tuner = XGBTuner(task, seed=0, feature_type="knob", min_train=8, plan_size=16, sa_chains=2, sa_iters=160)
    run(tuner, budget=24, batch=8)
    rest = [i for i in range(task.config_space.raw_size)
            if task.config_space.is_valid(i) and i not in tuner.measured]
    assert len(rest) <= 2 * 160  # two short annealing chains would not meet them all
    plan = tuner._search(16)
    assert len(plan) == 16 and not set(plan) & tuner.measured
    scores = dict(zip(rest, tuner.model.predict(task, rest)))
    assert min(scores[i] for i in plan) >= max(scores[i] for i in rest if i not in plan)


def test_xgb_pretrain_on_other_workloads(task, cost_dataset):
    other, data = cost_dataset
    records = [({"index": r["index"], "knobs": r["knobs"]}, other, r["cost"]) for r in data]
    records.append(({"knobs": {}}, other, 1.0))  # not in the space: skipped
    tuner = XGBTuner(task, seed=0, feature_type="knob", plan_size=16, sa_chains=8, sa_iters=15, epsilon=0.0)
    tuner.pretrain(records)
    batch = tuner.next_batch(8)  # no own measurement yet: the pre-trained model picks them
    assert tuner.model.trained and len(batch) == 8
    scores = tuner.model.predict(task, [c.index for c in batch])
    rand = tuner.model.predict(task, task.config_space.sample_indices(64, np.random.default_rng(0)))
    assert scores.mean() > np.median(rand)
