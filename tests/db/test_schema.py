"""Schema versions: a fresh log is made by the Alembic revisions, an older one is migrated in
place to tables that match the ORM models, a newer one is refused clearly."""

from __future__ import annotations

import pytest
from alembic.config import Config
from schema_probe import engine_of, revision_and_differences, schema_version, upgrade_to
from sqlalchemy import text

import db
import db.schema
from db.migrations import SCRIPT_LOCATION


def _set_version(url: str, version: int) -> None:
    engine = engine_of(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE schema_version SET version = :v"), {"v": version})
    engine.dispose()


def _version(url: str) -> tuple[int, str | None]:
    """The log's schema_version, and its Alembic revision."""
    return schema_version(url), revision_and_differences(url)[0]


def _differences(url: str) -> list:
    """How the log's tables differ from the ORM models."""
    return revision_and_differences(url)[1]


def test_a_fresh_log_has_the_current_version_and_the_models_tables(log_url: str) -> None:
    db.open(log_url).close()
    assert _version(log_url) == (db.SCHEMA_VERSION, db.schema.HEAD_REVISION)
    assert _differences(log_url) == []


@pytest.mark.parametrize("older", range(1, db.SCHEMA_VERSION))
def test_a_log_at_every_older_version_is_migrated_to_the_models_tables(log_url: str, older: int) -> None:
    upgrade_to(log_url, f"v{older}")
    assert _version(log_url) == (older, f"v{older}")
    with db.open(log_url) as tlog:
        tlog.add(db.Record(workload_key="k", template="t", args=[1], target="llvm", config={"a": 1},
                           costs=[1.0]))
        assert tlog.records("k")[0].kind == db.TRIAL
    assert _version(log_url) == (db.SCHEMA_VERSION, db.schema.HEAD_REVISION)
    assert _differences(log_url) == []


def test_a_log_from_a_newer_version_is_refused(log_url: str) -> None:
    with db.open(log_url) as tlog:
        tlog.add(db.Record(workload_key="k", template="t", args=[], target="llvm", config={}, costs=[1.0]))
    newer = db.SCHEMA_VERSION + 7
    _set_version(log_url, newer)
    with pytest.raises(db.SchemaVersionError, match=f"schema version {newer}.*up to {db.SCHEMA_VERSION}"
                                                    r".*upgrade autotune-compiler") as info:
        db.open(log_url)
    assert "autotune@" not in str(info.value)  # the test URL's password never shows
    assert _version(log_url)[0] == newer     # and the log is left as it was


def test_an_older_log_without_a_migration_path_is_refused(log_url: str) -> None:
    db.open(log_url).close()
    engine = engine_of(log_url)
    with engine.begin() as conn:  # a log from before Alembic, at a version no revision starts from
        conn.execute(text("DROP TABLE alembic_version"))
        conn.execute(text("UPDATE schema_version SET version = 0"))
    engine.dispose()
    with pytest.raises(db.SchemaVersionError, match="schema version 0, and no migration"):
        db.open(log_url)


def test_a_revision_from_a_newer_library_is_refused(log_url: str) -> None:
    db.open(log_url).close()
    engine = engine_of(log_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'v99'"))
    engine.dispose()
    with pytest.raises(db.SchemaVersionError, match="revision 'v99'.*upgrade autotune-compiler"):
        db.open(log_url)


def test_a_database_with_foreign_tables_of_our_names_is_refused(log_url: str) -> None:
    engine = engine_of(log_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE records (id INTEGER PRIMARY KEY, payload TEXT)"))
    engine.dispose()
    with pytest.raises(db.TuningLogError, match="not a tuning log"):
        db.open(log_url)


def test_a_database_of_another_alembic_project_is_refused(log_url: str) -> None:
    engine = engine_of(log_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('1f2e3d4c')"))
    engine.dispose()
    with pytest.raises(db.TuningLogError, match="not a tuning log"):
        db.open(log_url)


def test_the_head_revision_is_the_schema_version() -> None:
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    script = ScriptDirectory.from_config(config)
    assert script.get_heads() == [db.schema.HEAD_REVISION] == [f"v{db.SCHEMA_VERSION}"]
    chain = [r.revision for r in script.walk_revisions()][::-1]
    assert chain == [f"v{n}" for n in range(1, db.SCHEMA_VERSION + 1)]
