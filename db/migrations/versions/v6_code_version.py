"""Schema version 6: records name the code version that built and timed them.

A config's figure used to pool every cost it was ever given, so after a change of the
compiler or of its templates the log kept costs that today's build no longer has. Records
now carry ``code_version`` (``""`` for those written before), and ``config_stats`` keeps,
per config, only the costs of its latest code version (the version of its latest record),
with that version and that record's time. The statistics are rebuilt from the records.

Revision ID: v6
Revises: v5
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations import set_version
from db.stats import rebuild_stats

revision = "v6"
down_revision = "v5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the code version to records and config statistics, then fill the statistics."""
    op.add_column("records", sa.Column("code_version", sa.String(64), nullable=False, server_default=""))
    op.add_column("config_stats", sa.Column("code_version", sa.String(64), nullable=False, server_default=""))
    op.add_column("config_stats", sa.Column("latest", sa.Float, nullable=False, server_default="0"))
    rebuild_stats(op.get_bind())
    set_version(6)
