"""AutoTVM's ``GATuner``: a genetic algorithm over the config space."""

from __future__ import annotations

from autotune.tuner import ga_tuner

from .tuner import Tuner

__all__ = ["GATuner"]


class GATuner(Tuner, ga_tuner.GATuner):
    """A genetic algorithm (AutoTVM's ``GATuner(task, pop_size, elite_num, mutation_prob)``)."""

    def __init__(self, task, pop_size: int = 100, elite_num: int = 3, mutation_prob: float = 0.1,
                 seed: int | None = None):
        super().__init__(task, seed=seed, pop_size=pop_size, elite_num=elite_num, mutation_prob=mutation_prob)
