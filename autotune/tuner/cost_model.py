"""An XGBoost cost model of config throughput, trained on measurements of one or more workloads.

Each workload is one *group*: its labels are throughputs (``flop / cost``) divided by
the group's best, failures 0. With ``loss_type="rank"`` the model is trained with
``rank:pairwise`` and pairs are formed within a group only, so measurements of other
workloads (transfer) teach the order of configs without mixing absolute speeds; with
``"reg"`` it regresses the normalized throughput (``reg:squarederror``). Predictions are
scores, higher for configs predicted faster; only their order means something.
"""

from __future__ import annotations

# xgboost is imported where a model is fitted or used: it is heavy, and only the xgb tuner
# needs it, once it has measurements.
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autotune.tuner.features import FeatureCache

__all__ = ["XGBCostModel", "Group", "LOSS_TYPES"]

logger = logging.getLogger(__name__)

LOSS_TYPES = ("rank", "reg")
# base_margin(task, config indices) -> the margin each of their predictions starts from.
Margin = Callable[[object, list], np.ndarray]
_OBJECTIVES = {"rank": "rank:pairwise", "reg": "reg:squarederror"}


@dataclass
class Group:
    """Measurements of one workload: config indices of ``task``'s space and their costs
    (seconds; None for a failed candidate)."""

    task: object
    indices: list[int]
    costs: list[float | None]


class XGBCostModel:
    """Features (cached by config) -> XGBoost booster -> scores.

    ``num_threads`` and ``seed`` make training deterministic; ``num_rounds`` and
    ``params`` tune the booster (``params`` are merged over the defaults);
    ``feature_workers`` is the :class:`FeatureCache`'s ``workers``.
    """

    def __init__(self, feature_type: str = "itervar", loss_type: str = "rank", num_threads: int = 1,
                 seed: int | None = None, num_rounds: int = 150, params: dict | None = None,
                 feature_workers: int | None = None):
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"unknown loss type {loss_type!r}; use one of {LOSS_TYPES}")
        self.features = FeatureCache(feature_type, feature_workers)
        self.loss_type = loss_type
        self.num_rounds = num_rounds
        self.params = {
            "objective": _OBJECTIVES[loss_type], "max_depth": 6, "eta": 0.1, "subsample": 1.0,
            "min_child_weight": 1, "lambda": 1.0, "nthread": int(num_threads),
            "seed": 0 if seed is None else int(seed) % (2 ** 31), "verbosity": 0,
        }
        if loss_type == "rank":
            # Random pairs within a group ("mean"): the order of all configs matters, not the top k.
            self.params.update(lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=32)
        self.params.update(params or {})
        self._booster = None
        self._width: int | None = None
        self._settings = (num_threads, seed, num_rounds, params, feature_workers)

    def sibling(self, feature_type: str) -> XGBCostModel:
        """A new, untrained model of the same loss and settings on ``feature_type`` features."""
        num_threads, seed, num_rounds, params, workers = self._settings
        return XGBCostModel(feature_type, self.loss_type, num_threads, seed, num_rounds, params, workers)

    @property
    def trained(self) -> bool:
        return self._booster is not None

    @property
    def booster(self):
        """The trained ``xgboost.Booster``, or None before :meth:`fit`."""
        return self._booster

    def fit(self, groups: Sequence[Group], base_margin: Margin | None = None) -> bool:
        """Train on ``groups`` from scratch; False (and no model) when they hold fewer than
        two configs with features, or no success. ``base_margin(task, indices)``, if given,
        is the margin each prediction starts from (a base model's, in transfer learning)."""
        import xgboost as xgb

        blocks = []
        for g in groups:
            if not g.indices:
                continue
            x, ok = self.features.get(g.task, g.indices)
            y = _labels(g.task, g.costs)
            if ok.sum() < 2 or not (y[ok] > 0).any():
                continue
            blocks.append((x[ok], y[ok], g.task, [i for i, keep in zip(g.indices, ok) if keep]))
        if not blocks:
            return False
        width = max(b[0].shape[1] for b in blocks)
        xs = np.concatenate([_pad(b[0], width) for b in blocks])
        ys = np.concatenate([b[1] for b in blocks])
        dtrain = xgb.DMatrix(xs, label=ys)
        if self.loss_type == "rank":
            dtrain.set_group([len(b[1]) for b in blocks])
        if base_margin is not None:
            dtrain.set_base_margin(np.concatenate([np.asarray(base_margin(task, idx), dtype=np.float64)
                                                   for _, _, task, idx in blocks]))
        self._booster = xgb.train(self.params, dtrain, num_boost_round=self.num_rounds)
        self._width = width
        logger.debug("cost model trained on %d configs in %d groups", len(ys), len(blocks))
        return True

    def predict(self, task, indices: Sequence[int], output_margin: bool = False,
                base_margin: Margin | None = None) -> np.ndarray:
        """Scores of ``indices`` in ``task``'s space; -inf for configs without features.
        ``output_margin``: the raw margins (before the objective's transformation);
        ``base_margin`` as in :meth:`fit`."""
        import xgboost as xgb

        if self._booster is None:
            raise RuntimeError("the cost model is not trained yet")
        if len(indices) == 0:
            return np.zeros(0)
        x, ok = self.features.get(task, indices, self._width)
        out = np.full(len(indices), -np.inf)
        if ok.any():
            dtest = xgb.DMatrix(x[ok])
            if base_margin is not None:
                kept = [i for i, keep in zip(indices, ok) if keep]
                dtest.set_base_margin(np.asarray(base_margin(task, kept), dtype=np.float64))
            out[ok] = self._booster.predict(dtest, output_margin=output_margin)
        return out


def _labels(task, costs: Sequence[float | None]) -> np.ndarray:
    """Throughput relative to the best of the group; 0 for failures."""
    flop = max(1, int(getattr(task, "flop", 1) or 1))
    thr = np.array([flop / c if c is not None and np.isfinite(c) and c > 0 else 0.0 for c in costs])
    best = thr.max() if len(thr) else 0.0
    return thr / best if best > 0 else thr


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    if x.shape[1] == width:
        return x
    out = np.zeros((x.shape[0], width), dtype=x.dtype)
    out[:, :x.shape[1]] = x
    return out
