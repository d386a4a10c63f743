"""AutoTVM's ``XGBoostCostModel``: this project's XGBoost cost model
(:class:`autotune.tuner.cost_model.XGBCostModel`) under AutoTVM's API.

``fit(xs, ys, plan_size)`` trains on config indices ``xs`` of the task's space and their
throughputs ``ys`` (FLOPS; 0 for a failure), ``predict(xs)`` scores indices (higher:
predicted faster), ``fit_log(records, plan_size)`` trains on AutoTVM records of this
template's workloads (transfer learning). A model spawned with :meth:`spawn_base_model`
and loaded into another with :meth:`load_basemodel` gives the other's predictions a head
start (its margins, discounted as more data arrives), as in AutoTVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from autotune.tuner.cost_model import LOSS_TYPES, Group, XGBCostModel
from autotune.tuner.features import FEATURE_TYPES

from .tuner import _seconds

__all__ = ["XGBoostCostModel"]


class XGBoostCostModel:
    """An XGBoost cost model of ``task``'s configs (AutoTVM's ``XGBoostCostModel``).

    ``feature_type`` is "itervar" (features of the lowered loop nest), "knob" (the knob
    values) or "curve" (AutoTVM's relation feature of the buffers' touched bytes and reuse,
    :func:`autotune.autotvm.feature.get_buffer_curve_sample_flatten`); ``loss_type`` "rank"
    (pairwise ranking) or "reg" (regression of the normalized throughput); ``num_threads``
    XGBoost's threads (None: 1, not AutoTVM's all cores, so that training gives the same model
    on every machine);
    ``log_interval`` is accepted for AutoTVM's signature (training is not logged);
    ``upper_model``: the model this one is the base model of (they share features).
    """

    def __init__(self, task, feature_type: str, loss_type: str, num_threads: int | None = None,
                 log_interval: int = 25, upper_model: XGBoostCostModel | None = None,
                 seed: int | None = None):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"XGBoostCostModel: feature_type {feature_type!r} is not supported; "
                             f"use one of {FEATURE_TYPES}")
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"XGBoostCostModel: unknown loss_type {loss_type!r}; use one of {LOSS_TYPES}")
        self.task = task
        self.space = task.config_space
        self.target = task.target
        self.fea_type = feature_type
        self.loss_type = loss_type
        self.num_threads = num_threads
        self.log_interval = log_interval
        self.seed = seed
        self.upper_model = upper_model
        self.base_model: XGBoostCostModel | None = None
        self._sample_size = 0
        self._model = XGBCostModel(feature_type, loss_type, num_threads=num_threads or 1, seed=seed)
        if upper_model is not None:  # a base model computes the same features: share them
            self._model.features = upper_model.feature_cache

    @property
    def feature_cache(self):
        """The features computed so far (by workload and config index)."""
        return self._model.features

    @property
    def bst(self):
        """The trained ``xgboost.Booster`` (None before a fit)."""
        return self._model.booster

    def fit(self, xs: Sequence[int], ys: Sequence[float], plan_size: int) -> None:
        """Train on config indices ``xs`` and their throughputs ``ys`` (0 for a failure).
        ``plan_size`` is accepted for AutoTVM's signature: AutoTVM stops boosting once the
        recall of the top ``plan_size`` stops improving; this model trains a fixed number of
        rounds. Raises ValueError when fewer than two configs
        have features or none succeeded."""
        xs = [int(x) for x in xs]
        if len(xs) != len(ys):
            raise ValueError(f"XGBoostCostModel.fit: {len(xs)} configs but {len(ys)} throughputs")
        # Labels are throughputs relative to the best, so any cost proportional to 1/y will do.
        costs = [1.0 / float(y) if y > 0 else None for y in ys]
        self._sample_size = len(xs)
        margin = self._base_margin if self.base_model is not None else None
        if not self._model.fit([Group(self.task, xs, costs)], base_margin=margin):
            raise ValueError("XGBoostCostModel.fit needs at least two configs with features and a "
                             "success among them")

    def fit_log(self, records: Iterable, plan_size: int, min_seed_records: int = 500) -> bool:
        """Train on AutoTVM records ``(MeasureInput, MeasureResult)`` of this task's template
        (every workload of it, each its own ranking group); False, and no training, when fewer
        than ``min_seed_records`` are of the template or they cannot train a model."""
        groups: dict[str, Group] = {}
        count = 0
        for inp, res in records:
            if inp.task.name != self.task.name:
                continue
            group = groups.setdefault(inp.task.workload_key, Group(inp.task, [], []))
            group.indices.append(inp.task.config_space.from_json(inp.config.to_json()).index)
            group.costs.append(_seconds(res))
            count += 1
        if count < min_seed_records:
            return False
        self._sample_size = count
        return self._model.fit(list(groups.values()))

    def predict(self, xs: Sequence[int], output_margin: bool = False) -> np.ndarray:
        """Scores of config indices ``xs`` (higher: predicted faster; -inf where the template
        rejects the config); ``output_margin``: the raw margins."""
        margin = self._base_margin if self.base_model is not None else None
        return self._model.predict(self.task, [int(x) for x in xs], output_margin=output_margin,
                                   base_margin=margin)

    def load_basemodel(self, base_model: XGBoostCostModel) -> None:
        """Start this model's predictions from ``base_model``'s margins (transfer learning)."""
        self.base_model = base_model
        base_model.upper_model = self

    def spawn_base_model(self) -> XGBoostCostModel:
        """A new model of the same kind whose upper model is this one (to train as a base model)."""
        return XGBoostCostModel(self.task, self.fea_type, self.loss_type, self.num_threads, self.log_interval,
                                upper_model=self, seed=self.seed)

    def clone_new(self) -> XGBoostCostModel:
        """A new, untrained model of the same kind for the same task."""
        return XGBoostCostModel(self.task, self.fea_type, self.loss_type, self.num_threads, self.log_interval,
                                seed=self.seed)

    def _base_margin(self, task, indices: list) -> np.ndarray:
        # AutoTVM's discount: the base model counts for less as this model sees more data.
        discount = 1.0 / (2 ** (self._sample_size / 64.0))
        return discount * self.base_model._model.predict(task, indices, output_margin=True)

