"""Choosing configs from noisy timings: confident costs and rankings, computed by hand.

A config's confident cost is the median of all its costs times ``1 + 0.1 / sqrt(count)``.
"""

from __future__ import annotations

import itertools
import math

import pytest

from autotune.selection import confident_cost, rank_configs


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
