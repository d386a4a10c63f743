"""Applying a tuning log: the best measured config for each workload, at build time.

>>> with autotune.apply_history_best("tuning.db"):
...     s, args = search_spaces.matmul(1024, 1024, 1024, "float32", target="llvm")
...     f = compiler.build(s, args, target="llvm")
"""

from __future__ import annotations

import logging
import threading

import db
from search_spaces.dispatch import DispatchContext
from search_spaces.space import ConfigEntity

from . import selection

__all__ = ["ApplyHistoryBest", "apply_history_best"]

logger = logging.getLogger(__name__)


def _open(log) -> db.TuningLog:
    return log if isinstance(log, db.TuningLog) else db.open(log)


class ApplyHistoryBest(DispatchContext):
    """A dispatch context that answers with the best valid config in a tuning log.

    The best config of a workload is the one :mod:`autotune.selection` ranks first (the
    best confident median over every measurement of a config): the config ``tune()``
    chose. A workload with no record of its own borrows the best config of its nearest
    neighbour (:func:`selection.borrow`): another shape of the same template on the same
    target model (``transfer=True``), and with ``any_model=True`` also a workload tuned on
    another CPU or GPU model of the same target kind; the config must be valid in its
    space. Records whose config is not valid for the task are reported in the log and
    skipped, never applied.
    """

    def __init__(self, log, transfer: bool = True, any_model: bool = False):
        super().__init__()
        self.log = _open(log)
        self.transfer = transfer
        self.any_model = any_model
        self._cache: dict[tuple[str, str], ConfigEntity | None] = {}
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

    @staticmethod
    def _valid_config(task, config: dict) -> ConfigEntity:
        cfg = task.config_space.from_json(config)
        if not task.config_space.is_valid(cfg.index):
            raise ValueError(f"config {config} breaks a constraint of {task.workload_name}")
        return cfg

    def _lookup(self, task) -> ConfigEntity | None:
        def validate(config: dict) -> None:
            self._valid_config(task, config)

        found = selection.best(self.log, task, validate=validate)
        if found:
            return self._valid_config(task, found[0].config)
        if not (self.transfer or self.any_model):
            return None
        borrowed = selection.borrow(self.log, task, other_shapes=self.transfer, other_models=self.any_model,
                                    validate=validate)
        if borrowed is None:
            return None
        workload, entry = borrowed
        logger.warning("%s has no tuning record; borrowing the best config of %s on %s", task.workload_name,
                       selection.workload_label(workload.template, workload.args),
                       selection.target_label(workload.target, workload.target_model))
        return self._valid_config(task, entry.config)


def apply_history_best(log, transfer: bool = True, any_model: bool = False) -> ApplyHistoryBest:
    """A context in which templates use the best config recorded in ``log``.

    ``log`` is a path (an SQLite file), an SQLAlchemy URL or an open
    :class:`db.TuningLog`. Nested contexts: the innermost that has an answer wins;
    a workload no context knows falls back to its default config with one warning.
    """
    return ApplyHistoryBest(log, transfer=transfer, any_model=any_model)
