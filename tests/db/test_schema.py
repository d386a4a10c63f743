"""Schema versions: a newer log is refused clearly, an older one is migrated in place."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, create_engine, text

import db
import db.schema


def _set_version(url: str, version: int) -> None:
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE schema_version SET version = :v"), {"v": version})
    engine.dispose()


def _version(url: str) -> int:
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version FROM schema_version")).scalar_one()
    engine.dispose()
    return version


def test_a_fresh_log_has_the_current_version(log_url: str) -> None:
    db.open(log_url).close()
    assert _version(log_url) == db.SCHEMA_VERSION


def test_a_log_from_a_newer_version_is_refused(log_url: str) -> None:
    with db.open(log_url) as tlog:
        tlog.add(db.Record(workload_key="k", template="t", args=[], target="llvm", config={}, costs=[1.0]))
    newer = db.SCHEMA_VERSION + 7
    _set_version(log_url, newer)
    with pytest.raises(db.SchemaVersionError, match=f"schema version {newer}.*up to {db.SCHEMA_VERSION}"
                                                    r".*upgrade autotune-compiler") as info:
        db.open(log_url)
    assert "autotune@" not in str(info.value)  # the test URL's password never shows
    assert _version(log_url) == newer        # and the log is left as it was


def test_an_older_log_is_migrated(log_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with db.open(log_url) as tlog:
        tlog.add(db.Record(workload_key="k", template="t", args=[1], target="llvm", config={"a": 1},
                           costs=[1.0]))
    calls = []

    def add_notes(conn: Connection) -> None:  # what a real step looks like: DDL plus a backfill
        calls.append(db.SCHEMA_VERSION)
        conn.execute(text("ALTER TABLE workloads ADD COLUMN notes TEXT"))
        conn.execute(text("UPDATE workloads SET notes = 'migrated'"))

    monkeypatch.setattr(db.schema, "SCHEMA_VERSION", db.SCHEMA_VERSION + 1)
    monkeypatch.setitem(db.schema.MIGRATIONS, db.SCHEMA_VERSION, add_notes)
    with db.open(log_url) as tlog:
        assert tlog.count() == 1 and tlog.records("k")[0].config == {"a": 1}
    assert len(calls) == 1 and _version(log_url) == db.SCHEMA_VERSION + 1
    db.open(log_url).close()  # already current: no second migration
    assert len(calls) == 1
    engine = create_engine(log_url if "://" in log_url else f"sqlite:///{log_url}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT notes FROM workloads")).scalar_one() == "migrated"
    engine.dispose()


def test_an_older_log_without_a_migration_path_is_refused(log_url: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db.open(log_url).close()
    monkeypatch.setattr(db.schema, "SCHEMA_VERSION", db.SCHEMA_VERSION + 1)
    with pytest.raises(db.SchemaVersionError, match="no migration"):
        db.open(log_url)


def test_a_database_with_foreign_tables_of_our_names_is_refused(log_url: str) -> None:
    engine = create_engine(log_url if "://" in log_url else f"sqlite:///{log_url}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE records (id INTEGER PRIMARY KEY, payload TEXT)"))
    engine.dispose()
    with pytest.raises(db.TuningLogError, match="not a tuning log"):
        db.open(log_url)
