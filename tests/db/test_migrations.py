"""Logs written by earlier versions of the schema open, and are migrated, on SQLite and PostgreSQL.

The logs come from ``tests/db/data`` (see its README): made by the code of their time, never
by today's.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from schema_probe import engine_of, revision_and_differences, schema_version
from sqlalchemy import MetaData, insert, text

import db
import db.schema

DATA = Path(__file__).parent / "data"
V1_SQLITE = DATA / "tuning_log_v1.db"
V1_POSTGRES_DDL = DATA / "tuning_log_v1.postgresql.sql"
V1_TABLES = ("schema_version", "workloads", "tuning_runs", "records")  # in foreign-key order


def _v1_rows() -> dict[str, list[dict]]:
    """Every row of the version-1 SQLite log, per table."""
    engine = engine_of(str(V1_SQLITE))
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        rows = {name: [dict(r._mapping) for r in conn.execute(meta.tables[name].select())]
                for name in V1_TABLES}
    engine.dispose()
    return rows


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


def test_version_4_builds_the_statistics_of_the_records_a_log_holds(v1_log: str) -> None:
    with db.open(v1_log) as log:
        for key in ("mm64-z4", "mm32-cuda"):
            pooled: dict[str, list[float]] = {}
            for r in log.records(key, errors=False):
                pooled.setdefault(db.knobs_fingerprint(r.config), []).extend(c for c in r.costs if c > 0)
            expected = sorted((db.confident_cost(c), h, sorted(c)) for h, c in pooled.items())
            stats = log.config_stats(key)
            assert [(s.score, s.knobs_hash, list(s.costs)) for s in stats] == expected
            assert sum(len(s.record_ids) for s in stats) == log.count(key, errors=False)
        # mm64-z4: config 3 measured twice (a trial and its re-measurement) pools both records;
        # config 5 once; config 7 failed: no entry
        (five, three) = log.config_stats("mm64-z4")
        assert (five.config["index"], len(five.record_ids)) == (5, 1)
        assert (three.config["index"], len(three.record_ids), three.count) == (3, 2, 3)
        counts = {row.workload_key: (row.trials, row.errors, row.remeasured) for row in log.summary()}
        assert counts == {"mm32-cuda": (1, 0, 0), "mm64-z4": (3, 1, 1)}
