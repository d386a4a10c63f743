"""Kernels whose best config has its threads on the output's height, timed inside the model
against their best config with threads split otherwise (``build_model(..., algorithms="measure")``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graph_models import assert_computes_graph, residual_cnn

import autotune
import db
from autotune.model import ModelBuilder
from autotune.selection import record_of
from autotune.thread_splits import HEIGHT, _other_split
from compiler.graph import model_info, optimize, prepare
from compiler.graph.layout import DIRECT, algorithm_options
from compiler.target import Target
from measure.records import MeasureResult
from search_spaces.graph_tasks import kernel_task

TARGET = "llvm -mcpu=haswell"  # 8 float lanes: blocks of 16 channels, whatever the host


@pytest.fixture(scope="module")
def graph():
    # 12x12 planes of 16 channels: rows of 12 columns in whole register tiles, so that threads
    # may take the height
    return residual_cnn(np.random.default_rng(5), channels=16, size=12)


@pytest.fixture(scope="module")
def plan(graph):
    """Every 3x3 layer direct: each a blocked convolution whose threads may take the height."""
    with Target(TARGET):
        return dict.fromkeys(algorithm_options(optimize(graph)), DIRECT)


def _tasks(graph, plan):
    tasks = {}
    for node in prepare(graph, TARGET, algorithms=plan).nodes:
        task = kernel_task(node, Target(TARGET))
        if task is not None and task.name == "conv2d_nchwc":
            tasks[task.workload_key] = task
    return list(tasks.values())


def _split(task, axis):
    return next(c for c in task.config_space if c["parallel_axis"].val == axis)


@pytest.fixture
def log_path(tmp_path, graph, plan):
    """A log in which each blocked convolution's best config (1 ms) splits threads by height, its
    next (2 ms) by channel blocks, and its worst (3 ms) by rows."""
    path = tmp_path / "tuning.db"
    with db.open(path) as log:
        for task in _tasks(graph, plan):
            for axis, ms in ((HEIGHT, 1.0), ("oc", 2.0), ("rows", 3.0)):
                result = MeasureResult((ms * 1e-3,) * 3, None, "", 0.1, 0.1, 1.7e9, "w")
                log.add(record_of(task, _split(task, axis), result, host="h"))
    return path


def test_the_other_split_is_the_best_config_whose_threads_are_not_on_the_height(graph, plan, log_path):
    tasks = _tasks(graph, plan)
    assert len(tasks) >= 2
    with ModelBuilder(TARGET, str(log_path)) as builder:
        for task in tasks:
            assert builder.best_config(task)["parallel_axis"].val == HEIGHT
            assert _other_split(builder, task) == _split(task, "oc")
    with db.open(log_path) as log:  # the height config now ranks last: nothing to time against it
        for task in tasks:
            result = MeasureResult((9e-3,) * 3, None, "", 0.1, 0.1, 1.7e9, "w")
            log.add(record_of(task, _split(task, HEIGHT), result, host="h"))
    with ModelBuilder(TARGET, str(log_path)) as builder:
        assert all(_other_split(builder, task) is None for task in tasks)


def test_a_model_given_a_workloads_config_is_built_with_that_one(graph, plan, log_path):
    task = _tasks(graph, plan)[0]
    module = autotune.build_model(graph, TARGET, str(log_path), algorithms=plan,
                                  configs={task.workload_key: _split(task, "rows")})
    schedules = {k["workload"]: k["schedule"] for k in model_info(module)["kernels"] if "workload" in k}
    assert schedules[task.workload_key] == "conv2d_nchwc: tuned, chosen inside the model"
    others = [s for key, s in schedules.items() if key != task.workload_key and s.startswith("conv2d_nchwc")]
    assert others and all(s == "conv2d_nchwc: tuned" for s in others)
    assert_computes_graph(module, graph, 1)
    with pytest.raises(autotune.AutotuneError, match="configs maps workload keys to configs"):
        autotune.build_model(graph, TARGET, str(log_path),
                             configs={task.workload_key: {"parallel_axis": "oc"}})


@pytest.mark.slow
def test_each_height_split_kernel_keeps_the_split_that_ran_faster_inside_the_model(graph, plan, log_path):
    splits = autotune.choose_thread_splits(graph, TARGET, str(log_path), algorithms=plan, rounds=1, repeat=2,
                                           min_repeat_ms=1)
    tasks = {t.workload_key: t for t in _tasks(graph, plan)}
    assert sorted(c.key for c in splits.workloads) == sorted(tasks)  # every one timed both ways
    for c in splits.workloads:
        assert 0 < c.height < 1 and 0 < c.other < 1
        assert c.other_config == _split(tasks[c.key], "oc")
        assert c.other_chosen == (c.other < c.height)
    changed = {c.key: c.other_config for c in splits.workloads if c.other_chosen}
    if changed:  # the choices stand only if the model ran faster with them
        assert splits.best_latency > 0 and splits.chosen_latency > 0
        assert splits.configs == (changed if splits.chosen_latency < splits.best_latency else {})
        assert "ran faster in the model with their threads split otherwise" in splits.report()
    else:
        assert math.isnan(splits.best_latency) and splits.configs == {}
        assert "ran fastest in the model so" in splits.report()
    assert_computes_graph(autotune.build_model(graph, TARGET, str(log_path), algorithms=plan,
                                               configs=splits.configs), graph, 2)


def test_a_log_with_no_height_split_best_builds_nothing_to_compare(graph, plan, tmp_path):
    path = tmp_path / "tuning.db"
    with db.open(path) as log:
        for task in _tasks(graph, plan):
            result = MeasureResult((1e-3,) * 3, None, "", 0.1, 0.1, 1.7e9, "w")
            log.add(record_of(task, _split(task, "rows"), result, host="h"))
    splits = autotune.choose_thread_splits(graph, TARGET, str(path), algorithms=plan)
    assert splits.workloads == [] and splits.configs == {}
    assert "no kernel's best config has its threads on the output's height" in splits.report()
