"""Reading a tuning log's schema straight from its database (SQLite path or URL), beside
:mod:`db`: for the schema and migration tests."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text

import db.schema
from db.migrations import SCRIPT_LOCATION


def engine_of(url: str):
    """An SQLAlchemy engine on ``url`` (an SQLite path, or a database URL)."""
    return create_engine(url if "://" in url else f"sqlite:///{url}")


def schema_version(url: str) -> int:
    """The log's ``schema_version``."""
    engine = engine_of(url)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version FROM schema_version")).scalar_one()
    engine.dispose()
    return version


def revision_and_differences(url: str) -> tuple[str | None, list]:
    """The log's Alembic revision, and how its tables differ from the ORM models (Alembic's
    autogenerate comparison)."""
    engine = engine_of(url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn)
        found = context.get_current_revision(), compare_metadata(context, db.schema.Base.metadata)
    engine.dispose()
    return found


def upgrade_to(url: str, revision: str) -> None:
    """Make an empty database a log at an older ``revision``: its tables, as that version's
    library would create them (filled with no statistics: the last revision computes them)."""
    engine = engine_of(url)
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    engine.dispose()
