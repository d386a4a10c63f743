"""``random``: configs drawn uniformly from the valid space, without replacement."""

from __future__ import annotations

from autotune.tuner.tuner import Tuner

__all__ = ["RandomTuner"]


class RandomTuner(Tuner):
    """Uniform random search over the valid configs; never repeats a config."""

    name = "random"

    def _propose(self, n: int) -> list[int]:
        return self._random_indices(n)
