"""Dispatch contexts: which config a template uses when it is called.

Calling a template (``search_spaces.matmul(..., target="llvm")``) asks the current
dispatch context for a config for its task. Contexts nest (``with ctx:``); a context
that has no answer defers to the one it was entered inside, and at the bottom a
:class:`FallbackContext` answers with the space's default config, warning once per
workload that it is untuned.

To write a new source of configs (``autotune.apply_history_best`` reads the tuning
log), subclass :class:`DispatchContext` and override :meth:`DispatchContext._query`.
"""

from __future__ import annotations

import logging
import threading

from search_spaces.errors import SearchSpaceError
from search_spaces.space import ConfigEntity
from search_spaces.task import create_task, target_key

# target_key is defined with the tasks (their workload keys use it) and offered here too.
__all__ = ["DispatchContext", "FallbackContext", "ApplyConfig", "current_context", "target_key"]

logger = logging.getLogger(__name__)

_local = threading.local()


class DispatchContext:
    """A source of configs for tasks; use as ``with ctx: ...``.

    :meth:`query` returns a config for ``task`` on ``target``, or None when neither
    this context nor any context it was entered inside has one. Subclasses implement
    :meth:`_query`; they should return configs valid in ``task.config_space`` (read
    stored JSON back with ``task.config_space.from_json(data)``).
    """

    def __init__(self):
        self._parent: DispatchContext | None = None

    def query(self, target, task) -> ConfigEntity | None:
        """The config for ``task`` on ``target`` (a Target or its string), or None.

        ``task`` is a :class:`search_spaces.Task`, or a workload as AutoTVM writes it:
        ``(template name, *args)`` (``task.workload``), made into the task for ``target``.
        """
        if isinstance(task, tuple):
            task = _workload_task(task, target)
        cfg = self._query(target_key(target), task)
        if cfg is None and self._parent is not None:
            return self._parent.query(target, task)
        return cfg

    def _query(self, target_key: str, task) -> ConfigEntity | None:
        """Override: the config for ``task`` on a target keyed ``"<kind>:<model>"``, or None.

        ``task`` is a :class:`search_spaces.Task`: ``task.workload_key`` identifies the
        workload, ``task.config_space`` rebuilds and validates configs.
        """
        raise NotImplementedError

    def __enter__(self) -> DispatchContext:
        stack = _stack()
        self._parent = stack[-1]
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _stack()
        if stack[-1] is not self:
            raise RuntimeError("dispatch contexts were exited out of order")
        stack.pop()
        self._parent = None


def _workload_task(workload: tuple, target):
    """The task of an AutoTVM workload ``(template name, *args)`` on ``target``."""
    if not workload or not isinstance(workload[0], str):
        raise SearchSpaceError(f"a workload is (template name, *args), got {workload!r}")
    return create_task(workload[0], workload[1:], target)


class FallbackContext(DispatchContext):
    """The bottom context: each task's default config, with one warning per workload."""

    def __init__(self):
        super().__init__()
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _query(self, target_key: str, task) -> ConfigEntity:
        key = (target_key, task.workload_key)
        with self._lock:
            first = key not in self._warned
            self._warned.add(key)
        if first:
            logger.warning("no tuned config for %s; using the untuned default config "
                           "(tune it, then apply the tuning log with autotune.apply_history_best)",
                           task.workload_name)
        cfg = task.config_space.default_config
        return ConfigEntity(cfg.index, dict(cfg.items()), is_fallback=True)

    def clear_warnings(self) -> None:
        """Forget which workloads were warned about (tests use this)."""
        with self._lock:
            self._warned.clear()


class ApplyConfig(DispatchContext):
    """Use one fixed config for every template called inside the block."""

    def __init__(self, config: ConfigEntity):
        super().__init__()
        if not isinstance(config, ConfigEntity):
            raise TypeError(f"ApplyConfig needs a ConfigEntity, got {type(config).__name__}")
        self.config = config

    def _query(self, target_key: str, task) -> ConfigEntity:
        return self.config


_FALLBACK = FallbackContext()


def _stack() -> list[DispatchContext]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = [_FALLBACK]
    return stack


def current_context() -> DispatchContext:
    """The innermost dispatch context of this thread (the fallback when none was entered)."""
    return _stack()[-1]
