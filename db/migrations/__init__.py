"""The schema migrations of the tuning log: an Alembic script directory.

``versions/`` holds one revision per schema version: ``v1`` creates the tables as the
first release wrote them, and each later revision upgrades from the one before. Every
revision also sets the ``schema_version`` row, so that table keeps naming the version a
log is at. :func:`db.schema.ensure_schema` runs them (through ``alembic.command`` on the
log's own connection and transaction); ``env.py`` is the Alembic environment it uses.

To add a migration: bump :data:`db.schema.SCHEMA_VERSION` to ``N``, change the ORM tables
in ``db/schema.py``, and add ``versions/vN_<what>.py`` with ``revision = "vN"`` and
``down_revision = "v<N-1>"``, whose ``upgrade()`` changes the tables (``alembic.op``) and
ends with ``set_version(N)``. ``tests/db/test_migrations.py`` checks that the migrated
tables match the ORM tables on SQLite and PostgreSQL.

A revision that changes the statistics tables fills them with :func:`db.stats.rebuild_stats`,
which writes today's tables; so only the latest such revision calls it (earlier ones stop,
as ``v4`` did when ``v5`` came), and a log that migrates through several computes them once.
"""

from __future__ import annotations

from pathlib import Path

from alembic import op
from sqlalchemy import Integer, column, table

__all__ = ["SCRIPT_LOCATION", "set_version"]

#: Where the Alembic environment and the revisions live.
SCRIPT_LOCATION = str(Path(__file__).parent)

_SCHEMA_VERSION = table("schema_version", column("id", Integer), column("version", Integer))


def set_version(version: int) -> None:
    """Record, inside a revision's ``upgrade()``, that the log is now at schema ``version``."""
    op.execute(_SCHEMA_VERSION.update().where(_SCHEMA_VERSION.c.id == 1).values(version=version))
