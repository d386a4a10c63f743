"""Processes that write into a tuning log, for the concurrency tests (started with ``spawn``)."""

from __future__ import annotations

import itertools

import db

__all__ = ["make_record", "write_records", "write_until_killed", "write_shared_configs"]


def make_record(worker: int, i: int, **fields: object) -> db.Record:
    """A distinct, valid record: worker ``worker``'s ``i``-th measurement of a small matmul."""
    values: dict[str, object] = dict(
        workload_key=f"matmul-64-llvm-w{worker % 2}", template="matmul", args=[64, 64, 64, "float32"],
        target="llvm -mcpu=znver4", target_model="znver4", config={"tile": [worker, i]}, config_index=i,
        costs=[1e-3 + 1e-6 * i, 1.1e-3], host=f"worker-{worker}", timestamp=1.7e9 + i)
    values.update(fields)
    return db.Record(**values)


def write_records(url: str, worker: int, n: int, barrier: object) -> None:
    """Wait for the other writers, open the log, add ``n`` records one transaction each."""
    barrier.wait(timeout=60)
    with db.open(url) as log:
        for i in range(n):
            assert log.add(make_record(worker, i)) == 1


def write_until_killed(url: str, pipe: object) -> None:
    """Add records three per transaction forever, sending the uids of each committed batch."""
    with db.open(url) as log:
        for i in itertools.count(step=3):
            batch = [make_record(7, j) for j in range(i, i + 3)]
            log.add(batch)
            pipe.send([record.uid for record in batch])


def write_shared_configs(url: str, worker: int, n: int, barrier: object) -> None:
    """Wait for the other writers, then add ``n`` records of configs every writer measures too
    (one transaction each), so that concurrent writers fold costs into the same statistics."""
    barrier.wait(timeout=60)
    with db.open(url) as log:
        for i in range(n):
            assert log.add(make_record(worker, i, config={"tile": [i % 5]}, workload_key="matmul-64-llvm-w0",
                                       costs=[1e-3 * (1 + (worker * n + i) % 7)])) == 1
