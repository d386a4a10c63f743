"""Applying a tuning log: the best measured config for each workload, at build time.

>>> with autotune.apply_history_best("tuning.db"):
...     s, args = search_spaces.matmul(1024, 1024, 1024, "float32", target="llvm")
...     f = compiler.build(s, args, target="llvm")
"""

from __future__ import annotations

import json
import logging
import math
import threading

import db
from search_spaces.dispatch import DispatchContext
from search_spaces.space import ConfigEntity

from .selection import rank_configs

__all__ = ["ApplyHistoryBest", "apply_history_best"]

logger = logging.getLogger(__name__)


class _Row:
    """A stand-in record holding just a config."""

    def __init__(self, config: dict):
        self.config = config


def _open(log) -> db.TuningLog:
    return log if isinstance(log, db.TuningLog) else db.open(log)


def _arg_distance(a, b) -> float | None:
    """How far apart two argument lists are (None when they cannot be compared)."""
    if len(a) != len(b):
        return None
    total = 0.0
    for x, y in zip(a, b):
        if isinstance(x, bool) or isinstance(y, bool) or not (
                isinstance(x, (int, float)) and isinstance(y, (int, float))):
            if x != y:
                return None
            continue
        if x == y:
            continue
        if x <= 0 or y <= 0:
            total += abs(x - y)
        else:
            total += abs(math.log(x / y))
    return total


class ApplyHistoryBest(DispatchContext):
    """A dispatch context that answers with the fastest valid config in a tuning log.

    A workload with no record of its own may borrow the best config of the nearest
    tuned workload of the same template on the same target (``transfer=True``), when
    that config is valid in its space; ``any_model=True`` also accepts records made
    on another CPU or GPU model of the same target kind. Records whose config is not
    valid for the task are reported in the log and skipped, never applied.
    """

    def __init__(self, log, transfer: bool = True, any_model: bool = False):
        super().__init__()
        self.log = _open(log)
        self.transfer = transfer
        self.any_model = any_model
        self._cache: dict[tuple[str, str], ConfigEntity | None] = {}
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def _query(self, target_key: str, task) -> ConfigEntity | None:
        key = (target_key, task.workload_key)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        cfg = self._lookup(task)
        with self._lock:
            self._cache[key] = cfg
        return cfg

    def _valid_config(self, task, record) -> ConfigEntity:
        cfg = task.config_space.from_json(record.config)
        if not task.config_space.is_valid(cfg.index):
            raise ValueError(f"config {record.config} breaks a constraint of {task.workload_name}")
        return cfg

    def _validator(self, task):
        def validate(record) -> bool:
            try:
                self._valid_config(task, record)
                return True
            except Exception as err:  # noqa: BLE001 - any invalid row is reported and skipped
                logger.warning("ignoring an invalid tuning record for %s: %s", task.workload_name, err)
                return False

        return validate

    def _lookup(self, task) -> ConfigEntity | None:
        # Every measurement of a config counts: the winner is the best confident median.
        records = self.log.records(task, errors=False)
        for entry in rank_configs((r.config, r.costs) for r in records):
            try:
                return self._valid_config(task, _Row(entry.config))
            except Exception as err:  # noqa: BLE001 - any invalid row is reported and skipped
                logger.warning("ignoring an invalid tuning record for %s: %s", task.workload_name, err)
        if self.any_model:
            best = self.log.best(task, k=1, validate=self._validator(task), any_model=True)
            if best:
                return self._valid_config(task, best[0])
        if self.transfer:
            return self._borrow(task)
        return None

    def _borrow(self, task) -> ConfigEntity | None:
        from compiler.target import Target

        target = Target(task.target)
        args = json.loads(json.dumps(list(task.args)))  # tuples as the log stores them: lists
        candidates = []
        for w in self.log.workloads():
            if w.template != task.name or w.key == task.workload_key:
                continue
            if w.target_kind != target.kind:
                continue
            if not self.any_model and w.target_model != target.model:
                continue
            d = _arg_distance(args, list(w.args))
            if d is not None:
                candidates.append((d, w.key, w))
        for _, _, w in sorted(candidates, key=lambda c: (c[0], c[1])):
            for record in self.log.best(w.key, k=5):
                try:
                    cfg = self._valid_config(task, record)
                except Exception:  # noqa: BLE001 - not valid here; try the next one
                    continue
                if task.workload_key not in self._said:
                    self._said.add(task.workload_key)
                    logger.warning("%s has no tuning record; borrowing the best config of %s%s",
                                   task.workload_name, w.template, tuple(w.args))
                return cfg
        return None


def apply_history_best(log, transfer: bool = True, any_model: bool = False) -> ApplyHistoryBest:
    """A context in which templates use the best config recorded in ``log``.

    ``log`` is a path (an SQLite file), an SQLAlchemy URL or an open
    :class:`db.TuningLog`. Nested contexts: the innermost that has an answer wins;
    a workload no context knows falls back to its default config with one warning.
    """
    return ApplyHistoryBest(log, transfer=transfer, any_model=any_model)
