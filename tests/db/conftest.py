"""Fixtures of the tuning-log tests: every log test runs on SQLite and on PostgreSQL.

PostgreSQL comes from ``AUTOTUNE_TEST_POSTGRES_URL`` (e.g.
``postgresql+psycopg://autotune:autotune@127.0.0.1:5432/autotune_test``; ``.ci/run`` starts
such a server). Each test gets a schema of its own in that database, dropped afterwards.
When the variable is unset or the server unreachable, the PostgreSQL cases skip and say why.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import db

sys.path.insert(0, str(Path(__file__).parent))  # tuning_log_workers, for spawned processes

POSTGRES_ENV = "AUTOTUNE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[object]:
    """An SQLAlchemy engine on the test PostgreSQL database; skips the test when there is none."""
    raw = os.environ.get(POSTGRES_ENV)
    if not raw:
        pytest.skip(f"PostgreSQL tuning-log tests need {POSTGRES_ENV} (e.g. "
                    f"postgresql+psycopg://autotune:autotune@127.0.0.1:5432/autotune_test); it is unset")
    try:
        from sqlalchemy import create_engine, text
        from sqlalchemy.engine import make_url

        url = make_url(raw)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as err:  # unreachable server, missing driver, bad URL: all mean "skip"
        shown = make_url(raw).render_as_string(hide_password=True) if "://" in raw else raw
        pytest.skip(f"PostgreSQL at {shown} ({POSTGRES_ENV}) is unusable: {type(err).__name__}: "
                    f"{' '.join(str(err).split())[:200]}")
    yield engine
    engine.dispose()


def _postgres_schema_url(admin: object) -> Iterator[str]:
    from sqlalchemy import text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a fresh, not yet created tuning log lives: an SQLite path or a PostgreSQL URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "tuning.db")
    else:
        yield from _postgres_schema_url(request.getfixturevalue("postgres_admin"))


@pytest.fixture
def other_url(request: pytest.FixtureRequest, log_url: str, tmp_path: Path) -> Iterator[str]:
    """A second fresh log on the same backend as ``log_url``."""
    if "://" not in log_url:
        yield str(tmp_path / "other.db")
    else:
        yield from _postgres_schema_url(request.getfixturevalue("postgres_admin"))


@pytest.fixture
def tlog(log_url: str) -> Iterator[db.TuningLog]:
    """An open, empty tuning log (SQLite or PostgreSQL)."""
    with db.open(log_url) as opened:
        yield opened
