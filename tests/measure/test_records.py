"""Measurement records round-trip through JSON; the pieces below the pools work in-process."""

from __future__ import annotations

import json
import pickle

import numpy as np
from helpers import assert_written, poisoned

from measure import (
    Artifact,
    ErrorKind,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
)
from measure.artifact import build_artifact, load_artifact
from measure.worker import compare_outputs


def test_measure_result_json_roundtrip():
    ok = MeasureResult((1e-3, 2e-3), None, "", 0.5, 0.25, 1700000000.0, "host:1")
    bad = MeasureResult((), ErrorKind.WRONG_ANSWER, "C differs", 0.5, 0.1, 1700000001.0, "host:2")
    for r in (ok, bad):
        assert MeasureResult.from_json(json.loads(json.dumps(r.to_json()))) == r
    assert ok.mean_cost == 1.5e-3 and bad.mean_cost == float("inf")


def test_artifact_json_roundtrip():
    art = Artifact("object", b"\x7fELF\x00\x01\xff", {"entry": "f", "functions": [], "target": "llvm"})
    assert Artifact.from_json(json.loads(json.dumps(art.to_json()))) == art


def test_measure_input_json_roundtrip(matmul_task):
    config = matmul_task.config_space.sample(1, rng=3)[0]
    inp = MeasureInput(matmul_task, config)
    back = MeasureInput.from_json(json.dumps(inp.to_json()))
    assert back.task == matmul_task and back.config == config


def test_artifact_loads_without_rebuilding(matmul_task, rng):
    config = matmul_task.config_space.sample(1, rng=5)[0]
    art = build_artifact(matmul_task, config)
    assert art.kind == "object" and art.data[:4] == b"\x7fELF"
    module = load_artifact(Artifact.from_json(json.loads(json.dumps(art.to_json()))))
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    c = poisoned((64, 64), np.float32)
    module(a, b, c)
    assert_written(c, a @ b, rtol=1e-4)
    assert module.time_evaluator(module.entry_name, number=2)(a, b, c).mean > 0


def test_compare_outputs_is_dtype_aware():
    want = np.linspace(-100, 100, 50).astype(np.float32)
    assert compare_outputs([want + 1e-3], [want], ["C"]) is None          # within 1e-4 * max|want|
    assert "C: 1 of 50" in compare_outputs([np.where(np.arange(50) == 7, 5.0, want)], [want], ["C"])
    assert compare_outputs([np.full(50, np.nan, np.float32)], [want], ["C"]) is not None  # unwritten
    ints = np.arange(10, dtype=np.int32)
    assert compare_outputs([ints + (np.arange(10) == 3)], [ints], ["C"]).startswith("C: 1 of 10")


def test_options_pickle_without_workers():
    options = MeasureOptions(LocalBuilder(n_parallel=3, timeout=4), LocalRunner(number=2, cache_flush=True))
    back = pickle.loads(pickle.dumps(options))
    assert back.builder.n_parallel == 3 and back.runner.cache_flush and back.runner.number == 2
    default = MeasureOptions()
    assert isinstance(default.builder, LocalBuilder) and isinstance(default.runner, LocalRunner)
