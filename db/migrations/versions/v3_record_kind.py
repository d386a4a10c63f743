"""Schema version 3: records get a kind, "trial" or "remeasure".

Older logs stored the end-of-run re-measurements as ordinary records of their run. A
search never measures a config twice in one run, so a record whose config the same run
measured before (for the same workload) is a re-measurement; every other record is a
trial. (The first re-measurement of a config that only an earlier run measured stays a
trial.)

Revision ID: v3
Revises: v2
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations import set_version

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the records' kind and mark the re-measurements of older logs."""
    op.add_column("records", sa.Column("kind", sa.String(32), nullable=False, server_default="trial"))
    op.execute("UPDATE records SET kind = 'remeasure' WHERE run_id IS NOT NULL AND EXISTS ("
               "SELECT 1 FROM records AS earlier WHERE earlier.run_id = records.run_id "
               "AND earlier.workload_id = records.workload_id AND earlier.config = records.config "
               "AND earlier.id < records.id)")
    set_version(3)
