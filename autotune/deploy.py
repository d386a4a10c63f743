"""The one-line way to deploy: a template, built with its best tuned config."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import compiler
from search_spaces import create_task
from search_spaces.dispatch import current_context

from .history import apply_history_best

__all__ = ["build"]


def build(name: str, args: Sequence, target="llvm", db=None, *, transfer: bool = True,
          any_model: bool = False, func_name: str | None = None):
    """Build template ``name`` on ``args`` for ``target`` with the best config in ``db``.

    ``db`` is a tuning log (path, URL or open log) or a pin file (``*.json``, written by
    ``autotune pin``). A workload it does not know borrows the config of its nearest tuned
    neighbour, adapted to its shape (``transfer``; :mod:`autotune.transfer`); without a
    log, or with nothing to borrow, the template's default config is used (with a warning).
    Returns the compiled :class:`compiler.runtime.Module`; call ``export_library()``
    on it to ship a shared object that needs neither the tuner nor the database.
    """
    task = create_task(name, list(args), target)
    ctx = apply_history_best(db, transfer=transfer, any_model=any_model) if db is not None \
        else contextlib.nullcontext()
    with ctx:
        config = current_context().query(task.target, task)
    schedule, tensors = task.instantiate(config)
    return compiler.build(schedule, tensors, target=task.target, name=func_name or name)
