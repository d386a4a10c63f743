"""apply_history_best and autotune.build: the tuning log flows back into build()."""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import pytest
from helpers import random_array

import autotune
import db
from compiler.target import Target
from db import Record
from search_spaces.dispatch import current_context


def _record(task, cfg, cost, error_kind=None, costs=None):
    """A log row for ``cfg``, keyed by the model of the task's target as ``tune()`` keys it."""
    if costs is None:
        costs = [] if error_kind else [cost]
    return Record(workload_key=task.workload_key, template=task.name, args=list(task.args),
                  target=task.target, target_model=Target(task.target).model, config=cfg.to_json(),
                  config_index=cfg.index, costs=costs, error_kind=error_kind,
                  error_msg="boom" if error_kind else "", build_time=0.1, run_time=0.1, host="h",
                  device="cpu", timestamp=time.time(), run_id=None, gflops=None)


@pytest.fixture
def log(tmp_path):
    with db.open(tmp_path / "tuning.db") as opened:
        yield opened


@pytest.fixture
def task():
    return autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")


def _query(t):
    return current_context().query(t.target, t)


def test_picks_the_fastest_valid_record_and_ignores_errors(log, task):
    a, b, c = task.config_space.sample(3, rng=1)
    log.add([_record(task, a, 3e-3), _record(task, b, 2e-3), _record(task, c, 1e-9, "runtime_error")])
    with autotune.apply_history_best(log):
        assert _query(task).index == b.index


def test_a_record_from_an_older_space_applies_by_its_knob_values(log, task):
    """A template's space that gains knob values shifts every index after them: a log written
    before that holds indices the space now gives to other configs, and its knob values still
    name its configs."""
    a, b = task.config_space.sample(2, rng=4)
    stale = _record(task, a, 1e-3)
    stale.config = {"index": b.index, "knobs": a.knob_values()}
    stale.config_index = b.index
    log.add([stale, _record(task, b, 5e-3)])
    with autotune.apply_history_best(log):
        assert _query(task) == a


def test_a_record_from_before_a_knob_was_added_applies_with_the_knob_s_absent_choice(log):
    """conv2d_nchwc gained ``plane`` (tiles along the whole output plane); its configs logged
    before ran by rows, which ``plane=False`` does: they still apply, as that."""
    task = autotune.create_task("conv2d_nchwc", (1, 16, 14, 14, 64, 3, 3, 2, 1, 1, 8, 16, "float32"),
                                "llvm -mcpu=haswell")
    space = task.config_space
    assert space.default_config["plane"].val
    rows = next(space.get(i) for i in range(len(space)) if not space.get(i)["plane"].val)
    logged = _record(task, rows, 1e-3)
    logged.config = {"index": 0, "knobs": {k: v for k, v in rows.knob_values().items() if k != "plane"}}
    log.add([logged])
    with autotune.apply_history_best(log, transfer=False):
        assert _query(task) == rows


def test_invalid_config_rows_are_reported_not_applied(log, task, caplog):
    a, b = task.config_space.sample(2, rng=2)
    bad = _record(task, a, 1e-6)
    bad.config = {"index": a.index, "knobs": {"no_such_knob": 3}}
    log.add([bad, _record(task, b, 5e-3)])
    with caplog.at_level(logging.WARNING), autotune.apply_history_best(log):
        assert _query(task).index == b.index
    assert "invalid tuning record" in caplog.text


def test_unknown_workload_falls_back_to_default_with_a_warning(log, task, caplog):
    with caplog.at_level(logging.WARNING), autotune.apply_history_best(log, transfer=False):
        cfg = _query(task)
    assert cfg.index == task.config_space.default_config.index
    assert "no tuned config" in caplog.text


def test_nested_contexts_innermost_wins(tmp_path, task):
    a, b = task.config_space.sample(2, rng=3)
    with db.open(tmp_path / "outer.db") as outer, db.open(tmp_path / "inner.db") as inner:
        outer.add(_record(task, a, 1e-3))
        inner.add(_record(task, b, 1e-3))
        with autotune.apply_history_best(outer):
            assert _query(task).index == a.index
            with autotune.apply_history_best(inner):
                assert _query(task).index == b.index
            assert _query(task).index == a.index


@autotune.template("test_history_scale")
def _scale(n, dtype):
    """A template whose knobs do not depend on its shape, so configs transfer between shapes."""
    from compiler import te

    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_knob("factor", [4, 8, 16])
    cfg.define_knob("parallel", [False, True])
    xo, xi = s[B].split(B.op.axis[0], factor=cfg["factor"].val)
    s[B].vectorize(xi)
    if cfg["parallel"].val:
        s[B].parallel(xo)
    return s, [A, B]


# Pinned CPU models: the log is keyed by the model of the target, so the test reads the
# same on every machine. A log made on another CPU model is not borrowed from by default.
_HERE = "llvm -mcpu=znver4"
_ELSEWHERE = "llvm -mcpu=skylake-avx512"


def test_borrows_from_the_nearest_tuned_shape(log, caplog):
    def scale(args, target=_HERE):
        return autotune.create_task("test_history_scale", args, target)

    near, far, other_dtype, new = (scale(a) for a in ((1000, "float32"), (64, "float32"),
                                                      (1024, "float64"), (1024, "float32")))
    nearer_elsewhere = scale((1020, "float32"), _ELSEWHERE)
    near_cfg, far_cfg, dtype_cfg, elsewhere_cfg = (
        t.config_space.get(i) for t, i in ((near, 1), (far, 2), (other_dtype, 3), (nearer_elsewhere, 4)))
    log.add([_record(near, near_cfg, 1e-3), _record(far, far_cfg, 1e-4),
             _record(other_dtype, dtype_cfg, 1e-5), _record(nearer_elsewhere, elsewhere_cfg, 1e-6)])
    with caplog.at_level(logging.WARNING), autotune.apply_history_best(log):
        cfg = _query(new)
    # nearest in shape, same dtype and CPU model; not the fastest elsewhere
    assert cfg.index == near_cfg.index
    assert "borrowing" in caplog.text and "1000" in caplog.text
    with autotune.apply_history_best(log, any_model=True):
        assert _query(new).index == elsewhere_cfg.index  # other models count when asked to
    with autotune.apply_history_best(log, transfer=False):
        assert _query(new).is_fallback


def test_a_well_measured_config_beats_one_lucky_sample(log, task):
    lucky, steady = task.config_space.sample(2, rng=7)
    # Every measurement of a config counts. lucky: 1.0 * (1 + 0.1 / 1) = 1.1 (ms);
    # steady, its three records pooled: median 1.05 of 9 costs, 1.05 * (1 + 0.1 / 3) = 1.085.
    # (Ranked record by record, steady would score 1.05 * (1 + 0.1 / sqrt(3)) = 1.111 and lose.)
    log.add([_record(task, lucky, 1.0e-3)]
            + [_record(task, steady, None, costs=[1.0e-3, 1.05e-3, 1.1e-3]) for _ in range(3)])
    with autotune.apply_history_best(log):
        assert _query(task).index == steady.index


def _source(task, config) -> str:
    """The LLVM IR of ``task`` built with ``config``, named as ``autotune.build`` names it."""
    import compiler

    s, args = task.instantiate(config)
    return compiler.build(s, args, target=task.target, name=task.name).get_source("ll")


def test_autotune_build_uses_the_logged_config_and_exports(log, task, tmp_path, rng):
    default = task.config_space.default_config
    cfg = next(c for c in task.config_space.sample(8, rng=6) if c.index != default.index)
    log.add(_record(task, cfg, 1e-4))
    f = autotune.build("matmul", (32, 32, 32, "float32"), "llvm", db=log)
    logged = _source(task, cfg)
    assert logged != _source(task, default)  # so the next line can tell the two apart
    assert f.get_source("ll") == logged
    a, b = random_array(rng, (32, 32), "float32"), random_array(rng, (32, 32), "float32")
    c = np.full((32, 32), np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    f.export_library(str(tmp_path / "mm.so"))
    import compiler.runtime

    g = compiler.runtime.load_module(str(tmp_path / "mm.so"))
    c2 = np.full((32, 32), np.nan, "float32")
    g(a, b, c2)
    np.testing.assert_array_equal(c, c2)


# ---------------------------------------------------------------------------- one ranking

# Two configs whose per-record mean and confident median disagree (seconds):
# "steady_mean" is one record of 3 ms: mean 3, confident 3 * (1 + 0.1) = 3.3 ms;
# "good_median" has slow outliers: [1, 1, 10] ms (mean 4), then a re-measurement [1, 9] ms
# (mean 5): pooled median 1 of 5, confident 1 * (1 + 0.1 / sqrt(5)) = 1.045 ms.
# By the mean of a record the first would win; by the one ranking the second does.
_STEADY, _OUTLIER, _AGAIN = [3e-3], [1e-3, 1e-3, 10e-3], [1e-3, 9e-3]


def _disagreeing(log, task):
    steady, good = (task.config_space.get(i) for i in (1, 4))
    log.add([_record(task, steady, None, costs=_STEADY), _record(task, good, None, costs=_OUTLIER),
             dataclasses.replace(_record(task, good, None, costs=_AGAIN), kind=db.REMEASURE)])
    assert min(log.records(task), key=lambda r: r.mean_cost).config_index == steady.index
    return steady, good


def test_prune_never_deletes_the_config_apply_history_best_picks(log):
    from autotune.selection import prune

    task = autotune.create_task("test_history_scale", (1000, "float32"), _HERE)
    other = autotune.create_task("test_history_scale", (64, "float32"), _HERE)
    steady, good = _disagreeing(log, task)
    log.add([_record(other, other.config_space.get(0), 2e-3), _record(other, other.config_space.get(2), 5e-3),
             _record(other, other.config_space.get(3), None, error_kind="runtime_error")])
    with autotune.apply_history_best(log):
        assert _query(task).index == good.index and _query(other).index == 0
    assert prune(log, keep_best=1) == 1 + 2  # the steady config; the other's slower config and its error
    assert {(r.config_index, r.kind) for r in log.records(task)} == {(good.index, db.TRIAL),
                                                                     (good.index, db.REMEASURE)}
    with autotune.apply_history_best(log):  # a fresh context: the same answers from the pruned log
        assert _query(task).index == good.index and _query(other).index == 0
    with pytest.raises(ValueError, match="keep_best"):
        prune(log, keep_best=0)


def test_borrowing_and_best_agree_with_the_one_ranking(log, caplog):
    from autotune.report import summarize
    from autotune.selection import best, confident_cost
    from autotune.transfer import borrow

    tuned = autotune.create_task("test_history_scale", (1000, "float32"), _HERE)
    steady, good = _disagreeing(log, tuned)
    (top, second) = best(log, tuned, k=2)
    assert (top.config["index"], second.config["index"]) == (good.index, steady.index)
    assert top.score == pytest.approx(confident_cost(_OUTLIER + _AGAIN)) and len(top.records) == 2
    (summary,) = summarize(log)  # what `autotune best` and the report print
    assert summary.best_config == good.knob_values() and summary.trials == 2 and summary.remeasured == 1
    assert summary.best_cost == pytest.approx(1e-3)

    new_shape = autotune.create_task("test_history_scale", (1024, "float32"), _HERE)
    new_model = autotune.create_task("test_history_scale", (1000, "float32"), _ELSEWHERE)
    with caplog.at_level(logging.WARNING), autotune.apply_history_best(log):
        assert _query(new_shape).index == good.index  # borrowed from another shape
        assert _query(new_model).is_fallback          # other models only when asked
    assert "borrowing the best config of test_history_scale(1000,float32)" in caplog.text
    with autotune.apply_history_best(log, transfer=False, any_model=True):
        assert _query(new_model).index == good.index  # the same shape on another CPU model
        assert _query(new_shape).is_fallback           # but no other shape
    borrowed = borrow(log, new_model, other_shapes=False, other_models=True)
    assert borrowed.source_key == tuned.workload_key and borrowed.index == good.index
    # a config refused by the borrower is skipped for the next best
    assert borrow(log, new_shape, accept=lambda config: config.index != good.index).index == steady.index


# ---------------------------------------------------------------------------- AutoTVM's query


def test_query_takes_a_workload_tuple_as_autotvm_does(log, task):
    tuned = task.config_space.sample(1, rng=9)[0]
    log.add(_record(task, tuned, 1e-3))
    ctx = autotune.apply_history_best(log, transfer=False)
    assert ctx.query(task.target, ("matmul", 32, 32, 32, "float32")) == tuned
    assert ctx.query(task.target, task) == tuned
    # a workload the log does not know: None from lookup, the fallback (the default config) from
    # query, as in AutoTVM, entered or not
    assert ctx.lookup(task.target, ("matmul", 16, 32, 32, "float32")) is None
    assert ctx.query(task.target, ("matmul", 16, 32, 32, "float32")).is_fallback
    with ctx:
        assert current_context().query(task.target, ("matmul", 16, 32, 32, "float32")).is_fallback
    with pytest.raises(ValueError, match="template name"):
        ctx.query(task.target, (32, 32, 32))


# ---------------------------------------------------------------------------- pin files


def test_a_pin_file_answers_as_the_log_does_and_lends_to_other_shapes(log, tmp_path, caplog):
    from autotune.pin import write_pin

    tuned = autotune.create_task("test_history_scale", (1000, "float32"), _HERE)
    slow, fast = tuned.config_space.sample(2, rng=4)
    log.add([_record(tuned, slow, 2e-3), _record(tuned, fast, 1e-3)])
    path = tmp_path / "pinned.json"
    assert write_pin(log, path) == 1
    log.close()  # a deployment reads the pin file alone
    ctx = autotune.apply_history_best(path)
    assert ctx.query(_HERE, ("test_history_scale", 1000, "float32")) == fast
    with caplog.at_level(logging.WARNING):
        borrowed = ctx.query(_HERE, ("test_history_scale", 1024, "float32"))
    assert borrowed.index == fast.index
    assert borrowed.borrowed_from == f"test_history_scale(1000,float32) on {_HERE}"
    assert "borrowing the best config of test_history_scale(1000,float32)" in caplog.text
    assert autotune.apply_history_best(path, transfer=False).lookup(_HERE, ("test_history_scale", 1024,
                                                                            "float32")) is None
    assert ctx.lookup(_ELSEWHERE, ("test_history_scale", 1000, "float32")) is None  # another CPU model


def test_a_pinned_config_that_does_not_fit_is_reported_not_applied(tmp_path, caplog):
    import json

    entry = {"template": "test_history_scale", "args": [1000, "float32"], "target": _HERE, "model": "znver4",
             "config": {"factor": 5, "parallel": False}, "cost": 1e-3, "records": 1}
    path = tmp_path / "pinned.json"
    path.write_text(json.dumps({"format": "autotune-pin", "version": 1, "entries": [entry]}))
    with caplog.at_level(logging.WARNING):
        pinned = autotune.apply_history_best(path)
        assert pinned.lookup(_HERE, ("test_history_scale", 1000, "float32")) is None
    assert "ignoring the pinned config" in caplog.text
