"""Schema version 2: runs get a heartbeat (its last time and its interval).

A run still marked running whose heartbeat stopped reads as dead. Runs logged before
have none, and are judged by their start.

Revision ID: v2
Revises: v1
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations import set_version

revision = "v2"
down_revision = "v1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the runs' heartbeat columns."""
    op.add_column("tuning_runs", sa.Column("heartbeat", sa.Float))
    op.add_column("tuning_runs", sa.Column("heartbeat_interval", sa.Float))
    set_version(2)
