"""The messages between the tuner and its workers round-trip through JSON and bytes, and
the worker's side of each call works in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from measure_faults import inputs_for

from measure import (
    Artifact,
    BuildReply,
    BuildRequest,
    ErrorKind,
    LocalRunner,
    MeasureError,
    MeasureInput,
    RunReply,
    RunRequest,
)
from measure.pool import FrameReader, encode_frame
from measure.worker import build, run
from search_spaces import SearchSpaceError, Task

ART = Artifact("object", b"\x7fELF\x00\x01\xfe\xff", {"entry": "f", "functions": [], "target": "llvm"})


def _round_trips(message) -> None:
    cls = type(message)
    assert cls.from_json(json.loads(json.dumps(message.to_json()))) == message
    data = message.encode()
    assert isinstance(data, bytes) and cls.decode(data) == message


def test_build_request_round_trips(matmul_task):
    config = matmul_task.config_space.sample(1, rng=3)[0]
    request = BuildRequest.of(MeasureInput(matmul_task, config))
    _round_trips(request)
    assert request.task == matmul_task.to_json() and request.config == config.to_json()
    assert Task.from_json(request.task) == matmul_task
    assert matmul_task.config_space.from_json(request.config) == config


@pytest.mark.parametrize("reply", [
    BuildReply(ART, None, 0.25, None, "host:1"),
    BuildReply(ART, None, 0.25, None, "node-a", "0.1.0+1a2b3c4d5e6f"),
    BuildReply(None, "TypeError: no", 0.5, ErrorKind.COMPILE_ERROR, "host:2"),
    BuildReply(None, "build took too long", 10.0, ErrorKind.BUILD_TIMEOUT),
])
def test_build_reply_round_trips(reply):
    _round_trips(reply)


@pytest.mark.parametrize("device, cache_flush", [(None, True), (1, "weights"), (None, False)])
def test_run_request_round_trips(matmul_task, device, cache_flush):
    request = RunRequest(matmul_task.to_json(by_value=True), ART, 2, 5, 12.5, 3.0, cache_flush, False, 4.0,
                         30.0, device)
    _round_trips(request)
    assert RunRequest.from_json(request.to_json()).cache_flush == cache_flush


def test_a_run_request_names_the_cache_flush_choices_it_was_not_given(matmul_task):
    data = RunRequest(matmul_task.to_json(by_value=True), ART).to_json()
    with pytest.raises(MeasureError, match="cache_flush must be one of .*'weights'.*got 'inputs'"):
        RunRequest.from_json({**data, "cache_flush": "inputs"})
    with pytest.raises(ValueError, match="cache_flush must be one of"):
        LocalRunner(cache_flush="all")
    assert LocalRunner(cache_flush="weights").cache_flush == "weights"
    assert LocalRunner(cache_flush=1).cache_flush is True


@pytest.mark.parametrize("reply", [
    RunReply((1e-3, 2e-3, 1.5e-3), run_time=0.2, worker="host:3"),
    RunReply((1e-3,), worker="node-a", code_version="0.1.0+1a2b3c4d5e6f"),
    RunReply.failure(ErrorKind.WRONG_ANSWER, "C: 3 of 64 elements differ", 0.1, "host:4"),
    RunReply.failure(ErrorKind.RUNTIME_ERROR, "an illegal address", replace_worker=True),
])
def test_run_reply_round_trips(reply):
    _round_trips(reply)
    assert reply.status == ("ok" if reply.error_kind is None else "error")
    assert reply.to_json()["status"] == reply.status


def test_run_reply_becomes_a_measure_result():
    ok = RunReply((2e-3, 4e-3), run_time=0.5, worker="h:1").result(build_time=0.25)
    assert ok.ok and ok.costs == (2e-3, 4e-3) and ok.mean_cost == pytest.approx(3e-3)
    assert (ok.build_time, ok.run_time, ok.worker) == (0.25, 0.5, "h:1") and ok.timestamp > 0
    bad = RunReply.failure(ErrorKind.RUN_TIMEOUT, "no result").result(build_time=1.0)
    assert bad.error_kind is ErrorKind.RUN_TIMEOUT and bad.costs == () and bad.mean_cost == float("inf")


def test_malformed_messages_name_the_problem():
    with pytest.raises(MeasureError, match="RunRequest needs .*artifact"):
        RunRequest.from_json({"task": {}})
    with pytest.raises(MeasureError, match="BuildRequest is a JSON object"):
        BuildRequest.decode(b"[1, 2]")
    with pytest.raises(MeasureError, match="status 'ok' has error kind"):
        RunReply.from_json({"status": "ok", "costs": [], "error_kind": "wrong_answer"})


def test_a_template_only_the_tuner_knows_travels_as_code(faulty_task):
    request = BuildRequest.of(inputs_for(faulty_task, ["none"])[0])
    assert "code" in request.task and "code" not in faulty_task.to_json()  # logs never hold code
    with pytest.raises(SearchSpaceError, match="pickled code"):
        Task.from_json(request.task)
    assert Task.from_json(request.task, allow_code=True) == faulty_task


def test_frames_survive_arriving_in_pieces():
    messages = [{"reply": {"costs": [1.0]}}, {"phase": "run", "timeout": 3.0}, {"ready": "h:" + "x" * 5000}]
    data = b"".join(encode_frame(m) for m in messages)
    reader = FrameReader()
    got = []
    for k in range(0, len(data), 7):
        got += reader.feed(data[k:k + 7])
    assert got == messages


# ---------------------------------------------------------------------------- the worker's side


def test_build_then_run_in_one_call_each(faulty_task):
    inputs = inputs_for(faulty_task, ["none", "wrong", "raise"])
    replies = [BuildReply.decode(build(BuildRequest.decode(BuildRequest.of(i).encode())).encode())
               for i in inputs]
    assert replies[0].artifact is not None and replies[1].artifact is not None
    assert replies[2].artifact is None and replies[2].error_kind is ErrorKind.INSTANTIATION_ERROR
    task = faulty_task.to_json(by_value=True)
    prepared = []
    ok = run(RunRequest(task, replies[0].artifact, 1, 2, 1), on_prepared=prepared.append)
    assert ok.status == "ok" and len(ok.costs) == 2 and all(np.isfinite(ok.costs)) and min(ok.costs) > 0
    assert prepared == [10]  # the candidate's own clock starts once the task's data is made
    wrong = run(RunRequest(task, replies[1].artifact, 1, 1, 1))
    assert wrong.error_kind is ErrorKind.WRONG_ANSWER and wrong.costs == () and "C:" in wrong.message


def test_timed_as_inside_a_model_a_residual_stays_in_the_caches_and_the_weights_do_not(monkeypatch):
    """``cache_flush="model"``: the worker keeps an epilogue's residual (what the kernels before it
    wrote inside a model) in the caches; the weights and the bias are evicted; other timings name
    nothing warm."""
    from compiler.runtime.timer import NativeTimer, flushed_ranges
    from search_spaces import create_task, is_residual_argument

    evicted = []
    real_time = NativeTimer.time

    def recording_time(self, kernel, buffers, scalars, arrays, *args, warm=(), **options):
        evicted.append([n for _, n in flushed_ranges(arrays, options.get("cache_flush", False), warm)])
        return real_time(self, kernel, buffers, scalars, arrays, *args, warm=warm, **options)

    monkeypatch.setattr(NativeTimer, "time", recording_time)
    task = create_task("dense", (2, 64, 32, "float32", False, ("bias", "add", "relu")), "llvm")
    reply = build(BuildRequest.of(MeasureInput(task, task.config_space.default_config)))
    data = task.to_json(by_value=True)
    for flush, expected in (("model", [32 * 64 * 4, 32 * 4]), ("weights", [32 * 64 * 4, 32 * 4, 2 * 32 * 4])):
        evicted.clear()
        result = run(RunRequest(data, reply.artifact, 1, 2, 1, cache_flush=flush))
        assert result.status == "ok", result.message
        assert evicted and all(sizes == expected for sizes in evicted)
    assert is_residual_argument("residual") and is_residual_argument("pointwise_residual2")
    assert not is_residual_argument("bias") and not is_residual_argument("residual_scale")
