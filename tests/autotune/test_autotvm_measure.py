"""autotvm.measure_option, LocalBuilder and LocalRunner: AutoTVM's arguments onto measure's options."""

from __future__ import annotations

import math

import pytest

import measure
from autotune import autotvm
from autotune.autotvm.measure import MeasureErrorNo, error_kind, error_no
from measure import ErrorKind, MeasureInput, measure_batch


def test_local_runner_takes_autotvm_arguments_in_autotvm_order():
    runner = autotvm.LocalRunner(7, 2, 5, 12, 0.25, True)  # timeout, number, repeat, min_repeat_ms, ...
    assert isinstance(runner, measure.LocalRunner)
    assert (runner.timeout, runner.number, runner.repeat, runner.min_repeat_ms) == (7, 2, 5, 12)
    assert runner.cooldown_ms == pytest.approx(250) and runner.cooldown_interval == pytest.approx(0.25)
    assert runner.cache_flush is True and runner.enable_cpu_cache_flush is True
    default = autotvm.LocalRunner()  # AutoTVM's defaults
    assert (default.timeout, default.number, default.repeat, default.min_repeat_ms) == (10, 4, 3, 0)
    assert default.cooldown_ms == pytest.approx(100) and default.cache_flush is False
    assert default.check_correctness  # outputs are checked here unless turned off
    assert not autotvm.LocalRunner(check_correctness=False).check_correctness


def test_local_builder_and_measure_option():
    builder = autotvm.LocalBuilder(timeout=4, n_parallel=2)
    assert isinstance(builder, measure.LocalBuilder) and (builder.timeout, builder.n_parallel) == (4, 2)
    runner = autotvm.LocalRunner(number=5)
    option = autotvm.measure_option(builder=builder, runner=runner)
    assert isinstance(option, measure.MeasureOptions)
    assert option.builder is builder and option.runner is runner
    local = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=5))
    assert isinstance(local.builder, autotvm.LocalBuilder) and local.runner.number == 5
    both = autotvm.measure_option()
    assert isinstance(both.builder, autotvm.LocalBuilder) and isinstance(both.runner, autotvm.LocalRunner)


@pytest.mark.parametrize("make, match", [
    (lambda: autotvm.LocalBuilder(build_func="ndk"), "build_func='ndk'"),
    (lambda: autotvm.LocalBuilder(build_kwargs={"x": 1}), "build_kwargs"),
    (lambda: autotvm.LocalRunner(module_loader=object()), "module_loader"),
    (lambda: autotvm.LocalRunner(cooldown_interval=-1), "cooldown_interval"),
    (lambda: autotvm.LocalRunner(number=0), "number"),
    (lambda: autotvm.measure_option(builder="rpc"), "builder"),
    (lambda: autotvm.measure_option(runner="rpc"), "runner"),
])
def test_unsupported_arguments_are_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_cooldown_and_cache_flush_measure_for_real():
    task = autotvm.task.create("matmul", args=(16, 16, 16, "float32"), target="llvm")
    runner = autotvm.LocalRunner(number=2, repeat=3, cooldown_interval=0.01, enable_cpu_cache_flush=True)
    with autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1), runner=runner) as option:
        [result] = measure_batch([MeasureInput(task, task.config_space.default_config)], option)
    assert result.error_kind is None, result.error_msg
    # One cost per repeat, each measured on its own after a cooldown.
    assert len(result.costs) == 3 and all(c > 0 and math.isfinite(c) for c in result.costs)


def test_error_numbers_are_autotvms():
    assert error_no(None) is MeasureErrorNo.NO_ERROR and error_kind(0) is None
    expected = {ErrorKind.INSTANTIATION_ERROR: 1, ErrorKind.COMPILE_ERROR: 2, ErrorKind.RUNTIME_ERROR: 4,
                ErrorKind.WRONG_ANSWER: 5, ErrorKind.BUILD_TIMEOUT: 6, ErrorKind.RUN_TIMEOUT: 7,
                ErrorKind.WORKER_CRASH: 8}
    assert {kind: int(error_no(kind)) for kind in ErrorKind} == expected
    for kind, number in expected.items():
        if kind is not ErrorKind.WORKER_CRASH:
            assert error_kind(number) is kind
    assert error_kind(3) is ErrorKind.COMPILE_ERROR  # AutoTVM's device-compile error
    assert error_kind(8) is ErrorKind.RUNTIME_ERROR  # UNKNOWN_ERROR
    with pytest.raises(ValueError):
        error_kind(9)
