"""The one interface every tuner shares.

A tuning loop asks a tuner for a batch of configs, measures them and tells it the
results::

    tuner = get_tuner("xgb", task, seed=0)
    while budget and tuner.has_next():
        configs = tuner.next_batch(min(batch_size, budget))
        results = measure(configs)                   # MeasureInput / MeasureResult
        tuner.update(inputs, results)

The base class keeps the books that make that contract hold for every strategy:
which configs were proposed and measured, the best so far, and the checks that a
batch holds only valid configs that were never proposed nor measured before. A
strategy implements :meth:`Tuner._propose` (and, if it learns, :meth:`Tuner._observe`).

Inputs need only ``.config`` (a ConfigEntity or its JSON dict); results need only
``.costs`` (seconds, empty on error) and ``.error_kind`` (None on success). A failed
candidate counts as infinitely slow.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence

import numpy as np

from autotune.errors import AutotuneError
from autotune.tuner import TUNERS, tuner_class
from search_spaces import ConfigEntity, SearchSpaceError

__all__ = ["Tuner", "get_tuner", "result_cost"]

logger = logging.getLogger(__name__)


def result_cost(result) -> float | None:
    """Mean seconds of a measure result, or None for a failure.

    ``result`` is an object with ``.costs`` and ``.error_kind``, or a plain number of
    seconds (None, NaN or inf for a failure).
    """
    if result is None or isinstance(result, (int, float)):
        return float(result) if result is not None and math.isfinite(result) and result > 0 else None
    costs = list(getattr(result, "costs", None) or [])
    if getattr(result, "error_kind", None) is not None or not costs:
        return None
    cost = float(np.mean(costs))
    return cost if math.isfinite(cost) and cost > 0 else None


class Tuner:
    """Proposes configs of ``task``'s space in batches and learns from their costs.

    ``Tuner(task, seed=None, **options)``. A tuner may also be made without a task
    (``OptunaTuner(sampler=...)``) and bound later with :meth:`bind`, as ``tune()``
    does. ``seed`` makes the sequence of batches reproducible (given the same results).

    Attributes: ``task``, ``space``, ``seed``, ``measured`` (indices of configs with a
    result), ``proposed`` (indices handed out by :meth:`next_batch`), ``best_config``
    and ``best_cost`` (seconds; inf until a success).
    """

    name = "tuner"
    default_batch_size = 8  # candidates per round of tune() when its caller gives no batch_size
    # Whether tune() measures the space's default config in its first batch (the baseline a
    # user would otherwise get); AutoTVM's tuners measure their own picks only.
    lead_with_default = True

    def __init__(self, task=None, seed: int | None = None, **options):
        if options:
            raise TypeError(f"{type(self).__name__} got unknown options: {', '.join(sorted(options))}")
        self.task = None
        self.seed = seed
        if task is not None:
            self.bind(task, seed)

    # ------------------------------------------------------------------ binding

    def bind(self, task, seed: int | None = None) -> Tuner:
        """Attach the tuner to ``task`` (once); ``seed`` is used when none was given."""
        if self.task is not None:
            if task != self.task:
                raise AutotuneError(f"{type(self).__name__} is bound to {self.task!r}, not {task!r}; "
                                    "make one tuner per task")
            return self
        if self.seed is None:
            self.seed = seed
        self.task = task
        self.space = task.config_space
        self.rng = np.random.default_rng(self.seed)
        self.measured: set[int] = set()
        self.proposed: set[int] = set()
        self.costs: dict[int, float | None] = {}
        self.best_config = None
        self.best_cost = math.inf
        self._visited: set[int] = set()  # proposed | measured
        self._exhausted = False
        self._setup()
        return self

    def _bound(self) -> None:
        if self.task is None:
            raise AutotuneError(f"{type(self).__name__} is not bound to a task; pass the task to its "
                                "constructor, to get_tuner(), or call bind(task)")

    # ------------------------------------------------------------------ the interface

    def next_batch(self, n: int) -> list:
        """Up to ``n`` valid configs never proposed nor measured before (fewer only when
        the space is running out)."""
        self._bound()
        if n <= 0 or not self.has_next():
            return []
        batch = []
        for index in self._propose(n):
            index = int(index)
            if index in self._visited or not self.space.is_valid(index):
                logger.debug("%s proposed index %d twice or invalid; skipped", self.name, index)
                continue
            self._visited.add(index)
            self.proposed.add(index)
            batch.append(self.space.from_index(index, check=False))
            if len(batch) == n:
                break
        if len(batch) < n:  # the strategy ran dry: fill with random unvisited configs
            batch += self._random_fill(n - len(batch))
        return batch

    def update(self, inputs: Sequence, results: Sequence) -> None:
        """Learn from measured ``inputs`` (with ``.config``) and their ``results``."""
        self._bound()
        if len(inputs) != len(results):
            raise AutotuneError(f"update: {len(inputs)} inputs but {len(results)} results")
        self._record([(inp.config, res) for inp, res in zip(inputs, results)])

    def has_next(self) -> bool:
        """False once every valid config has been proposed or measured."""
        self._bound()
        if self._exhausted:
            return False
        return not (self.space.size_is_exact and len(self._visited) >= self.space.size)

    def close(self) -> None:
        """Stop any worker processes the tuner started (a tuner may be used again after)."""

    def use_log(self, log) -> None:
        """Called by ``tune()`` with the run's tuning log (a :class:`db.TuningLog`), before it
        gives the tuner the log's history: a tuner that keeps state of its own beside the log
        (the Optuna tuner's study) opens it here. The default does nothing."""

    def load_history(self, pairs: Iterable) -> None:
        """Seed the tuner with earlier ``(config, result)`` pairs (resuming a run).

        A config is a ConfigEntity or its JSON dict; a result an object with ``.costs``
        and ``.error_kind`` or plain seconds (None for a failure). The configs count as
        measured and are never proposed. Configs that are not in the space (a log of
        an older template) are skipped with a warning.
        """
        self._bound()
        self._record(list(pairs), strict=False)

    # ------------------------------------------------------------------ strategy hooks

    def _setup(self) -> None:
        """Called once the tuner knows its task (``self.space``, ``self.rng`` are set)."""

    def _propose(self, n: int) -> list[int]:
        """Up to ``n`` candidate indices; the base class drops visited or invalid ones."""
        raise NotImplementedError

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        """New results (cost None for a failure), in measurement order."""

    # ------------------------------------------------------------------ helpers

    def _record(self, pairs: list, strict: bool = True) -> None:
        indices, costs = [], []
        for config, result in pairs:
            config = self._as_config(config, strict)
            if config is None:
                continue
            cost = result_cost(result)
            self.measured.add(config.index)
            self._visited.add(config.index)
            self.costs[config.index] = cost
            if cost is not None and cost < self.best_cost:
                self.best_cost, self.best_config = cost, config
            indices.append(config.index)
            costs.append(cost)
        if indices:
            self._observe(indices, costs)

    def _as_config(self, config, strict: bool):
        try:
            if isinstance(config, ConfigEntity):
                return self.space.from_json(config.to_json())
            return self.space.from_json(config)
        except SearchSpaceError as exc:
            if strict:
                raise AutotuneError(f"{type(self).__name__}: a measured config is not in the space of "
                                    f"{self.task!r}: {exc}") from exc
            logger.warning("skipping a config that is not in the space of %r: %s", self.task, exc)
            return None

    def _random_fill(self, n: int) -> list:
        """Up to ``n`` random unvisited configs, marked proposed."""
        try:
            picks = self.space.sample_indices(n, self.rng, exclude=self._visited)
        except SearchSpaceError:
            picks = []
        if len(picks) < n:
            self._exhausted = True
        self._visited.update(picks)
        self.proposed.update(picks)
        return [self.space.from_index(i, check=False) for i in picks]

    def _random_indices(self, n: int, exclude: set[int] | None = None) -> list[int]:
        """Up to ``n`` random valid indices outside ``self._visited`` and ``exclude``."""
        skip = self._visited if not exclude else self._visited | exclude
        try:
            return self.space.sample_indices(n, self.rng, exclude=skip)
        except SearchSpaceError:
            return []

    def __repr__(self) -> str:
        where = "unbound" if self.task is None else f"{self.task!r}, {len(self.measured)} measured"
        return f"{type(self).__name__}({where}, seed={self.seed!r})"


def get_tuner(tuner, task, seed: int | None = None, **options) -> Tuner:
    """A tuner for ``task``: ``tuner`` is a name in :data:`~autotune.tuner.TUNERS`, a
    :class:`Tuner` subclass, or an instance (bound to ``task`` here if it was made without
    one). ``options`` go to the tuner's constructor (names and classes only)."""
    if isinstance(tuner, Tuner):
        if options:
            raise AutotuneError(f"get_tuner: options {sorted(options)} cannot be given with a tuner "
                                "instance; pass them to its constructor")
        return tuner.bind(task, seed)
    if isinstance(tuner, str):
        if tuner not in TUNERS:
            raise AutotuneError(f"unknown tuner {tuner!r}; choose one of {', '.join(TUNERS)} "
                                "or pass a Tuner instance")
        return tuner_class(tuner)(task, seed=seed, **options)
    if isinstance(tuner, type) and issubclass(tuner, Tuner):
        return tuner(task, seed=seed, **options)
    raise AutotuneError(f"a tuner is a name ({', '.join(TUNERS)}), a Tuner subclass or instance; "
                        f"got {tuner!r}")
