"""Schema version 4: per-config statistics and per-workload counts, kept as records arrive.

Adds the tables ``config_stats`` (per workload and config: sorted costs, count, median,
minimum, maximum, score, record ids, work of one run) and ``workload_counts`` (records per
workload, kind and error kind), so that reading the best configs of a workload no longer
ranks its records. (Version 4 filled them from the records the log held already; version 5
changed the statistics tables and fills them since, with today's code: a log migrates
through every revision at once, so they are filled once, at the end.) The index on
``records (workload_id, median_cost)``, which no query used, gives way to ``(workload_id,
kind, timestamp, mean_cost, run_id)``, from which a tuning curve is read without touching
the table.

Revision ID: v4
Revises: v3
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations import set_version

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the statistics tables (version 5 fills them)."""
    op.create_table(
        "config_stats",
        sa.Column("workload_id", _Id, sa.ForeignKey("workloads.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("knobs_hash", sa.String(64), primary_key=True),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("costs", sa.Text, nullable=False),
        sa.Column("record_ids", sa.Text, nullable=False),
        sa.Column("n_costs", sa.Integer, nullable=False),
        sa.Column("median_cost", sa.Float, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("min_cost", sa.Float, nullable=False),
        sa.Column("max_cost", sa.Float, nullable=False),
        sa.Column("flop", sa.Float),
    )
    op.create_index("ix_config_stats_rank", "config_stats", ["workload_id", "score", "knobs_hash"])
    op.create_table(
        "workload_counts",
        sa.Column("workload_id", _Id, sa.ForeignKey("workloads.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("error_kind", sa.String(255), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    # A tuning curve reads its trials from this index alone; the median index served no query.
    op.drop_index("ix_records_best_median", "records")
    op.create_index("ix_records_curve", "records",
                    ["workload_id", "kind", "timestamp", "mean_cost", "run_id"])
    set_version(4)
