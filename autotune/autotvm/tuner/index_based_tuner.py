"""AutoTVM's index-based tuners: ``GridSearchTuner`` and ``RandomTuner``, over config indices.

A config index is AutoTVM's (the first knob varies fastest; each knob lists its choices
in AutoTVM's order), so ``GridSearchTuner`` visits indices 0, 1, 2, ... as AutoTVM's does.
``range_idx=(lo, hi)`` restricts either to the indices ``lo..hi`` (inclusive). In a
space with constraints (``cfg.add_constraint``), indices that break one are passed over.
"""

from __future__ import annotations

import numbers

from autotune.tuner import tuner as base

from .tuner import Tuner

__all__ = ["IndexBaseTuner", "GridSearchTuner", "RandomTuner"]


class IndexBaseTuner(Tuner, base.Tuner):
    """A tuner that picks config indices in ``range_idx`` (default: the whole space).

    ``range_length`` is the number of indices in the range, ``index_offset`` its first,
    ``counter`` how many were taken; ``has_next()`` is False once all were.
    """

    def __init__(self, task, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed=seed)
        size = self.space.range_length
        if range_idx is None:
            self.index_offset, self.range_length = 0, size
        else:
            lo, hi = _checked_range(range_idx, size, type(self).__name__)
            self.index_offset, self.range_length = lo, hi - lo + 1
        self.counter = 0

    def has_next(self) -> bool:
        return self.counter < self.range_length

    def _take(self, index: int):
        """The config at ``index``, or None where it breaks a constraint or was proposed or
        measured before (a loaded history's configs are passed over); marked proposed."""
        if index in self._visited or not self.space.is_index_valid(index):
            return None
        self._visited.add(index)
        self.proposed.add(index)
        return self.space.from_index(index, check=False)


def _checked_range(range_idx, size: int, who: str) -> tuple[int, int]:
    ok = (isinstance(range_idx, tuple | list) and len(range_idx) == 2
          and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in range_idx))
    if not ok:
        raise ValueError(f"{who}: range_idx must be None or (first index, last index), got {range_idx!r}")
    lo, hi = int(range_idx[0]), int(range_idx[1])
    if not 0 <= lo < hi < size:
        raise ValueError(f"{who}: range_idx {range_idx!r} needs 0 <= first < last < {size} "
                         "(the number of config indices; the range includes both ends)")
    return lo, hi


class GridSearchTuner(IndexBaseTuner):
    """Visits the indices of its range in order (AutoTVM's ``GridSearchTuner(task, range_idx=None)``)."""

    name = "grid"

    def next_batch(self, batch_size: int) -> list:
        out = []
        while len(out) < batch_size and self.counter < self.range_length:
            config = self._take(self.index_offset + self.counter)
            self.counter += 1
            if config is not None:
                out.append(config)
        return out


class RandomTuner(IndexBaseTuner):
    """Draws the indices of its range in random order, each once (AutoTVM's
    ``RandomTuner(task, range_idx=None)``; ``seed`` makes the order reproducible).
    ``visited`` lists the indices drawn."""

    name = "random"

    def __init__(self, task, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, range_idx, seed)
        # A lazy shuffle: positions 0..rand_max-1 stand for the range's indices not drawn yet;
        # _moved maps a position to the index it stands for where that is not the position.
        self._moved: dict[int, int] = {}
        self.rand_max = self.range_length
        self.visited: list[int] = []

    def has_next(self) -> bool:
        return self.rand_max > 0

    def next_batch(self, batch_size: int) -> list:
        out = []
        while len(out) < batch_size and self.rand_max > 0:
            pos = int(self.rng.integers(self.rand_max))
            self.rand_max -= 1
            index = self._moved.get(pos, pos) + self.index_offset
            # The last position takes the drawn one's place.
            self._moved[pos] = self._moved.pop(self.rand_max, self.rand_max)
            self.counter += 1
            config = self._take(index)
            if config is not None:
                self.visited.append(index)
                out.append(config)
        return out
