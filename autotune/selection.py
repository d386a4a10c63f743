"""Choosing the best config from noisy timings: a confident median over every measurement.

A config measured once may look fast by luck; one measured many times has a
trustworthy median. Each config's score is the median of all its costs, raised a
little for configs with few costs, so that a well-measured config wins a near tie.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ConfigScore", "confident_cost", "rank_configs"]

# Relative penalty at one cost: a config timed 3 times is charged ~6%, 27 times ~2%.
_PENALTY = 0.1


def confident_cost(costs: list[float]) -> float:
    """The median of ``costs``, raised by ``_PENALTY / sqrt(len(costs))``."""
    if not costs:
        return math.inf
    return statistics.median(costs) * (1.0 + _PENALTY / math.sqrt(len(costs)))


@dataclass
class ConfigScore:
    """All the costs gathered for one config, and its confident score."""

    config: dict
    costs: list
    score: float

    @property
    def median(self) -> float:
        return statistics.median(self.costs)


def _config_key(config) -> str:
    knobs = config.get("knobs", config) if isinstance(config, dict) else config
    return json.dumps(knobs, sort_keys=True, default=str)


def rank_configs(pairs: Iterable[tuple[dict, list]]) -> list[ConfigScore]:
    """Pool ``(config_json, costs)`` pairs by config and rank them, best first.

    Failed measurements (no costs) are ignored.
    """
    pooled: dict[str, ConfigScore] = {}
    for config, costs in pairs:
        costs = [float(c) for c in costs if c is not None and math.isfinite(c) and c > 0]
        if not costs:
            continue
        key = _config_key(config)
        entry = pooled.get(key)
        if entry is None:
            pooled[key] = ConfigScore(config, list(costs), 0.0)
        else:
            entry.costs.extend(costs)
    for entry in pooled.values():
        entry.score = confident_cost(entry.costs)
    return sorted(pooled.values(), key=lambda e: (e.score, _config_key(e.config)))
