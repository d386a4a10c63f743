"""Schema version 1: workloads, tuning runs and records, as the first release wrote them.

Revision ID: v1
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v1"
down_revision = None
branch_labels = None
depends_on = None

# SQLite only auto-increments an "INTEGER PRIMARY KEY"; elsewhere ids are 64-bit.
_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the version-1 tables."""
    version = op.create_table(
        "schema_version",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("version", sa.Integer, nullable=False))
    op.create_table(
        "workloads",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("key", sa.Text, nullable=False, unique=True),
        sa.Column("template", sa.String(255), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("target_kind", sa.String(64), nullable=False),
        sa.Column("target_model", sa.String(255), nullable=False))
    op.create_index("ix_workloads_family", "workloads", ["template", "target_kind"])
    op.create_table(
        "tuning_runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tuner", sa.String(255), nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("started", sa.Float, nullable=False),
        sa.Column("ended", sa.Float),
        sa.Column("status", sa.String(64), nullable=False))
    op.create_table(
        "records",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("uid", sa.String(64), nullable=False, unique=True),
        sa.Column("workload_id", _Id, sa.ForeignKey("workloads.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("tuning_runs.id", ondelete="SET NULL")),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("config_index", sa.BigInteger),
        sa.Column("costs", sa.Text, nullable=False),
        sa.Column("mean_cost", sa.Float),
        sa.Column("median_cost", sa.Float),
        sa.Column("gflops", sa.Float),
        sa.Column("error_kind", sa.String(255)),
        sa.Column("error_msg", sa.Text, nullable=False),
        sa.Column("build_time", sa.Float),
        sa.Column("run_time", sa.Float),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("device", sa.String(255), nullable=False),
        sa.Column("timestamp", sa.Float, nullable=False))
    op.create_index("ix_records_best_mean", "records", ["workload_id", "mean_cost"])
    op.create_index("ix_records_best_median", "records", ["workload_id", "median_cost"])
    op.create_index("ix_records_run", "records", ["run_id"])
    op.bulk_insert(version, [{"id": 1, "version": 1}])
