"""The Alembic environment of the tuning log's migrations.

It runs online only, on the connection that :func:`db.schema.ensure_schema` passes in
``config.attributes["connection"]``: that connection is already in the transaction that
holds the log's write lock, so the migration and the version it records commit together.
"""

from __future__ import annotations

from alembic import context

from db.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the tuning log's migrations run through db.open(), which passes its connection")
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():  # inside the caller's transaction: commits nothing itself
    context.run_migrations()
