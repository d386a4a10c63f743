"""Logs written by earlier versions of the schema open, and are migrated, on SQLite and PostgreSQL.

The logs come from ``tests/db/data`` (see its README): made by the code of their time, never
by today's.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from schema_probe import engine_of, revision_and_differences, schema_version, upgrade_to
from sqlalchemy import MetaData, insert, text

import db
import db.schema

DATA = Path(__file__).parent / "data"
V1_SQLITE = DATA / "tuning_log_v1.db"
V1_POSTGRES_DDL = DATA / "tuning_log_v1.postgresql.sql"
V1_TABLES = ("schema_version", "workloads", "tuning_runs", "records")  # in foreign-key order
V4_SQLITE = DATA / "tuning_log_v4.db"
V4_TABLES = ("workloads", "tuning_runs", "records", "config_stats", "workload_counts")


def _rows(path: Path, tables: tuple[str, ...]) -> dict[str, list[dict]]:
    """Every row of some tables of an SQLite log, per table."""
    engine = engine_of(str(path))
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        rows = {name: [dict(r._mapping) for r in conn.execute(meta.tables[name].select())]
                for name in tables}
    engine.dispose()
    return rows


def _v1_rows() -> dict[str, list[dict]]:
    """Every row of the version-1 SQLite log, per table."""
    return _rows(V1_SQLITE, V1_TABLES)


@pytest.fixture(params=["sqlite", "postgres"])
def v1_log(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A tuning log at schema version 1: a copy of the SQLite file, or its tables created in a
    fresh PostgreSQL schema with version 1's DDL and filled with the file's rows."""
    if request.param == "sqlite":
        path = tmp_path / "v1.db"
        shutil.copyfile(V1_SQLITE, path)
        return str(path)
    new_postgres_url: Callable[[], str] = request.getfixturevalue("new_postgres_url")
    url = new_postgres_url()
    engine = engine_of(url)
    with engine.begin() as conn:
        for statement in V1_POSTGRES_DDL.read_text().split(";"):
            if statement.strip() and not statement.strip().startswith("INSERT INTO schema_version"):
                conn.execute(text(statement))
        meta = MetaData()
        meta.reflect(conn)
        for name, rows in _v1_rows().items():
            if rows:
                conn.execute(insert(meta.tables[name]), rows)
        for table in ("workloads", "records"):  # the ids were copied: move the sequences past them
            conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                              f"(SELECT max(id) FROM {table}))"))
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def v4_log(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A tuning log at schema version 4, with the statistics version 4 kept: a copy of the
    SQLite file, or version 4's tables made in a fresh PostgreSQL schema (by the revisions)
    and filled with the file's rows."""
    if request.param == "sqlite":
        path = tmp_path / "v4.db"
        shutil.copyfile(V4_SQLITE, path)
        return str(path)
    url = request.getfixturevalue("new_postgres_url")()
    upgrade_to(url, "v4")
    engine = engine_of(url)
    with engine.begin() as conn:
        meta = MetaData()
        meta.reflect(conn)
        for name, rows in _rows(V4_SQLITE, V4_TABLES).items():
            if rows:
                conn.execute(insert(meta.tables[name]), rows)
        for table in ("workloads", "records"):
            conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                              f"(SELECT max(id) FROM {table}))"))
    engine.dispose()
    return url


def _v4_ranking(url: str) -> dict[str, list[tuple]]:
    """Per workload key, the configs in version 4's ranking order as its statistics held them:
    fingerprint, config, count, median, score, minimum, maximum, work, record ids."""
    engine = engine_of(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT w.key, s.knobs_hash, s.config, s.n_costs, s.median_cost, s.score, s.min_cost, "
            "s.max_cost, s.flop, s.record_ids, s.costs FROM config_stats s JOIN workloads w ON "
            "w.id = s.workload_id ORDER BY w.key, s.score, s.knobs_hash")).all()
    engine.dispose()
    out: dict[str, list[tuple]] = {}
    for key, *fields, record_ids, costs in rows:
        assert len(json.loads(costs)) == fields[2]  # a real version-4 row: its costs as a JSON list
        out.setdefault(key, []).append((*fields, sorted(json.loads(record_ids))))
    return out


def test_a_version_4_log_keeps_its_ranking_and_statistics(v4_log: str) -> None:
    before = _v4_ranking(v4_log)
    assert schema_version(v4_log) == 4 and len(before) == 3
    assert sum(len(configs) for configs in before.values()) == 18
    with db.open(v4_log) as log:
        assert revision_and_differences(v4_log) == (db.schema.HEAD_REVISION, [])
        for key, configs in before.items():
            after = [(s.knobs_hash, db.canonical_json(s.config), s.count, s.median, s.score, s.min_cost,
                      s.max_cost, s.flop, _record_ids(v4_log, log.records(key, knobs_hash=s.knobs_hash)))
                     for s in log.config_stats(key)]
            assert after == configs
        # the migrated log goes on: a new cost joins the best config's statistics
        best = log.config_stats("mm64-z4", limit=1)[0]
        record = log.records("mm64-z4", knobs_hash=best.knobs_hash)[0]
        log.add(db.Record(workload_key="mm64-z4", template=record.template, args=record.args,
                          target=record.target, target_model=record.target_model, config=record.config,
                          costs=[best.min_cost / 2], timestamp=2e9))
        again = log.config_stats("mm64-z4", limit=1)[0]
        assert (again.knobs_hash, again.count, again.min_cost) == (best.knobs_hash, best.count + 1,
                                                                    best.min_cost / 2)


def _record_ids(url: str, records: list[db.Record]) -> list[int]:
    """The row ids of ``records`` in the log at ``url`` (found by their uids)."""
    uids = {r.uid for r in records}
    engine = engine_of(url)
    with engine.connect() as conn:
        found = conn.execute(text("SELECT id, uid FROM records")).all()
    engine.dispose()
    return sorted(i for i, uid in found if uid in uids)


def test_a_version_1_log_opens_and_keeps_everything(v1_log: str) -> None:
    assert schema_version(v1_log) == 1
    assert revision_and_differences(v1_log)[0] is None  # from before Alembic
    with db.open(v1_log) as log:
        assert schema_version(v1_log) == db.SCHEMA_VERSION
        assert revision_and_differences(v1_log) == (db.schema.HEAD_REVISION, [])
        records = log.records()
        assert len(records) == 5 and log.count(errors=True) == 1
        assert log.add(records) == 0  # every record keeps its identity (uid)
        # the finished run measured config 3 twice: the second time was a re-measurement
        assert [(r.config["index"], r.kind) for r in log.records("mm64-z4")] == [
            (3, "trial"), (5, "trial"), (7, "trial"), (3, "remeasure")]
        assert log.records("mm32-cuda")[0].kind == "trial"
        assert [(s.workload_key, s.trials, s.remeasured) for s in log.summary()] == [
            ("mm32-cuda", 1, 0), ("mm64-z4", 3, 1)]
        assert [w.key for w in log.workloads()] == ["mm64-z4", "mm32-cuda"]
        assert log.records("mm64-z4")[0].costs == [2e-3, 2.2e-3]
        assert [r.config["index"] for r in log.records("mm64-z4", errors=False)] == [3, 5, 3]
        finished, killed = log.runs()
        assert (finished.tuner, finished.status, finished.options["trials"]) == ("random", "budget", 4)
        assert finished.heartbeat is None and finished.heartbeat_interval is None
        # the run that never ended has no heartbeat; it started long ago: its process is gone
        assert (killed.tuner, killed.ended, killed.status) == ("xgb", None, "dead")
        # the migrated log is written to as a new one
        run = log.start_run("random")
        log.add(db.Record(workload_key="mm64-z4", template="matmul", args=[64, 64, 64, "float32"],
                          target="llvm -mcpu=znver4", target_model="znver4",
                          config={"index": 9, "knobs": {"tile": [2, 32]}}, costs=[1e-3], run_id=run))
        log.end_run(run, "budget")
        assert log.records("mm64-z4", run_id=run)[0].config["index"] == 9
        assert log.runs()[-1].status == "budget" and log.runs()[-1].heartbeat is not None
    with db.open(v1_log) as again:  # already current: opens as it is
        assert again.count() == 6


def test_the_statistics_are_built_from_the_records_a_log_holds(v1_log: str) -> None:
    with db.open(v1_log) as log:
        for key in ("mm64-z4", "mm32-cuda"):
            pooled: dict[str, list[float]] = {}
            for r in log.records(key, errors=False):
                pooled.setdefault(db.knobs_fingerprint(r.config), []).extend(c for c in r.costs if c > 0)
            expected = sorted((db.confident_cost(c), h, sorted(c)) for h, c in pooled.items())
            stats = log.config_stats(key)
            got = [(s.score, s.knobs_hash, sorted(c for r in log.records(key, knobs_hash=s.knobs_hash)
                                                  for c in r.costs if c > 0)) for s in stats]
            assert got == expected
            assert sum(len(log.records(key, knobs_hash=s.knobs_hash)) for s in stats) == log.count(
                key, errors=False)
            # written before records named their code version: one version, "", for all
            for s in stats:
                pooled_records = log.records(key, knobs_hash=s.knobs_hash)
                assert {r.code_version for r in pooled_records} == {s.code_version} == {""}
                assert s.latest == max(r.timestamp for r in pooled_records)
        # mm64-z4: config 3 measured twice (a trial and its re-measurement) pools both records;
        # config 5 once; config 7 failed: no entry
        (five, three) = log.config_stats("mm64-z4")
        assert (five.config["index"], len(log.records("mm64-z4", knobs_hash=five.knobs_hash))) == (5, 1)
        assert (three.config["index"], len(log.records("mm64-z4", knobs_hash=three.knobs_hash)),
                three.count) == (3, 2, 3)
        counts = {row.workload_key: (row.trials, row.errors, row.remeasured) for row in log.summary()}
        assert counts == {"mm32-cuda": (1, 0, 0), "mm64-z4": (3, 1, 1)}
