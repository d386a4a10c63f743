"""Per-config statistics of a tuning log, kept in SQL as records arrive.

Ranking every record of a workload in Python grows with the tuning history, so the log
keeps, per workload and config, everything the ranking needs: in ``config_stats`` a row of
fixed size (the count of the config's usable costs, their median, minimum and maximum, and
the config's *confident cost*, its score), in ``config_costs`` one row per usable cost
(with the record it came from), ordered by cost under the config's id. Reading the best
configs of a workload is then an indexed ``ORDER BY score`` with a ``LIMIT``. Counts of
records per workload, kind and error kind (table ``workload_counts``) serve summaries.

The tables are updated in the transaction that inserts the records (:func:`add_stats`),
without rewriting what a config holds already: its new costs are rows added to
``config_costs``, its fixed-size columns are merged with the new records, and its median is
read from the middle of its costs (``ORDER BY cost LIMIT 1 or 2 OFFSET (n - 1) / 2`` on the
table's key), so that an insert does not read or write a config's history.
:func:`rebuild_stats` recomputes the tables from the records (after a prune, and by the
schema migration that last changed them).

A config's figure is made of the costs of its latest code version only: each record names
the version of the code that built and timed it (``code_version``), and a config's costs
from an earlier version (a compiler or template since changed) no longer count once it has
been measured with a newer one; its records stay. The latest version is the one of the
config's latest record (by time, then by version), so a config's statistics are a function
of the multiset of its records alone and do not depend on the order in which they arrived.

The score is :func:`confident_cost` (``autotune.selection`` ranks with it and only with it;
it lives here because the log computes it on insert, and this package imports no other).
Changing its formula needs a schema migration that rebuilds the statistics.

The ranking order: lower score first; on equal scores, the config whose
:func:`knobs_fingerprint` (the SHA-256 of its canonical knob JSON, in hex) is smaller.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from db.record import canonical_json
from db.schema import ConfigCostRow, ConfigStatsRow, RecordRow, WorkloadCountRow, WorkloadRow

__all__ = ["PENALTY", "confident_cost", "knobs_of", "knobs_fingerprint", "usable_costs", "ConfigStats",
           "add_stats", "rebuild_stats"]

#: Relative penalty at one cost: a config timed 3 times is charged ~6%, 27 times ~2%.
PENALTY = 0.1

_BATCH = 500
_MEDIANS = 200  # configs per median query (SQLite allows 500 terms in a compound SELECT)


def confident_cost(costs: Sequence[float]) -> float:
    """The median of ``costs``, raised by ``PENALTY / sqrt(len(costs))``; ``inf`` for none.

    A config measured once may look fast by luck; one measured many times has a
    trustworthy median, so a well-measured config wins a near tie.
    """
    if not costs:
        return math.inf
    return _score(statistics.median(costs), len(costs))


def knobs_of(config: Any) -> dict:
    """The knob values of a config as the log stores it (``{"index", "knobs"}``, or bare knobs)."""
    if not isinstance(config, dict):
        return {}
    return config.get("knobs", config)


def knobs_fingerprint(config: Any) -> str:
    """The SHA-256 (hex) of the canonical JSON of a config's knobs: what pools the records of
    one config (whatever else its stored JSON holds) and breaks ties of the ranking."""
    return hashlib.sha256(canonical_json(knobs_of(config)).encode()).hexdigest()


def usable_costs(costs: Iterable[float | None]) -> list[float]:
    """The costs that count for the ranking: finite and positive."""
    return [float(c) for c in costs if c is not None and math.isfinite(c) and c > 0]


@dataclass(frozen=True, slots=True)
class ConfigStats:
    """What the log knows of one config of one workload (a row of ``config_stats``).

    ``config`` is the config as stored (of the records pooled, the one whose canonical JSON
    sorts first); ``count`` the number of its usable costs, ``median``, ``min_cost`` and
    ``max_cost`` their median, minimum and maximum; ``score`` its :func:`confident_cost`;
    ``flop`` the work of one run as its records state it (``None`` when none does);
    ``code_version`` the code version those costs come from (the config's latest) and
    ``latest`` the time of its latest record. Its records are
    ``TuningLog.records(workload_key, knobs_hash=knobs_hash)`` (those its costs come from).
    """

    workload_key: str
    knobs_hash: str
    config: dict
    count: int
    median: float
    score: float
    min_cost: float
    max_cost: float
    flop: float | None = None
    code_version: str = ""
    latest: float = 0.0

    @property
    def spread(self) -> float:
        """``(max - min) / median`` of the costs: how much the measurements disagree."""
        return (self.max_cost - self.min_cost) / self.median if self.median else 0.0


class _Pool:
    """New records of one config and one code version, to be merged into its row: the least
    canonical JSON of its config, its usable costs as ``(cost, record id, position)``, the
    least work of one run and the time of its latest record (every choice here is
    order-independent)."""

    __slots__ = ("config", "costs", "flop", "version", "latest")

    def __init__(self, config: str, flop: float | None, version: str, latest: float):
        self.config, self.costs, self.flop, self.version, self.latest = config, [], flop, version, latest

    def absorb(self, config: str, flop: float | None, latest: float) -> None:
        self.config = min(self.config, config)
        if flop is not None:
            self.flop = flop if self.flop is None else min(self.flop, flop)
        self.latest = max(self.latest, latest)

    @property
    def newest(self) -> tuple[float, str]:
        """What orders code versions: the time of the latest record, then the version."""
        return self.latest, self.version

    def row(self, workload_id: int, knobs_hash: str) -> dict[str, Any]:
        """The whole row of a config that the log does not hold yet."""
        costs = sorted(c for c, _, _ in self.costs)
        median = statistics.median(costs)
        return {"workload_id": workload_id, "knobs_hash": knobs_hash, "config": self.config,
                "n_costs": len(costs), "median_cost": median, "score": _score(median, len(costs)),
                "min_cost": costs[0], "max_cost": costs[-1], "flop": self.flop,
                "code_version": self.version, "latest": self.latest}


def _score(median: float, n: int) -> float:
    """:func:`confident_cost` from the median and count (the same arithmetic)."""
    return median * (1.0 + PENALTY / math.sqrt(n))


def _flop(gflops: float | None, mean: float | None) -> float | None:
    return gflops * 1e9 * mean if gflops and mean and gflops > 0 and mean > 0 else None


# Pools of records by workload and config, then by code version.
_Versions = dict[str, _Pool]
_Pools = dict[tuple[int, str], _Versions]


def _pools(rows: Iterable[dict[str, Any]], pools: _Pools | None = None) -> _Pools:
    """Pool successful records by workload, config and code version, into ``pools`` (new by
    default): dicts of ``id, workload_id, gflops, mean_cost, timestamp, code_version``,
    ``costs`` (a list), ``config`` (a dict) and ``config_text`` (its canonical JSON)."""
    pools = {} if pools is None else pools
    for r in rows:
        costs = usable_costs(r["costs"])
        if not costs:
            continue
        key = (r["workload_id"], knobs_fingerprint(r["config"]))
        flop, version = _flop(r["gflops"], r["mean_cost"]), r["code_version"]
        versions = pools.setdefault(key, {})
        pool = versions.get(version)
        if pool is None:
            pool = versions[version] = _Pool(r["config_text"], flop, version, r["timestamp"])
        else:
            pool.absorb(r["config_text"], flop, r["timestamp"])
        pool.costs.extend((c, r["id"], seq) for seq, c in enumerate(costs))
    return pools


def _latest(versions: _Versions) -> _Pool:
    """The pool of a config's latest code version: the one whose costs are its figure."""
    return max(versions.values(), key=lambda pool: pool.newest)


# The statements of every insert, built once per dialect: building a statement costs more
# than running it on a few rows.

@functools.cache
def _counts_upsert(dialect: str) -> Any:
    bump = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(WorkloadCountRow)
    return bump.on_conflict_do_update(index_elements=["workload_id", "kind", "error_kind"],
                                      set_={"n": WorkloadCountRow.n + bump.excluded.n})


@functools.cache
def _stats_of() -> Any:
    S = ConfigStatsRow
    return select(S.id, S.knobs_hash, S.config, S.n_costs, S.min_cost, S.max_cost, S.flop, S.code_version,
                  S.latest).where(
        S.workload_id == bindparam("wid"), S.knobs_hash.in_(bindparam("hashes", expanding=True)))


@functools.cache
def _insert_stats() -> Any:
    S = ConfigStatsRow
    return insert(S).returning(S.workload_id, S.knobs_hash, S.id, sort_by_parameter_order=True)


# The statements run per config and per cost go to the driver as they are: SQLAlchemy's
# processing of each row's parameters would cost more than the database's work. SQLite runs
# them once per row (bound by position); PostgreSQL takes the whole batch at once, a column
# per array (``unnest``), since a statement per row would cost a round trip each.

_UPDATE_STATS = ("UPDATE config_stats SET config = ?, n_costs = ?, median_cost = ?, score = ?, min_cost = ?, "
                 "max_cost = ?, flop = ?, latest = ? WHERE id = ?")
_PG_UPDATE_STATS = ("UPDATE config_stats AS s SET config = u.config, n_costs = u.n, median_cost = u.median, "
                    "score = u.score, min_cost = u.lo, max_cost = u.hi, flop = u.flop, latest = u.latest "
                    "FROM unnest(%s::text[], %s::int[], %s::float8[], %s::float8[], %s::float8[], "
                    "%s::float8[], %s::float8[], %s::float8[], %s::bigint[]) "
                    "AS u(config, n, median, score, lo, hi, flop, latest, id) WHERE s.id = u.id")
_INSERT_COSTS = "INSERT INTO config_costs (config_id, cost, record_id, seq) VALUES (?, ?, ?, ?)"
_PG_INSERT_COSTS = ("INSERT INTO config_costs (config_id, cost, record_id, seq) "
                    "SELECT * FROM unnest(%s::bigint[], %s::float8[], %s::bigint[], %s::int[])")
# The middle costs of configs (id, how many, from which position: for each), each read from
# its config's key in config_costs; LIMIT and OFFSET are the config's own.
_PG_MIDDLES = ("SELECT m.config_id, m.cost FROM unnest(%s::bigint[], %s::int[], %s::int[]) AS t(id, l, o) "
               "CROSS JOIN LATERAL (SELECT config_id, cost FROM config_costs WHERE config_id = t.id "
               "ORDER BY cost LIMIT t.l OFFSET t.o) AS m")


@functools.cache
def _middles(n: int) -> str:
    """:data:`_PG_MIDDLES` for ``n`` configs on SQLite, whose LIMIT cannot name a column: one
    ``UNION ALL`` of ``n`` index seeks (parameters: id, how many, from which position; for each)."""
    part = ("SELECT * FROM (SELECT config_id, cost FROM config_costs WHERE config_id = ? "
            "ORDER BY cost LIMIT ? OFFSET ?) AS m{k}")
    return " UNION ALL ".join(part.format(k=k) for k in range(n))


def _columns(rows: list[tuple]) -> tuple[list, ...]:
    """Rows of parameters as one list per column: the arrays a PostgreSQL ``unnest`` takes."""
    return tuple(list(column) for column in zip(*rows))


def _run_rows(conn: Connection, sqlite_sql: str, postgres_sql: str, rows: list[tuple]) -> None:
    """Run a statement for each of ``rows`` (tuples of its parameters)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(postgres_sql, _columns(rows))
    else:
        conn.exec_driver_sql(sqlite_sql, rows)


def _insert_costs(conn: Connection, ids: dict[tuple[int, str], int],
                  pools: dict[tuple[int, str], _Pool]) -> None:
    rows = [(ids[key], c, rid, seq) for key, pool in sorted(pools.items()) for c, rid, seq in pool.costs]
    for start in range(0, len(rows), 20 * _BATCH):
        _run_rows(conn, _INSERT_COSTS, _PG_INSERT_COSTS, rows[start:start + 20 * _BATCH])


def _insert_new(conn: Connection, pools: dict[tuple[int, str], _Pool]) -> None:
    """Write the rows and costs of configs the log does not hold yet."""
    rows = [pool.row(*key) for key, pool in sorted(pools.items())]
    ids: dict[tuple[int, str], int] = {}
    for start in range(0, len(rows), _BATCH):
        for wid, knobs_hash, row_id in conn.execute(_insert_stats(), rows[start:start + _BATCH]):
            ids[(wid, knobs_hash)] = row_id
    _insert_costs(conn, ids, pools)


def _medians(conn: Connection, counts: dict[int, int]) -> dict[int, float]:
    """The median cost of each config id of ``counts`` (id -> its number of costs)."""
    ids = sorted(counts)
    wanted = [(i, 2 - counts[i] % 2, (counts[i] - 1) // 2) for i in ids]
    middles: dict[int, list[float]] = {i: [] for i in ids}
    postgres = conn.dialect.name == "postgresql"
    step = len(wanted) if postgres else _MEDIANS
    for start in range(0, len(wanted), step):
        part = wanted[start:start + step]
        if postgres:
            found = conn.exec_driver_sql(_PG_MIDDLES, _columns(part))
        else:
            found = conn.exec_driver_sql(_middles(len(part)), tuple(v for row in part for v in row))
        for config_id, cost in found:
            middles[config_id].append(cost)
    return {i: statistics.median(m) for i, m in middles.items()}  # of the one or two middle costs


def _merge_old(conn: Connection, old: dict[tuple[int, str], Any],
               pools: dict[tuple[int, str], _Pool]) -> None:
    """Fold new records into the rows of configs the log holds (``old``: key -> its row), of the
    code version of the row."""
    ids = {key: row.id for key, row in old.items()}
    _insert_costs(conn, ids, pools)
    counts = {row.id: row.n_costs + len(pools[key].costs) for key, row in old.items()}
    medians = _medians(conn, counts)
    updates = []
    for key, row in sorted(old.items()):
        pool = pools[key]
        pool.absorb(row.config, row.flop, row.latest)
        new_costs = [c for c, _, _ in pool.costs]
        n, median = counts[row.id], medians[row.id]
        updates.append((pool.config, n, median, _score(median, n), min(row.min_cost, *new_costs),
                        max(row.max_cost, *new_costs), pool.flop, pool.latest, row.id))
    _run_rows(conn, _UPDATE_STATS, _PG_UPDATE_STATS, updates)


def add_stats(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Fold newly inserted records into the statistics, in ``conn``'s transaction.

    ``rows`` are the inserted rows as dicts (with their new ``id``; ``costs`` and ``config``
    as data, the config's canonical JSON as ``config_text``). On PostgreSQL the rows
    of their workloads are locked first (in id order), so that concurrent writers of one
    workload merge their costs one after the other; SQLite writers are serialised already.
    """
    if not rows:
        return
    counts = Counter((r["workload_id"], r["kind"], r["error_kind"] or "") for r in rows)
    wids = sorted({w for w, _, _ in counts})
    if conn.dialect.name == "postgresql":
        # FOR NO KEY UPDATE: writers of one workload queue here, but the key-share locks that
        # inserting records takes on their workload (its foreign key) do not conflict with it.
        conn.execute(select(WorkloadRow.id).where(WorkloadRow.id.in_(wids)).order_by(WorkloadRow.id)
                     .with_for_update(key_share=True))
    conn.execute(_counts_upsert(conn.dialect.name), [{"workload_id": w, "kind": k, "error_kind": e, "n": n}
                        for (w, k, e), n in sorted(counts.items())])
    new = _pools(r for r in rows if r["error_kind"] is None)
    if not new:
        return
    hashes: dict[int, list[str]] = {}
    for wid, knobs_hash in sorted(new):
        hashes.setdefault(wid, []).append(knobs_hash)
    # One query per workload and batch: "workload_id = ? AND knobs_hash IN (...)" searches the
    # unique index, where SQLite would scan the table for a (workload_id, knobs_hash) IN list.
    old: dict[tuple[int, str], Any] = {}
    for wid, hs in hashes.items():
        for start in range(0, len(hs), _BATCH):
            for row in conn.execute(_stats_of(), {"wid": wid, "hashes": hs[start:start + _BATCH]}):
                old[(wid, row.knobs_hash)] = row
    _insert_new(conn, {key: _latest(versions) for key, versions in new.items() if key not in old})
    same: dict[tuple[int, str], _Pool] = {}
    newer: dict[tuple[int, str], str] = {}
    for key, row in old.items():
        top = _latest(new[key])
        if top.version != row.code_version and top.newest > (row.latest, row.code_version):
            newer[key] = top.version
        elif row.code_version in new[key]:
            same[key] = new[key][row.code_version]
        # else: costs of an earlier code version, kept in the records but not in the figure
    if same:
        _merge_old(conn, {key: old[key] for key in same}, same)
    if newer:
        _replace(conn, {key: old[key].id for key in newer}, newer)


def _replace(conn: Connection, ids: dict[tuple[int, str], int],
             versions: dict[tuple[int, str], str]) -> None:
    """Make the rows of configs whose latest code version changed (``ids``: key -> row id) anew,
    from all the records of that version (``versions``: key -> the version), the new ones
    included: they are few (a config is measured again after a change of the code), and a
    version met again after another (a build gone back to) keeps its earlier costs."""
    S, CC, R = ConfigStatsRow, ConfigCostRow, RecordRow
    row_ids = sorted(ids.values())
    for start in range(0, len(row_ids), _BATCH):
        part = row_ids[start:start + _BATCH]
        conn.execute(delete(CC).where(CC.config_id.in_(part)))
        conn.execute(delete(S).where(S.id.in_(part)))
    wanted: dict[tuple[int, str], set[str]] = {}
    for (wid, knobs_hash), version in versions.items():
        wanted.setdefault((wid, version), set()).add(knobs_hash)
    pools: _Pools = {}
    for (wid, version), knobs in sorted(wanted.items()):
        query = select(*_POOLED).where(R.workload_id == wid, R.code_version == version,
                                       R.error_kind.is_(None))
        rows = _pooled_rows(conn.execute(query))
        _pools((r for r in rows if knobs_fingerprint(r["config"]) in knobs), pools)
    _insert_new(conn, {key: _latest(v) for key, v in pools.items()})


# The columns of a record that its config's statistics need.
_POOLED = (RecordRow.id, RecordRow.workload_id, RecordRow.config, RecordRow.costs, RecordRow.gflops,
           RecordRow.mean_cost, RecordRow.timestamp, RecordRow.code_version)


def _pooled_rows(result: Iterable[Any]) -> list[dict[str, Any]]:
    """Rows of :data:`_POOLED` as :func:`_pools` takes them."""
    return [{**r._mapping, "costs": json.loads(r.costs), "config": json.loads(r.config),
             "config_text": r.config} for r in result]


def rebuild_stats(conn: Connection, workload_ids: Sequence[int] | None = None) -> None:
    """Recompute the statistics of some workloads (all by default) from their records."""
    S, CC, C, R = ConfigStatsRow, ConfigCostRow, WorkloadCountRow, RecordRow
    if workload_ids is None:
        conn.execute(delete(CC))
        conn.execute(delete(S))
        conn.execute(delete(C))
        where = []
        wids: list[int] = list(conn.scalars(select(WorkloadRow.id).order_by(WorkloadRow.id)))
    else:
        wids = sorted(set(workload_ids))
        conn.execute(delete(CC).where(CC.config_id.in_(select(S.id).where(S.workload_id.in_(wids)))))
        conn.execute(delete(S).where(S.workload_id.in_(wids)))
        conn.execute(delete(C).where(C.workload_id.in_(wids)))
        where = [R.workload_id.in_(wids)]
    error_kind = func.coalesce(R.error_kind, "")
    counts = (select(R.workload_id, R.kind, error_kind, func.count()).where(*where)
              .group_by(R.workload_id, R.kind, error_kind))
    conn.execute(insert(C).from_select(["workload_id", "kind", "error_kind", "n"], counts))
    for wid in wids:  # one workload at a time: bounded memory, and its pools are complete
        last = 0
        pools: _Pools = {}
        while True:
            query = (select(*_POOLED).where(R.workload_id == wid, R.error_kind.is_(None), R.id > last)
                     .order_by(R.id).limit(20 * _BATCH))
            rows = _pooled_rows(conn.execute(query))
            if not rows:
                break
            last = rows[-1]["id"]
            _pools(rows, pools)
        if pools:
            _insert_new(conn, {key: _latest(versions) for key, versions in pools.items()})
