"""Applying a tuning log or a pin file: the best config for each workload, at build time.

>>> with autotune.apply_history_best("tuning.db"):          # or a pin file: "configs.json"
...     s, args = search_spaces.matmul(1024, 1024, 1024, "float32", target="llvm")
...     f = compiler.build(s, args, target="llvm")
"""

from __future__ import annotations

import json
import logging
import os
import threading

import db
from measure import code_version
from search_spaces import create_task
from search_spaces.dispatch import DispatchContext
from search_spaces.space import ConfigEntity

from . import selection
from .pin import read_pin
from .transfer import LogSource, Source, borrow

__all__ = ["ApplyHistoryBest", "apply_history_best", "PinSource"]

logger = logging.getLogger(__name__)


def _is_pin(log) -> bool:
    return isinstance(log, str | os.PathLike) and os.fspath(log).endswith(".json")


class PinSource(Source):
    """The entries of a pin file (:func:`autotune.pin.read_pin`) as a source of tuned
    configs: one config per workload, scored by its cost."""

    def __init__(self, entries: list[dict]):
        self._workloads = []
        self._configs = {}
        for e in entries:
            args = json.loads(json.dumps(list(e["args"])))
            kind = db.target_kind(e["target"])
            key = json.dumps([e["template"], args, kind, e.get("model", "")], sort_keys=True)
            self._workloads.append(db.Workload(key, e["template"], args, e["target"], e.get("model", "")))
            self._configs[key] = (dict(e["config"]), float(e.get("cost") or 0.0))

    def workloads(self) -> list[db.Workload]:
        return list(self._workloads)

    def ranked(self, workload, k):
        return [self._configs[workload.key]]

    def exact(self, target_key_: str, task) -> dict | None:
        """The knob values pinned for ``task`` on the target keyed ``"<kind>:<model>"``, or None."""
        args = json.loads(json.dumps(list(task.args)))
        for w in self._workloads:
            same_target = f"{w.target_kind}:{w.target_model}" == target_key_
            if w.template == task.name and w.args == args and same_target:
                return self._configs[w.key][0]
        return None


class ApplyHistoryBest(DispatchContext):
    """A dispatch context that answers with the best valid config of a tuning log or a pin file.

    The best config of a workload is the one :mod:`autotune.selection` ranks first (the
    best confident median over every measurement of a config): the config ``tune()``
    chose; a pin file (written by ``autotune pin``) names it directly. A workload with no
    config of its own borrows from its nearest neighbours (:mod:`autotune.transfer`):
    other shapes of the same template on the same target model (``transfer=True``), and
    with ``any_model=True`` also workloads tuned on another CPU or GPU model of the same
    target kind; the borrowed config is adapted to the workload's space, and says where it
    came from (:class:`autotune.transfer.BorrowedConfig`), in a warning unless ``announce`` is
    False (a model build names them all in one warning instead). Records whose config is not
    valid for the task are reported in the log and skipped, never applied. ``stale`` names the
    workloads whose config was chosen by a figure other code than today's measured
    (:func:`measure.code_version`: the compiler or a template changed since), each with that
    figure's code version; tuning again times them again (see :mod:`autotune.selection`).
    """

    def __init__(self, log, transfer: bool = True, any_model: bool = False, announce: bool = True):
        super().__init__()
        if _is_pin(log):
            self.log = None
            self.pin = PinSource(read_pin(log))
            self._source = self.pin
        else:
            self.log = log if isinstance(log, db.TuningLog) else db.open(log)
            self.pin = None
            self._source = LogSource(self.log)
        self.transfer = transfer
        self.any_model = any_model
        self.announce = announce
        self._cache: dict[tuple[str, str], ConfigEntity | None] = {}
        self._lock = threading.Lock()
        self.stale: dict[str, str] = {}

    def lookup(self, target, workload) -> ConfigEntity | None:
        """The config the log (or pin file) has for ``workload`` on ``target``, own or
        borrowed, or None. :meth:`query` asks the other contexts for the rest, down to the
        default config, as in AutoTVM.

        As in AutoTVM, ``workload`` is ``(template name, *args)``; a
        :class:`search_spaces.Task` is accepted too.
        """
        if isinstance(workload, tuple | list):
            if not workload or not isinstance(workload[0], str):
                raise ValueError(f"a workload is (template name, *args), got {workload!r}")
            workload = create_task(workload[0], list(workload[1:]), target)
        return super().lookup(target, workload)

    def _query(self, target_key_: str, task) -> ConfigEntity | None:
        key = (target_key_, task.workload_key)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        cfg = self._lookup(target_key_, task)
        with self._lock:
            self._cache[key] = cfg
        return cfg

    @staticmethod
    def _valid_config(task, config: dict) -> ConfigEntity:
        cfg = task.config_space.from_json(config)
        if not task.config_space.is_valid(cfg.index):
            raise ValueError(f"config {config} breaks a constraint of {task.workload_name}")
        return cfg

    def _own(self, target_key_: str, task) -> ConfigEntity | None:
        """The workload's own best valid config, if the log or pin holds one."""
        if self.pin is not None:
            knobs = self.pin.exact(target_key_, task)
            if knobs is None:
                return None
            try:
                return self._valid_config(task, {"knobs": knobs})
            except Exception as err:  # noqa: BLE001 - any failure means the pinned config does not fit
                logger.warning("ignoring the pinned config of %s: %s (%s)", task.workload_name, knobs, err)
                return None
        found = selection.best(self.log, task, validate=lambda config: self._valid_config(task, config))
        if not found:
            return None
        if found[0].code_version != code_version():
            self.stale[task.workload_name] = found[0].code_version
            logger.info("the config of %s was chosen by a figure that other code than today's measured "
                        "(code version %r, today %s): tuning it again times it again", task.workload_name,
                        found[0].code_version, code_version())
        return self._valid_config(task, found[0].config)

    def _lookup(self, target_key_: str, task) -> ConfigEntity | None:
        own = self._own(target_key_, task)
        if own is not None or not (self.transfer or self.any_model):
            return own
        return borrow(self._source, task, other_shapes=self.transfer, other_models=self.any_model,
                      level=logging.WARNING if self.announce else logging.INFO)


def apply_history_best(log, transfer: bool = True, any_model: bool = False) -> ApplyHistoryBest:
    """A context in which templates use the best config recorded in ``log``.

    ``log`` is a path (an SQLite file), an SQLAlchemy URL, an open :class:`db.TuningLog`,
    or the path of a pin file (``*.json``, written by ``autotune pin``). Nested contexts:
    the innermost that has an answer wins; a workload no context knows falls back to its
    default config with one warning. ``ctx.query(target, (template, *args))`` asks for a
    workload's config directly, as in AutoTVM (the default config when the log has none);
    ``ctx.lookup(...)`` answers None then.
    """
    return ApplyHistoryBest(log, transfer=transfer, any_model=any_model)

