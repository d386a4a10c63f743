"""The tuning log on SQLite and PostgreSQL: storing, runs, import/export, merge, prune, summary."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import db

ARGS = [64, 64, 64, "float32"]
ZEN4 = dict(target="llvm -mcpu=znver4", target_model="znver4")


def rec(key: str = "mm-zen4", config: dict | None = None, costs: list[float] | None = None,
        t: float = 0.0, **fields: object) -> db.Record:
    values: dict[str, object] = dict(workload_key=key, template="matmul", args=ARGS, **ZEN4,
                                     config=config if config is not None else {"t": 0},
                                     costs=costs if costs is not None else [1.0], timestamp=1.7e9 + t)
    values.update(fields)
    return db.Record(**values)


def test_every_field_round_trips(tlog: db.TuningLog) -> None:
    run = tlog.start_run("xgb", {"trials": 500, "seed": [1, 2], "early_stopping": None})
    args = (8, [1, 2], {"layout": "NCHW", "pad": (1, 1)})
    ok = rec(args=args, config={"tile_y": [4, 16], "unroll": 1},
             config_index=2**40 + 3, costs=[1.25e-3, 1.5e-3, 0.1 + 0.2], build_time=0.75, run_time=0.125,
             host="node-7", device="AMD Ryzen 9 7950X", t=0.123456789, run_id=run, gflops=321.0625)
    failed = rec(args=args, config={"tile_y": [1, 64], "unroll": 0}, config_index=0, costs=[],
                 error_kind="runtime", error_msg="segfault in candidate: ünïcode\nline 2 \"quoted\"",
                 build_time=0.5, run_time=None, host="node-7", device="", t=1.0, run_id=run, gflops=None)
    cuda = rec("mm-h100", target="cuda -arch=sm_90", target_model="sm_90", config={"tile_y": [8, 8]},
               costs=[2e-5], t=2.0, device="NVIDIA H100")
    assert tlog.add([ok, failed]) == 2
    assert tlog.add(cuda) == 1
    tlog.end_run(run, "finished")

    assert tlog.records() == [ok, failed, cuda]
    assert [r.uid for r in tlog.records()] == [ok.uid, failed.uid, cuda.uid]
    assert tlog.records("mm-zen4", errors=True) == [failed]
    assert tlog.records(errors=False) == [ok, cuda]
    assert tlog.records(target_model="sm_90") == [cuda]
    assert tlog.records(target="llvm -mcpu=znver4", run_id=run) == [ok, failed]
    assert tlog.records(limit=1) == [ok]
    assert tlog.records(SimpleNamespace(workload_key="mm-zen4")) == [ok, failed]  # a task names its workload
    with pytest.raises(TypeError, match="workload key"):
        tlog.records(42)
    assert tlog.count() == 3 and tlog.count("mm-zen4") == 2 and tlog.count(errors=True) == 1
    assert tlog.workloads() == [db.Workload("mm-zen4", "matmul", ok.args, **ZEN4),
                                db.Workload("mm-h100", "matmul", ARGS, "cuda -arch=sm_90", "sm_90")]
    (info,) = tlog.runs()
    assert (info.run_id, info.tuner, info.status) == (run, "xgb", "finished")
    assert info.options == {"trials": 500, "seed": [1, 2], "early_stopping": None}
    assert info.ended is not None and info.ended >= info.started


def test_adding_is_idempotent_and_atomic(tlog: db.TuningLog) -> None:
    records = [rec(config={"t": i}, t=i) for i in range(5)]
    assert tlog.add(records) == 5
    assert tlog.add(records) == 0
    assert tlog.add(records + [rec(config={"t": 9}, t=9)]) == 1
    assert tlog.add([]) == 0
    with pytest.raises(TypeError, match="Record"):
        tlog.add([rec(config={"t": 10}), {"not": "a record"}])
    assert tlog.count() == 6


def test_unknown_run_ids_get_a_placeholder_run(tlog: db.TuningLog) -> None:
    tlog.add(rec(run_id="f" * 32))
    assert [(r.run_id, r.status) for r in tlog.runs()] == [("f" * 32, "unknown")]
    with pytest.raises(db.TuningLogError, match="no run 'nope'"):
        tlog.end_run("nope")


def test_runs_of_a_workload_are_the_runs_that_wrote_its_records(tlog: db.TuningLog) -> None:
    hot = tlog.start_run("xgb", {"cache_flush": False})
    cold = tlog.start_run("xgb", {"cache_flush": True})
    elsewhere = tlog.start_run("xgb", {})
    tlog.add([rec(run_id=hot, t=1), rec(run_id=cold, config={"t": 1}, t=2),
              rec(run_id=cold, config={"t": 2}, t=3), rec(key="other", run_id=elsewhere, t=4),
              rec(key="no-run", t=5)])
    runs = tlog.runs_of("mm-zen4")
    assert [(r.run_id, r.options) for r in runs] == [(hot, {"cache_flush": False}),
                                                     (cold, {"cache_flush": True})]
    assert [r.run_id for r in tlog.runs_of("other")] == [elsewhere]
    assert tlog.runs_of("no-run") == [] and tlog.runs_of("never-seen") == []


def test_a_run_without_heartbeats_reads_as_dead(tlog: db.TuningLog) -> None:
    run = tlog.start_run("xgb", heartbeat_interval=2.0)
    (info,) = tlog.runs()
    assert info.status == "running" and info.heartbeat == info.started and info.heartbeat_interval == 2.0
    grace = db.DEAD_AFTER_BEATS * 2.0
    assert tlog.runs(now=info.started + grace - 0.5)[0].status == "running"
    assert tlog.runs(now=info.started + grace + 0.5)[0].status == "dead"
    tlog.heartbeat(run)
    (beaten,) = tlog.runs()
    assert beaten.heartbeat >= info.heartbeat
    assert tlog.runs(now=beaten.heartbeat + grace - 0.5)[0].status == "running"
    assert tlog.runs(now=beaten.heartbeat + grace + 0.5)[0].status == "dead"
    tlog.end_run(run, "interrupted")
    (ended,) = tlog.runs(now=beaten.heartbeat + 100 * grace)
    assert ended.status == "interrupted"  # a run that ended is never dead
    tlog.heartbeat(run)  # beats after the end change nothing
    assert tlog.runs()[0].heartbeat == ended.heartbeat
    tlog.add(rec(run_id="f" * 32))  # a placeholder run is not running: never dead either
    assert {r.run_id: r.status for r in tlog.runs(now=ended.heartbeat + 100 * grace)}["f" * 32] == "unknown"
    with pytest.raises(ValueError, match="heartbeat_interval"):
        tlog.start_run("xgb", heartbeat_interval=0)


def test_keep_alive_beats_until_the_context_ends(tlog: db.TuningLog) -> None:
    run = tlog.start_run("xgb", heartbeat_interval=0.05)
    other = tlog.start_run("ga", heartbeat_interval=0.05)
    started = tlog.runs()[0].heartbeat
    with tlog.keep_alive([run]):
        deadline = time.monotonic() + 60
        while tlog.runs()[0].heartbeat == started:  # wait for a beat; time nothing
            assert time.monotonic() < deadline, "no heartbeat within a minute"
            time.sleep(0.05)
    last = {r.run_id: r.heartbeat for r in tlog.runs()}
    assert last[other] < last[run]  # only the runs named beat
    time.sleep(0.2)
    assert {r.run_id: r.heartbeat for r in tlog.runs()} == last  # and no beat after the context


def test_the_heartbeat_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(db.HEARTBEAT_ENV, raising=False)
    assert db.default_heartbeat_interval() == db.HEARTBEAT_INTERVAL_S
    monkeypatch.setenv(db.HEARTBEAT_ENV, "0.25")
    assert db.default_heartbeat_interval() == 0.25
    with db.open(":memory:") as tlog:
        tlog.start_run("xgb")
        assert tlog.runs()[0].heartbeat_interval == 0.25
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv(db.HEARTBEAT_ENV, bad)
        with pytest.raises(db.TuningLogError, match=db.HEARTBEAT_ENV):
            db.default_heartbeat_interval()


def _workload_fixture(tlog: db.TuningLog) -> None:
    tlog.add([
        rec(config={"t": 1}, costs=[3.0, 5.0], t=1),          # mean 4.0, median 4.0
        rec(config={"t": 2}, costs=[1.0, 1.0, 10.0], t=2),    # mean 4.0, median 1.0
        rec(config={"t": 3}, costs=[2.0, 2.5], t=3),          # mean 2.25, median 2.25
        rec(config={"t": 1}, costs=[3.5], t=4),               # config 1 again: mean 3.5
        rec(config={"t": 4}, costs=[], error_kind="build", t=5),
        rec(config={"t": 5}, costs=[6.0], t=6),
        rec("other", args=[32, 32, 32, "float32"], config={"t": 0}, costs=[1e-6], t=7),  # never mixed in
    ])


def test_export_import_round_trip_is_idempotent(tlog: db.TuningLog, other_url: str, tmp_path: Path) -> None:
    run = tlog.start_run("ga", {"population": 16})
    records = [rec(config={"t": i}, costs=[1.0 + i], t=i, run_id=run) for i in range(7)]
    records.append(rec(config={"t": 99}, costs=[], error_kind="build", error_msg="x", t=8, run_id=run))
    tlog.add(records)
    tlog.end_run(run, "interrupted")
    path = tmp_path / "log.jsonl"
    assert tlog.export_jsonl(path) == 8
    lines = path.read_text().splitlines()
    assert len(lines) == 9 and json.loads(lines[0])["run"]["status"] == "interrupted"

    with db.open(other_url) as other:
        assert other.import_jsonl(path) == 8
        assert other.import_jsonl(path) == 0
        assert other.records() == tlog.records()
        assert other.runs() == tlog.runs()
    assert tlog.import_jsonl(path) == 0
    assert tlog.count() == 8


def test_import_of_a_malformed_file_stores_nothing(tlog: db.TuningLog, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = [rec(config={"t": i}, t=i).to_json() for i in range(3)]
    path.write_text("\n".join([good[0], "", good[1], '{"workload_key": "k"}', good[2]]) + "\n")
    with pytest.raises(db.RecordError, match=r"bad.jsonl:4: .*lacks field"):
        tlog.import_jsonl(path)
    assert tlog.count() == 0
    path.write_text(good[0] + "\n{not json\n")
    with pytest.raises(db.RecordError, match=r"bad.jsonl:2: .*not valid JSON|bad.jsonl:2:"):
        tlog.import_jsonl(path)
    assert tlog.count() == 0
    with pytest.raises(db.TuningLogError, match="cannot read"):
        tlog.import_jsonl(tmp_path / "missing.jsonl")


def test_merge_adds_only_what_is_new(tlog: db.TuningLog, other_url: str, tmp_path: Path) -> None:
    a, b, c = (rec(config={"t": i}, costs=[float(i + 1)], t=i) for i in range(3))
    run = tlog.start_run("random")
    tlog.add([a, b])
    with db.open(other_url) as other:
        other_run = other.start_run("xgb", {"trials": 3})
        other.add([b, c, rec("mm-h100", target="cuda", target_model="sm_90", run_id=other_run)])
        assert tlog.merge(other) == 2
        assert tlog.merge(other) == 0
        assert other.count() == 3
    assert tlog.merge(other_url) == 0
    assert tlog.merge(tlog) == 0
    assert tlog.count() == 4
    assert {r.run_id for r in tlog.runs()} == {run, other_run}
    # merging an SQLite file into this log (whatever its backend)
    with db.open(tmp_path / "third.db") as third:
        third.add(rec(config={"t": 50}, costs=[9.0], t=50))
    assert tlog.merge(tmp_path / "third.db") == 1
    assert [r.config["t"] for r in tlog.records("mm-zen4")] == [0, 1, 2, 50]


def test_prune_keeps_the_successful_records_of_the_configs_named(tlog: db.TuningLog) -> None:
    _workload_fixture(tlog)
    tlog.add(rec("only-errors", config={"t": 1}, costs=[], error_kind="build"))
    tlog.add(rec(config={"t": 3}, costs=[], error_kind="timeout", t=20, kind=db.REMEASURE))
    assert tlog.count() == 9
    # configs 1 and 3 of mm-zen4 (both records of config 1; config 3's error goes), nothing of
    # "only-errors"; "other" is not named: left alone
    assert tlog.prune({"mm-zen4": [{"t": 1}, {"t": 3}], "only-errors": [], "never-seen": [{"t": 0}]}) == 5
    assert [(r.workload_key, r.config["t"], r.costs) for r in tlog.records()] == [
        ("mm-zen4", 1, [3.0, 5.0]), ("mm-zen4", 3, [2.0, 2.5]), ("mm-zen4", 1, [3.5]), ("other", 0, [1e-6])]
    assert [w.key for w in tlog.workloads()] == ["mm-zen4", "other"]
    assert tlog.prune({"mm-zen4": [{"t": 1}, {"t": 3}]}) == 0
    assert tlog.prune({"mm-zen4": [{"t": 3}], "other": []}) == 3
    assert [(r.workload_key, r.config["t"]) for r in tlog.records()] == [("mm-zen4", 3)]
    assert tlog.prune({}) == 0


def test_summary(tlog: db.TuningLog) -> None:
    _workload_fixture(tlog)
    tlog.add(rec("other", args=[32, 32, 32, "float32"], config={"t": 1}, costs=[2e-6], gflops=5.0, t=8))
    tlog.add(rec("broken", config={"t": 1}, costs=[], error_kind="build", target="cuda", target_model=""))
    tlog.add([rec(config={"t": 3}, costs=[2.0], t=9, kind=db.REMEASURE),  # measurements, not trials
              rec(config={"t": 1}, costs=[], error_kind="timeout", t=10, kind=db.REMEASURE)])
    rows = tlog.summary()
    assert [(r.workload_key, r.trials, r.errors, r.remeasured) for r in rows] == [
        ("broken", 1, 1, 0), ("mm-zen4", 6, 1, 2), ("other", 2, 0, 0)]
    assert rows[1] == db.SummaryRow("mm-zen4", "matmul", "llvm -mcpu=znver4", "znver4", 6, 1, 2,
                                    error_kinds={"build": 1})  # trials only: the failed re-measurement apart
    assert rows[0].error_kinds == {"build": 1} and rows[2].error_kinds == {}


def test_trials_and_remeasurements_are_told_apart(tlog: db.TuningLog) -> None:
    run = tlog.start_run("random")
    trials = [rec(config={"t": i}, costs=[1.0 + i], t=i, run_id=run) for i in range(3)]
    again = [rec(config={"t": 0}, costs=[0.5], t=5 + i, run_id=run, kind=db.REMEASURE) for i in range(2)]
    tlog.add(trials + again)
    assert tlog.count() == 5 and tlog.count("mm-zen4", kind=db.TRIAL) == 3
    assert tlog.count(kind=db.REMEASURE) == 2 and tlog.count(kind=db.REMEASURE, errors=True) == 0
    assert tlog.records(kind=db.TRIAL) == trials and tlog.records(kind=db.REMEASURE) == again
    assert [r.kind for r in tlog.records(run_id=run)] == ["trial"] * 3 + ["remeasure"] * 2
    with pytest.raises(ValueError, match="kind must be one of trial, remeasure"):
        tlog.count(kind="trials")


def test_malformed_rows_are_reported_not_used(tlog: db.TuningLog, log_url: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    from sqlalchemy import create_engine, text

    _workload_fixture(tlog)
    engine = create_engine(log_url if "://" in log_url else f"sqlite:///{log_url}")
    with engine.begin() as conn:  # someone edits the log by hand: a broken config, a cost that is text
        sql = "UPDATE records SET {} = :bad WHERE config = :config"
        conn.execute(text(sql.format("config")), {"bad": '{"t": 3', "config": '{"t":3}'})
        conn.execute(text(sql.format("costs")), {"bad": '["fast"]', "config": '{"t":2}'})
    engine.dispose()
    with caplog.at_level(logging.WARNING, logger="db"):
        assert [r.config["t"] for r in tlog.records("mm-zen4", errors=False)] == [1, 1, 5]
        assert len(tlog.records()) == 5
    assert sum("malformed record row" in r.getMessage() for r in caplog.records) >= 2


def test_db_imports_no_other_package() -> None:
    import subprocess
    import sys

    code = ("import sys, db; bad = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'compiler', 'search_spaces', 'autotune', 'measure'}); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_reopening_keeps_everything(log_url: str) -> None:
    with db.open(log_url) as first:
        first.add([rec(config={"t": i}, t=i) for i in range(3)])
    with db.open(log_url) as again:
        assert again.count() == 3
        assert "***" in repr(again) or "://" not in log_url


def test_sqlite_log_is_in_wal_mode(tmp_path: Path) -> None:
    import sqlite3

    with db.open(tmp_path / "sub" / "dir" / "t.db") as tlog:
        tlog.add(rec())
    with sqlite3.connect(tmp_path / "sub" / "dir" / "t.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_urls_and_memory(tmp_path: Path) -> None:
    with db.open(f"sqlite:///{tmp_path / 'u.db'}") as tlog:
        tlog.add(rec())
    with db.open(tmp_path / "u.db") as tlog:
        assert tlog.count() == 1
    with db.open(":memory:") as tlog:
        tlog.add(rec())
        assert tlog.count() == 1


def test_open_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, just words " * 100)
    with pytest.raises(db.TuningLogError, match="notes.txt.*not a database"):
        db.open(tmp_path / "notes.txt")
    with pytest.raises(db.TuningLogError, match="is a directory"):
        db.open(tmp_path)
    with pytest.raises(db.TuningLogError, match="unsupported database 'mysql'"):
        db.open("mysql://user:hunter2@localhost/tuning")


def test_unreachable_postgres_names_the_url_without_password() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(db.TuningLogError) as info:
        db.open("postgresql://tuner:hunter2@127.0.0.1:1/tuning")
    message = str(info.value)
    assert "postgresql+psycopg://tuner:***@127.0.0.1:1/tuning" in message
    assert "hunter2" not in message and "hunter2" not in str(info.value.__cause__)


@pytest.mark.parametrize("url", [
    "postgresql://autotune:s3cr:et@127.0.0.1:9/x",
    "postgresql+psycopg://autotune@127.0.0.1:9/x?password=s3cr:et",
    "postgresql://autotune@127.0.0.1:9/x?sslmode=disable&PASSWORD=s3cr:et",
])
def test_a_log_never_names_its_password(url):
    assert "s3cr" not in db.hide_passwords(f"cannot open {url}: refused")
    with pytest.raises(db.TuningLogError) as info:
        db.open(url)
    assert "s3cr" not in str(info.value)
