"""Dispatch contexts: which config a template uses when it is called (AutoTVM's semantics).

Calling a template (``search_spaces.matmul(..., target="llvm")``) asks the current
dispatch context, :attr:`DispatchContext.current`, for a config for its task. Contexts
nest (``with ctx:``): each remembers the context that was current when it was entered
(``ctx._old_ctx``), and a query it cannot answer goes on to that one. At the bottom the
global :class:`FallbackContext` answers with the space's default config, warning once
per workload that it is untuned (unless ``GLOBAL_SCOPE.silent``).

To write a new source of configs (``autotune.apply_history_best`` reads the tuning
log), subclass :class:`DispatchContext` and override :meth:`DispatchContext._query`
(given the target's key and the :class:`~search_spaces.Task`), or, as in AutoTVM,
:meth:`DispatchContext._query_inside` (given the :class:`~compiler.target.Target` and the
workload ``(template name, *args)``).
"""

from __future__ import annotations

import logging
import threading

from compiler.target import Target
from search_spaces.errors import SearchSpaceError
from search_spaces.space import ConfigEntity, FallbackConfigEntity
from search_spaces.task import Task, create_task, target_key, workload_key

# target_key is defined with the tasks (their workload keys use it) and offered here too.
__all__ = ["DispatchContext", "FallbackContext", "ApplyConfig", "current_context", "clear_fallback_cache",
           "GLOBAL_SCOPE", "GlobalScope", "target_key"]

logger = logging.getLogger(__name__)

_local = threading.local()


class GlobalScope:
    """Switches that apply to every dispatch (AutoTVM's ``autotvm.env.GLOBAL_SCOPE``):
    ``silent``: the fallback context warns of no untuned workload."""

    def __init__(self):
        self.silent = False


GLOBAL_SCOPE = GlobalScope()


class _WithCurrent(type):
    """Gives the class AutoTVM's ``DispatchContext.current``: the innermost context of this thread."""

    @property
    def current(cls) -> DispatchContext:
        return _stack()[-1]


class DispatchContext(metaclass=_WithCurrent):
    """A source of configs for tasks; use as ``with ctx: ...``.

    :meth:`query` returns a config for a task on a target, asking the enclosing
    contexts (``_old_ctx``, the context current when this one was entered, or made) what this
    one cannot answer; :meth:`lookup` asks this one alone. Subclasses implement :meth:`_query` (or AutoTVM's
    :meth:`_query_inside`); they should return configs valid in ``task.config_space``
    (read stored JSON back with ``task.config_space.from_json(data)``).
    """

    def __init__(self):
        # As in AutoTVM, a context answers what it cannot from the context current when it was
        # made (entering it makes that the one current then); :meth:`lookup` asks it alone.
        self._old_ctx: DispatchContext | None = None if self._answers_all else current_context()

    _answers_all = False  # the fallback context: the bottom of every chain

    def query(self, target, workload) -> ConfigEntity | None:
        """The config for ``workload`` on ``target`` (a Target or its string).

        ``workload`` is a :class:`search_spaces.Task`, or a workload as AutoTVM writes it:
        ``(template name, *args)`` (``task.workload``). What this context has no config for,
        the context it was entered in answers (for a context never entered, the one current
        when it was made), down to the fallback context's default config, as in AutoTVM.
        :meth:`lookup` tells whether this context itself has a config.
        """
        cfg = self.lookup(target, workload)
        if cfg is None and self._old_ctx is not None:
            return self._old_ctx.query(target, workload)
        return cfg

    def lookup(self, target, workload) -> ConfigEntity | None:
        """The config this context alone has for ``workload`` on ``target``, or None (no other
        context is asked): whether a tuning log holds a config for a workload, say."""
        if _overrides(self, "_query_inside"):  # written as in AutoTVM: a Target and a workload tuple
            return self._query_inside(Target.from_any(target),
                                      workload.workload if isinstance(workload, Task) else workload)
        return self._query_inside(target, workload)

    def _query_inside(self, target, workload) -> ConfigEntity | None:
        """The config this context alone has for ``workload`` on ``target``, or None (AutoTVM's
        hook). Overridden, it is given the Target and the workload ``(template name, *args)``;
        by default it asks :meth:`_query` with the task."""
        task = workload if isinstance(workload, Task) else _workload_task(workload, target)
        return self._query(target_key(target), task)

    def _query(self, target_key: str, task) -> ConfigEntity | None:
        """Override: the config for ``task`` on a target keyed ``"<kind>:<model>"``, or None.

        ``task`` is a :class:`search_spaces.Task`: ``task.workload_key`` identifies the
        workload, ``task.config_space`` rebuilds and validates configs.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither _query nor _query_inside")

    def update(self, target, workload, cfg) -> None:
        """Make this context answer ``cfg`` for ``workload`` on ``target`` (AutoTVM's
        ``DispatchContext.update``), where the context supports it."""
        raise NotImplementedError(f"{type(self).__name__} cannot be updated with a config")

    def __enter__(self) -> DispatchContext:
        stack = _stack()
        self._old_ctx = stack[-1]
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _stack()
        if stack[-1] is not self:
            raise RuntimeError("dispatch contexts were exited out of order")
        stack.pop()


def _overrides(ctx: DispatchContext, name: str) -> bool:
    return getattr(type(ctx), name) is not getattr(DispatchContext, name)


def _workload_task(workload: tuple, target):
    """The task of an AutoTVM workload ``(template name, *args)`` on ``target``."""
    if not isinstance(workload, tuple | list) or not workload or not isinstance(workload[0], str):
        raise SearchSpaceError(f"a workload is (template name, *args), got {workload!r}")
    return create_task(workload[0], workload[1:], target)


def _workload_key(target, workload) -> tuple[str, str]:
    """``(target key, workload key)`` of a task or a workload tuple, without making the task."""
    if isinstance(workload, Task):
        return target_key(target), workload.workload_key
    if not isinstance(workload, tuple | list) or not workload or not isinstance(workload[0], str):
        raise SearchSpaceError(f"a workload is (template name, *args), got {workload!r}")
    return target_key(target), workload_key(workload[0], workload[1:], target)


class FallbackContext(DispatchContext):
    """The bottom context: each task's default config, as a
    :class:`~search_spaces.space.FallbackConfigEntity` (``is_fallback`` True; a template may set
    its knobs), with one warning per workload unless ``GLOBAL_SCOPE.silent``.

    As AutoTVM's, it remembers the config it gave each workload (``memory``):
    :meth:`update` sets it, :meth:`clear_cache` forgets it.
    """

    _answers_all = True

    def __init__(self):
        super().__init__()
        self.memory: dict[tuple[str, str], ConfigEntity] = {}
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _query(self, target_key: str, task) -> ConfigEntity:
        key = (target_key, task.workload_key)
        with self._lock:
            known = self.memory.get(key)
        if known is not None and _fits(task, known):
            return known
        with self._lock:
            first = key not in self._warned
            self._warned.add(key)
        if first and not GLOBAL_SCOPE.silent:
            logger.warning("no tuned config for %s; using the untuned default config "
                           "(tune it, then apply the tuning log with autotune.apply_history_best)",
                           task.workload_name)
        # A config the template may set knobs of (``cfg["tile"] = SplitEntity(...)``), kept for
        # the workload as AutoTVM keeps it.
        cfg = FallbackConfigEntity(task.config_space, dict(task.config_space.default_config.items()))
        with self._lock:
            self.memory[key] = cfg
        return cfg

    def update(self, target, workload, cfg: ConfigEntity) -> None:
        """Answer ``cfg`` for ``workload`` (a task or ``(template name, *args)``) on ``target``."""
        with self._lock:
            self.memory[_workload_key(target, workload)] = cfg

    def clear_cache(self, target, workload) -> None:
        """Forget the config given for ``workload`` on ``target`` (the next query warns again)."""
        key = _workload_key(target, workload)
        with self._lock:
            self.memory.pop(key, None)
            self._warned.discard(key)

    def clear_warnings(self) -> None:
        """Forget every config given and which workloads were warned about (tests use this)."""
        with self._lock:
            self.memory.clear()
            self._warned.clear()


def _fits(task, cfg: ConfigEntity) -> bool:
    """Whether ``cfg`` is a config of ``task``'s space (a template registered again under the
    same name may have another space); a fallback config may hold values outside the space."""
    if isinstance(cfg, FallbackConfigEntity):
        return cfg.knob_kinds_match(task.config_space)
    try:
        task.config_space.from_json(cfg.to_json())
    except SearchSpaceError:
        return False
    return True


class ApplyConfig(DispatchContext):
    """Use one fixed config for every template called inside the block; ``workload`` is the
    workload last asked for."""

    def __init__(self, config: ConfigEntity):
        super().__init__()
        self.config = _checked_config(config)
        self.workload = None

    def _query(self, target_key: str, task) -> ConfigEntity:
        self.workload = task.workload
        return self.config

    def update(self, target, workload, cfg: ConfigEntity) -> None:
        """Use ``cfg`` from now on (AutoTVM's ``ApplyConfig.update``)."""
        self.workload = workload.workload if isinstance(workload, Task) else workload
        self.config = _checked_config(cfg)


def _checked_config(config) -> ConfigEntity:
    if not isinstance(config, ConfigEntity):
        raise TypeError(f"ApplyConfig needs a ConfigEntity, got {type(config).__name__}")
    return config


_FALLBACK = FallbackContext()


def _stack() -> list[DispatchContext]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = [_FALLBACK]
    return stack


def current_context() -> DispatchContext:
    """The innermost dispatch context of this thread (the fallback when none was entered);
    ``DispatchContext.current`` is the same."""
    return _stack()[-1]


def clear_fallback_cache(target, workload) -> None:
    """Forget the fallback config given for ``workload`` on ``target`` in the fallback context
    under the current one (AutoTVM's ``clear_fallback_cache``)."""
    ctx = current_context()
    while not isinstance(ctx, FallbackContext):
        ctx = ctx._old_ctx
    ctx.clear_cache(target, workload)
