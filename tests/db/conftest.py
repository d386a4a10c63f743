"""Fixtures of the tuning-log tests: every log test runs on SQLite and on PostgreSQL.

The PostgreSQL cases take a fresh schema from ``new_postgres_url`` (``tests/conftest.py``):
they skip, saying why, where no test server is configured or reachable, and fail under
``CI=true``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import db

sys.path.insert(0, str(Path(__file__).parent))  # tuning_log_workers, for spawned processes


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh, not yet created tuning log lives: an SQLite path or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "tuning.db")
    new_postgres_url: Callable[[], str] = request.getfixturevalue("new_postgres_url")
    return new_postgres_url()


@pytest.fixture
def other_url(request: pytest.FixtureRequest, log_url: str, tmp_path: Path) -> str:
    """A second fresh log on the same backend as ``log_url``."""
    if "://" not in log_url:
        return str(tmp_path / "other.db")
    return request.getfixturevalue("new_postgres_url")()


@pytest.fixture
def tlog(log_url: str) -> Iterator[db.TuningLog]:
    """An open, empty tuning log (SQLite or PostgreSQL)."""
    with db.open(log_url) as opened:
        yield opened
