"""The per-config statistics and per-workload counts a log keeps as records arrive (SQLite and
PostgreSQL): they equal the same figures computed from the records, whatever the order, batching
and concurrency of the writes, and after a prune."""

from __future__ import annotations

import multiprocessing
import random
import statistics

import pytest
import tuning_log_workers as workers
from sqlalchemy import create_engine, select

import db
from db.schema import ConfigCostRow, ConfigStatsRow, WorkloadCountRow
from db.stats import rebuild_stats, usable_costs

KEYS = ("mm-a", "mm-b")


VERSIONS = ("", "0.1.0+aaaa", "0.1.0+bbbb")


def _random_records(seed: int, n: int) -> list[db.Record]:
    """Records of few configs (some under two indexes or key orders), with errors, costs that do
    not count (zero), both kinds, costs drawn from few values so that scores tie, and three code
    versions at times that interleave (some equal), so that a config's latest version changes
    back and forth as they arrive."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x, y = rng.randrange(4), rng.randrange(3)
        knobs = {"x": x, "y": y} if rng.random() < 0.5 else {"y": y, "x": x}
        config = {"index": x * 3 + y + rng.choice((0, 100)), "knobs": knobs}
        error = rng.random() < 0.15
        costs = [] if error else [rng.choice((0.0, 1.0, 1.5, 2.0, 3.0)) for _ in range(rng.randint(1, 3))]
        out.append(db.Record(workload_key=rng.choice(KEYS), template="matmul", args=[64, 64, 64, "float32"],
                             target="llvm", config=config, costs=costs,
                             timestamp=1.7e9 + rng.randrange(n // 3),
                             error_kind="build" if error else None, gflops=rng.choice((None, 5.0)),
                             kind=rng.choice((db.TRIAL, db.TRIAL, db.REMEASURE)),
                             code_version=rng.choice(VERSIONS)))
    return out


def _tables(conn) -> tuple[list, list, list]:
    """Every row of the statistics tables, as plain sorted data (a cost row under its config's
    workload and fingerprint: the ids of config_stats are the log's own business)."""
    S, CC = ConfigStatsRow, ConfigCostRow
    stats = conn.execute(select(*(c for c in S.__table__.columns if c.name != "id")))
    costs = conn.execute(select(S.workload_id, S.knobs_hash, CC.cost, CC.record_id, CC.seq)
                         .join(S, S.id == CC.config_id))
    counts = conn.execute(select(WorkloadCountRow.__table__))
    return tuple(sorted(tuple(r) for r in rows) for rows in (stats, costs, counts))


def _stats_table(url: str) -> tuple[list, list, list]:
    """Every row of the statistics tables of the log at ``url``."""
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.connect() as conn:
        found = _tables(conn)
    engine.dispose()
    return found


def _rebuilt(url: str) -> tuple[list, list, list]:
    """The statistics tables as :func:`rebuild_stats` makes them from the records (rolled back)."""
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.connect() as conn, conn.begin():
        rebuild_stats(conn)
        found = _tables(conn)
        conn.rollback()
    engine.dispose()
    return found


def _costs(log: db.TuningLog, key: str, stats: db.ConfigStats) -> list[float]:
    """The usable costs of the records the log pools into a config, ascending."""
    return sorted(usable_costs(c for r in log.records(key, knobs_hash=stats.knobs_hash) for c in r.costs))


def _pooled_by_hand(records: list[db.Record], key: str) -> dict[str, list[db.Record]]:
    """The records of each config of ``key`` whose costs count: those with usable costs of the
    config's latest code version (that of its latest such record, then the greater version)."""
    mine: dict[str, list[db.Record]] = {}
    for r in {r.uid: r for r in records}.values():  # a record the log holds already adds nothing
        if r.workload_key == key and r.error_kind is None and usable_costs(r.costs):
            mine.setdefault(db.knobs_fingerprint(r.config), []).append(r)
    pooled = {}
    for h, rs in mine.items():
        latest = max((r.timestamp, r.code_version) for r in rs)[1]
        pooled[h] = [r for r in rs if r.code_version == latest]
    return pooled


def _by_hand(records: list[db.Record], key: str) -> list[tuple]:
    """(fingerprint, sorted costs, median, score) of each config of ``key``, in ranking order."""
    rows = []
    for h, rs in _pooled_by_hand(records, key).items():
        c = sorted(usable_costs(x for r in rs for x in r.costs))
        rows.append((h, c, statistics.median(c), db.confident_cost(c)))
    return sorted(rows, key=lambda row: (row[3], row[0]))


def test_statistics_follow_the_records_in_any_order_and_batching(log_url: str) -> None:
    records = _random_records(1, 300)
    with db.open(log_url) as log:
        rng = random.Random(2)
        shuffled = records[:]
        rng.shuffle(shuffled)
        while shuffled:
            size = rng.randint(1, 40)
            log.add(shuffled[:size])
            shuffled = shuffled[size:]
        log.add(records[:50])  # already there: changes nothing
        for key in KEYS:
            got = [(s.knobs_hash, _costs(log, key, s), s.median, s.score) for s in log.config_stats(key)]
            assert got == _by_hand(records, key)
            page = log.config_stats(key, limit=2, offset=1)
            assert [s.knobs_hash for s in page] == [g[0] for g in got[1:3]]
            for s in log.config_stats(key):
                stored = log.records(key, knobs_hash=s.knobs_hash)
                assert {db.knobs_fingerprint(r.config) for r in stored} == {s.knobs_hash}
                costs = sorted(c for r in stored for c in r.costs if c > 0)
                assert (s.count, s.min_cost, s.max_cost) == (len(costs), costs[0], costs[-1])
                assert s.flop == (min(r.gflops * 1e9 * r.mean_cost for r in stored if r.gflops)
                                  if any(r.gflops for r in stored) else None)
                mine = _pooled_by_hand(records, key)[s.knobs_hash]
                assert sorted(r.uid for r in stored) == sorted({r.uid for r in mine})
                assert {r.code_version for r in stored} == {s.code_version}
                assert s.latest == max(r.timestamp for r in mine)
        summary = {row.workload_key: row for row in log.summary()}
        for key in KEYS:
            mine = [r for r in records if r.workload_key == key]
            trials = [r for r in mine if r.kind == db.TRIAL]
            assert (summary[key].trials, summary[key].errors, summary[key].remeasured) == (
                len(trials), sum(r.error_kind is not None for r in trials), len(mine) - len(trials))
    assert _stats_table(log_url) == _rebuilt(log_url)


def test_prune_leaves_the_statistics_of_what_it_keeps(log_url: str) -> None:
    records = _random_records(3, 120)
    with db.open(log_url) as log:
        log.add(records)
        top = log.config_stats("mm-a", limit=1)[0]
        before = log.config_stats("mm-a")
        kept = log.records("mm-a", knobs_hash=top.knobs_hash)
        assert log.prune({"mm-a": [r.config for r in kept]}) > 0
        assert log.config_stats("mm-a") == [top] and len(before) > 1
        assert log.records("mm-a", knobs_hash=top.knobs_hash) == kept
        assert log.records("mm-a", knobs_hash=before[1].knobs_hash) == []
        (row, _) = log.summary()
        assert row.trials + row.remeasured == log.count("mm-a") >= len(kept) and row.errors == 0
    assert _stats_table(log_url) == _rebuilt(log_url)


def test_concurrent_writers_of_the_same_configs_lose_no_cost(log_url: str) -> None:
    writers, each = 4, 40
    with db.open(log_url):
        pass  # created before the writers start: they race on the statistics, not on the schema
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    procs = [ctx.Process(target=workers.write_shared_configs, args=(log_url, w, each, barrier))
             for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * writers
    with db.open(log_url) as log:
        stats = log.config_stats("matmul-64-llvm-w0")
        assert sum(s.count for s in stats) == writers * each and len(stats) == 5
        key = "matmul-64-llvm-w0"
        assert sum(len(log.records(key, knobs_hash=s.knobs_hash)) for s in stats) == writers * each
        for s in stats:
            costs = _costs(log, key, s)
            assert (s.count, s.median, s.score) == (len(costs), statistics.median(costs),
                                                    db.confident_cost(costs))
        assert log.summary()[0].trials == writers * each
    assert _stats_table(log_url) == _rebuilt(log_url)


def test_the_median_follows_every_insert_for_odd_and_even_counts(log_url: str) -> None:
    """Each insert reads the median from the middle of the config's costs: it equals
    statistics.median of every cost so far, after one record or a batch, as the count turns odd
    and even, with costs that repeat and costs that do not count."""
    rng = random.Random(8)
    every: dict[int, list[float]] = {0: [], 1: []}
    parities = set()
    with db.open(log_url) as log:
        for step in range(40):
            batch = []
            for _ in range(rng.choice((1, 1, 2, 5))):
                x = rng.randrange(2)
                costs = [rng.choice((rng.uniform(1.0, 9.0), 2.0, 0.0)) for _ in range(rng.randint(1, 3))]
                every[x] += [c for c in costs if c > 0]
                batch.append(db.Record(workload_key="mm-a", template="matmul", args=[8], target="llvm",
                                       config={"x": x}, costs=costs, timestamp=float(len(every[0]) + step)))
            log.add(batch)
            for s in log.config_stats("mm-a"):
                costs = sorted(every[db.knobs_of(s.config)["x"]])
                assert (s.count, s.median, s.score, s.min_cost, s.max_cost) == (
                    len(costs), statistics.median(costs), db.confident_cost(costs), costs[0], costs[-1])
                parities.add(s.count % 2)
    assert parities == {0, 1}
    assert _stats_table(log_url) == _rebuilt(log_url)


def test_two_logs_fed_in_other_orders_keep_the_same_statistics(log_url: str, other_url: str) -> None:
    records = _random_records(9, 200)
    shuffled = records[:]
    random.Random(10).shuffle(shuffled)
    with db.open(log_url) as one, db.open(other_url) as two:
        for r in records:  # one record per transaction...
            one.add(r)
        two.add(shuffled)  # ...and all at once, in another order
        for key in KEYS:
            assert one.config_stats(key) == two.config_stats(key) != []


def test_the_records_of_a_config_need_their_workload(tlog: db.TuningLog) -> None:
    tlog.add(_random_records(11, 30))
    top = tlog.config_stats("mm-a", limit=1)[0]
    with pytest.raises(ValueError, match="knobs_hash.*workload"):
        tlog.records(knobs_hash=top.knobs_hash)
    assert tlog.records("mm-b", knobs_hash="0" * 64) == []
    # the same knobs measured for another workload are another config
    assert all(r.workload_key == "mm-a" for r in tlog.records("mm-a", knobs_hash=top.knobs_hash))


@pytest.mark.parametrize("k", [0, -1, True])
def test_trial_curve_checks_its_points(tlog: db.TuningLog, k: object) -> None:
    with pytest.raises(ValueError, match="points"):
        tlog.trial_curve("mm-a", points=k)


def test_trial_curve_downsamples_in_time_order(tlog: db.TuningLog) -> None:
    rng = random.Random(6)
    n, points = 1000, 40
    costs = [rng.uniform(1.0, 2.0) for _ in range(n)]
    times = sorted(rng.uniform(0, 1e4) for _ in range(n))  # uneven: buckets of time hold more or less
    runs = [tlog.start_run("random"), tlog.start_run("xgb")]
    records = [db.Record(workload_key="mm-a", template="matmul", args=[8], target="llvm", config={"i": i},
                         costs=[] if i % 7 == 3 else [costs[i]], error_kind="run" if i % 7 == 3 else None,
                         timestamp=1000.0 + times[i], run_id=runs[i >= 600]) for i in range(n)]
    records.append(db.Record(workload_key="mm-a", template="matmul", args=[8], target="llvm", config={"i": 0},
                             costs=[0.1], timestamp=5000.0, kind=db.REMEASURE))  # no trial: not drawn
    rng.shuffle(records)
    tlog.add(records)
    curve = tlog.trial_curve("mm-a", points=points)
    assert curve.trials == n and len(curve.points) <= points
    first, edges = 0, []
    for p in curve.points:  # bucket of trials first+1 .. p.trial (1-based, in time order)
        bucket = range(first, p.trial)
        ok = [costs[i] for i in bucket if i % 7 != 3]
        assert (p.fastest, p.slowest, p.errors) == (min(ok), max(ok), sum(i % 7 == 3 for i in bucket))
        edges.append(first + 1)
        first = p.trial
    assert first == n
    assert curve.run_starts == [max(e for e in edges if e <= 601)]  # the bucket the second run starts in
    exact = tlog.trial_curve("mm-a", points=5000)  # fewer trials than points: one point each
    assert [p.trial for p in exact.points] == list(range(1, n + 1)) and exact.run_starts == [601]
    assert [(p.fastest, p.errors) for p in exact.points[:4]] == [(costs[0], 0), (costs[1], 0), (costs[2], 0),
                                                                 (None, 1)]
    assert tlog.trial_curve("nothing").points == []
