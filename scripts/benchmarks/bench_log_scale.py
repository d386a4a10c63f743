"""Tuning-log reads and writes at scale: each operation's median time against the number of records.

Run with ``python3 scripts/benchmarks/bench_log_scale.py [--sizes 10000,100000,1000000] [--repeat 5]
[--postgres URL] [--workloads 10] [--dir DIR]``. PostgreSQL is measured too when ``--postgres``
or ``AUTOTUNE_TEST_POSTGRES_URL`` names a server (each size in a fresh schema, dropped after).

Each log holds ``--workloads`` matmul workloads (llvm, this machine's CPU model) with the
records spread evenly, drawn from 2,000 real configs of each workload's space (so
``apply_history_best`` validates and applies them), 1 to 3 costs each, 5% errors and 2%
re-measurements. The logs are FILLED BY BULK SQL, not by ``TuningLog.add`` per record:
``records`` rows are inserted directly, then the per-config statistics are computed from
them (:func:`db.stats.rebuild_stats`, what the schema migration does), so 10^6 records
take a minute or two rather than the hours of one ``add`` per record. Every timed
operation then runs through the public API:

``add 1``
    ``TuningLog.add`` of one new record;
``add 1000: ms/record``
    the write cost per record of a bulk ``TuningLog.add`` of 1,000 records in one call (of one
    workload, configs drawn from its pool, so most join configs the log holds already), in
    milliseconds: it should not grow with the log (a config's statistics are extended, never
    rewritten);
``summary``
    ``TuningLog.summary()``;
``best k=3``
    ``autotune.selection.best(log, workload, k=3)`` (with the records of the three);
``apply_history_best``
    the lookup for one workload in a fresh ``apply_history_best`` context (config validated);
``autotune best``
    the ``autotune best`` command, in this process (``autotune.cli.main``; no interpreter start);
``report tables``
    ``autotune.report.summarize`` and its table, what ``autotune report`` writes as text;
``report curves``
    every workload's tuning curve, downsampled in SQL to 1,000 points (what the plots draw).

The table shows the median of ``--repeat`` runs of each (seconds, but for the write cost
per record); the machine is shared, so read the growth along a row rather than single figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, insert, text

import autotune
import db
import search_spaces  # noqa: F401 - registers the templates
from autotune import report, selection
from autotune.cli import main as cli_main
from db.schema import RecordRow
from db.stats import rebuild_stats

POOL = 2000         # distinct configs per workload
ERRORS = 0.05
REMEASURES = 0.02
BATCH = 5000


def _tasks(n: int) -> list:
    shapes = [(64 * (1 + k % 4), 64 * (1 + k // 4 % 4), 64 * (1 + k // 16)) for k in range(n)]
    return [autotune.create_task("matmul", (m, k, n_, "float32"), "llvm") for m, k, n_ in shapes]


def _pools(tasks: list, rng: random.Random) -> list[list[str]]:
    """Canonical JSON of POOL configs of each task's space (fewer where the space is smaller)."""
    out = []
    for task in tasks:
        space = task.config_space
        indexes = rng.sample(range(space.size), min(POOL, space.size))
        out.append([db.canonical_json(space.get(i).to_json()) for i in indexes])
    return out


def _rows(n: int, wids: list[int], pools: list[list[str]], flops: list[float], rng: random.Random):
    """``n`` record rows for the records table, a batch at a time."""
    batch = []
    for i in range(n):
        w = i % len(wids)
        config = rng.choice(pools[w])
        error = rng.random() < ERRORS
        costs = [] if error else [rng.lognormvariate(-7, 0.3) for _ in range(rng.randint(1, 3))]
        mean = sum(costs) / len(costs) if costs else None
        batch.append({
            "uid": uuid.uuid4().hex, "workload_id": wids[w], "run_id": None, "config": config,
            "config_index": json.loads(config)["index"], "costs": json.dumps(costs), "mean_cost": mean,
            "median_cost": statistics.median(costs) if costs else None,
            "gflops": flops[w] / mean / 1e9 if mean else None, "error_kind": "runtime" if error else None,
            "error_msg": "", "build_time": 0.1, "run_time": 0.01, "host": "bench", "device": "",
            "timestamp": 1.7e9 + i, "kind": db.REMEASURE if rng.random() < REMEASURES else db.TRIAL})
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _record(task, config: dict, rng: random.Random) -> db.Record:
    return selection.record_of(task, task.config_space.from_json(config), _Result(rng))


class _Result:
    """A successful measure result with random costs (what ``record_of`` reads)."""

    def __init__(self, rng: random.Random):
        self.error_kind, self.error_msg, self.worker = None, "", "bench"
        self.costs = [rng.lognormvariate(-7, 0.3)]
        self.build_time, self.run_time, self.timestamp = 0.1, 0.01, time.time()


def fill(url: str, n: int, tasks: list, pools: list[list[str]], seed: int) -> float:
    """Create the log at ``url`` with ``n`` records by bulk SQL; returns the seconds it took."""
    start = time.perf_counter()
    rng = random.Random(seed)
    with db.open(url) as log:  # the schema, and one real record per workload (creates the workloads)
        log.add([_record(t, json.loads(p[0]), rng) for t, p in zip(tasks, pools)])
        keys = {w.key: i for i, w in enumerate(log.workloads())}
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA synchronous = OFF")
        wids = [conn.execute(text("SELECT id FROM workloads WHERE key = :k"),
                             {"k": t.workload_key}).scalar_one() for t in tasks]
        assert len(keys) == len(tasks)
        for batch in _rows(n - len(tasks), wids, pools, [t.flop for t in tasks], rng):
            conn.execute(insert(RecordRow), batch)
        rebuild_stats(conn)
    engine.dispose()
    return time.perf_counter() - start


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(url: str, tasks: list, pools: list[list[str]], repeat: int) -> dict[str, str]:
    """The median seconds of each operation on the log at ``url``."""
    rng = random.Random(1)
    out: dict[str, str] = {}
    task = tasks[len(tasks) // 2]
    pool = [json.loads(p) for p in pools[len(tasks) // 2]]
    singles = iter([_record(task, rng.choice(pool), rng) for _ in range(repeat)])
    batches = iter([[_record(task, rng.choice(pool), rng) for _ in range(1000)] for _ in range(repeat)])
    with db.open(url) as log:
        one = _median_time(lambda: log.add(next(singles)), repeat)
        out["add 1"] = f"{one:.4f}"
        many = _median_time(lambda: log.add(next(batches)), repeat)
        out["add 1000: ms/record"] = f"{many / 1000 * 1e3:.3f}"
        out["summary"] = f"{_median_time(log.summary, repeat):.4f}"
        out["best k=3"] = f"{_median_time(lambda: selection.best(log, task, k=3), repeat):.4f}"

        def lookup() -> None:
            assert autotune.apply_history_best(log).lookup(task.target, task) is not None

        out["apply_history_best"] = f"{_median_time(lookup, repeat):.4f}"

        def tables() -> None:
            report.format_table(report.summary_table(report.summarize(log)))

        out["report tables"] = f"{_median_time(tables, repeat):.4f}"

        def curves() -> None:
            for t in tasks:
                log.trial_curve(t.workload_key, points=report.PLOT_POINTS)

        out["report curves"] = f"{_median_time(curves, repeat):.4f}"

    def best_command() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli_main(["best", "--db", url]) == 0

    out["autotune best"] = f"{_median_time(best_command, repeat):.4f}"
    return out


@contextlib.contextmanager
def _postgres_schema(url: str):
    """A fresh schema on the server at ``url``: the URL whose search path is it; dropped after."""
    from sqlalchemy.engine import make_url

    admin = create_engine(make_url(url).set(drivername="postgresql+psycopg"))
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield admin.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


OPS = ("add 1", "add 1000: ms/record", "summary", "best k=3", "apply_history_best", "autotune best",
       "report tables", "report curves")


def _table(title: str, sizes: list[int], results: dict[int, dict[str, str]], fills: dict[int, float]) -> str:
    header = ["operation (median s)", *[f"{n:,} records" for n in sizes]]
    rows = [header, ["fill (bulk SQL, not timed below)", *[f"{fills[n]:.1f}" for n in sizes]]]
    rows += [[op, *[results[n][op] for n in sizes]] for op in OPS]
    return f"{title}\n" + report.format_table(rows, right=list(range(1, len(header))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="record counts, comma-separated (default: 10000,100000,1000000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per operation (default: 5)")
    parser.add_argument("--workloads", type=int, default=10, help="matmul workloads per log (default: 10)")
    parser.add_argument("--postgres", default=os.environ.get("AUTOTUNE_TEST_POSTGRES_URL"),
                        help="a PostgreSQL URL to measure too (default: $AUTOTUNE_TEST_POSTGRES_URL)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--dir", help="where the SQLite logs go (default: a temporary directory)")
    ns = parser.parse_args(argv)
    sizes = [int(s) for s in ns.sizes.split(",")]
    tasks = _tasks(ns.workloads)
    pools = _pools(tasks, random.Random(0))
    print(f"{len(tasks)} matmul workloads, {sum(map(len, pools)):,} distinct configs; logs filled by bulk "
          f"SQL inserts of the records, then db.stats.rebuild_stats (not TuningLog.add per record)",
          flush=True)
    backends = ["sqlite"] + ([] if ns.no_postgres or not ns.postgres else ["postgresql"])
    with tempfile.TemporaryDirectory(dir=ns.dir) as tmp:
        for backend in backends:
            results, fills = {}, {}
            for n in sizes:
                with contextlib.ExitStack() as stack:
                    if backend == "sqlite":
                        url = str(Path(tmp) / f"log_{n}.db")
                    else:
                        url = stack.enter_context(_postgres_schema(ns.postgres))
                    fills[n] = fill(url, n, tasks, pools, seed=n)
                    print(f"  {backend}: filled {n:,} records in {fills[n]:.1f} s", file=sys.stderr,
                          flush=True)
                    results[n] = measure(url, tasks, pools, ns.repeat)
                    if backend == "sqlite":
                        Path(url).unlink()
            print()
            print(_table(f"{backend} ({len(tasks)} workloads; median of {ns.repeat} runs, seconds)", sizes,
                         results, fills), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
