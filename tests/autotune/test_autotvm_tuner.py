"""AutoTVM's tuner classes and callbacks, measuring for real on a small user template."""

from __future__ import annotations

import json

import numpy as np
import pytest
from autotvm_templates import elementwise_template

import db
from autotune import autotvm
from compiler import te
from search_spaces import unregister_template


@pytest.fixture(scope="module")
def task():
    with elementwise_template("test_autotvm/scale", lambda a: a * 2.0):
        yield autotvm.task.create("test_autotvm/scale", args=(64, "float32"), target="llvm")


@pytest.fixture(scope="module")
def option():
    with autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1),
                                runner=autotvm.LocalRunner(number=2, repeat=2, cooldown_interval=0)) as opt:
        yield opt


def test_the_task_is_autotvms(task):
    assert task.name == "test_autotvm/scale" and task.args == (64, "float32")
    assert task.workload == ("test_autotvm/scale", 64, "float32")
    assert len(task.config_space) == 7 * 2


@pytest.mark.parametrize("make", [
    lambda t: autotvm.tuner.RandomTuner(t),
    lambda t: autotvm.tuner.GridSearchTuner(t),
    lambda t: autotvm.tuner.GATuner(t, pop_size=4, elite_num=1),
    lambda t: autotvm.tuner.XGBTuner(t, plan_size=4),
], ids=["random", "grid", "ga", "xgb"])
def test_each_tuner_makes_n_trial_trials_and_calls_back_once_each(task, option, make, tmp_path):
    tuner = make(task)
    calls = []
    progress = autotvm.callback.progress_bar(5, prefix="test")
    result = tuner.tune(n_trial=5, measure_option=option,
                        callbacks=[lambda t, inputs, results: calls.append((t, inputs, results)),
                                   autotvm.callback.log_to_file(str(tmp_path / "t.json")),
                                   autotvm.callback.log_to_file(tmp_path / "t.db"), progress])
    assert len(calls) == 5 and all(t is tuner and len(i) == len(r) == 1 for t, i, r in calls)
    configs = [inputs[0].config.index for _, inputs, _ in calls]
    assert len(set(configs)) == 5
    for _, [inp], [res] in calls:
        assert inp.task is task and inp.target == task.target
        assert res.error_no == 0 and len(res.costs) == 2 and res.all_cost > 0
    # n_trial trials, and nothing measured again: every log holds exactly those trials.
    assert result.trials == 5 and result.remeasured == 0
    assert len((tmp_path / "t.json").read_text().splitlines()) == 5
    with db.open(tmp_path / "t.db") as log:
        records = log.records(task)
        assert [r.kind for r in records] == [db.TRIAL] * 5
        assert sorted(r.config_index for r in records) == sorted(configs)
    assert progress.count == 5 and progress.best > 0
    assert tuner.best_flops > 0 and tuner.best_measure_pair[0].config.index in configs


def test_tuning_stops_when_the_space_runs_out(option):
    @autotvm.template("test_autotvm/tiny")
    def tiny(n):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        cfg = autotvm.get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg["tile"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    try:
        task = autotvm.task.create("test_autotvm/tiny", args=(4,), target="llvm")
        calls = []
        result = autotvm.tuner.GridSearchTuner(task).tune(
            n_trial=10, measure_option=option, callbacks=[lambda t, i, r: calls.append(i[0].config.index)])
        assert len(task.config_space) == 3 and sorted(calls) == [0, 1, 2]
        assert result.stopped == "exhausted"
    finally:
        unregister_template("test_autotvm/tiny")


def test_best_config_from_the_json_log_builds_and_computes(task, option, tmp_path, rng):
    path = tmp_path / "scale.log"
    autotvm.tuner.RandomTuner(task).tune(n_trial=4, measure_option=option,
                                         callbacks=[autotvm.callback.log_to_file(str(path))])
    logged = {json.loads(line)["config"]["index"] for line in path.read_text().splitlines()}
    import compiler

    with autotvm.apply_history_best(str(path)) as ctx:
        cfg = ctx.query(compiler.Target("llvm"), task)
        assert cfg.index in logged and not cfg.is_fallback
        with compiler.Target("llvm"):
            s, args = task.instantiate(cfg)
            f = compiler.build(s, args)
    a = rng.random(64).astype("float32")
    b = np.full(64, np.nan, dtype="float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 2.0, rtol=1e-6)


def test_callbacks_refuse_what_they_cannot_do(task):
    with pytest.raises(ValueError, match="protocol"):
        autotvm.callback.log_to_file("x.log", protocol="pickle")
    with pytest.raises(ValueError, match="si_prefix"):
        autotvm.callback.progress_bar(3, si_prefix="X")
    with pytest.raises(ValueError, match="range_idx"):
        autotvm.tuner.RandomTuner(task, range_idx=(3, 3 + len(task.config_space)))
    with pytest.raises(ValueError, match="optimizer"):
        autotvm.tuner.XGBTuner(task, optimizer="reg")



def test_task_create_takes_the_template_or_its_name(task):
    from autotune.autotvm.task.space import SplitEntity  # AutoTVM's module path
    from search_spaces import SearchSpaceError, get_template

    by_object = autotvm.task.create(get_template("test_autotvm/scale"), args=(64, "float32"), target="llvm")
    assert by_object is task
    assert autotvm.task.create("test_autotvm/scale", (64, "float32"), "llvm", target_host="llvm") is task
    with pytest.raises(SearchSpaceError, match="target_host"):
        autotvm.task.create("test_autotvm/scale", (64, "float32"), "llvm", target_host="cuda")
    assert isinstance(task.config_space.default_config["tile"], SplitEntity)


def test_load_history_from_an_autotvm_log(task, option, tmp_path):
    path = tmp_path / "history.log"
    autotvm.tuner.RandomTuner(task).tune(n_trial=4, measure_option=option,
                                         callbacks=[autotvm.callback.log_to_file(str(path))])
    logged = {json.loads(line)["config"]["index"] for line in path.read_text().splitlines()}
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.load_history(autotvm.record.load_from_file(path))
    assert tuner.measured == logged and tuner.best_config.index in logged
    calls = []
    tuner.tune(n_trial=3, measure_option=option, callbacks=[lambda t, i, r: calls.append(i[0].config.index)])
    assert len(calls) == 3 and not set(calls) & logged

    # Records of another workload of the template train a learning tuner's model instead.
    other = autotvm.task.create("test_autotvm/scale", args=(128, "float32"), target="llvm")
    xgb = autotvm.tuner.XGBTuner(other, plan_size=4)
    seen = []
    xgb.pretrain = lambda triples: seen.extend(triples)
    xgb.load_history(autotvm.record.load_from_file(path), min_seed_records=5)
    assert seen == [] and not xgb.measured  # fewer than min_seed_records
    xgb.load_history(autotvm.record.load_from_file(path), min_seed_records=4)
    assert len(seen) == 4 and not xgb.measured
    assert all(t.workload_key == task.workload_key and c > 0 for _, t, c in seen)


def test_index_tuners_pass_over_the_configs_of_a_loaded_history(task, option, tmp_path):
    path = tmp_path / "grid.log"
    autotvm.tuner.GridSearchTuner(task).tune(n_trial=3, measure_option=option,
                                             callbacks=[autotvm.callback.log_to_file(str(path))])
    calls = []
    record = [lambda t, i, r: calls.append(i[0].config.index)]
    grid = autotvm.tuner.GridSearchTuner(task)
    grid.load_history(autotvm.record.load_from_file(path))
    grid.tune(n_trial=3, measure_option=option, callbacks=record)
    assert calls == [3, 4, 5]  # indices 0, 1 and 2 are in the history
    rand = autotvm.tuner.RandomTuner(task, seed=0)
    rand.load_history(autotvm.record.load_from_file(path))
    calls.clear()
    rand.tune(n_trial=len(task.config_space) - 3, measure_option=option, callbacks=record)
    assert sorted(calls) == list(range(3, len(task.config_space)))


def test_template_takes_autotvms_arguments():
    def double(n):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        return te.create_schedule(B.op), [A, B]

    try:
        tmpl = autotvm.template("test_autotvm/double", double)  # AutoTVM's template(task_name, func)
        assert tmpl is autotvm.task.template("test_autotvm/double")(double)
        assert autotvm.task.create("test_autotvm/double", (8,), "cuda").target_kind == "cuda"
    finally:
        unregister_template("test_autotvm/double")
