"""Tasks under AutoTVM's names: ``autotvm.task.create``, ``autotvm.template``, ``get_config``
(and ``autotvm.task.space``: knobs and config spaces).

A task here is :class:`search_spaces.Task`: ``task.name``, ``task.args``,
``task.target``, ``task.config_space``, ``task.flop``, ``task.instantiate(config)``
and ``task.workload`` (``(name, *args)``) mean what they mean in AutoTVM.
"""

from __future__ import annotations

from collections.abc import Sequence

import search_spaces
from compiler.target import target_kinds
from search_spaces import (
    ApplyConfig,
    ConfigEntity,
    ConfigSpace,
    DispatchContext,
    FallbackContext,
    SearchSpaceError,
    Task,
    Template,
    create_task,
    get_config,
)

from . import dispatcher, space
from .dispatcher import ApplyHistoryBest, clear_fallback_cache

__all__ = ["dispatcher", "ApplyHistoryBest", "clear_fallback_cache",
           "create", "space", "Task", "template", "get_config", "ConfigSpace", "ConfigEntity",
           "DispatchContext", "ApplyConfig", "FallbackContext"]


def template(task_name: str, func=None):
    """AutoTVM's ``@autotvm.template("name")``: register ``func`` (or the decorated function)
    as template ``task_name`` for every target; returns the :class:`search_spaces.Template`.
    ``search_spaces.template`` does the same and can restrict a template to a target kind."""
    register = search_spaces.template(task_name)
    return register if func is None else register(func)


def create(task_name, args: Sequence, target=None, target_host=None) -> Task:
    """The task of template ``task_name`` (its name, or the template itself) on ``args`` for
    ``target``, as AutoTVM's ``autotvm.task.create``.

    ``target_host`` is accepted for AutoTVM's signature; it must be None or a target of this
    machine's CPU (``"llvm"``): host code is always compiled for it here.
    """
    if target_host is not None and not _runs_on_cpu(target_host):
        raise SearchSpaceError(f"autotvm.task.create: target_host {target_host!r} is not supported; "
                               "host code is compiled for this CPU ('llvm')")
    name = task_name.name if isinstance(task_name, Template) else task_name
    return create_task(name, args, target)


def _runs_on_cpu(target) -> bool:
    """Whether ``target`` (a Target or its string) is of a kind whose code runs on the CPU."""
    words = str(target).split()
    info = target_kinds().get(words[0]) if words else None
    return info is not None and info.device_type == "cpu"
