"""``grid``: every valid config in index order (the first knob varies fastest)."""

from __future__ import annotations

from autotune.tuner.tuner import Tuner

__all__ = ["GridTuner"]


class GridTuner(Tuner):
    """Exhaustive search in mixed-radix index order; meant for small spaces."""

    name = "grid"

    def _setup(self) -> None:
        self._configs = iter(self.space)

    def _propose(self, n: int) -> list[int]:
        out: list[int] = []
        for config in self._configs:
            if config.index not in self._visited:
                out.append(config.index)
                if len(out) == n:
                    break
        return out
