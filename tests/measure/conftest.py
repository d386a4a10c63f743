"""Fixtures of the measurement tests: templates that fail on purpose, shared options, Ray."""

from __future__ import annotations

import inspect

import pytest
from measure_faults import register_faulty

from measure import LocalBuilder, LocalRunner, MeasureOptions


@pytest.fixture(scope="session")
def faulty_task():
    return register_faulty("measure_faulty")


@pytest.fixture(scope="session")
def faulty_task_no_reference():
    return register_faulty("measure_faulty_noref", with_reference=False)


@pytest.fixture(scope="session")
def matmul_task():
    from search_spaces import create_task

    return create_task("matmul", (64, 64, 64, "float32"), "llvm")


@pytest.fixture(scope="module")
def local_options():
    """Local workers shared by a module's tests (started once: spawning costs about a second)."""
    with MeasureOptions(LocalBuilder(n_parallel=2, timeout=5),
                        LocalRunner(number=2, repeat=2, min_repeat_ms=5, timeout=3)) as options:
        yield options


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance with two CPUs, started once per module and shut down after it: a
    Ray instance left running would be the cluster that a later test's ``--cluster auto`` finds.
    Modules that use it are in the ``ray`` xdist group, so only one runs at a time."""
    import ray

    from measure.ray import connect

    started = not ray.is_initialized()
    connect(None, num_cpus=2)
    yield ray
    if started:
        # ray.shutdown kills the processes without waiting for them by default: a GCS still
        # dying would be the cluster that the next test's ``--cluster auto`` connects to.
        if "wait_for_processes" in inspect.signature(ray.shutdown).parameters:  # newer Ray
            ray.shutdown(wait_for_processes=True)
        else:
            ray.shutdown()
