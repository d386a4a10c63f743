"""``optuna``: any Optuna sampler through the ask/tell interface (TPE by default).

Each knob is one Optuna parameter whose values are the knob's choice positions: a
``CategoricalDistribution`` by default, or an ``IntDistribution`` with
``knob_distribution="int"`` (choices are ordered, e.g. split sizes, which samplers
such as CMA-ES can exploit). A batch comes from several asks:

- a config that violates a constraint is told as pruned and asked again (at most
  ``max_retries`` asks per config of the batch; the rest of the batch is then random);
- a config measured before is told its known cost at once, without measuring again;
- a config already in flight keeps its trial open, told when the result arrives.

Measured costs (seconds, minimized) are told as values, failed candidates as
failures; configs measured without a trial (random fill, resumed history) are added
to the study as finished trials.
"""

from __future__ import annotations

# optuna itself (heavy) is imported where it is used: only an OptunaTuner bound to a task needs it.
from autotune.errors import AutotuneError
from autotune.tuner.tuner import Tuner

__all__ = ["OptunaTuner"]

_DISTRIBUTIONS = ("categorical", "int")


class OptunaTuner(Tuner):
    """Optuna-driven search. ``sampler`` is any ``optuna.samplers.BaseSampler``; without one,
    ``TPESampler(seed=seed, constant_liar=True)`` (pending trials count as bad, which keeps a
    batch diverse). A sampler passed in is seeded by whoever made it."""

    name = "optuna"

    def __init__(self, task=None, seed: int | None = None, sampler=None, max_retries: int = 20,
                 knob_distribution: str = "categorical", **options):
        if knob_distribution not in _DISTRIBUTIONS:
            raise AutotuneError(f"OptunaTuner: unknown knob_distribution {knob_distribution!r}; "
                                f"use one of {_DISTRIBUTIONS}")
        if max_retries < 1:
            raise AutotuneError(f"OptunaTuner: max_retries must be at least 1, got {max_retries}")
        self.sampler, self.max_retries, self.knob_distribution = sampler, max_retries, knob_distribution
        super().__init__(task, seed, **options)

    def _setup(self) -> None:
        import optuna

        # Optuna logs every finished trial at INFO on its own handler; a library stays quiet.
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = self.sampler or optuna.samplers.TPESampler(seed=self.seed, constant_liar=True)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        dist = optuna.distributions
        categorical = self.knob_distribution == "categorical"
        self._dists = {
            name: (dist.CategoricalDistribution(list(range(len(knob)))) if categorical
                   else dist.IntDistribution(0, len(knob) - 1))
            for name, knob in self.space.space_map.items()
        }
        self._open: dict[int, list] = {}  # config index -> trials waiting for its result

    def _propose(self, n: int) -> list[int]:
        from optuna.trial import TrialState

        out: list[int] = []
        for _ in range(n * self.max_retries):
            if len(out) == n:
                break
            trial = self.study.ask(self._dists)
            index = self.space.choices_to_index([trial.params[name] for name in self._dists])
            if not self.space.is_valid(index):
                self.study.tell(trial, state=TrialState.PRUNED)
            elif index in self.costs:
                self._tell(trial, self.costs[index])
            else:
                self._open.setdefault(index, []).append(trial)
                if index not in self._visited and index not in out:
                    out.append(index)
        return out

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        import optuna
        from optuna.trial import TrialState

        for index, cost in zip(indices, costs):
            trials = self._open.pop(index, [])
            for trial in trials:
                self._tell(trial, cost)
            if not trials:
                params = dict(zip(self._dists, self.space.index_to_choices(index)))
                state = TrialState.COMPLETE if cost is not None else TrialState.FAIL
                self.study.add_trial(optuna.trial.create_trial(
                    params=params, distributions=self._dists, value=cost, state=state))

    def _tell(self, trial, cost: float | None) -> None:
        from optuna.trial import TrialState

        if cost is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, cost)
