"""Choosing configs from noisy timings: confident costs and rankings, computed by hand.

A config's confident cost is the median of all its costs times ``1 + 0.1 / sqrt(count)``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import subprocess
import sys

import pytest

import db
from autotune.selection import best, confident_cost, rank_configs, rank_records


def _cfg(x: int, index: int | None = None, **more) -> dict:
    return {"index": x if index is None else index, "knobs": {"x": x, **more}}


@pytest.mark.parametrize("costs, expected", [
    ([2.0], 2.2),                                          # one cost: 10% on top
    ([3.0, 1.0, 2.0, 100.0], 2.625),                       # median 2.5 of four, 5% on top
    ([4.0] * 9, 4.0 + 4.0 / 30),                           # nine costs: 0.1 / 3 on top
    ([5.0, 1.0, 2.0], 2.0 + 0.2 / math.sqrt(3)),           # the median, not the mean or the minimum
])
def test_confident_cost_by_hand(costs, expected):
    assert confident_cost(costs) == pytest.approx(expected, rel=1e-12)


def test_confident_cost_of_no_costs_is_infinite():
    assert confident_cost([]) == math.inf


def test_ranking_pools_costs_per_config_and_skips_failures():
    pairs = [
        (_cfg(1), [1.0]),                                  # one lucky cost: 1.1
        (_cfg(2), [1.0, 1.05, 1.1]),                       # three records of config 2 ...
        (_cfg(3), []),                                     # a failed measurement: no costs
        (_cfg(2), [1.05, 1.0, 1.1]),
        (_cfg(4), [None, math.nan, math.inf, 0.0, -1.0, 2.0]),  # only 2.0 is a cost: 2.2
        (_cfg(2), [1.1, 1.05, 1.0]),                       # ... pooled: median 1.05 of 9, 1.085
    ]
    ranked = rank_configs(pairs)
    assert [e.config["knobs"]["x"] for e in ranked] == [2, 1, 4]
    assert [e.score for e in ranked] == pytest.approx([1.085, 1.1, 2.2], rel=1e-12)
    assert sorted(ranked[0].costs) == [1.0] * 3 + [1.05] * 3 + [1.1] * 3
    assert ranked[0].median == pytest.approx(1.05) and ranked[2].costs == [2.0]


def test_configs_are_told_apart_by_their_knobs():
    # The same knobs under another index, or in another key order, are the same config.
    pairs = [({"index": 7, "knobs": {"a": 1, "b": 2}}, [3.0]),
             ({"index": 9, "knobs": {"b": 2, "a": 1}}, [1.0, 2.0]),
             ({"index": 7, "knobs": {"a": 2, "b": 1}}, [2.5])]
    ranked = rank_configs(pairs)
    assert len(ranked) == 2
    # {a: 1, b: 2}: median 2.0 of three, 2.0 * (1 + 0.1 / sqrt(3)) = 2.1155; {a: 2, b: 1}: 2.75
    assert ranked[0].config["knobs"] == {"a": 1, "b": 2} and sorted(ranked[0].costs) == [1.0, 2.0, 3.0]
    assert [e.score for e in ranked] == pytest.approx([2.0 + 0.2 / math.sqrt(3), 2.75], rel=1e-12)


def test_a_tie_in_medians_goes_to_the_better_measured_config():
    # Both medians are 1.0: four costs score 1.05, one cost 1.1.
    ranked = rank_configs([(_cfg(1), [1.0]), (_cfg(2), [1.0, 0.9, 1.1, 1.0])])
    assert [e.config["knobs"]["x"] for e in ranked] == [2, 1]
    assert [e.score for e in ranked] == pytest.approx([1.05, 1.1], rel=1e-12)


def test_equal_scores_rank_the_same_whatever_the_record_order():
    pairs = [(_cfg(3), [2.0, 2.0]), (_cfg(1), [2.0, 2.0]), (_cfg(2), [1.0])]
    orders = {tuple(e.config["knobs"]["x"] for e in rank_configs(p)) for p in itertools.permutations(pairs)}
    assert len(orders) == 1
    (order,) = orders
    assert order[0] == 2 and set(order[1:]) == {1, 3}  # 1.1, then the tie at 2.0 * (1 + 0.1 / sqrt(2))


def test_nothing_measured_ranks_nothing():
    assert rank_configs([]) == []
    assert rank_configs([(_cfg(1), []), (_cfg(2), [math.nan])]) == []


# ---------------------------------------------------------------------------- the log's ranking

_SCRIPT = """
import json, random, sys
import db
from autotune.selection import best
path, seed = sys.argv[1], int(sys.argv[2])
records = [db.Record.from_dict(d) for d in json.load(sys.stdin)]
random.Random(seed).shuffle(records)
with db.open(path) as log:
    while records:                      # batches of varied size, in this process's order
        size = random.Random(seed + len(records)).randint(1, 30)
        log.add(records[:size]); records = records[size:]
    print(json.dumps({w.key: [e.config for e in best(log, w.key, k=3)] for w in log.workloads()}))
"""


def _log_records(seed: int) -> list:
    """Records of three workloads: per workload six configs (some under two spellings: index, key
    order) measured twice each, four of them with exactly the same costs (a tie, broken by the
    knob fingerprint), and errors and zero costs that do not count; in an order of ``seed``."""
    rng = random.Random(seed)
    out = []
    for w, x, rep in itertools.product(range(3), range(6), range(2)):
        knobs = {"x": x, "y": x % 2} if rng.random() < 0.5 else {"y": x % 2, "x": x}
        config = {"index": x + rng.choice((0, 10)), "knobs": knobs}
        costs = [1.0, 3.0] if x < 4 else [2.0 + x + w, 1.0 + rep]
        if rng.random() < 0.3:
            costs.append(0.0)  # a cost that does not count
        for error in ([False, True] if rng.random() < 0.2 else [False]):
            out.append(db.Record(workload_key=f"w{w}", template="t", args=[8], target="llvm", config=config,
                                 timestamp=float(len(out)), costs=[] if error else costs,
                                 error_kind="run" if error else None))
    rng.shuffle(out)
    return out


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_log(request, tmp_path):
    """An empty log on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url = str(tmp_path / "t.db")
    else:
        url = request.getfixturevalue("new_postgres_url")()
    with db.open(url) as log:
        yield log


def test_the_log_ranks_as_the_python_ranking_does(fresh_log):
    records = _log_records(5)
    fresh_log.add(records)
    for key in ("w0", "w1", "w2"):
        by_python = rank_records([r for r in records if r.workload_key == key])
        by_sql = best(fresh_log, key, k=100)
        assert len(by_sql) == len(by_python) == 6 and by_sql[0].score == by_sql[3].score
        def figures(ranked):
            return [(e.config, e.costs, e.score) for e in ranked]

        assert figures(by_sql) == figures(by_python)
        assert [[r.uid for r in e.records] for e in by_sql] == [[r.uid for r in e.records] for e in by_python]
        # the validator skips a config for the next one, as the Python ranking would
        skipped = best(fresh_log, key, k=2, validate=lambda c, top=by_python[0].config: c != top)
        assert [e.config for e in skipped] == [e.config for e in by_python[1:3]]


def test_a_config_is_ranked_by_the_costs_of_its_latest_code_version(fresh_log):
    """Costs measured with earlier code stop counting once the config is measured with newer code;
    a record of older code that arrives late (a merged log) changes nothing; going back to a
    version (a newer record of it) brings back all of that version's costs."""
    def record(x, cost, when, version):
        return db.Record(workload_key="w", template="t", args=[8], target="llvm", config={"knobs": {"x": x}},
                         costs=[cost, cost], timestamp=when, code_version=version)

    def ranking(records):
        by_python = rank_records(records)
        by_sql = best(fresh_log, "w", k=10)
        assert [(e.config, e.costs, e.score, e.code_version) for e in by_sql] == \
            [(e.config, e.costs, e.score, e.code_version) for e in by_python]
        return [(e.config["knobs"]["x"], e.median, e.code_version) for e in by_sql]

    records = [record(0, 1.0, 1.0, "old"), record(0, 1.2, 2.0, "old"), record(1, 2.0, 3.0, "old")]
    fresh_log.add(records)
    assert ranking(records) == [(0, 1.1, "old"), (1, 2.0, "old")]
    records.append(record(0, 3.0, 4.0, "new"))  # today's code makes config 0 slower
    fresh_log.add(records[-1:])
    assert ranking(records) == [(1, 2.0, "old"), (0, 3.0, "new")]
    records.append(record(0, 0.5, 0.5, "old"))  # an older record, merged late
    fresh_log.add(records[-1:])
    assert ranking(records) == [(1, 2.0, "old"), (0, 3.0, "new")]
    records.append(record(0, 1.4, 5.0, "old"))  # the old code again, and the latest
    fresh_log.add(records[-1:])
    assert ranking(records) == [(0, 1.1, "old"), (1, 2.0, "old")]
    assert [r.timestamp for r in best(fresh_log, "w")[0].records] == [1.0, 2.0, 0.5, 5.0]


def test_two_processes_adding_records_in_other_orders_pick_the_same_configs(tmp_path):
    records = _log_records(7)
    data = json.dumps([r.to_dict() for r in records])
    picks = []
    for seed in (1, 2):
        done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / f"log{seed}.db"), str(seed)],
                              input=data, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)})
        assert done.returncode == 0, done.stderr
        picks.append(json.loads(done.stdout))
    assert picks[0] == picks[1] and len(picks[0]) == 3
    assert all(len(configs) == 3 for configs in picks[0].values())
    # and the same configs as the ranking of the records in their first order
    for key, configs in picks[0].items():
        assert configs == [e.config for e in rank_records([r for r in records if r.workload_key == key])[:3]]
