"""Per-config statistics of a tuning log, kept in SQL as records arrive.

Ranking every record of a workload in Python grows with the tuning history, so the log
keeps, per workload and config, everything the ranking needs (table ``config_stats``):
the config's usable costs (sorted), their count, median, minimum and maximum, the ids of
the records that hold them, and the config's *confident cost*, its score. Reading the best
configs of a workload is then an indexed ``ORDER BY score`` with a ``LIMIT``. Counts of
records per workload, kind and error kind (table ``workload_counts``) serve summaries.

Both tables are updated in the transaction that inserts the records (:func:`add_stats`);
:func:`rebuild_stats` recomputes them from the records (after a prune, and by the schema
migration that introduced them). A config's statistics are a function of the multiset of
its costs alone, so they do not depend on the order in which records arrived.

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
from db.schema import ConfigStatsRow, RecordRow, WorkloadCountRow, WorkloadRow

__all__ = ["PENALTY", "confident_cost", "knobs_of", "knobs_fingerprint", "usable_costs", "ConfigStats",
           "add_stats", "rebuild_stats"]

#: Relative penalty at one cost: a config timed 3 times is charged ~6%, 27 times ~2%.
PENALTY = 0.1

_BATCH = 500


def confident_cost(costs: Sequence[float]) -> float:
    """The median of ``costs``, raised by ``PENALTY / sqrt(len(costs))``; ``inf`` for none.

    A config measured once may look fast by luck; one measured many times has a
    trustworthy median, so a well-measured config wins a near tie.
    """
    if not costs:
        return math.inf
    return statistics.median(costs) * (1.0 + PENALTY / math.sqrt(len(costs)))


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
    sorts first); ``costs`` every usable cost of it, ascending; ``record_ids`` the records
    that hold them; ``score`` its :func:`confident_cost`; ``flop`` the work of one run as its
    records state it (``None`` when none does).
    """

    workload_key: str
    knobs_hash: str
    config: dict
    costs: tuple[float, ...]
    record_ids: tuple[int, ...]
    median: float
    score: float
    flop: float | None = None

    @property
    def count(self) -> int:
        """How many costs were measured."""
        return len(self.costs)

    @property
    def spread(self) -> float:
        """``(max - min) / median`` of the costs: how much the measurements disagree."""
        return (self.costs[-1] - self.costs[0]) / self.median if self.median else 0.0


class _Pool:
    """The statistics of one config while they are being merged (a row in the making)."""

    __slots__ = ("config", "costs", "ids", "flop")

    def __init__(self, config: str, costs: list[float], ids: list[int], flop: float | None):
        self.config, self.costs, self.ids, self.flop = config, costs, ids, flop

    def absorb(self, config: str, costs: Iterable[float], ids: Iterable[int], flop: float | None) -> None:
        """Pool more records of the config (every choice here is order-independent)."""
        self.config = min(self.config, config)
        self.costs.extend(costs)
        self.ids.extend(ids)
        if flop is not None:
            self.flop = flop if self.flop is None else min(self.flop, flop)

    def row(self, workload_id: int, knobs_hash: str) -> dict[str, Any]:
        self.costs.sort()
        self.ids.sort()
        return {"workload_id": workload_id, "knobs_hash": knobs_hash, "config": self.config,
                "costs": json.dumps(self.costs), "record_ids": json.dumps(self.ids),
                "n_costs": len(self.costs), "median_cost": statistics.median(self.costs),
                "score": confident_cost(self.costs), "min_cost": self.costs[0], "max_cost": self.costs[-1],
                "flop": self.flop}


def _flop(gflops: float | None, mean: float | None) -> float | None:
    return gflops * 1e9 * mean if gflops and mean and gflops > 0 and mean > 0 else None


def _insert(conn: Connection, table: Any) -> Any:
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def _pools(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str], _Pool]:
    """New statistics from successful records: dicts of ``id, workload_id, gflops, mean_cost``,
    ``costs`` (a list), ``config`` (a dict) and ``config_text`` (its canonical JSON)."""
    pools: dict[tuple[int, str], _Pool] = {}
    for r in rows:
        costs = usable_costs(r["costs"])
        if not costs:
            continue
        key = (r["workload_id"], knobs_fingerprint(r["config"]))
        flop = _flop(r["gflops"], r["mean_cost"])
        pool = pools.get(key)
        if pool is None:
            pools[key] = _Pool(r["config_text"], costs, [r["id"]], flop)
        else:
            pool.absorb(r["config_text"], costs, [r["id"]], flop)
    return pools


# The statements of every insert, built once per dialect: building an upsert costs more than
# running it on a few rows.

@functools.cache
def _stats_upsert(dialect: str) -> Any:
    upsert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(ConfigStatsRow)
    keys = ("workload_id", "knobs_hash")
    columns = [c.name for c in ConfigStatsRow.__table__.columns if c.name not in keys]
    return upsert.on_conflict_do_update(index_elements=["workload_id", "knobs_hash"],
                                        set_={c: upsert.excluded[c] for c in columns})


@functools.cache
def _counts_upsert(dialect: str) -> Any:
    bump = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(WorkloadCountRow)
    return bump.on_conflict_do_update(index_elements=["workload_id", "kind", "error_kind"],
                                      set_={"n": WorkloadCountRow.n + bump.excluded.n})


@functools.cache
def _stats_of() -> Any:
    S = ConfigStatsRow
    return select(S.workload_id, S.knobs_hash, S.config, S.costs, S.record_ids, S.flop).where(
        S.workload_id == bindparam("wid"), S.knobs_hash.in_(bindparam("hashes", expanding=True)))


def _write_pools(conn: Connection, pools: dict[tuple[int, str], _Pool]) -> None:
    rows = [pool.row(*key) for key, pool in sorted(pools.items())]
    for start in range(0, len(rows), _BATCH):
        conn.execute(_stats_upsert(conn.dialect.name), rows[start:start + _BATCH])


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
    # primary key, where SQLite would scan the table for a (workload_id, knobs_hash) IN list.
    parts = [(wid, hs[start:start + _BATCH]) for wid, hs in hashes.items()
             for start in range(0, len(hs), _BATCH)]
    for wid, part in parts:
        for old in conn.execute(_stats_of(), {"wid": wid, "hashes": part}):
            new[(old.workload_id, old.knobs_hash)].absorb(old.config, json.loads(old.costs),
                                                          json.loads(old.record_ids), old.flop)
    _write_pools(conn, new)


def rebuild_stats(conn: Connection, workload_ids: Sequence[int] | None = None) -> None:
    """Recompute the statistics of some workloads (all by default) from their records."""
    S, C, R = ConfigStatsRow, WorkloadCountRow, RecordRow
    if workload_ids is None:
        conn.execute(delete(S))
        conn.execute(delete(C))
        where = []
        wids: list[int] = list(conn.scalars(select(WorkloadRow.id).order_by(WorkloadRow.id)))
    else:
        wids = sorted(set(workload_ids))
        conn.execute(delete(S).where(S.workload_id.in_(wids)))
        conn.execute(delete(C).where(C.workload_id.in_(wids)))
        where = [R.workload_id.in_(wids)]
    error_kind = func.coalesce(R.error_kind, "")
    counts = (select(R.workload_id, R.kind, error_kind, func.count()).where(*where)
              .group_by(R.workload_id, R.kind, error_kind))
    conn.execute(insert(C).from_select(["workload_id", "kind", "error_kind", "n"], counts))
    columns = (R.id, R.workload_id, R.config, R.costs, R.gflops, R.mean_cost)
    for wid in wids:  # one workload at a time: bounded memory, and its pools are complete
        last = 0
        pools: dict[tuple[int, str], _Pool] = {}
        while True:
            query = (select(*columns).where(R.workload_id == wid, R.error_kind.is_(None), R.id > last)
                     .order_by(R.id).limit(20 * _BATCH))
            rows = [{**r._mapping, "costs": json.loads(r.costs), "config": json.loads(r.config),
                     "config_text": r.config} for r in conn.execute(query)]
            if not rows:
                break
            last = rows[-1]["id"]
            for key, pool in _pools(rows).items():
                if key in pools:
                    pools[key].absorb(pool.config, pool.costs, pool.ids, pool.flop)
                else:
                    pools[key] = pool
        if pools:
            _write_pools(conn, pools)
