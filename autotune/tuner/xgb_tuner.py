"""``xgb``: an XGBoost cost model searched by simulated annealing (AutoTVM's XGBTuner).

The model (:class:`~autotune.tuner.cost_model.XGBCostModel`) is trained on every
measurement so far, failures ranked last, and retrained whenever new results have
arrived by the next call of :meth:`next_batch`. Parallel simulated annealing over the
model (:func:`~autotune.tuner.sa.anneal`, chains started from random configs and the
best measured ones) yields a *plan* of the ``plan_size`` best-predicted unvisited
configs; where the space holds no more unvisited configs than the annealing would score
(``sa_chains * sa_iters``), every one is scored instead, so the plan is the model's true
best at no greater cost. Batches are taken from the plan, each pick replaced by a random
config with probability ``epsilon`` (exploration). While fewer than ``replan_until``
configs are measured, the search runs again for every batch that follows new results:
early models change a lot with every batch, and a plan searched with the first model
would steer the next ``plan_size`` trials. Later, a retrained model only re-ranks the
rest of the plan and the search runs again once ``plan_size`` new results arrived or the
plan runs short. A batch takes the plan's picks in order but skips, while others are
left, a config only one knob away from one already in the batch (near-duplicates teach
the model little and waste trials on one neighbourhood). Until the model can be trained
(fewer than ``min_train`` measurements and no pre-training), batches are random.

Transfer learning: :meth:`XGBTuner.pretrain` takes measurements of other workloads of
the same template; they train the model from the start and stay in its training set
as their own ranking groups.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from autotune.errors import AutotuneError
from autotune.tuner.cost_model import LOSS_TYPES, Group, XGBCostModel
from autotune.tuner.features import FEATURE_TYPES, check_workers
from autotune.tuner.sa import anneal
from autotune.tuner.tuner import Tuner, result_cost
from search_spaces import ConfigEntity, SearchSpaceError

__all__ = ["XGBTuner"]

logger = logging.getLogger(__name__)


class XGBTuner(Tuner):
    """Model-based search.

    Options: ``feature_type`` ("itervar" or "knob"), ``loss_type`` ("rank" or "reg"),
    ``plan_size`` (configs planned per search), ``epsilon`` (share of random picks),
    ``min_train`` (measurements before the first model), ``num_threads`` (XGBoost
    threads; fixed, so training is deterministic), ``num_rounds`` (boosting rounds),
    ``sa_chains``, ``sa_iters`` and ``sa_early_stop`` (the annealing search),
    ``replan_until`` (measurements up to which the plan is searched again for every batch),
    ``feature_workers`` (processes that compute features; default
    :func:`~autotune.tuner.features.default_feature_workers`).
    """

    name = "xgb"
    default_batch_size = 16

    def __init__(self, task=None, seed: int | None = None, feature_type: str = "itervar",
                 loss_type: str = "rank", plan_size: int = 64, epsilon: float = 0.1, min_train: int = 8,
                 num_threads: int = 1, num_rounds: int = 150, sa_chains: int = 32, sa_iters: int = 60,
                 sa_early_stop: int = 20, replan_until: int = 256, feature_workers: int | None = None,
                 **options):
        if feature_type not in FEATURE_TYPES:
            raise AutotuneError(f"XGBTuner: unknown feature_type {feature_type!r}; "
                                f"use one of {FEATURE_TYPES}")
        if loss_type not in LOSS_TYPES:
            raise AutotuneError(f"XGBTuner: unknown loss_type {loss_type!r}; use one of {LOSS_TYPES}")
        if not 0.0 <= epsilon <= 1.0 or plan_size < 1 or sa_chains < 1:
            raise AutotuneError(f"XGBTuner: needs 0 <= epsilon <= 1, plan_size >= 1 and sa_chains >= 1; "
                                f"got {epsilon}, {plan_size}, {sa_chains}")
        try:
            check_workers(feature_workers, "feature_workers")
        except ValueError as exc:
            raise AutotuneError(f"XGBTuner: {exc}") from None
        self.feature_type, self.loss_type = feature_type, loss_type
        self.plan_size, self.epsilon, self.min_train = plan_size, epsilon, min_train
        self.num_threads, self.num_rounds = num_threads, num_rounds
        self.sa_chains, self.sa_iters, self.sa_early_stop = sa_chains, sa_iters, sa_early_stop
        self.replan_until = replan_until
        self.feature_workers = feature_workers
        super().__init__(task, seed, **options)

    def _setup(self) -> None:
        self.model = XGBCostModel(self.feature_type, self.loss_type, self.num_threads, self.seed,
                                  self.num_rounds, feature_workers=self.feature_workers)
        self._indices: list[int] = []
        self._costs: list[float | None] = []
        self._pretrain: dict[str, Group] = {}
        self._trained_on = -1   # results (own + pre-training) behind the current model
        self._plan: list[int] = []
        self._searched_at = 0   # own results when the plan was last searched

    def close(self) -> None:
        """Stop the feature workers, if any started."""
        if self.task is not None:
            self.model.features.close()

    # ------------------------------------------------------------------ transfer

    def pretrain(self, records: Iterable) -> None:
        """Add measurements of other workloads of the same template to the training set.

        ``records`` are ``(config, task, cost)`` triples: ``config`` a ConfigEntity or its
        JSON dict in ``task``'s space, ``cost`` mean seconds (None for a failure; a result
        object with ``.costs``/``.error_kind`` is accepted too). Records of this tuner's own
        task are loaded as history instead; records of other templates, or whose config is
        not in their task's space, are skipped.
        """
        self._bound()
        own, skipped = [], 0
        for config, task, cost in records:
            if task == self.task:
                own.append((config, cost))
                continue
            if task.template != self.task.template:
                skipped += 1
                continue
            try:
                data = config.to_json() if isinstance(config, ConfigEntity) else config
                index = task.config_space.from_json(data).index
            except SearchSpaceError:
                skipped += 1
                continue
            group = self._pretrain.setdefault(task.workload_key, Group(task, [], []))
            group.indices.append(index)
            group.costs.append(result_cost(cost))
        if skipped:
            logger.warning("pretrain: skipped %d records of other templates or outside their space", skipped)
        if own:
            self.load_history(own)

    # ------------------------------------------------------------------ strategy

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        self._indices += indices
        self._costs += costs

    def _data_size(self) -> int:
        return len(self._indices) + sum(len(g.indices) for g in self._pretrain.values())

    def _retrain(self) -> bool:
        """Train on everything measured if something new arrived; whether it did."""
        if self._data_size() == self._trained_on:
            return False
        if len(self._indices) < self.min_train and not self._pretrain:
            return False
        groups = list(self._pretrain.values()) + [Group(self.task, self._indices, self._costs)]
        if not self.model.fit(groups):
            return False
        self._trained_on = self._data_size()
        return True

    def _propose(self, n: int) -> list[int]:
        retrained = self._retrain()
        if not self.model.trained:
            return self._random_indices(n)
        self._plan = [i for i in self._plan if i not in self._visited]
        new_results = len(self._indices) - self._searched_at
        stale = new_results >= self.plan_size or (new_results > 0 and len(self._indices) < self.replan_until)
        if len(self._plan) < n or stale:
            self._plan = self._search(max(self.plan_size, n))
            self._searched_at = len(self._indices)
        elif retrained:  # cheap: the plan's features are cached; re-rank it by the new model
            scores = self.model.predict(self.task, self._plan)
            self._plan = [self._plan[k] for k in sorted(range(len(self._plan)), key=lambda k: -scores[k])]
        n_explore = sum(self.rng.random() < self.epsilon for _ in range(n))
        out = self._diverse_picks(n - n_explore)
        out += self._random_indices(n - len(out), exclude=set(out))
        return out

    def _diverse_picks(self, n: int) -> list[int]:
        """Up to ``n`` configs off the front of the plan (removed from it), skipping those one
        knob away from an earlier pick while the plan has others."""
        if n <= 0:
            return []
        picked: list[int] = []
        picked_digits: list[list[int]] = []
        skipped: list[int] = []
        rest = list(self._plan)
        while rest and len(picked) < n:
            i = rest.pop(0)
            d = self.space.index_to_choices(i)
            if any(sum(a != b for a, b in zip(d, p)) <= 1 for p in picked_digits):
                skipped.append(i)
                continue
            picked.append(i)
            picked_digits.append(d)
        if len(picked) < n:  # the plan ran out of distinct configs: take near-duplicates, best first
            take = n - len(picked)
            picked += skipped[:take]
            skipped = skipped[take:]
        self._plan = skipped + rest
        return picked

    def _search(self, n: int) -> list[int]:
        """The ``n`` best-predicted unvisited configs: every one scored where the space holds no
        more than an annealing search would score, else by annealing from random and top
        measured starts."""
        space = self.space
        if space.size_is_exact and space.size - len(self._visited) <= self.sa_chains * self.sa_iters:
            rest = [i for i in space.valid_indices() if i not in self._visited]
            scores = self.model.predict(self.task, rest)
            order = sorted(range(len(rest)), key=lambda k: (-scores[k], rest[k]))
            return [rest[k] for k in order[:n] if scores[k] > -float("inf")]
        measured = sorted((c, i) for i, c in zip(self._indices, self._costs) if c is not None)
        tops = [i for _, i in measured[:self.sa_chains // 2]]
        starts = tops + self._random_indices(self.sa_chains - len(tops), exclude=set(tops))
        if not starts:
            return []
        return anneal(self.space, lambda idx: self.model.predict(self.task, idx), starts, n, self.rng,
                      exclude=self._visited, n_iter=self.sa_iters, early_stop=self.sa_early_stop)
