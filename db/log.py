"""The tuning log: :func:`open` a path or URL, get a :class:`TuningLog`.

A plain path names an SQLite file; a URL (``sqlite:///...``, ``postgresql://...``) selects
the engine. SQLite runs in WAL mode with a busy timeout and takes its write lock at the
start of each write transaction, so several tuning processes on one machine can write
into one file. PostgreSQL is the log of a cluster: every worker opens the same URL.

A log is data only. Nothing read from it is executed or unpickled; a row that does not
decode into a valid :class:`~db.record.Record` is reported (logged) and skipped. Which
config of a workload is best is not the log's call: ``autotune.selection`` ranks the
records it reads back (and validates their configs against the caller's space).
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import json
import logging
import math
import os
import random
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    and_,
    case,
    cast,
    create_engine,
    delete,
    event,
    exists,
    func,
    select,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import aliased
from sqlalchemy.pool import StaticPool

from db.errors import RecordError, TuningLogError
from db.record import (
    RECORD_KINDS,
    REMEASURE,
    TRIAL,
    Record,
    RunInfo,
    SummaryRow,
    Workload,
    canonical_json,
    target_kind,
)
from db.schema import (
    ConfigCostRow,
    ConfigStatsRow,
    RecordRow,
    RunRow,
    WorkloadCountRow,
    WorkloadRow,
    ensure_schema,
    is_current,
)
from db.stats import ConfigStats, add_stats, rebuild_stats

__all__ = ["TuningLog", "TrialCurve", "CurvePoint", "open", "BUSY_TIMEOUT_S", "TaskOrKey",
           "HEARTBEAT_INTERVAL_S", "HEARTBEAT_ENV", "DEAD_AFTER_BEATS", "default_heartbeat_interval",
           "RECONNECT_TIMEOUT_S"]

log = logging.getLogger(__name__)

#: How long (seconds) an SQLite writer waits for another process's write to finish.
BUSY_TIMEOUT_S = 60.0

#: How long (seconds) a write to a PostgreSQL log retries while the server cannot be reached (a
#: restart, a fail-over, a network outage) before it fails.
RECONNECT_TIMEOUT_S = 600.0

#: Seconds between two heartbeats of a running tuner (see :meth:`TuningLog.keep_alive`),
#: unless the environment variable :data:`HEARTBEAT_ENV` names another interval.
HEARTBEAT_INTERVAL_S = 10.0
HEARTBEAT_ENV = "AUTOTUNE_HEARTBEAT_S"

#: A run still marked running whose last heartbeat is older than this many of its own
#: intervals reads as ``"dead"``: its process was killed or its machine lost.
DEAD_AFTER_BEATS = 6

#: A workload key, a :class:`Record` or :class:`Workload`, or any object with a
#: ``workload_key`` attribute (a task).
TaskOrKey = Any

_BATCH = 500
_PG_INIT_LOCK = 0x61757475_6E65  # advisory-lock id under which PostgreSQL openers create the tables
_R, _W = RecordRow, WorkloadRow
_RECORD_COLUMNS = (
    _R.id, _R.config, _R.config_index, _R.costs, _R.gflops, _R.error_kind, _R.error_msg,
    _R.build_time, _R.run_time, _R.host, _R.device, _R.timestamp, _R.run_id, _R.kind, _R.code_version,
    _W.key, _W.template, _W.args, _W.target, _W.target_model,
)


def open(path_or_url: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT_S,
         reconnect_timeout: float = RECONNECT_TIMEOUT_S) -> TuningLog:
    """Open (creating if needed) the tuning log at a path or SQLAlchemy URL.

    A path (``"tuning.db"``) or ``":memory:"`` means SQLite; a string with ``://`` is a URL:
    ``sqlite:///tuning.db``, ``postgresql://user:pw@host/db`` (the psycopg 3 driver is used
    when none is named). A fresh log gets the current schema, an older one is migrated, a
    newer one raises :class:`~db.errors.SchemaVersionError`. An unreachable or unreadable
    database raises :class:`~db.errors.TuningLogError` naming it (never its password).
    ``busy_timeout`` is how long an SQLite writer waits for another one; ``reconnect_timeout`` how
    long a write to a PostgreSQL log retries while its server cannot be reached (a warning says
    so, and another when it is written): a tuning run outlives a restart of the server.
    """
    if not (isinstance(reconnect_timeout, int | float) and reconnect_timeout >= 0):
        raise ValueError(f"reconnect_timeout must be a number of seconds >= 0, got {reconnect_timeout!r}")
    url, where, memory = _url_of(path_or_url)
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise TuningLogError(f"cannot open tuning log {where}: unsupported database {backend!r} "
                             f"(use an SQLite path or URL, or a postgresql:// URL)")
    try:
        if backend == "sqlite":
            engine = _sqlite_engine(url, where, memory, busy_timeout)
        else:
            engine = create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
    except (ImportError, sa_exc.NoSuchModuleError) as err:
        raise TuningLogError(f"cannot open tuning log {where}: its database driver is not installed ({err}); "
                             f"for PostgreSQL: pip install 'autotune-compiler[postgres]'") from None
    tlog = TuningLog(engine, where, backend, memory=memory, reconnect_timeout=reconnect_timeout)
    try:
        tlog._init_schema()
    except TuningLogError:
        engine.dispose()
        raise
    except sa_exc.SQLAlchemyError as err:
        engine.dispose()
        raise TuningLogError(f"cannot open tuning log {where}: {_reason(err)}") from err
    return tlog


class TuningLog:
    """An open tuning log (see :func:`open`). Use it as a context manager or :meth:`close` it.

    Every method runs in its own transaction; a method that writes is atomic (all its rows
    or none). One ``TuningLog`` per process: open the log again in each worker.
    """

    def __init__(self, engine: Engine, where: str, backend: str, *, memory: bool = False,
                 reconnect_timeout: float = RECONNECT_TIMEOUT_S) -> None:
        self._engine = engine
        self._where = where
        self._backend = backend
        self._memory = memory
        self._reconnect_timeout = reconnect_timeout
        self._gave_up = False  # a write gave up waiting for the server, and none got through since

    # --- opening and closing ---------------------------------------------------------------

    @property
    def where(self) -> str:
        """The log's path or URL, without a password: what messages name it by."""
        return self._where

    @property
    def url(self) -> URL:
        """The SQLAlchemy URL the log was opened with, password included: for opening the same
        database elsewhere (never print it; :attr:`where` is what messages name the log by)."""
        return self._engine.url

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._backend

    def close(self) -> None:
        """Close the log's connections. The log may not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> TuningLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TuningLog({self._where!r})"

    def _init_schema(self) -> None:
        with self._reading() as conn:
            if is_current(conn):
                return
        with self._writing() as conn:
            if self._backend == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_PG_INIT_LOCK)))
            ensure_schema(conn, self._where)

    # --- writing ---------------------------------------------------------------------------

    def add(self, records: Record | Iterable[Record]) -> int:
        """Store one record or many, atomically; returns how many were new.

        A record whose :attr:`~db.record.Record.uid` the log already holds is not stored
        again. Its workload is created on first sight (key, template, args, target, model);
        a ``run_id`` the log does not know gets a placeholder run.
        """
        batch = [records] if isinstance(records, Record) else list(records)
        for r in batch:
            if not isinstance(r, Record):
                raise TypeError(f"TuningLog.add takes Record objects, got {type(r).__name__}")
        batch = [dataclasses.replace(r) for r in batch]  # re-checks fields changed after construction
        if not batch:
            return 0
        return self._retrying("adding records", lambda conn: self._store(conn, batch), unwritten=batch)

    def start_run(self, tuner: str, options: dict[str, Any] | None = None, *,
                  heartbeat_interval: float | None = None) -> str:
        """Record the start of a tuning run; returns its id (a hex string unique across logs).

        The run is ``"running"`` until :meth:`end_run`. Its process promises a heartbeat every
        ``heartbeat_interval`` seconds (default: :func:`default_heartbeat_interval`), which
        :meth:`keep_alive` writes; without one the run soon reads as ``"dead"``.
        """
        interval = heartbeat_interval if heartbeat_interval is not None else default_heartbeat_interval()
        if not (isinstance(interval, int | float) and math.isfinite(interval) and interval > 0):
            raise ValueError(f"start_run: heartbeat_interval must be a positive number of seconds, "
                             f"got {heartbeat_interval!r}")
        now = time.time()
        run = RunInfo(run_id=uuid.uuid4().hex, tuner=tuner, options=options or {}, started=now,
                      ended=None, status="running", heartbeat=now, heartbeat_interval=float(interval))
        run = RunInfo.from_dict(run.to_dict())  # checks that the options are JSON data
        self._retrying("starting a run", lambda conn: self._store_runs(conn, [run]))
        return run.run_id

    def heartbeat(self, run_ids: str | Iterable[str]) -> None:
        """Say that the runs ``run_ids`` are alive: set their heartbeat to now (runs that ended
        are left alone)."""
        ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
        if not ids:
            return
        with self._guard("writing a heartbeat"), self._writing() as conn:
            conn.execute(update(RunRow).where(RunRow.id.in_(ids), RunRow.status == "running")
                         .values(heartbeat=time.time()))

    @contextmanager
    def keep_alive(self, run_ids: str | Iterable[str]) -> Iterator[None]:
        """Within this context a background thread writes the heartbeat of ``run_ids`` as often
        as they promised when they started (the shortest of their intervals), so that readers
        see them alive; once the process is killed the beats stop, and the runs read as
        ``"dead"``. (An in-memory log has no other reader: there, nothing is written.)"""
        ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
        if self._memory or not ids:
            yield
            return
        with self._guard("reading runs"), self._reading() as conn:
            intervals = conn.scalars(select(RunRow.heartbeat_interval).where(RunRow.id.in_(ids))).all()
        interval = min((i for i in intervals if i), default=default_heartbeat_interval())
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    self.heartbeat(ids)
                except TuningLogError as err:  # a missed beat; the next one may get through
                    log.warning("%s", err)

        thread = threading.Thread(target=beat, name="tuning-log-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def end_run(self, run_id: str, status: str = "finished") -> None:
        """Record the end of a run (``status``: ``"finished"``, ``"failed"``, ``"interrupted"``...)."""
        def end(conn: Connection) -> int:
            now = time.time()
            return conn.execute(update(RunRow).where(RunRow.id == run_id)
                                .values(ended=now, status=status, heartbeat=now)).rowcount

        if self._retrying("ending a run", end) == 0:
            raise TuningLogError(f"tuning log {self._where} has no run {run_id!r}")

    def import_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Add the runs and records of a JSONL file (as :meth:`export_jsonl` writes); returns how many
        records were new. Importing a file twice adds nothing the second time.

        The import is atomic: a malformed line raises :class:`~db.errors.RecordError` naming the
        file and line, and nothing of the file is stored.
        """
        added = 0
        runs: list[RunInfo] = []
        records: list[Record] = []
        try:
            with builtins.open(path, encoding="utf-8") as f, self._guard("importing"), \
                    self._writing() as conn:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        data = json.loads(line)
                        if isinstance(data, dict) and data.keys() == {"run"}:
                            runs.append(RunInfo.from_dict(data["run"]))
                        else:
                            records.append(Record.from_dict(data))
                    except (ValueError, TypeError) as err:  # RecordError is a ValueError
                        raise RecordError(f"{path}:{lineno}: {err}") from None
                    if len(records) >= _BATCH:
                        added += self._flush(conn, runs, records)
                added += self._flush(conn, runs, records)
        except OSError as err:
            raise TuningLogError(f"cannot read {path}: {err.strerror or err}") from None
        return added

    def merge(self, other: TuningLog | str | os.PathLike[str]) -> int:
        """Add every run and record of another log (an open one, a path or a URL); returns how
        many records were new. Merging the same log twice adds nothing the second time."""
        if other is self:
            return 0
        source = other if isinstance(other, TuningLog) else open(other)
        try:
            runs = source.runs()
            added = 0
            with self._guard("merging"), self._writing() as conn:
                self._store_runs(conn, runs)
                for batch in source._record_batches():
                    added += self._store(conn, batch)
            return added
        finally:
            if source is not other:
                source.close()

    def prune(self, keep: Mapping[str, Iterable[dict[str, Any]]]) -> int:
        """Keep, for each workload key of ``keep``, only the successful records of the configs it
        lists; delete its other records, error records included, and workloads left with no
        records. Workloads ``keep`` does not name are left alone. Returns the number of records
        deleted. (Which configs to keep is the caller's choice: ``autotune.selection.prune``
        keeps the best under its ranking.)"""
        plan = {key: sorted({canonical_json(c) for c in configs}) for key, configs in keep.items()}
        deleted = 0
        with self._guard("pruning"), self._writing() as conn:
            ids = dict(conn.execute(select(_W.key, _W.id).where(_W.key.in_(list(plan)))).all())
            for key, configs in plan.items():
                if key not in ids:
                    continue
                query = delete(_R).where(_R.workload_id == ids[key])
                if configs:
                    query = query.where(_R.error_kind.is_not(None) | _R.config.not_in(configs))
                deleted += conn.execute(query).rowcount
            conn.execute(delete(_W).where(_W.id.in_(list(ids.values())),
                                          ~exists().where(_R.workload_id == _W.id)))
            left = conn.scalars(select(_W.id).where(_W.id.in_(list(ids.values())))).all()
            if deleted and left:
                rebuild_stats(conn, left)
        return deleted

    # --- reading ---------------------------------------------------------------------------

    def records(self, task_or_key: TaskOrKey | None = None, *, target: str | None = None,
                target_model: str | None = None, run_id: str | None = None, errors: bool | None = None,
                kind: str | None = None, limit: int | None = None,
                ids: Iterable[int] | None = None, knobs_hash: str | None = None) -> list[Record]:
        """Records in the order they were stored, filtered by workload, target string, target model,
        run, ``errors`` (``True``: only errors, ``False``: only successes, ``None``: all),
        ``kind`` (:data:`~db.record.TRIAL` or :data:`~db.record.REMEASURE`; ``None``: both),
        ``ids`` (record ids) and ``knobs_hash``: the records of the workload's config with this
        knob fingerprint that its :class:`~db.stats.ConfigStats` pools (those with usable
        costs), read through the config's costs; it needs the workload."""
        query = (select(*_RECORD_COLUMNS).join(_W, _W.id == _R.workload_id).order_by(_R.id))
        if knobs_hash is not None:
            if task_or_key is None:
                raise ValueError("records: knobs_hash names a config of one workload; name the workload too")
            S, CC, W = ConfigStatsRow, ConfigCostRow, aliased(WorkloadRow)
            config = (select(CC.record_id).join(S, S.id == CC.config_id).join(W, W.id == S.workload_id)
                      .where(W.key == _key_of(task_or_key), S.knobs_hash == knobs_hash).correlate(None))
            query = query.where(_R.id.in_(config))
        if ids is not None:
            wanted = sorted(set(ids))
            if len(wanted) > _BATCH:  # keep the parameter list short: read by batches
                found: list[Record] = []
                for start in range(0, len(wanted), _BATCH):
                    found += self.records(task_or_key, target=target, target_model=target_model,
                                          run_id=run_id, errors=errors, kind=kind,
                                          ids=wanted[start:start + _BATCH], knobs_hash=knobs_hash)
                return found[:limit] if limit is not None else found
            query = query.where(_R.id.in_(wanted))
        if kind is not None:
            query = query.where(_R.kind == _checked_kind(kind))
        if task_or_key is not None:
            query = query.where(_W.key == _key_of(task_or_key))
        if target is not None:
            query = query.where(_W.target == target)
        if target_model is not None:
            query = query.where(_W.target_model == target_model)
        if run_id is not None:
            query = query.where(_R.run_id == run_id)
        if errors is not None:
            query = query.where(_R.error_kind.is_not(None) if errors else _R.error_kind.is_(None))
        if limit is not None:
            query = query.limit(limit)
        with self._guard("reading records"), self._reading() as conn:
            return [r for r in map(self._decode, conn.execute(query)) if r is not None]

    def workloads(self) -> list[Workload]:
        """Every workload of the log, in the order they first appeared."""
        query = select(_W.key, _W.template, _W.args, _W.target, _W.target_model).order_by(_W.id)
        with self._guard("reading workloads"), self._reading() as conn:
            return [Workload(key=w.key, template=w.template, args=json.loads(w.args), target=w.target,
                             target_model=w.target_model) for w in conn.execute(query)]

    def runs(self, *, now: float | None = None) -> list[RunInfo]:
        """Every tuning run of the log, oldest first.

        A run marked ``"running"`` whose last heartbeat (its start, for runs logged without
        one) is older than :data:`DEAD_AFTER_BEATS` of its heartbeat intervals comes out with
        status ``"dead"``: the process that ran it is gone. ``now`` (seconds since the epoch)
        is the time to judge at; by default, the present.
        """
        query = select(RunRow).order_by(RunRow.started, RunRow.id)
        with self._guard("reading runs"), self._reading() as conn:
            rows = conn.execute(query).all()
        now = time.time() if now is None else now
        return [_run_info(r, now) for r in rows]

    def runs_of(self, task_or_key: TaskOrKey) -> list[RunInfo]:
        """The runs that wrote records of one workload, oldest first (records whose run was
        deleted have none: they are not represented)."""
        wrote = (select(_R.run_id).join(_W, _W.id == _R.workload_id)
                 .where(_W.key == _key_of(task_or_key), _R.run_id.is_not(None)).distinct())
        query = select(RunRow).where(RunRow.id.in_(wrote)).order_by(RunRow.started, RunRow.id)
        with self._guard("reading runs"), self._reading() as conn:
            rows = conn.execute(query).all()
        now = time.time()
        return [_run_info(r, now) for r in rows]

    def count(self, task_or_key: TaskOrKey | None = None, *, errors: bool | None = None,
              kind: str | None = None) -> int:
        """The number of records (of one workload, only errors or successes, only one ``kind``:
        ``count(task, kind=db.TRIAL)`` is the number of trials)."""
        query = select(func.count(_R.id))
        if kind is not None:
            query = query.where(_R.kind == _checked_kind(kind))
        if task_or_key is not None:
            query = query.join(_W, _W.id == _R.workload_id).where(_W.key == _key_of(task_or_key))
        if errors is not None:
            query = query.where(_R.error_kind.is_not(None) if errors else _R.error_kind.is_(None))
        with self._guard("counting records"), self._reading() as conn:
            return int(conn.scalar(query) or 0)

    def summary(self) -> list[SummaryRow]:
        """One row per workload: its trials (re-measurements apart), failed trials (and how many
        of each error kind) and re-measurements; sorted by template then key. Read from the
        counts the log keeps, not from the records. (The best config of each workload is chosen
        by ``autotune.selection``; ``autotune best`` prints both.)"""
        C = WorkloadCountRow
        query = (select(_W.id, _W.key, _W.template, _W.target, _W.target_model, C.kind, C.error_kind, C.n)
                 .select_from(_W).outerjoin(C, C.workload_id == _W.id).order_by(_W.template, _W.key, _W.id))
        with self._guard("summarising"), self._reading() as conn:
            rows = conn.execute(query).all()
        out: dict[int, SummaryRow] = {}
        for r in rows:
            row = out.get(r.id)
            if row is None:
                row = out[r.id] = SummaryRow(workload_key=r.key, template=r.template, target=r.target,
                                             target_model=r.target_model, trials=0, errors=0)
            if r.kind == TRIAL:
                row.trials += int(r.n)
                if r.error_kind:
                    row.errors += int(r.n)
                    row.error_kinds[r.error_kind] = int(r.n)
            elif r.kind == REMEASURE:
                row.remeasured += int(r.n)
        return list(out.values())

    def config_stats(self, task_or_key: TaskOrKey, *, limit: int | None = None,
                     offset: int = 0) -> list[ConfigStats]:
        """The statistics of a workload's configs in ranking order, best first (lower score, then
        smaller knob fingerprint: see :mod:`db.stats`), from ``offset`` on, at most ``limit``.

        An indexed read: its cost does not grow with the records of the workload.
        """
        S = ConfigStatsRow
        query = (select(_W.key, S.knobs_hash, S.config, S.n_costs, S.median_cost, S.score, S.min_cost,
                        S.max_cost, S.flop, S.code_version, S.latest)
                 .join(_W, _W.id == S.workload_id).where(_W.key == _key_of(task_or_key))
                 .order_by(S.score, S.knobs_hash).offset(offset))
        if limit is not None:
            query = query.limit(limit)
        with self._guard("reading config statistics"), self._reading() as conn:
            rows = conn.execute(query).all()
        return [ConfigStats(workload_key=r.key, knobs_hash=r.knobs_hash, config=json.loads(r.config),
                            count=r.n_costs, median=r.median_cost, score=r.score, min_cost=r.min_cost,
                            max_cost=r.max_cost, flop=r.flop, code_version=r.code_version,
                            latest=r.latest) for r in rows]

    def trial_curve(self, task_or_key: TaskOrKey, *, points: int = 1000) -> TrialCurve:
        """A workload's search trials in time order, downsampled: what a plot of its tuning curve
        draws, without loading every record.

        Up to ``points`` trials come one point each. Beyond, the trials are grouped into
        ``points`` buckets of equal spans of time (one pass of SQL, no sort of the trials), each
        a point: the number of its last trial, its fastest and slowest mean cost, its errors.
        ``run_starts`` are the trial numbers where a tuning run starts (beyond ``points``
        trials, the first trial of the bucket it starts in).
        """
        if isinstance(points, bool) or not isinstance(points, int) or points < 1:
            raise ValueError(f"trial_curve: points must be a positive int, got {points!r}")
        with self._guard("reading a tuning curve"), self._reading() as conn:
            wid = conn.scalar(select(_W.id).where(_W.key == _key_of(task_or_key)))
            trials = and_(_R.workload_id == wid, _R.kind == TRIAL)
            # the count the log keeps, and the ends of the trials' range: two seeks in
            # ix_records_curve (a lone min or max is read from the index, a count would scan it)
            total = int(conn.scalar(select(func.sum(WorkloadCountRow.n)).where(
                WorkloadCountRow.workload_id == wid, WorkloadCountRow.kind == TRIAL)) or 0)
            if not total:
                return TrialCurve(0, [], [])
            t0 = conn.scalar(select(func.min(_R.timestamp)).where(trials))
            t1 = conn.scalar(select(func.max(_R.timestamp)).where(trials))
            if total <= points:
                rows = conn.execute(select(_R.mean_cost, _R.error_kind, _R.run_id).where(trials)
                                    .order_by(_R.timestamp, _R.id)).all()
                starts = [n for n, r in enumerate(rows, 1) if n > 1 and r.run_id != rows[n - 2].run_id]
                each = [CurvePoint(n, r.mean_cost, r.mean_cost, int(r.error_kind is not None))
                        for n, r in enumerate(rows, 1)]
                return TrialCurve(total, each, starts)
            width = (t1 - t0) / points or 1.0  # all at one time: one bucket
            offset = (_R.timestamp - t0) / width  # >= 0; SQLite's cast truncates, PostgreSQL's rounds
            index = cast(func.floor(offset) if self._backend == "postgresql" else offset, Integer)
            bucket = case((index > points - 1, points - 1), else_=index).label("bucket")
            # errors are the trials without a mean cost: every column read is in ix_records_curve
            buckets = conn.execute(select(bucket, func.count(), func.min(_R.mean_cost),
                                          func.max(_R.mean_cost), func.count() - func.count(_R.mean_cost))
                                   .where(trials).group_by(bucket).order_by(bucket)).all()
            firsts = conn.scalars(select(func.min(_R.timestamp)).where(trials).group_by(_R.run_id)).all()
        curve, starts_at, last = [], {}, 0
        for b, n, lo, hi, errors in buckets:
            starts_at[int(b)] = last + 1
            last += int(n)
            curve.append(CurvePoint(last, lo, hi, int(errors)))
        starts = set()
        for t in firsts:
            if t > t0:
                b = min(int((t - t0) / width), points - 1)
                starts.add(starts_at.get(b, last))
        return TrialCurve(total, curve, sorted(starts))

    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every run (``{"run": {...}}`` lines) then every record (one JSON object per line)
        to ``path``; returns the number of records written. :meth:`import_jsonl` reads it back."""
        n = 0
        try:
            with builtins.open(path, "w", encoding="utf-8") as f:
                for run in self.runs():
                    f.write(json.dumps({"run": run.to_dict()}, separators=(",", ":")) + "\n")
                for batch in self._record_batches():
                    f.writelines(r.to_json() + "\n" for r in batch)
                    n += len(batch)
        except OSError as err:
            raise TuningLogError(f"cannot write {path}: {err.strerror or err}") from None
        return n

    # --- internals -------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        # On SQLite the "begin" hook turns this option into BEGIN IMMEDIATE: the write lock is
        # taken up front (waiting up to the busy timeout), never upgraded from a read snapshot.
        with self._engine.connect() as conn:
            conn.execution_options(autotune_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except sa_exc.SQLAlchemyError as err:
            raise TuningLogError(f"tuning log {self._where}: {what} failed: {_reason(err)}") from err

    def _retrying(self, what: str, write: Callable[[Connection], Any],
                  unwritten: Sequence[Record] = ()) -> Any:
        """``write(conn)`` in a write transaction; what it returns. While a PostgreSQL server cannot
        be reached it is tried again, with growing pauses, for up to the log's reconnect timeout
        (each write is idempotent: a record or run the log holds is not stored twice). Where the
        database fails it, or the wait is interrupted, the records ``unwritten`` are saved to a file
        (:meth:`_save_unwritten`) that the error or a warning names. After a write that gave up,
        the next ones are tried once until one gets through (ending a run that failed so does not
        wait again)."""
        deadline, pause = None, 0.25
        while True:
            try:
                with self._guard(what), self._writing() as conn:
                    done = write(conn)
            except TuningLogError as err:
                cause = err.__cause__
                if not isinstance(cause, sa_exc.SQLAlchemyError):
                    raise
                waits = (self._backend == "postgresql" and self._reconnect_timeout > 0 and not self._gave_up
                         and _unreachable(cause))
                now = time.monotonic()
                if waits and deadline is None:
                    deadline = now + self._reconnect_timeout
                    log.warning("tuning log %s: %s failed (%s); trying again for up to %.0f s", self._where,
                                what, _reason(cause), self._reconnect_timeout)
                if not waits or now >= deadline:
                    message = str(err)
                    if waits:
                        self._gave_up = True
                        message += f" (the server was unreachable for {self._reconnect_timeout:.0f} s)"
                    if unwritten:
                        message += f"; {self._save_unwritten(unwritten)}"
                    raise TuningLogError(message) from cause
                try:
                    time.sleep(min(pause, deadline - now))
                except KeyboardInterrupt:
                    if unwritten:
                        log.warning("tuning log %s: interrupted while waiting for the server; %s",
                                    self._where, self._save_unwritten(unwritten))
                    raise
                pause = min(pause * 2, 10.0)
                continue
            if deadline is not None:
                log.warning("tuning log %s: %s done once the server answered again", self._where, what)
            self._gave_up = False
            return done

    def _save_unwritten(self, records: Sequence[Record]) -> str:
        """Save records that could not be written to a JSONL file in the current directory; what
        to do with it (or why it could not be saved), for an error message."""
        path = Path(f"autotune-unwritten-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-"
                    f"{uuid.uuid4().hex[:6]}.jsonl").resolve()
        try:
            with builtins.open(path, "w", encoding="utf-8") as f:
                f.writelines(r.to_json() + "\n" for r in records)
        except OSError as err:
            return f"{_count(records)} lost (saving them failed: {err.strerror or err})"
        return (f"{_count(records)} saved in {path}: add them to the log later with "
                f"autotune import --db <the log's URL> {path}")

    def _insert(self, table: Any) -> Any:
        return (postgresql.insert if self._backend == "postgresql" else sqlite.insert)(table)

    def _store_runs(self, conn: Connection, runs: Sequence[RunInfo]) -> None:
        if runs:
            conn.execute(self._insert(RunRow).on_conflict_do_nothing(index_elements=["id"]),
                         [{"id": r.run_id, "tuner": r.tuner, "options": canonical_json(r.options),
                           "started": r.started, "ended": r.ended, "status": r.status,
                           "heartbeat": r.heartbeat, "heartbeat_interval": r.heartbeat_interval}
                          for r in runs])

    def _flush(self, conn: Connection, runs: list[RunInfo], records: list[Record]) -> int:
        self._store_runs(conn, runs)
        added = self._store(conn, records) if records else 0
        runs.clear()
        records.clear()
        return added

    def _store(self, conn: Connection, records: Sequence[Record]) -> int:
        """Insert records (with their workloads and placeholder runs) in ``conn``'s transaction."""
        first: dict[str, Record] = {}
        for r in records:
            first.setdefault(r.workload_key, r)
        ids = self._workload_ids(conn, first)
        missing = [key for key in first if key not in ids]
        if missing:  # new workloads (usually none: one query is all a known workload costs)
            conn.execute(self._insert(_W).on_conflict_do_nothing(index_elements=["key"]),
                         [{"key": key, "template": r.template, "args": canonical_json(r.args),
                           "target": r.target, "target_kind": target_kind(r.target),
                           "target_model": r.target_model} for key, r in ((k, first[k]) for k in missing)])
            ids.update(self._workload_ids(conn, {key: first[key] for key in missing}))
        started: dict[str, float] = {}
        for r in records:
            if r.run_id is not None:
                started[r.run_id] = min(started.get(r.run_id, r.timestamp), r.timestamp)
        self._store_runs(conn, [RunInfo(run_id=rid, tuner="unknown", options={}, started=t, ended=None,
                                        status="unknown") for rid, t in started.items()])
        rows: dict[str, dict[str, Any]] = {}
        parsed: dict[str, Record] = {}
        for r in records:
            uid = r.uid
            parsed.setdefault(uid, r)
            rows.setdefault(uid, {
                "uid": uid, "workload_id": ids[r.workload_key], "run_id": r.run_id,
                "config": canonical_json(r.config), "config_index": r.config_index,
                "costs": json.dumps(r.costs), "mean_cost": r.mean_cost, "median_cost": r.median_cost,
                "gflops": r.gflops, "error_kind": r.error_kind, "error_msg": r.error_msg,
                "build_time": r.build_time, "run_time": r.run_time, "host": r.host, "device": r.device,
                "timestamp": r.timestamp, "kind": r.kind, "code_version": r.code_version})
        values = list(rows.values())
        insert = _insert_records(self._backend)
        added = []
        for start in range(0, len(values), _BATCH):
            for new in conn.execute(insert, values[start:start + _BATCH]):
                r = parsed[new.uid]
                added.append({**rows[new.uid], "id": new.id, "costs": r.costs, "config": r.config,
                              "config_text": rows[new.uid]["config"]})
        add_stats(conn, added)  # in this transaction: the statistics never lag the records
        return len(added)

    def _workload_ids(self, conn: Connection, first: dict[str, Record]) -> dict[str, int]:
        """The ids of the workloads of ``first`` (key -> its first record) that the log holds;
        a warning for a key that names another workload than its record."""
        ids: dict[str, int] = {}
        keys = list(first)
        for start in range(0, len(keys), _BATCH):
            for w in conn.execute(select(_W.id, _W.key, _W.template, _W.args, _W.target, _W.target_model)
                                  .where(_W.key.in_(keys[start:start + _BATCH]))):
                ids[w.key] = w.id
                r = first[w.key]
                if (w.template, w.args, w.target, w.target_model) != (
                        r.template, canonical_json(r.args), r.target, r.target_model):
                    log.warning("tuning log %s: workload key %s already names %s%s on %s (%s); records "
                                "for %s%s on %s (%s) are stored under it", self._where, w.key,
                                w.template, w.args, w.target, w.target_model,
                                r.template, r.args, r.target, r.target_model)
        return ids

    def _decode(self, row: Any) -> Record | None:
        """A :class:`Record` from a row of :data:`_RECORD_COLUMNS`; ``None`` (and a warning) if malformed."""
        try:
            return Record(workload_key=row.key, template=row.template, args=json.loads(row.args),
                          target=row.target, target_model=row.target_model, config=json.loads(row.config),
                          config_index=row.config_index, costs=json.loads(row.costs),
                          error_kind=row.error_kind, error_msg=row.error_msg, build_time=row.build_time,
                          run_time=row.run_time, host=row.host, device=row.device,
                          timestamp=row.timestamp, run_id=row.run_id, gflops=row.gflops, kind=row.kind,
                          code_version=row.code_version)
        except (ValueError, TypeError) as err:
            log.warning("tuning log %s: skipping malformed record row %s: %s", self._where, row.id, err)
            return None

    def _record_batches(self) -> Iterator[list[Record]]:
        """Every record, in id order, a batch at a time (keyset pagination: no long cursor)."""
        last = 0
        while True:
            query = (select(*_RECORD_COLUMNS).join(_W, _W.id == _R.workload_id)
                     .where(_R.id > last).order_by(_R.id).limit(_BATCH))
            with self._guard("reading records"), self._reading() as conn:
                rows = conn.execute(query).all()
            if not rows:
                return
            last = rows[-1].id
            yield [r for r in map(self._decode, rows) if r is not None]


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """A bucket of consecutive trials: the number of its last trial, the fastest and slowest
    mean cost of its successful trials (``None`` when all failed), and its failed trials."""

    trial: int
    fastest: float | None
    slowest: float | None
    errors: int


@dataclass(frozen=True, slots=True)
class TrialCurve:
    """A workload's trials, downsampled (see :meth:`TuningLog.trial_curve`)."""

    trials: int
    points: list[CurvePoint]
    run_starts: list[int]


@functools.cache
def _insert_records(backend: str) -> Any:
    """The statement that inserts records (those already held are skipped), built once."""
    insert = postgresql.insert if backend == "postgresql" else sqlite.insert
    return insert(_R).on_conflict_do_nothing(index_elements=["uid"]).returning(_R.id, _R.uid)


def _key_of(obj: TaskOrKey) -> str:
    """The workload key of a key, a record, a workload or a task."""
    if isinstance(obj, str):
        return obj
    key = getattr(obj, "workload_key", None)
    if not isinstance(key, str):
        raise TypeError(f"expected a workload key (str) or a task with a workload_key, "
                        f"got {type(obj).__name__}")
    return key


def default_heartbeat_interval() -> float:
    """Seconds between two heartbeats of a running tuner: the environment variable
    :data:`HEARTBEAT_ENV` (``AUTOTUNE_HEARTBEAT_S``) when set, else :data:`HEARTBEAT_INTERVAL_S`."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return HEARTBEAT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise TuningLogError(f"{HEARTBEAT_ENV}={text!r}: expected a positive number of seconds")
    return value


def _run_info(row: Any, now: float) -> RunInfo:
    return RunInfo(run_id=row.id, tuner=row.tuner, options=json.loads(row.options), started=row.started,
                   ended=row.ended, status=_observed_status(row, now), heartbeat=row.heartbeat,
                   heartbeat_interval=row.heartbeat_interval)


def _observed_status(run: Any, now: float) -> str:
    """A run's status as a reader sees it: ``"dead"`` for a running run whose heartbeat stopped."""
    if run.status != "running":
        return run.status
    interval = run.heartbeat_interval or HEARTBEAT_INTERVAL_S
    last = run.heartbeat if run.heartbeat is not None else run.started
    return "dead" if now - last > DEAD_AFTER_BEATS * interval else "running"


def _checked_kind(kind: str) -> str:
    if kind not in RECORD_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RECORD_KINDS)}, got {kind!r}")
    return kind


# scheme://user:PASSWORD@host (up to the last '@' of the word: a password may hold one),
# and a password given as a query parameter (...?password=PASSWORD).
_URL_PASSWORD = re.compile(r"(://[^/@\s]*?:)\S*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s]*", re.IGNORECASE)


def hide_passwords(text: str) -> str:
    """``text`` with the password of every database URL in it replaced by ``***``.

    Both spellings are hidden: ``user:secret@host`` and ``...?password=secret``.
    Everything that names a log in a message goes through here.
    """
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


def _count(records: Sequence[Record]) -> str:
    return "its record is" if len(records) == 1 else f"its {len(records)} records are"


def _unreachable(err: sa_exc.SQLAlchemyError) -> bool:
    """Whether ``err`` says that the database server could not be reached or the connection to it
    was lost (worth trying again), rather than that the statement failed."""
    if isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated:
        return True
    return isinstance(err, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.DisconnectionError)


def _reason(err: BaseException) -> str:
    """The driver's message of a database error, on one line, without the SQL and parameters."""
    cause = getattr(err, "orig", None) or err
    text = " ".join(str(cause).split()) or type(cause).__name__
    return hide_passwords(text if len(text) <= 500 else text[:497] + "...")


def _url_of(path_or_url: str | os.PathLike[str]) -> tuple[URL, str, bool]:
    """The SQLAlchemy URL of a path or URL, how messages name it, and whether it is in memory."""
    if isinstance(path_or_url, TuningLog):
        raise TypeError("open() takes a path or URL, not an open TuningLog")
    text = os.fspath(path_or_url)
    if not isinstance(text, str):
        raise TypeError(f"open() takes a path or URL string, got {type(path_or_url).__name__}")
    if text == ":memory:":
        return URL.create("sqlite"), ":memory:", True
    if "://" not in text:
        path = Path(text).expanduser().absolute()
        if path.is_dir():
            raise TuningLogError(f"cannot open tuning log {path}: it is a directory")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise TuningLogError(f"cannot open tuning log {path}: {err.strerror or err}") from None
        return URL.create("sqlite", database=str(path)), str(path), False
    try:
        url = make_url(text)
    except sa_exc.ArgumentError:
        raise TuningLogError(f"not a database URL: {hide_passwords(text)}") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    where = hide_passwords(url.render_as_string(hide_password=True))
    memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
    return url, where, memory


def _sqlite_engine(url: URL, where: str, memory: bool, busy_timeout: float) -> Engine:
    kwargs: dict[str, Any] = {"connect_args": {"timeout": busy_timeout, "check_same_thread": False}}
    if memory:
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # transactions are begun by the hook below
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if not memory:
            mode = _enable_wal(cursor, busy_timeout)
            if mode != "wal":
                log.warning("tuning log %s: SQLite refused WAL mode (journal mode %s); concurrent "
                            "writers may wait longer", where, mode)
            cursor.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable across process crashes
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("autotune_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _enable_wal(cursor: Any, busy_timeout: float) -> str:
    """Switch an SQLite database to WAL mode; returns the journal mode it ends in.

    Switching needs an exclusive lock, and SQLite answers "database is locked" at once
    (without its busy handler) while other connections hold the file, as when several
    processes open a fresh log together; so retry, with jittered backoff, for up to
    ``busy_timeout`` seconds.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.002
    while True:
        try:
            mode = str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode == "wal":
                return mode
            return str(cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.1)
