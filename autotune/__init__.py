"""The front door of tuning: tuners, ``tune()``, dispatch contexts and the CLI.

AutoTVM's API (``from autotune import autotvm``) sits beside ``tune()`` in
:mod:`autotune.autotvm`. The template API lives in :mod:`search_spaces` and is re-exported here
(``autotune.template``, ``autotune.get_config``, ``autotune.create_task``, ...).

Every name but ``AutotuneError`` and ``__version__`` is imported on first use (by
``__getattr__``): they pull in the compiler, numpy and the tuning log, and
``import autotune`` (which ``autotune --help`` and ``--version`` do) must stay fast.
"""

import importlib
import importlib.metadata

from autotune import tuner
from autotune.errors import AutotuneError

try:
    # The version is written once, as compiler.__version__; the installed distribution's
    # metadata is built from it and reads without importing the compiler (slow to import).
    __version__ = importlib.metadata.version("autotune-compiler")
except importlib.metadata.PackageNotFoundError:  # running from a source tree without installing
    from compiler import __version__

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
    "extract_tasks": "autotune.model",
    "build_model": "autotune.model",
    "tune_model": "autotune.model",
    "choose_algorithms": "autotune.algorithms",
    "AlgorithmChoices": "autotune.algorithms",
    "choose_thread_splits": "autotune.thread_splits",
    "ThreadSplits": "autotune.thread_splits",
    "measure_latency": "autotune.model",
    "measure_deployed": "autotune.model",
    "DeployedLatency": "autotune.model",
    "ModelTask": "autotune.model",
    "ModelTasks": "autotune.model",
    "ModelTuneResult": "autotune.model",
    "TuneResult": "autotune.tuning",
    "Trial": "autotune.tuning",
    **{name: "autotune.tuner" for name in ("Tuner", "get_tuner", "TUNERS")},
    **{path.rsplit(":", 1)[1]: "autotune.tuner" for path in tuner.TUNERS.values()},  # each tuner's class
}

__all__ = ["AutotuneError", "__version__", *_FROM_SEARCH_SPACES, *_OWN]


def __getattr__(name: str):
    if name == "autotvm":  # AutoTVM's API, a subpackage: ``from autotune import autotvm``
        return importlib.import_module("autotune.autotvm")
    if name in _OWN:
        value = getattr(importlib.import_module(_OWN[name]), name)
    elif name in _FROM_SEARCH_SPACES:
        value = getattr(importlib.import_module("search_spaces"), name)
    else:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM_SEARCH_SPACES) | set(_OWN) | {"autotvm"})
