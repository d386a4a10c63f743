"""The front door of tuning: tuners, ``tune()``, dispatch contexts and the CLI.

AutoTVM's API (``from autotune import autotvm``) sits beside ``tune()`` in
:mod:`autotune.autotvm`. The template API lives in :mod:`search_spaces` and is re-exported here
(``autotune.template``, ``autotune.get_config``, ``autotune.create_task``, ...). It is
imported on first use, so that ``import autotune`` (and ``autotune --version``) stays
fast.
"""

from importlib import metadata as _metadata

from autotune.errors import AutotuneError

try:
    __version__ = _metadata.version("autotune-compiler")
except _metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0"

# Names re-exported from search_spaces, resolved lazily by __getattr__ below.
_FROM_SEARCH_SPACES = (
    "template", "get_config", "create_task", "Task", "ConfigSpace", "ConfigEntity",
    "DispatchContext", "ApplyConfig", "FallbackContext", "InstantiationError", "SearchSpaceError",
)

# Names of this package, also imported on first use (they pull in the compiler and the log).
_OWN = {
    "apply_history_best": "autotune.history",
    "ApplyHistoryBest": "autotune.history",
    "build": "autotune.deploy",
    "tune": "autotune.tuning",
    "tune_tasks": "autotune.tuning",
    "TuneResult": "autotune.tuning",
    "Trial": "autotune.tuning",
    "Tuner": "autotune.tuner",
    "get_tuner": "autotune.tuner",
    "TUNERS": "autotune.tuner",
    "RandomTuner": "autotune.tuner",
    "GridTuner": "autotune.tuner",
    "GATuner": "autotune.tuner",
    "XGBTuner": "autotune.tuner",
    "OptunaTuner": "autotune.tuner",
}

__all__ = ["AutotuneError", "__version__", *_FROM_SEARCH_SPACES, *_OWN]


def __getattr__(name: str):
    if name == "autotvm":  # AutoTVM's API, a subpackage: ``from autotune import autotvm``
        import importlib

        return importlib.import_module("autotune.autotvm")
    if name in _OWN:
        import importlib

        value = getattr(importlib.import_module(_OWN[name]), name)
        globals()[name] = value
        return value
    if name in _FROM_SEARCH_SPACES:
        import search_spaces

        value = getattr(search_spaces, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM_SEARCH_SPACES) | set(_OWN) | {"autotvm"})
