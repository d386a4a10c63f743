"""Tuners: strategies that propose configs of a task's space to measure.

Every tuner is a :class:`Tuner` (``next_batch(n)``, ``update(inputs, results)``,
``has_next()``, ``load_history(pairs)``); :func:`get_tuner` makes one by name::

    tuner = get_tuner("xgb", task, seed=0)

A new tuner is one module with a :class:`Tuner` subclass and one line in
:data:`TUNERS`. Tuner modules are imported on first use (xgboost and optuna load
only when asked for).
"""

from __future__ import annotations

import importlib

from autotune.errors import AutotuneError
from autotune.tuner.tuner import Tuner, result_cost

__all__ = ["Tuner", "TUNERS", "get_tuner", "result_cost",
           "RandomTuner", "GridTuner", "GATuner", "XGBTuner", "OptunaTuner"]

# name -> "module:class"
TUNERS = {
    "random": "autotune.tuner.random_tuner:RandomTuner",
    "grid": "autotune.tuner.grid_tuner:GridTuner",
    "ga": "autotune.tuner.ga_tuner:GATuner",
    "xgb": "autotune.tuner.xgb_tuner:XGBTuner",
    "optuna": "autotune.tuner.optuna_tuner:OptunaTuner",
}
_CLASSES = {path.rsplit(":", 1)[1]: path for path in TUNERS.values()}


def _load(path: str) -> type:
    module, cls = path.split(":")
    return getattr(importlib.import_module(module), cls)


def get_tuner(tuner, task, seed: int | None = None, **options) -> Tuner:
    """A tuner for ``task``: ``tuner`` is a name in :data:`TUNERS`, a :class:`Tuner`
    subclass, or an instance (bound to ``task`` here if it was made without one).
    ``options`` go to the tuner's constructor (names and classes only)."""
    if isinstance(tuner, Tuner):
        if options:
            raise AutotuneError(f"get_tuner: options {sorted(options)} cannot be given with a tuner "
                                "instance; pass them to its constructor")
        return tuner.bind(task, seed)
    if isinstance(tuner, str):
        if tuner not in TUNERS:
            raise AutotuneError(f"unknown tuner {tuner!r}; choose one of {', '.join(TUNERS)} "
                                "or pass a Tuner instance")
        return _load(TUNERS[tuner])(task, seed=seed, **options)
    if isinstance(tuner, type) and issubclass(tuner, Tuner):
        return tuner(task, seed=seed, **options)
    raise AutotuneError(f"a tuner is a name ({', '.join(TUNERS)}), a Tuner subclass or instance; "
                        f"got {tuner!r}")


def __getattr__(name: str):
    if name in _CLASSES:
        cls = _load(_CLASSES[name])
        globals()[name] = cls
        return cls
    raise AttributeError(f"module 'autotune.tuner' has no attribute {name!r}")
