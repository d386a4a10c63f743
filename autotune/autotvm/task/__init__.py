"""Tasks under AutoTVM's names: ``autotvm.task.create``, ``autotvm.template``, ``get_config``
(and ``autotvm.task.space``: knobs and config spaces; ``autotvm.task.task``: tasks, templates,
``args_to_workload`` and ``compute_flop``).

A task here is :class:`search_spaces.Task`: ``task.name``, ``task.args``,
``task.target``, ``task.config_space``, ``task.flop``, ``task.instantiate(config)``
and ``task.workload`` (``(name, *args)``) mean what they mean in AutoTVM.
"""

from __future__ import annotations

from search_spaces import (
    ApplyConfig,
    ConfigEntity,
    ConfigSpace,
    DispatchContext,
    FallbackContext,
    Task,
    get_config,
)

from . import dispatcher, space, task
from .dispatcher import ApplyHistoryBest, clear_fallback_cache
from .task import FlopCalculationError, args_to_workload, compute_flop, create, template

__all__ = ["create", "space", "Task", "template", "get_config", "ConfigSpace", "ConfigEntity",
           "DispatchContext", "ApplyConfig", "FallbackContext", "task", "args_to_workload", "compute_flop",
           "FlopCalculationError", "dispatcher", "ApplyHistoryBest", "clear_fallback_cache"]
