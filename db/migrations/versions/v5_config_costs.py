"""Schema version 5: a config's costs in rows of their own, its statistics of fixed size.

Version 4 kept, per config, its sorted costs and the ids of its records as JSON lists in
``config_stats``, which every insert read back, extended and rewrote: writing got slower as
configs gathered measurements. Now ``config_costs`` holds one row per usable cost (config id,
cost, record, position), ordered by its key, and ``config_stats`` only fixed-size columns
under a surrogate id; an insert adds cost rows and reads the median from the middle of the
config's index. Both tables are dropped and made anew, empty. (Version 5 filled them from the
records; version 6 added columns to them and fills them since, with today's code,
:func:`db.stats.rebuild_stats`, which also recounts ``workload_counts``: a log migrating
through several revisions computes them once, at the end.)

Revision ID: v5
Revises: v4
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations import set_version

revision = "v5"
down_revision = "v4"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Replace the statistics of version 4 by fixed-size rows and a table of costs."""
    op.drop_index("ix_config_stats_rank", "config_stats")
    op.drop_table("config_stats")
    op.create_table(
        "config_stats",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("workload_id", _Id, sa.ForeignKey("workloads.id", ondelete="CASCADE"), nullable=False),
        sa.Column("knobs_hash", sa.String(64), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("n_costs", sa.Integer, nullable=False),
        sa.Column("median_cost", sa.Float, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("min_cost", sa.Float, nullable=False),
        sa.Column("max_cost", sa.Float, nullable=False),
        sa.Column("flop", sa.Float),
    )
    op.create_index("ix_config_stats_config", "config_stats", ["workload_id", "knobs_hash"], unique=True)
    op.create_index("ix_config_stats_rank", "config_stats", ["workload_id", "score", "knobs_hash"])
    op.create_table(
        "config_costs",
        sa.Column("config_id", _Id, sa.ForeignKey("config_stats.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("cost", sa.Float, primary_key=True),
        sa.Column("record_id", _Id, primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sqlite_with_rowid=False,
    )
    set_version(5)
