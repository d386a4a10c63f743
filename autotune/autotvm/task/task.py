"""AutoTVM's ``autotvm.task.task``: tasks, templates, workloads and FLOP counting.

A task here is :class:`search_spaces.Task`: ``task.name``, ``task.args``,
``task.target``, ``task.config_space``, ``task.flop``, ``task.instantiate(config)``
and ``task.workload`` (``(name, *args)``) mean what they mean in AutoTVM.
"""

from __future__ import annotations

from collections.abc import Sequence

import search_spaces
from compiler import te
from compiler.target import target_kinds
from compiler.te.tensor import Tensor
from compiler.tir import expr as E
from search_spaces import SearchSpaceError, Task, Template, create_task
from search_spaces.flops import FlopCalculationError, autotvm_flops

__all__ = ["Task", "create", "template", "args_to_workload", "serialize_args", "deserialize_args",
           "compute_flop", "FlopCalculationError"]


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


def args_to_workload(args, task_name: str | None = None) -> tuple:
    """AutoTVM's ``args_to_workload``: ``args`` as hashable plain data
    (:func:`serialize_args`), preceded by ``task_name`` when given."""
    workload = serialize_args(args)
    return workload if task_name is None else (task_name, *workload)


def serialize_args(args) -> tuple:
    """AutoTVM's ``serialize_args``: each argument as hashable plain data. A tensor becomes
    ``("TENSOR", shape, dtype)``, a list a tuple, a constant its value and a variable its
    name; other expressions raise TypeError."""
    workload = _serialize(args)
    return workload if isinstance(workload, tuple) else (workload,)


def deserialize_args(args) -> list:
    """AutoTVM's ``deserialize_args``: the arguments of :func:`serialize_args`'s tuple, each
    ``("TENSOR", shape, dtype)`` a new placeholder of that shape and dtype."""
    return [_deserialize(a) for a in args]


def _deserialize(arg):
    if isinstance(arg, tuple | list) and len(arg) == 3 and arg[0] == "TENSOR":
        return te.placeholder(tuple(arg[1]), dtype=arg[2])
    return arg


def _serialize(x):
    if isinstance(x, Tensor):
        return ("TENSOR", tuple(_serialize(d) for d in x.shape), x.dtype)
    if isinstance(x, list | tuple):
        return tuple(_serialize(a) for a in x)
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, E.IntImm | E.FloatImm):
        return x.value
    if isinstance(x, E.Var):
        return x.name
    raise TypeError(f"args_to_workload: cannot serialize {type(x).__name__} {x!r} into a workload")


def compute_flop(sch) -> int:
    """AutoTVM's ``compute_flop``: the FLOPs of the compute that schedule ``sch`` produces,
    counted by AutoTVM's rules (:func:`search_spaces.flops.autotvm_flops`; the tuner's own
    ``task.flop`` counts only arithmetic on tensor data, :func:`search_spaces.count_flops`).

    Raises :class:`FlopCalculationError` (a RuntimeError, as AutoTVM raises) naming what
    cannot be counted, or when the compute has no operation to count; set the FLOPs with
    ``cfg.add_flop`` then."""
    try:
        flop = autotvm_flops(list(sch.outputs))
    except FlopCalculationError as exc:
        raise FlopCalculationError(f"FLOP estimator fails for this operator. Error msg: {exc}. Please use "
                                   "`cfg.add_flop` to manually set FLOP for this operator") from None
    if flop == 0:
        raise FlopCalculationError("Cannot find float number operation in this operator. Please use "
                                   "`cfg.add_flop` to manually set FLOP for this operator")
    return flop
