"""Measuring CUDA candidates: PTX artifacts (built and checked with ptxas without a GPU),
their JSON round trip, the clear error a runner without pycuda or GPU gives, and, on a
GPU, checked and timed runs through LocalRunner and RayRunner(gpu=True)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cuda_helpers import assemble
from measure_faults import costs_ok

from compiler.runtime.cuda import CUDAModule
from measure import (
    Artifact,
    BuildReply,
    BuildRequest,
    ErrorKind,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureOptions,
    RunRequest,
    measure_batch,
)
from measure.artifact import build_artifact, load_artifact
from measure.worker import build, prepare_task, run
from search_spaces import create_task, get_config, template

TARGET = "cuda -arch=sm_80"
_TIMES = "times candidates in measure workers, and measuring refuses timings taken on the simulator"


def _run_request(task, artifact) -> RunRequest:
    return RunRequest(task.to_json(by_value=True), artifact, number=2, repeat=2, min_repeat_ms=1)


@pytest.fixture(scope="module")
def cuda_matmul():
    return create_task("matmul", (64, 32, 64, "float32"), TARGET)


def test_cuda_build_gives_an_assembling_ptx_artifact(cuda_matmul):
    config = cuda_matmul.config_space.sample(1, rng=3)[0]
    art = build_artifact(cuda_matmul, config)
    assert art.kind == "ptx"
    assert art.metadata["target"] == TARGET and art.metadata["arch"] == "sm_80"
    assert art.metadata["entry"] == "default_function"
    assert [f["signature"]["name"] for f in art.metadata["functions"]] == ["default_function"]
    payload = json.loads(art.data)
    assert payload["type_key"] == "cuda" and ".entry" in payload["ptx"]
    assemble(payload["ptx"])
    module = load_artifact(art)  # no GPU needed to load, only to run
    assert isinstance(module, CUDAModule) and module.entry_name == "default_function"
    assert module.get_source("ptx") == payload["ptx"]
    assert module.launch_plan()["launches"]


def test_ptx_artifact_round_trips_through_json(cuda_matmul):
    result = build(BuildRequest.of(MeasureInput(cuda_matmul, cuda_matmul.config_space.default_config)))
    assert result.error is None and result.artifact.kind == "ptx", result.error
    again = BuildReply.from_json(json.loads(json.dumps(result.to_json())))
    assert again.artifact == result.artifact
    assert Artifact.from_json(again.artifact.to_json()).data == result.artifact.data
    a, b = load_artifact(result.artifact), load_artifact(again.artifact)
    assert a.get_source("ptx") == b.get_source("ptx") and a.launch_plan() == b.launch_plan()


def _why_no_gpu() -> str | None:
    """Why this machine cannot run CUDA code (pycuda missing, no driver, no device), or None."""
    from compiler.runtime.cuda import unavailable_reason

    return unavailable_reason()


def _no_gpu() -> bool:
    return _why_no_gpu() is not None


@pytest.mark.skipif("not _no_gpu()", reason="checks the behaviour without a GPU")
def test_run_without_pycuda_or_gpu_is_a_runtime_error(cuda_matmul):
    art = build_artifact(cuda_matmul, cuda_matmul.config_space.default_config)
    reply = run(_run_request(cuda_matmul, art))
    assert reply.status == "error" and reply.error_kind is ErrorKind.RUNTIME_ERROR and reply.costs == ()
    assert f"no usable GPU ({_why_no_gpu()})" in reply.message, reply.message


@pytest.mark.skipif("not _no_gpu()", reason="checks the behaviour without a GPU")
def test_local_runner_reports_the_missing_gpu_for_every_candidate(cuda_matmul):
    configs = cuda_matmul.config_space.sample(3, rng=5)
    with MeasureOptions(LocalBuilder(n_parallel=2, timeout=20),
                        LocalRunner(number=1, repeat=1, min_repeat_ms=1, timeout=10)) as options:
        results = measure_batch([MeasureInput(cuda_matmul, c) for c in configs], options)
        assert options.runner.gpu_ids() == [0]
    for r in results:
        assert r.error_kind is ErrorKind.RUNTIME_ERROR and r.costs == (), r
        assert f"no usable GPU ({_why_no_gpu()})" in r.error_msg, r.error_msg


@pytest.mark.skipif("not _no_gpu()", reason="checks the behaviour without a GPU")
@pytest.mark.xdist_group("ray")
def test_ray_gpu_runner_on_a_cluster_without_gpus_reports_instead_of_waiting(cuda_matmul, ray_cluster):
    from measure.ray import RayRunner

    assert not ray_cluster.cluster_resources().get("GPU")
    configs = cuda_matmul.config_space.sample(2, rng=6)
    with MeasureOptions(LocalBuilder(n_parallel=2, timeout=20),
                        RayRunner(gpu=True, number=1, repeat=1, min_repeat_ms=1, timeout=10)) as options:
        results = measure_batch([MeasureInput(cuda_matmul, c) for c in configs], options)
    for r in results:
        assert r.error_kind is ErrorKind.RUNTIME_ERROR and r.costs == (), r
        assert "no alive node of the Ray cluster has a GPU" in r.error_msg


def _staged_rows(n, m):
    """A CUDA template without a numpy reference: ``B = 2 * A``, each block staging its rows of
    ``A`` in shared memory. The default ``rows`` (64 x 256 floats, 64 KiB) is more than a block
    may have; ``rows=4`` fits."""
    from compiler import te

    cfg = get_config()
    cfg.define_knob("rows", [64, 4])
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, _ = s[B].split(B.op.axis[0], factor=cfg["rows"].val)
    tx, _ = s[B].split(B.op.axis[1], factor=2)
    s[B].reorder(bx, tx)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)
    o, _ = s[AA].split(s[AA].op.axis[1], factor=2)
    s[AA].bind(o, te.thread_axis("threadIdx.x"))
    return s, [A, B]


template("measure_staged_rows")(_staged_rows)


@pytest.fixture(scope="module")
def staged_rows():
    task = create_task("measure_staged_rows", (64, 256), TARGET)
    assert task.reference is None and task.config_space.default_config["rows"].val == 64
    return task


def test_expected_outputs_without_a_reference_do_not_need_a_valid_default_config(staged_rows):
    default = build(BuildRequest.of(MeasureInput(staged_rows, staged_rows.config_space.default_config)))
    assert default.error_kind is ErrorKind.COMPILE_ERROR and "65536 bytes of shared memory" in default.error
    data = prepare_task(staged_rows, check=True)
    (a,), (b,) = data.inputs, data.expected
    assert a.shape == b.shape == (64, 256) and np.ptp(a) > 1  # random inputs, not zeros
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)  # every element written: no NaN poison left


def test_expected_outputs_without_a_reference_on_the_cpu():
    from compiler import te

    def scaled_rows(n, k):
        cfg = get_config()
        A = te.placeholder((n, k), name="A")
        r = te.reduce_axis((0, k), name="r")
        B = te.compute((n,), lambda i: te.sum(A[i, r] * 3.0, axis=r), name="B")
        s = te.create_schedule(B.op)
        cfg.define_split("x", n, num_outputs=2)
        cfg["x"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    template("measure_scaled_rows")(scaled_rows)
    task = create_task("measure_scaled_rows", (48, 40), "llvm")
    data = prepare_task(task, check=True)
    (a,), (b,) = data.inputs, data.expected
    assert np.ptp(a) > 1
    # atol: a row whose sum cancels near zero keeps only the rounding of its summation order
    np.testing.assert_allclose(b, 3 * a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_local_runner_devices_option():
    assert LocalRunner(devices=[1, 0]).devices == [1, 0]
    assert "devices=[0]" in repr(LocalRunner(devices=(0,)))
    for bad in ([], [0, 0], [-1]):
        with pytest.raises(ValueError, match="devices"):
            LocalRunner(devices=bad)


# ---------------------------------------------------------------------------- on a GPU


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason=_TIMES)
def test_local_runner_times_cuda_candidates_on_every_gpu():
    task = create_task("matmul", (128, 64, 128, "float32"), "cuda")
    configs = task.config_space.sample(6, rng=8)
    with MeasureOptions(LocalBuilder(n_parallel=2, timeout=30),
                        LocalRunner(number=3, repeat=2, min_repeat_ms=1, timeout=20)) as options:
        results = measure_batch([MeasureInput(task, c) for c in configs], options)
        gpus = options.runner.gpu_ids()
    assert gpus and all(costs_ok(r) for r in results), [(r.error_kind, r.error_msg) for r in results]
    assert all(len(r.costs) == 2 and max(r.costs) < 0.1 for r in results)


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason=_TIMES)
def test_cuda_candidate_with_wrong_outputs_is_a_wrong_answer():
    task = create_task("elementwise", (8, 64, "add", "float32"), "cuda")
    other = create_task("elementwise", (8, 64, "sub", "float32"), "cuda")
    good = run(_run_request(task, build_artifact(task, task.config_space.default_config)))
    assert good.status == "ok" and len(good.costs) == 2 and all(c > 0 for c in good.costs), good
    bad = run(_run_request(task, build_artifact(other, other.config_space.default_config)))
    assert bad.error_kind is ErrorKind.WRONG_ANSWER and not bad.replace_worker, bad


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason=_TIMES)
def test_cuda_template_without_a_reference_is_measured_though_its_default_does_not_fit(staged_rows):
    fits = next(c for c in staged_rows.config_space if c["rows"].val == 4)
    with MeasureOptions(LocalBuilder(n_parallel=1, timeout=30),
                        LocalRunner(number=2, repeat=2, min_repeat_ms=1, timeout=20)) as options:
        (result,) = measure_batch([MeasureInput(staged_rows, fits)], options)
    assert costs_ok(result), (result.error_kind, result.error_msg)


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason=_TIMES)
@pytest.mark.xdist_group("ray")
def test_ray_runner_with_gpu_actors(ray_cluster):
    import measure.ray as ray_measure

    if not ray_cluster.cluster_resources().get("GPU"):
        pytest.skip("the local Ray instance has no GPU")
    task = create_task("matmul", (64, 64, 64, "float32"), "cuda")
    configs = task.config_space.sample(3, rng=9)
    with MeasureOptions(ray_measure.RayBuilder(timeout=30),
                        ray_measure.RayRunner(number=2, repeat=2, min_repeat_ms=1, timeout=20,
                                              gpu=True)) as options:
        results = measure_batch([MeasureInput(task, c) for c in configs], options)
    assert all(costs_ok(r) for r in results), [(r.error_kind, r.error_msg) for r in results]
    assert np.isfinite([r.mean_cost for r in results]).all()
