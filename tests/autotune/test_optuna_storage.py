"""The Optuna tuner keeps its study beside the tuning log: one trial per measured config,
continued when the run is resumed, readable by any other process (and optuna-dashboard)."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autotune
import db
from autotune.errors import AutotuneError
from autotune.tuner.optuna_tuner import OptunaTuner, study_name
from measure import Artifact, Builder, BuildReply, ErrorKind, MeasureOptions, MeasureResult, Runner

ROOT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter: what another process (optuna-dashboard) reads from the storage.
_READ_STUDY = """
import json, sys, optuna
study = optuna.load_study(study_name=sys.argv[1], storage=sys.argv[2])
print(json.dumps([[t.state.name, t.value, t.user_attrs] for t in study.trials]))
"""


class _NoBuild(Builder):
    """Hands every candidate on uncompiled: the scripted runner below needs no code."""

    def build(self, inputs, gates):
        for i, _ in enumerate(inputs):
            yield i, BuildReply(Artifact("none", b""), None, 0.0)


class _ScriptedRunner(Runner):
    """Every config gets a cost from its index; every fifth fails."""

    def run(self, jobs, gates):
        while (job := jobs.get()) is not None:
            i, inp, _ = job
            index = inp.config.index
            if index % 5 == 0:
                yield i, MeasureResult((), ErrorKind.RUNTIME_ERROR, "scripted failure", 0.0, 0.0,
                                       time.time(), "script")
            else:
                yield i, MeasureResult((1e-3 + index * 1e-6,), None, "", 0.0, 0.0, time.time(), "script")


def _task(n: int = 32):
    return autotune.create_task("matmul", (n, n, n, "float32"), "llvm")


def _read_study(name: str, url: str) -> list:
    """The study's trials as another process sees them: (state, value, user attributes)."""
    out = subprocess.run([sys.executable, "-c", _READ_STUDY, name, url], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


def _check_agrees(trials: list, log_url, task) -> None:
    """Each config the log holds a trial of is one trial of the study: COMPLETE with the
    trial's mean cost, or FAIL; the study holds no other trial."""
    with db.open(log_url) as log:
        records = [r for r in log.records(task) if r.kind == db.TRIAL]
    assert {t[0] for t in trials} <= {"COMPLETE", "FAIL"}  # no asks, nothing left running
    by_index = {t[2]["config_index"]: t for t in trials}
    assert len(by_index) == len(trials) == len(records)  # no config twice
    for r in records:
        state, value, attrs = by_index[r.config_index]
        if r.error_kind is None:
            assert state == "COMPLETE" and math.isclose(value, sum(r.costs) / len(r.costs), rel_tol=1e-12)
        else:
            assert state == "FAIL" and value is None
        assert attrs["config"].endswith(f",{r.config_index}")  # AutoTVM's form of the config


def test_study_beside_an_sqlite_log_is_the_log_s_trials(tmp_path, caplog):
    task, path = _task(), tmp_path / "tuning.db"
    tuner = OptunaTuner()
    with MeasureOptions() as options, caplog.at_level(logging.INFO, logger="autotune"):
        result = autotune.tune(task, trials=6, tuner=tuner, db=path, measure_option=options, batch_size=3,
                               seed=0, progress=False)
    assert result.trials == 6 and result.remeasured > 0
    assert tuner.storage_url == f"sqlite:///{tmp_path / 'tuning.optuna.db'}"
    assert tuner.study.study_name == study_name(task) and task.workload_key in study_name(task)
    assert any("optuna study" in r.getMessage() and str(tmp_path / "tuning.optuna.db") in r.getMessage()
               for r in caplog.records)
    trials = _read_study(study_name(task), tuner.storage_url)
    assert len(trials) == 6  # the re-measurements add no trials
    _check_agrees(trials, path, task)


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request, tmp_path):
    """A fresh tuning log: an SQLite path, or a PostgreSQL URL (skipped without a server)."""
    if request.param == "sqlite":
        yield str(tmp_path / "tuning.db")
        return
    url = request.getfixturevalue("new_postgres_url")()
    yield url
    from sqlalchemy import text

    schema = url.split("search_path%3D")[-1]  # the fixture drops its own schema, not the studies'
    with request.getfixturevalue("postgres_admin").begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}_optuna" CASCADE'))


def test_resuming_continues_the_study_without_duplicates(log_url):
    task, other = _task(), _task(16)
    with MeasureOptions(_NoBuild(), _ScriptedRunner()) as options:
        first = OptunaTuner()
        autotune.tune(task, trials=10, tuner=first, db=log_url, measure_option=options, batch_size=4, seed=0,
                      progress=False, remeasure=False)
        url = first.storage_url
        assert url is not None and url != log_url
        before = _read_study(study_name(task), url)
        assert {t[0] for t in before} >= {"COMPLETE", "FAIL"}
        _check_agrees(before, log_url, task)

        again = OptunaTuner()
        second = autotune.tune(task, trials=8, tuner=again, db=log_url, measure_option=options, batch_size=4,
                               seed=1, progress=False, remeasure=False)
        assert again.storage_url == url and len(second.history) == 8
        measured_before = {t[2]["config_index"] for t in before}
        assert not measured_before & {t.config.index for t in second.history}  # not measured again
        after = _read_study(study_name(task), url)
        assert after[:len(before)] == before  # the same study, continued
        _check_agrees(after, log_url, task)

        # another workload has a study of its own in the same storage
        autotune.tune(other, trials=3, tuner="optuna", db=log_url, measure_option=options, seed=0,
                      progress=False, remeasure=False)
    import optuna

    assert sorted(optuna.get_all_study_names(url)) == sorted([study_name(task), study_name(other)])
    assert _read_study(study_name(task), url) == after
    _check_agrees(_read_study(study_name(other), url), log_url, other)


def test_an_in_memory_log_keeps_the_study_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tuner = OptunaTuner()
    with MeasureOptions(_NoBuild(), _ScriptedRunner()) as options:
        for where in (None, ":memory:"):
            tuner = OptunaTuner()
            autotune.tune(_task(), trials=4, tuner=tuner, db=where, measure_option=options, seed=0,
                          progress=False, remeasure=False)
            assert tuner.storage_url is None and len(tuner.study.trials) == 4
            assert len(tuner.sampler_study.trials) >= 4
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_storage_wins(tmp_path):
    url, task = f"sqlite:///{tmp_path / 'mine.db'}", _task()
    tuner = OptunaTuner(storage=url, study_name="mine")
    with MeasureOptions(_NoBuild(), _ScriptedRunner()) as options:
        autotune.tune(task, trials=4, tuner=tuner, db=tmp_path / "tuning.db", measure_option=options,
                      seed=0, progress=False, remeasure=False)
    assert tuner.storage_url == url and not (tmp_path / "tuning.optuna.db").exists()
    trials = _read_study("mine", url)
    assert len(trials) == 4
    _check_agrees(trials, tmp_path / "tuning.db", task)


def test_a_study_of_other_knobs_is_refused(tmp_path):
    task, url = _task(), f"sqlite:///{tmp_path / 'studies.db'}"
    tuner = OptunaTuner(task, seed=0, storage=url, study_name="s", knob_distribution="int")
    tuner.update([_Input(c) for c in tuner.next_batch(3)], [1e-3] * 3)
    with pytest.raises(AutotuneError, match="study 's' in .* holds trials of other knobs"):
        _ = OptunaTuner(task, seed=0, storage=url, study_name="s").study
    assert study_name(task, "int") != study_name(task)  # tune()'s own names keep them apart


class _Input:
    def __init__(self, config):
        self.config = config
