"""``ga``: a genetic algorithm over knob choices, with elitism and mutation.

An individual's genes are its choice per knob. A generation of ``pop_size`` children
is bred from the scored members of the previous one plus the ``elite_num`` best
configs measured so far (elitism: the best are always parents; being measured, they
are never proposed again). Parents are drawn in proportion to their fitness
(throughput, ``flop / cost``; 0 for a failed candidate), crossed at one point and
each gene mutated to a random choice with probability ``mutation_prob``. Children
that are invalid, already visited or repeated are bred again; what breeding cannot
fill is drawn at random. The first generation is random.
"""

from __future__ import annotations

import numpy as np

from autotune.errors import AutotuneError
from autotune.tuner.tuner import Tuner

__all__ = ["GATuner"]

_BREED_TRIES = 20  # breeding attempts per child before falling back to random configs


class GATuner(Tuner):
    """Genetic search; ``pop_size`` children per generation, ``elite_num`` elites,
    ``mutation_prob`` per gene."""

    name = "ga"
    default_batch_size = 16

    def __init__(self, task=None, seed: int | None = None, pop_size: int = 100, elite_num: int = 3,
                 mutation_prob: float = 0.1, **options):
        if pop_size < 2 or not 0 <= elite_num <= pop_size or not 0.0 <= mutation_prob <= 1.0:
            raise AutotuneError(f"GATuner: needs pop_size >= 2, 0 <= elite_num <= pop_size and "
                                f"0 <= mutation_prob <= 1; got {pop_size}, {elite_num}, {mutation_prob}")
        self.pop_size, self.elite_num, self.mutation_prob = pop_size, elite_num, mutation_prob
        super().__init__(task, seed, **options)

    def _setup(self) -> None:
        self._pending: list[int] = []
        self._generation: list[int] = []
        self._fitness: dict[int, float] = {}
        self._sizes = [len(k) for k in self.space.knobs]

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        flop = max(1, int(self.task.flop or 1))
        for index, cost in zip(indices, costs):
            self._fitness[index] = flop / cost if cost is not None else 0.0

    def _propose(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            if not self._pending:
                self._pending = self._breed(exclude=set(out))
                if not self._pending:
                    break
            index = self._pending.pop(0)
            if index not in self._visited and index not in out:
                out.append(index)
        return out

    def _breed(self, exclude: set[int]) -> list[int]:
        scored = [i for i in self._generation if i in self._fitness]
        if not scored:
            self._generation = self._random_indices(self.pop_size, exclude)
            return list(self._generation)
        ranked = sorted(self._fitness, key=lambda i: (-self._fitness[i], i))
        pool = list(dict.fromkeys(scored + ranked[:self.elite_num]))
        fitness = np.array([self._fitness[i] for i in pool])
        probs = fitness / fitness.sum() if fitness.sum() > 0 else np.full(len(pool), 1.0 / len(pool))
        genes = [self.space.index_to_choices(i) for i in pool]
        children: list[int] = []
        taken = self._visited | exclude
        for _ in range(_BREED_TRIES * self.pop_size):
            if len(children) == self.pop_size:
                break
            a, b = self.rng.choice(len(pool), size=2, p=probs)
            point = int(self.rng.integers(len(self._sizes) + 1))
            child = genes[a][:point] + genes[b][point:]
            for k, size in enumerate(self._sizes):
                if size > 1 and self.rng.random() < self.mutation_prob:
                    child[k] = int(self.rng.integers(size))
            index = self.space.choices_to_index(child)
            if index in taken or not self.space.is_valid(index):
                continue
            taken.add(index)
            children.append(index)
        if len(children) < self.pop_size:
            children += self._random_indices(self.pop_size - len(children), exclude | set(children))
        self._generation = children
        return list(children)
