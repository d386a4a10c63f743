"""Tuners: strategies that propose configs of a task's space to measure.

Every tuner is a :class:`Tuner` (``next_batch(n)``, ``update(inputs, results)``,
``has_next()``, ``load_history(pairs)``); :func:`get_tuner` makes one by name::

    tuner = get_tuner("xgb", task, seed=0)

:data:`TUNERS` is the registry: a tuner's name (what ``tune(tuner=...)`` and
``autotune tune --tuner`` take) and where its class is. A new tuner is one module with a
:class:`Tuner` subclass and one line in :data:`TUNERS`.

The registry is plain data, and this package's other names (:class:`Tuner`,
:func:`get_tuner`, the tuner classes) are imported on first use: the command line reads
the registry for its ``--tuner`` choices without loading numpy, and a tuner's module
(xgboost, optuna) loads only when that tuner is asked for.
"""

from __future__ import annotations

import importlib

# name -> "module:class"
TUNERS = {
    "random": "autotune.tuner.random_tuner:RandomTuner",
    "grid": "autotune.tuner.grid_tuner:GridTuner",
    "ga": "autotune.tuner.ga_tuner:GATuner",
    "xgb": "autotune.tuner.xgb_tuner:XGBTuner",
    "optuna": "autotune.tuner.optuna_tuner:OptunaTuner",
}

_CLASSES = {path.rsplit(":", 1)[1]: name for name, path in TUNERS.items()}  # class name -> tuner name
_INTERFACE = ("Tuner", "get_tuner", "result_cost")  # defined in autotune.tuner.tuner

__all__ = ["TUNERS", "tuner_class", *_INTERFACE, *_CLASSES]


def tuner_class(name: str) -> type:
    """The class of the tuner registered as ``name`` in :data:`TUNERS` (its module imported
    now); a KeyError for an unknown name."""
    module, cls = TUNERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def __getattr__(name: str):
    if name in _INTERFACE:
        value = getattr(importlib.import_module("autotune.tuner.tuner"), name)
    elif name in _CLASSES:
        value = tuner_class(_CLASSES[name])
    else:
        raise AttributeError(f"module 'autotune.tuner' has no attribute {name!r}")
    globals()[name] = value
    return value
