"""The SQL schema of a tuning log (SQLAlchemy 2 ORM tables) and its versioning.

Tables:

``schema_version``
    one row: the schema version the log is at. Opening a log from a newer version fails
    with :class:`~db.errors.SchemaVersionError`; an older one is migrated in place by the
    Alembic revisions of :mod:`db.migrations`, in one transaction. (``alembic_version``,
    Alembic's own table, names the same version as revision ``"v<version>"``.)
``workloads``
    one row per workload key: template name, canonical JSON arguments, target string, its
    kind (first word) and model (``"znver4"``, ``"sm_90"``).
``tuning_runs``
    one row per tuning run (id: a random hex string, unique across logs): tuner, JSON
    options, start and end (seconds since the epoch), status, and the heartbeat the running
    tuner writes (its last time and its interval) so that a run whose process died is seen
    as dead.
``records``
    one row per measurement: workload, run, its kind (``"trial"`` or ``"remeasure"``), the
    version of the code that built and timed it (``""`` before version 6), canonical JSON
    config and its index, JSON costs with their mean and median (``NULL`` for errors),
    GFLOPS, error kind and message, build and run times, host, device, timestamp, and
    ``uid``, the record's fingerprint, which makes adding, importing and merging idempotent.

``config_stats``
    one row per workload and config (pooled by the fingerprint of its knobs), of fixed size:
    a surrogate id, the config as stored, the count of its usable costs, their median,
    minimum and maximum, its score (the confident cost the ranking sorts by), the work of
    one run, and the code version those costs come from (the config's latest) with the time
    of its latest record. Kept by :mod:`db.stats` in the transaction that inserts the records.
``config_costs``
    one row per usable cost of a config: the config's id, the cost, and the record (and the
    position among its usable costs) it came from. Its primary key orders a config's costs,
    so that the median is read from the middle of an index, and names the records that
    hold them; an insert adds rows and rewrites nothing.
``workload_counts``
    the number of records per workload, kind and error kind (``""`` for successes).

JSON lives in text columns (portable, and floats come back bit for bit). The indexes
``(workload_id, mean_cost)`` serves reading a workload's records (fastest first, where a
query wants that); ``(workload_id, kind, timestamp, mean_cost, run_id)`` holds everything a
tuning curve draws, so that it is read from the index alone (version 4 put it in place of
``(workload_id, median_cost)``, which no query used); ``(template, target_kind)`` on workloads
serves finding the neighbours of a workload to borrow from; ``(workload_id, score,
knobs_hash)`` on ``config_stats`` serves reading a workload's best configs in ranking order,
and ``(workload_id, knobs_hash)`` (unique) finding the row of a config.
"""

from __future__ import annotations

import logging

from sqlalchemy import (
    BigInteger,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.errors import SchemaVersionError, TuningLogError

__all__ = [
    "SCHEMA_VERSION",
    "HEAD_REVISION",
    "Base",
    "SchemaVersionRow",
    "WorkloadRow",
    "RunRow",
    "RecordRow",
    "ConfigStatsRow",
    "ConfigCostRow",
    "WorkloadCountRow",
    "ensure_schema",
    "schema_version",
    "is_current",
]

log = logging.getLogger(__name__)

#: The version of the schema this library writes. Bump it with each change of the tables and
#: add its Alembic revision ``v<version>`` to ``db/migrations/versions`` (see :mod:`db.migrations`).
SCHEMA_VERSION = 6

#: The Alembic revision of :data:`SCHEMA_VERSION`.
HEAD_REVISION = f"v{SCHEMA_VERSION}"

# SQLite only auto-increments an "INTEGER PRIMARY KEY"; elsewhere ids are 64-bit.
_Id = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """The declarative base of the tuning-log tables."""


class SchemaVersionRow(Base):
    """The single row that names the schema version of a log."""

    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class WorkloadRow(Base):
    """A workload: template, canonical JSON arguments and target, under its stable key."""

    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(_Id, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(Text, unique=True)
    template: Mapped[str] = mapped_column(String(255))
    args: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    target_kind: Mapped[str] = mapped_column(String(64))
    target_model: Mapped[str] = mapped_column(String(255))

    __table_args__ = (Index("ix_workloads_family", "template", "target_kind"),)


class RunRow(Base):
    """A tuning run."""

    __tablename__ = "tuning_runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tuner: Mapped[str] = mapped_column(String(255))
    options: Mapped[str] = mapped_column(Text)
    started: Mapped[float] = mapped_column(Float)
    ended: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(64))
    heartbeat: Mapped[float | None] = mapped_column(Float)
    heartbeat_interval: Mapped[float | None] = mapped_column(Float)


class RecordRow(Base):
    """A measurement of one configuration (or its failure)."""

    __tablename__ = "records"

    id: Mapped[int] = mapped_column(_Id, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(64), unique=True)
    workload_id: Mapped[int] = mapped_column(_Id, ForeignKey("workloads.id", ondelete="CASCADE"))
    run_id: Mapped[str | None] = mapped_column(String(64), ForeignKey("tuning_runs.id", ondelete="SET NULL"))
    kind: Mapped[str] = mapped_column(String(32), server_default="trial")
    code_version: Mapped[str] = mapped_column(String(64), server_default="")
    config: Mapped[str] = mapped_column(Text)
    config_index: Mapped[int | None] = mapped_column(BigInteger)
    costs: Mapped[str] = mapped_column(Text)
    mean_cost: Mapped[float | None] = mapped_column(Float)
    median_cost: Mapped[float | None] = mapped_column(Float)
    gflops: Mapped[float | None] = mapped_column(Float)
    error_kind: Mapped[str | None] = mapped_column(String(255))
    error_msg: Mapped[str] = mapped_column(Text)
    build_time: Mapped[float | None] = mapped_column(Float)
    run_time: Mapped[float | None] = mapped_column(Float)
    host: Mapped[str] = mapped_column(String(255))
    device: Mapped[str] = mapped_column(String(255))
    timestamp: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_records_best_mean", "workload_id", "mean_cost"),
        Index("ix_records_curve", "workload_id", "kind", "timestamp", "mean_cost", "run_id"),
        Index("ix_records_run", "run_id"),
    )


class ConfigStatsRow(Base):
    """The statistics of one config of one workload (see :mod:`db.stats`)."""

    __tablename__ = "config_stats"

    id: Mapped[int] = mapped_column(_Id, primary_key=True, autoincrement=True)
    workload_id: Mapped[int] = mapped_column(_Id, ForeignKey("workloads.id", ondelete="CASCADE"))
    knobs_hash: Mapped[str] = mapped_column(String(64))
    config: Mapped[str] = mapped_column(Text)
    n_costs: Mapped[int] = mapped_column(Integer)
    median_cost: Mapped[float] = mapped_column(Float)
    score: Mapped[float] = mapped_column(Float)
    min_cost: Mapped[float] = mapped_column(Float)
    max_cost: Mapped[float] = mapped_column(Float)
    flop: Mapped[float | None] = mapped_column(Float)
    code_version: Mapped[str] = mapped_column(String(64), server_default="")
    latest: Mapped[float] = mapped_column(Float, server_default="0")

    __table_args__ = (
        Index("ix_config_stats_config", "workload_id", "knobs_hash", unique=True),
        Index("ix_config_stats_rank", "workload_id", "score", "knobs_hash"),
    )


class ConfigCostRow(Base):
    """One usable cost of a config (see :mod:`db.stats`); the key orders a config's costs."""

    __tablename__ = "config_costs"

    config_id: Mapped[int] = mapped_column(_Id, ForeignKey("config_stats.id", ondelete="CASCADE"),
                                           primary_key=True)
    cost: Mapped[float] = mapped_column(Float, primary_key=True)
    record_id: Mapped[int] = mapped_column(_Id, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)

    # On SQLite the rows live in their key's b-tree alone (no rowid table beside it).
    __table_args__ = ({"sqlite_with_rowid": False},)


class WorkloadCountRow(Base):
    """How many records of one kind and error kind a workload has."""

    __tablename__ = "workload_counts"

    workload_id: Mapped[int] = mapped_column(_Id, ForeignKey("workloads.id", ondelete="CASCADE"),
                                             primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    error_kind: Mapped[str] = mapped_column(String(255), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


def schema_version(conn: Connection) -> int | None:
    """The schema version of the log on ``conn``; ``None`` when it has no tuning-log tables."""
    tables = set(inspect(conn).get_table_names())
    if SchemaVersionRow.__tablename__ not in tables:
        ours = {t.name for t in Base.metadata.sorted_tables} - {SchemaVersionRow.__tablename__}
        if tables & ours:
            raise TuningLogError(f"the database has tables {sorted(tables & ours)} but no schema_version "
                                 f"table: it is not a tuning log written by this library")
        return None
    version = conn.scalar(select(SchemaVersionRow.version).where(SchemaVersionRow.id == 1))
    if version is None:
        raise TuningLogError("the tuning log's schema_version table is empty")
    return int(version)


def _alembic_revision(conn: Connection) -> str | None:
    """The revision in Alembic's table; ``None`` for a log written before Alembic managed it."""
    if "alembic_version" not in inspect(conn).get_table_names():
        return None
    return conn.scalar(text("SELECT version_num FROM alembic_version"))


def is_current(conn: Connection) -> bool:
    """Whether the log on ``conn`` exists with the current schema (nothing to create or migrate)."""
    return schema_version(conn) == SCHEMA_VERSION and _alembic_revision(conn) == HEAD_REVISION


def ensure_schema(conn: Connection, where: str) -> None:
    """Create the tables of a fresh log, or migrate an older one, inside ``conn``'s transaction.

    Both are one Alembic upgrade to :data:`HEAD_REVISION` (a fresh log from nothing, through
    every revision). A log written before Alembic managed it starts from the revision its
    ``schema_version`` names. ``where`` names the log in messages (a path, or a URL without
    its password). The caller holds the log's write lock, so concurrent openers do this one
    at a time.
    """
    # Alembic (with db.migrations, which imports it) takes 0.3 s to load: only a log that is
    # created or migrated needs it, not one that is opened at the current schema.
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    from db.migrations import SCRIPT_LOCATION

    version = schema_version(conn)
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"tuning log {where} was written with schema version {version}, but this library reads "
            f"versions up to {SCHEMA_VERSION}: upgrade autotune-compiler to open it")
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["connection"] = conn
    revision = _alembic_revision(conn)
    if version is None and revision is not None:
        raise TuningLogError(f"the database has an alembic_version table (revision {revision!r}) but no "
                             f"tuning-log tables: it is not a tuning log written by this library")
    if version is not None and revision is None:  # written before Alembic: start where it says
        revision = f"v{version}"
        known = {r.revision for r in ScriptDirectory.from_config(config).walk_revisions()}
        if revision not in known:
            raise SchemaVersionError(f"tuning log {where} has schema version {version}, and no migration "
                                     f"from it to version {SCHEMA_VERSION} exists")
        command.stamp(config, revision)
    if revision == HEAD_REVISION:
        return
    if version is None:
        log.debug("creating tuning log %s (schema version %d)", where, SCHEMA_VERSION)
    else:
        log.info("migrating tuning log %s from schema version %d to %d", where, version, SCHEMA_VERSION)
    try:
        command.upgrade(config, "head")
    except CommandError as err:  # a revision this library does not know: a newer writer's
        raise SchemaVersionError(f"tuning log {where} is at revision {revision!r}, which this library cannot "
                                 f"migrate ({err}): upgrade autotune-compiler to open it") from None
