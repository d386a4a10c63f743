"""``xgb``: an XGBoost cost model searched by simulated annealing (AutoTVM's XGBTuner).

The model (:class:`~autotune.tuner.cost_model.XGBCostModel`) is trained on every
measurement so far, failures ranked last, and retrained at the next call of
:meth:`next_batch` once its data grew by a quarter
(:data:`~autotune.tuner.shared.REFIT_GROWTH`). Parallel simulated annealing over the
model (:func:`~autotune.tuner.sa.anneal`, chains started from random configs and the
best measured ones) yields a *plan* of the ``plan_size`` best-predicted unvisited
configs; where the space holds no more unvisited configs than the annealing would score
(``sa_chains * sa_iters``), every one is scored instead. Scoring a config by its
``itervar`` or ``curve`` features means lowering it (milliseconds each), and the search
visits hundreds of configs per plan: more than a few cores can lower while a large
cluster measures the plan. So a *surrogate*, the same kind of model on knob features
(free to compute), trained on the same data, scores what the search visits, and only its
best ``sa_shortlist`` times the plan's size are lowered and ranked by the model, together
with the unvisited configs lowered before (``sa_shortlist=0``: the model scores everything
itself). Batches are taken from the plan, each pick replaced by a random config with
probability ``epsilon`` (exploration). While fewer than ``replan_until``
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
as their own ranking groups. The model and its training data are a
:class:`~autotune.tuner.shared.SharedCostModel`: the tuner's own, or, once
:class:`~autotune.tuner.shared.SharedModels` attached the tuner (``tune_tasks`` does), one
shared with the run's other tuners of the template, trained on every one's measurements
as they arrive; the tuner then searches with it on its own task's features.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from autotune.errors import AutotuneError
from autotune.tuner.cost_model import LOSS_TYPES, Group, XGBCostModel
from autotune.tuner.features import FEATURE_TYPES, check_workers
from autotune.tuner.sa import anneal
from autotune.tuner.shared import SharedCostModel
from autotune.tuner.tuner import Tuner

# Wall seconds of computing features that a search may spend on its shortlist: the model
# ranks as many new configs as that allows (never fewer than a batch, never more than
# sa_shortlist times the plan).
SEARCH_FEATURE_SECONDS = 10.0

__all__ = ["XGBTuner"]

logger = logging.getLogger(__name__)


class XGBTuner(Tuner):
    """Model-based search.

    Options: ``feature_type`` ("itervar", "knob" or "curve"), ``loss_type`` ("rank" or "reg"),
    ``plan_size`` (configs planned per search), ``epsilon`` (share of random picks),
    ``min_train`` (measurements before the first model), ``num_threads`` (XGBoost
    threads; fixed, so training is deterministic), ``num_rounds`` (boosting rounds),
    ``sa_chains``, ``sa_iters`` and ``sa_early_stop`` (the annealing search),
    ``replan_until`` (measurements up to which the plan is searched again for every batch),
    ``sa_shortlist`` (how many times the plan's size the knob-feature surrogate passes on to
    the model, fewer where features are slow: :data:`SEARCH_FEATURE_SECONDS`; 0: no
    surrogate), ``feature_workers`` (processes that compute features; default
    :func:`~autotune.tuner.features.default_feature_workers`), ``share_model`` (whether
    :class:`~autotune.tuner.shared.SharedModels` may attach the tuner to a model shared with
    the other tasks of its template in a run; False: the tuner learns from its own measurements
    and its :meth:`pretrain` records only).

    ``model`` is the cost model the tuner searches with; ``shared`` the
    :class:`~autotune.tuner.shared.SharedCostModel` that holds it and its training data.
    """

    name = "xgb"
    default_batch_size = 16

    def __init__(self, task=None, seed: int | None = None, feature_type: str = "itervar",
                 loss_type: str = "rank", plan_size: int = 64, epsilon: float = 0.1, min_train: int = 8,
                 num_threads: int = 1, num_rounds: int = 150, sa_chains: int = 32, sa_iters: int = 60,
                 sa_early_stop: int = 20, replan_until: int = 256, feature_workers: int | None = None,
                 share_model: bool = True, sa_shortlist: float = 2.0, **options):
        if feature_type not in FEATURE_TYPES:
            raise AutotuneError(f"XGBTuner: unknown feature_type {feature_type!r}; "
                                f"use one of {FEATURE_TYPES}")
        if loss_type not in LOSS_TYPES:
            raise AutotuneError(f"XGBTuner: unknown loss_type {loss_type!r}; use one of {LOSS_TYPES}")
        if not 0.0 <= epsilon <= 1.0 or plan_size < 1 or sa_chains < 1 or sa_shortlist < 0:
            raise AutotuneError(f"XGBTuner: needs 0 <= epsilon <= 1, plan_size >= 1, sa_chains >= 1 and "
                                f"sa_shortlist >= 0; got {epsilon}, {plan_size}, {sa_chains}, {sa_shortlist}")
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
        self.share_model = share_model
        self.sa_shortlist = sa_shortlist
        super().__init__(task, seed, **options)

    def _setup(self) -> None:
        model = XGBCostModel(self.feature_type, self.loss_type, self.num_threads, self.seed,
                             self.num_rounds, feature_workers=self.feature_workers)
        self._own = Group(self.task, [], [])  # this task's measurements, in order
        self.shared = SharedCostModel(model, self.task.template)
        self.shared.join(self._own)
        self._seen_fits = 0     # the shared model's fits when this tuner last searched with it
        self._plan: list[int] = []
        self._searched_at = 0   # own results when the plan was last searched

    @property
    def model(self) -> XGBCostModel:
        """The cost model this tuner searches with (shared with others once attached)."""
        return self.shared.model

    @property
    def _indices(self) -> list[int]:
        return self._own.indices

    @property
    def _costs(self) -> list[float | None]:
        return self._own.costs

    def join(self, shared: SharedCostModel) -> None:
        """Search with ``shared`` from now on, training it on this tuner's measurements (and
        handing it the records given to :meth:`pretrain`). :class:`SharedModels` calls this."""
        self._bound()
        if shared is self.shared:
            return
        if shared.template != self.task.template:
            raise AutotuneError(f"XGBTuner of {self.task.template!r} cannot join a model of "
                                f"{shared.template!r}")
        shared.join(self._own)
        shared.absorb(self.shared)
        self.model.features.close()
        self.shared = shared
        self._seen_fits = -1  # whatever the shared model is, this tuner has not searched with it

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
        workload are loaded as history instead; records of other templates, or whose config is
        not in their task's space, are skipped. Once the tuner is attached to a shared model,
        the records train it for every tuner that shares it.
        """
        self._bound()
        own, others = [], []
        for config, task, cost in records:
            if task.workload_key == self.task.workload_key:
                own.append((config, cost))
            else:
                others.append((config, task, cost))
        skipped = self.shared.add(others)
        if skipped:
            logger.warning("pretrain: skipped %d records of other templates, of workloads tuned alongside "
                           "or outside their space", skipped)
        if own:
            self.load_history(own)

    # ------------------------------------------------------------------ strategy

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        self.shared.record(self._own, indices, costs)

    def _retrain(self) -> bool:
        """Fit the model again if new data arrived (this tuner's, or another's that shares it);
        whether the model changed since this tuner last searched with it."""
        self.shared.refresh(self.min_train)
        changed = self.shared.fits != self._seen_fits
        self._seen_fits = self.shared.fits
        return changed

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
        """The ``n`` best-predicted unvisited configs.

        Candidates are every unvisited config where the space holds no more than an annealing
        search would score, else those an annealing search from random and top measured starts
        finds. With a trained knob-feature surrogate (``sa_shortlist`` > 0), the surrogate scores
        the candidates, and the model ranks only its best ``sa_shortlist * n`` (fewer where
        features are slow: :meth:`_shortlist_size`) with the unvisited
        configs lowered before (earlier shortlists, at no cost): a couple of configs lowered per
        trial, not the hundreds the search visits."""
        surrogate = self.shared.surrogate() if self.sa_shortlist else None
        if surrogate is None:
            return self._candidates(self.model, n)
        shortlist = self._candidates(surrogate, self._shortlist_size(n))
        lowered = [i for i in self.model.features.cached(self.task) if i not in self._visited]
        return self._best(self.model, list(dict.fromkeys(shortlist + lowered)), n)

    def _shortlist_size(self, n: int) -> int:
        """``sa_shortlist * n`` configs (at least ``n``), or as many new ones as
        :data:`SEARCH_FEATURE_SECONDS` of computing features allows where that is fewer (at
        least a batch): lowering a Winograd convolution takes seconds, and a full shortlist of
        them cost more than building the batch it chose."""
        want = max(n, round(self.sa_shortlist * n))
        per_row = self.model.features.seconds_per_row
        if per_row:
            want = min(want, max(self.default_batch_size, int(SEARCH_FEATURE_SECONDS / per_row)))
        return want

    def _candidates(self, model: XGBCostModel, n: int) -> list[int]:
        """The ``n`` best unvisited configs by ``model``: all scored, or found by annealing."""
        space = self.space
        if space.size_is_exact and space.size - len(self._visited) <= self.sa_chains * self.sa_iters:
            return self._best(model, [i for i in space.valid_indices() if i not in self._visited], n)
        measured = sorted((c, i) for i, c in zip(self._indices, self._costs) if c is not None)
        tops = [i for _, i in measured[:self.sa_chains // 2]]
        starts = tops + self._random_indices(self.sa_chains - len(tops), exclude=set(tops))
        if not starts:
            return []
        return anneal(space, lambda idx: model.predict(self.task, idx), starts, n, self.rng,
                      exclude=self._visited, n_iter=self.sa_iters, early_stop=self.sa_early_stop)

    def _best(self, model: XGBCostModel, indices: list[int], n: int) -> list[int]:
        """The ``n`` of ``indices`` that ``model`` scores highest, best first (none it cannot score)."""
        scores = model.predict(self.task, indices)
        order = sorted(range(len(indices)), key=lambda k: (-scores[k], indices[k]))
        return [indices[k] for k in order[:n] if scores[k] > -float("inf")]
