"""Features computed by worker processes: the same rows as in the tuner's process, nothing
lost when a worker dies, and no worker left behind by ``tune()``."""

from __future__ import annotations

import gc
import logging
import os

import numpy as np
import pytest
from helpers import children_running

import autotune
import search_spaces
from autotune.errors import AutotuneError
from autotune.tuner import features as F
from autotune.tuner.features import FeatureCache, default_feature_workers
from autotune.tuner.xgb_tuner import XGBTuner
from compiler import te


def feature_workers_of(pid: int) -> list[int]:
    return children_running(pid, "autotune.tuner.feature_worker")


@pytest.fixture
def workers_at_once(monkeypatch):
    """Send every request of more than one config to the workers."""
    monkeypatch.setattr(F, "PARALLEL_AFTER_S", 0.0)
    monkeypatch.setattr(F, "PARALLEL_MIN_S", 0.0)


def rows_here(task, indices):
    return FeatureCache("itervar", workers=0).get(task, indices)


def test_workers_give_the_rows_the_tuner_would_compute(workers_at_once):
    cpu = search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm -mcpu=skylake-avx512")
    gpu = search_spaces.create_task("matmul", (256, 256, 256, "float32"), "cuda -arch=sm_80")
    cache = FeatureCache("itervar", workers=2)
    try:
        for task in (cpu, gpu):
            indices = [int(i) for i in task.config_space.sample_indices(12, np.random.default_rng(3))]
            x, ok = cache.get(task, indices)
            assert feature_workers_of(os.getpid()), "the rows were not computed by workers"
            want_x, want_ok = rows_here(task, indices)
            assert ok.all() and (ok == want_ok).all()
            np.testing.assert_array_equal(x, want_x)
    finally:
        cache.close()
    assert feature_workers_of(os.getpid()) == []


def test_caches_share_the_workers_until_the_last_one_closes(workers_at_once):
    task = search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm -mcpu=skylake-avx512")
    indices = [int(i) for i in task.config_space.sample_indices(8, np.random.default_rng(4))]
    first, second = FeatureCache("itervar", workers=2), FeatureCache("itervar", workers=2)
    first.get(task, indices)
    started = feature_workers_of(os.getpid())
    second.get(task, indices[::-1])
    assert len(started) == 2 and feature_workers_of(os.getpid()) == started  # no second set
    first.close()
    assert feature_workers_of(os.getpid()) == started  # the second cache still holds them
    second.close()
    assert feature_workers_of(os.getpid()) == []


def test_a_cache_dropped_without_closing_lets_go_of_the_workers(workers_at_once):
    task = search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm -mcpu=skylake-avx512")
    cache = FeatureCache("itervar", workers=2)
    cache.get(task, [int(i) for i in task.config_space.sample_indices(8, np.random.default_rng(5))])
    assert feature_workers_of(os.getpid())
    del cache
    gc.collect()
    assert feature_workers_of(os.getpid()) == []


def test_rows_of_a_worker_that_died_are_computed_here(workers_at_once, caplog):
    tuner_pid = os.getpid()

    def dies_in_workers(n):  # a template whose lowering kills any process but the tuner's
        cfg = search_spaces.get_config()
        cfg.define_knob("split", [1, 2, 4, 8])
        if os.getpid() != tuner_pid:
            os._exit(3)
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        s[B].split(B.op.axis[0], factor=cfg["split"].val)
        return s, [A, B]

    search_spaces.template("test_feature_worker_dies")(dies_in_workers)
    task = search_spaces.create_task("test_feature_worker_dies", (64,), "llvm")
    cache = FeatureCache("itervar", workers=2)
    try:
        with caplog.at_level(logging.WARNING, logger=F.__name__):
            x, ok = cache.get(task, [0, 1, 2, 3])
    finally:
        cache.close()
    assert "a feature worker gave no features (crash" in caplog.text
    want_x, want_ok = rows_here(task, [0, 1, 2, 3])
    assert ok.all() and (want_ok == ok).all()
    np.testing.assert_array_equal(x, want_x)


def test_tune_stops_the_feature_workers_it_started(workers_at_once, tmp_path):
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), target="llvm")
    tuner = XGBTuner(task, seed=0, min_train=4, feature_workers=2)
    autotune.tune(task, trials=12, tuner=tuner, db=str(tmp_path / "log.db"), batch_size=4, progress=False,
                  remeasure=False)
    assert len(tuner.model.features) > 12  # the model searched past the measured configs
    assert feature_workers_of(os.getpid()) == []


def test_feature_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_FEATURE_WORKERS", "3")
    assert default_feature_workers() == 3 and FeatureCache().workers == 3
    monkeypatch.setenv("AUTOTUNE_FEATURE_WORKERS", "0")
    assert FeatureCache().workers == 0
    monkeypatch.setenv("AUTOTUNE_FEATURE_WORKERS", "many")
    with pytest.raises(ValueError, match="AUTOTUNE_FEATURE_WORKERS must be a whole number, got 'many'"):
        default_feature_workers()
    monkeypatch.delenv("AUTOTUNE_FEATURE_WORKERS")
    assert 1 <= default_feature_workers() <= F.MAX_FEATURE_WORKERS


@pytest.mark.parametrize("bad", [-1, 2.5, "2", True])
def test_a_bad_worker_count_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=f"workers must be a whole number >= 0 .*got {bad!r}"):
        FeatureCache("itervar", workers=bad)
    refused = f"XGBTuner: feature_workers must be a whole number >= 0 .*got {bad!r}"
    with pytest.raises(AutotuneError, match=refused):
        XGBTuner(feature_workers=bad)
