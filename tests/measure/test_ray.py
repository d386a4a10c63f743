"""RayBuilder + RayRunner on a real local Ray instance (two CPUs, started once per session)."""

from __future__ import annotations

import os
import signal

import pytest
from measure_faults import costs_ok, inputs_for

import measure.ray as ray_measure
from measure import ErrorKind, MeasureInput, MeasureOptions, measure_batch, measure_stream
from search_spaces import create_task


@pytest.fixture(scope="module")
def ray_options(ray_cluster):
    with MeasureOptions(ray_measure.RayBuilder(timeout=4, startup_grace=4),
                        ray_measure.RayRunner(number=2, repeat=2, min_repeat_ms=5, timeout=3)) as options:
        yield options


def test_ray_measures_and_isolates_faults(faulty_task, matmul_task, ray_options):
    faults = ["none", "abort", "hang", "wrong", "raise", "slow_build", "none"]
    configs = matmul_task.config_space.sample(3, rng=21)
    inputs = inputs_for(faulty_task, faults) + [MeasureInput(matmul_task, c) for c in configs]
    results = measure_batch(inputs, ray_options)
    kinds = [r.error_kind for r in results]
    assert kinds == [None, ErrorKind.RUNTIME_ERROR, ErrorKind.RUN_TIMEOUT, ErrorKind.WRONG_ANSWER,
                     ErrorKind.INSTANTIATION_ERROR, ErrorKind.BUILD_TIMEOUT, None, None, None, None], \
        [(r.error_kind, r.error_msg) for r in results]
    assert all(costs_ok(r) for r in results if r.error_kind is None)
    node = ray_measure.ray.get_runtime_context().get_node_id()
    assert {results[i].worker for i in (0, 6, 7)} == {node}


def test_killed_actor_is_replaced_and_its_candidate_retried(matmul_task, ray_options):
    (key, pid), = ray_options.runner.actor_pids().items()
    configs = matmul_task.config_space.sample(5, rng=22)
    stream = measure_stream([MeasureInput(matmul_task, c) for c in configs], ray_options)
    first = [next(stream)]
    os.kill(pid, signal.SIGKILL)
    results = [r for _, r in first + list(stream)]
    assert len(results) == 5
    assert all(costs_ok(r) for r in results), [(r.error_kind, r.error_msg) for r in results]
    new_pid = ray_options.runner.actor_pids()[key]
    assert new_pid != pid


def test_local_and_ray_agree(faulty_task, local_options, ray_options):
    task = create_task("matmul", (64, 64, 64, "float32"), "llvm")
    configs = task.config_space.sample(3, rng=23)
    inputs = inputs_for(faulty_task, ["none", "wrong", "abort"])
    inputs += [MeasureInput(task, c) for c in configs]
    local = measure_batch(inputs, local_options)
    remote = measure_batch(inputs, ray_options)
    assert [r.error_kind for r in local] == [r.error_kind for r in remote] == [
        None, ErrorKind.WRONG_ANSWER, ErrorKind.RUNTIME_ERROR, None, None, None]
    # Both time every good candidate (how fast depends on the load of the machine: not checked).
    assert all(costs_ok(r) for r in local[3:] + remote[3:])
