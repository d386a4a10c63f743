"""AutoTVM's tuner API and XGBoostCostModel, written as AutoTVM code with only the imports renamed:
index-based tuners over AutoTVM's config indices, and a cost model fitted on real measurements."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import autotvm
from autotune.autotvm.tuner import XGBoostCostModel
from compiler import te
from search_spaces import unregister_template

N = 512  # 6 split choices x 2 loop orders: 12 configs


@pytest.fixture(scope="module")
def task():
    @autotvm.template("test_autotvm_tuners/axpy")
    def axpy(n):
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        C = te.compute((n, n), lambda i, j: A[i, j] * 3.0 + B[i, j], name="C")
        s = te.create_schedule(C.op)
        cfg = autotvm.get_config()
        i, j = C.op.axis
        cfg.define_split("tile", j, num_outputs=2, filter=lambda x: x.size[-1] in (1, 4, 16, 64, 256, 512))
        cfg.define_knob("order", [0, 1])
        jo, ji = cfg["tile"].apply(s, C, j)
        if cfg["order"].val:  # down the columns: each element on its own cache line, ~40x slower
            s[C].reorder(jo, ji, i)
        cfg.add_flop(2 * n * n)
        return s, [A, B, C]

    yield autotvm.task.create("test_autotvm_tuners/axpy", args=(N,), target="llvm")
    unregister_template("test_autotvm_tuners/axpy")


@pytest.fixture(scope="module")
def option():
    with autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1),
                                runner=autotvm.LocalRunner(number=2, repeat=1, cooldown_interval=0)) as opt:
        yield opt


@pytest.fixture(scope="module")
def measured(task, option):
    """Every config of the task measured once, in index order: [(MeasureInput, MeasureResult)]."""
    pairs = []
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=len(task.config_space), measure_option=option,
               callbacks=[lambda t, inputs, results: pairs.extend(zip(inputs, results))])
    return pairs


def test_grid_search_visits_indices_in_order(task):
    assert len(task.config_space) == 12
    tuner = autotvm.tuner.GridSearchTuner(task)
    seen = []
    while tuner.has_next():
        seen += [c.index for c in tuner.next_batch(5)]
    assert seen == list(range(12))
    assert tuner.next_batch(5) == []

    tuner = autotvm.tuner.GridSearchTuner(task, range_idx=(3, 7))
    assert [c.index for c in tuner.next_batch(10)] == [3, 4, 5, 6, 7] and not tuner.has_next()
    # AutoTVM's index: the first knob varies fastest (6 tile choices, then order)
    c = task.config_space.get(7)
    assert list(c["tile"].size[1:]) == [4] and c["order"].val == 1


def test_random_tuner_draws_its_range_once_each(task):
    tuner = autotvm.tuner.RandomTuner(task, range_idx=(2, 9))
    drawn = []
    while tuner.has_next():
        drawn += [c.index for c in tuner.next_batch(3)]
    assert sorted(drawn) == list(range(2, 10)) and tuner.visited == drawn
    assert tuner.next_batch(3) == []
    whole = autotvm.tuner.RandomTuner(task)
    assert sorted(c.index for c in whole.next_batch(100)) == list(range(12))


@pytest.mark.parametrize("bad", [(5, 5), (-1, 3), (3, 12), [1], "0-3"])
def test_range_idx_must_be_an_increasing_pair_inside_the_space(task, bad):
    with pytest.raises(ValueError, match="range_idx"):
        autotvm.tuner.GridSearchTuner(task, range_idx=bad)


def test_tuning_stays_in_range_and_keeps_the_best(task, option):
    calls = []
    tuner = autotvm.tuner.GridSearchTuner(task, range_idx=(4, 6))
    tuner.tune(n_trial=20, measure_option=option,
               callbacks=[lambda t, inputs, results: calls.extend(i.config.index for i in inputs)])
    assert calls == [4, 5, 6]  # AutoTVM's tune measures the tuner's picks only
    assert tuner.best_flops > 0 and 4 <= tuner.best_config.index <= 6
    inp, res = tuner.best_measure_pair
    assert inp.config == tuner.best_config and res.error_no == 0
    assert tuner.best_flops == pytest.approx(task.flop / np.mean(res.costs))

    rand = autotvm.tuner.RandomTuner(task, range_idx=(6, 11))
    picked = []
    rand.tune(n_trial=3, measure_option=option,
              callbacks=[lambda t, inputs, results: picked.extend(i.config.index for i in inputs)])
    assert len(picked) == 3 and len(set(picked)) == 3 and all(6 <= i <= 11 for i in picked)
    rand.reset()
    assert rand.best_config is None and rand.best_flops == 0 and rand.best_measure_pair is None


def test_a_manual_loop_with_update_and_load_history(task, measured):
    tuner = autotvm.tuner.RandomTuner(task)
    batch = tuner.next_batch(3)
    by_index = {inp.config.index: (inp, res) for inp, res in measured}
    inputs = [by_index[c.index][0] for c in batch]
    failed = autotvm.MeasureResult(("build failed",), int(autotvm.MeasureErrorNo.COMPILE_HOST), None, 0.0)
    results = [by_index[batch[0].index][1], failed, by_index[batch[2].index][1]]
    tuner.update(inputs, results)  # AutoTVM's results, an error among them
    assert tuner.measured == {c.index for c in batch}
    xgb = autotvm.tuner.XGBTuner(task, plan_size=4, feature_type="knob", loss_type="reg", num_threads=1)
    xgb.load_history(measured[:6])
    assert xgb.measured == {inp.config.index for inp, _ in measured[:6]}
    assert all(c.index not in xgb.measured for c in xgb.next_batch(4))
    curve = autotvm.tuner.XGBTuner(task, plan_size=4, feature_type="curve", loss_type="rank")
    curve.load_history(measured[:8])
    assert curve.feature_type == "curve"
    assert all(c.index not in curve.measured for c in curve.next_batch(4))


def _orders_clear_gaps(pred, ys, gap: float = 2.0) -> float:
    """The share of the pairs of configs measured at least ``gap`` times apart in throughput
    that ``pred`` puts in the same order. The axpy configs of one loop order run at one
    memory-bound speed, a few percent apart: their order is timing noise, which no model can learn."""
    pairs = [(i, j) for i in range(len(ys)) for j in range(len(ys)) if ys[j] >= gap * ys[i]]
    assert pairs, f"no two configs are {gap}x apart: {ys}"
    return sum(pred[i] < pred[j] for i, j in pairs) / len(pairs)


@pytest.mark.parametrize("feature_type,loss_type", [("itervar", "rank"), ("knob", "reg"), ("curve", "rank")])
def test_xgboost_cost_model_fits_real_measurements(task, measured, feature_type, loss_type):
    xs = [inp.config.index for inp, _ in measured]
    ys = [task.flop / np.mean(res.costs) if res.error_no == 0 else 0.0 for _, res in measured]
    assert sorted(xs) == list(range(12)) and min(ys) > 0

    model = XGBoostCostModel(task, feature_type=feature_type, loss_type=loss_type, num_threads=1)
    assert model.bst is None
    model.fit(xs, ys, plan_size=4)
    pred = model.predict(xs)
    assert pred.shape == (12,) and np.isfinite(pred).all()
    assert _orders_clear_gaps(pred, ys) >= 2 / 3  # it learned its training data's order
    if loss_type == "reg":  # regression of the throughput relative to the best
        np.testing.assert_allclose(pred, np.asarray(ys) / max(ys), atol=0.25)
    margin = model.predict(xs, output_margin=True)
    assert margin.shape == (12,)
    if feature_type == "curve":  # the model's rows are autotvm.feature's curve vectors
        rows, ok = model.feature_cache.get(task, xs[:3])
        assert ok.all()
        for x, row in zip(xs[:3], rows):
            s, args = task.instantiate(task.config_space.from_index(x))
            np.testing.assert_array_equal(row, autotvm.feature.get_buffer_curve_sample_flatten(s, args))

    fresh = model.clone_new()
    assert fresh.bst is None and fresh.fea_type == feature_type and fresh.loss_type == loss_type
    assert fresh.fit_log(measured, plan_size=4) is False  # fewer than 500 records
    assert fresh.fit_log(measured, plan_size=4, min_seed_records=10) is True
    assert _orders_clear_gaps(fresh.predict(xs), ys) >= 2 / 3

    base = model.spawn_base_model()
    assert base.upper_model is model and base.feature_cache is model.feature_cache
    base.fit(xs, ys, plan_size=4)
    upper = model.clone_new()
    upper.load_basemodel(base)
    assert upper.base_model is base and base.upper_model is upper
    upper.fit(xs[:6], ys[:6], plan_size=4)  # the base model's margins give it a head start
    assert np.isfinite(upper.predict(xs)).all()
