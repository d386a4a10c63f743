"""AutoTVM's autotvm.measure module layout: measure inputs and results, create_measure_batch, the
Builder and Runner bases and a user's own subclasses of them, written as AutoTVM code is."""

from __future__ import annotations

import time

import numpy as np
import pytest
from autotvm_templates import matmul_template

import compiler as tvm
from autotune import autotvm
from autotune.autotvm.measure import LocalBuilder, LocalRunner
from autotune.autotvm.measure.measure import (
    Builder,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    Runner,
    create_measure_batch,
)
from autotune.autotvm.measure.measure_methods import BuildResult
from search_spaces import InstantiationError

N = L = M = 16


@pytest.fixture(scope="module")
def task():
    with matmul_template("test_measure_api/matmul"):
        yield autotvm.task.create("test_measure_api/matmul", args=(N, L, M, "float32"), target="llvm")


def test_measure_result_is_autotvms_named_tuple():
    res = MeasureResult((1e-3, 2e-3), MeasureErrorNo.NO_ERROR, 0.5, 1.7e9)
    costs, error_no, all_cost, timestamp = res
    assert res._fields == ("costs", "error_no", "all_cost", "timestamp")
    assert (costs, error_no, all_cost, timestamp) == ((1e-3, 2e-3), 0, 0.5, 1.7e9)
    assert res._replace(error_no=MeasureErrorNo.RUN_TIMEOUT).error_no == 7
    assert MeasureInput._fields == ("target", "task", "config")
    assert autotvm.measure.MeasureResult is MeasureResult and autotvm.MeasureInput is MeasureInput


def test_create_measure_batch_builds_and_times_for_real(task):
    option = autotvm.measure_option(builder=LocalBuilder(n_parallel=1),
                                    runner=LocalRunner(number=2, repeat=2, cooldown_interval=0))
    assert option["builder"] is option.builder and option["runner"] is option.runner  # AutoTVM's dict
    measure_batch = create_measure_batch(task, option)
    try:
        configs = [task.config_space.get(i) for i in (0, 3, 5)]
        results = measure_batch([MeasureInput(task.target, task, c) for c in configs])
    finally:
        measure_batch.close()
    assert [type(r) for r in results] == [MeasureResult] * 3
    for res in results:
        assert res.error_no == MeasureErrorNo.NO_ERROR, res.costs
        assert len(res.costs) == 2 and all(0 < c < 1 for c in res.costs)
        assert res.all_cost > 0 and abs(res.timestamp - time.time()) < 600
    assert measure_batch.n_parallel == 1
    # the measured kernel computes the matmul
    with tvm.target.Target("llvm"):
        s, args = task.instantiate(configs[1])
    f = tvm.build(s, args, "llvm")
    a, b = np.random.rand(N, L).astype("float32"), np.random.rand(L, M).astype("float32")
    c = tvm.nd.array(np.full((N, M), np.nan, dtype="float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_local_builder_and_runner_called_directly(task):
    builder, runner = LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=2, cooldown_interval=0)
    assert isinstance(builder, Builder) and isinstance(runner, Runner)
    builder.set_task(task, runner.get_build_kwargs())
    runner.set_task(task)
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in (1, 2)]
    try:
        builds = builder.build(inputs)
        assert [type(b) for b in builds] == [BuildResult] * 2
        assert all(b.error is None and b.filename is None and b.time_cost > 0 for b in builds)
        assert builds[0].arg_info == (((N, L), "float32"), ((L, M), "float32"), ((N, M), "float32"))
        results = runner.run(inputs, builds)
    finally:
        builder.close()
        runner.close()
    assert all(r.error_no == 0 and len(r.costs) == 2 for r in results)


class DummyRunner(Runner):
    """A runner that measures nothing, as AutoTVM's own tests write one."""

    def __init__(self):
        super().__init__(1, 1)
        self.tasks = []
        self.seen = []

    def set_task(self, task):
        super().set_task(task)
        self.tasks.append(task)

    def get_build_kwargs(self):
        return {}

    def run(self, measure_inputs, build_results):
        self.seen += list(zip(measure_inputs, build_results))
        return [MeasureResult((1e-3 * (1 + inp.config.index % 7),), 0, 0.2, time.time())
                for inp in measure_inputs]


def test_a_users_runner_measures_in_the_tuning_loop(task):
    runner = DummyRunner()
    got = []
    tuner = autotvm.tuner.RandomTuner(task, seed=0)
    tuner.tune(n_trial=4, measure_option=autotvm.measure_option(builder=LocalBuilder(n_parallel=1),
                                                                runner=runner),
               callbacks=[lambda _, inputs, results: got.extend(zip(inputs, results))])
    assert runner.tasks == [task]  # set_task once, with the task
    assert len(runner.seen) == len(got) == 4
    for _, build in runner.seen:  # the candidates were really built
        assert build.error is None and build.artifact is not None and build.arg_info[2] == ((N, M), "float32")
    for inp, res in got:
        assert res.costs == (pytest.approx(1e-3 * (1 + inp.config.index % 7)),) and res.error_no == 0
    best = min(1e-3 * (1 + inp.config.index % 7) for inp, _ in got)
    assert tuner.best_flops == pytest.approx(task.flop / best)


class FakeBuilder(Builder):
    """A builder that compiles nothing and fails the configs of odd index."""

    def __init__(self):
        super().__init__(timeout=5, n_parallel=2)
        self.kwargs = None

    def set_task(self, task, build_kwargs=None):
        super().set_task(task, build_kwargs)
        self.kwargs = build_kwargs

    def build(self, measure_inputs):
        return [BuildResult("cand.so", (), None, 0.01) if inp.config.index % 2 == 0
                else BuildResult(None, (), InstantiationError("odd tile"), 0.01) for inp in measure_inputs]


class EchoRunner(DummyRunner):
    def get_build_kwargs(self):
        return {"max_shared_memory_per_block": 1024}


def test_a_users_builder_hands_its_results_to_a_users_runner(task):
    builder, runner = FakeBuilder(), EchoRunner()
    measure_batch = create_measure_batch(task, autotvm.measure_option(builder=builder, runner=runner))
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(4)]
    results = measure_batch(inputs)
    assert builder.task is task and builder.kwargs == {"max_shared_memory_per_block": 1024}
    assert [r.error_no for r in results] == [0, MeasureErrorNo.INSTANTIATION_ERROR] * 2
    assert "odd tile" in results[1].costs[0]
    assert [build.filename for _, build in runner.seen] == ["cand.so", "cand.so"]  # passed on as it is


def test_a_users_builder_needs_a_users_runner():
    with pytest.raises(ValueError, match="FakeBuilder is a user's Builder.*LocalRunner"):
        autotvm.measure_option(builder=FakeBuilder(), runner=LocalRunner())
    with pytest.raises(ValueError, match="runner is 'local' or a Runner"):
        autotvm.measure_option(runner=object())


class BrokenRunner(DummyRunner):
    def run(self, measure_inputs, build_results):
        return []


def test_a_runner_returning_the_wrong_results_is_named(task):
    measure_batch = create_measure_batch(task, autotvm.measure_option(builder=FakeBuilder(),
                                                                      runner=BrokenRunner()))
    with pytest.raises(TypeError, match="BrokenRunner.run returned"):
        measure_batch([MeasureInput(task.target, task, task.config_space.get(0))])


class CountingBuilder(LocalBuilder):
    """A LocalBuilder subclass that overrides build as AutoTVM code does."""

    def __init__(self):
        super().__init__(n_parallel=1)
        self.built = 0

    def build(self, measure_inputs):
        results = super().build(measure_inputs)
        self.built += len(results)
        return results


class SlowerRunner(LocalRunner):
    """A LocalRunner subclass whose run reports every cost doubled."""

    def __init__(self):
        super().__init__(number=1, repeat=1, cooldown_interval=0)
        self.calls = 0

    def run(self, measure_inputs, build_results):
        self.calls += 1
        return [res._replace(costs=tuple(2 * c for c in res.costs))
                for res in super().run(measure_inputs, build_results)]


def test_subclasses_of_local_builder_and_runner_are_called_as_autotvm_calls_them(task):
    builder, runner = CountingBuilder(), SlowerRunner()
    option = autotvm.measure_option(builder=builder, runner=runner)
    assert option["builder"] is builder and option["runner"] is runner
    got = []
    try:
        autotvm.tuner.GridSearchTuner(task).tune(
            n_trial=2, measure_option=option, callbacks=[lambda _, inputs, results: got.extend(results)])
    finally:
        option.close()
        builder.close()
        runner.close()
    assert builder.built == 2 and runner.calls >= 1
    assert len(got) == 2 and all(r.error_no == 0 and len(r.costs) == 1 and r.costs[0] > 0 for r in got)
    # a LocalBuilder subclass's candidates run on the plain LocalRunner too
    builder = CountingBuilder()
    measure_batch = create_measure_batch(task, autotvm.measure_option(
        builder=builder, runner=LocalRunner(number=1, repeat=1, cooldown_interval=0)))
    try:
        [res] = measure_batch([MeasureInput(task.target, task, task.config_space.get(4))])
    finally:
        measure_batch.close()
        builder.close()
    assert builder.built == 1 and res.error_no == 0 and res.costs[0] > 0


def test_rpc_runner_is_refused():
    from autotune.errors import AutotuneError

    with pytest.raises(AutotuneError, match="RPCRunner is not supported.*RayRunner"):
        autotvm.measure_option(builder=autotvm.LocalBuilder(),
                               runner=autotvm.RPCRunner("rasp3b", "127.0.0.1", 9190, number=4))
