"""A feature worker: ``python -m autotune.tuner.feature_worker [name]``.

Started by :class:`~autotune.tuner.features.FeatureCache` through a
:class:`measure.pool.WorkerPool` (a fresh interpreter that never imports the tuner's
``__main__``), it answers :data:`autotune.tuner.features.CALLS`: ``"features"``, the
features of some configs of a task, computed exactly as
:func:`~autotune.tuner.features.config_features` computes them in the tuner (lowering each
config is what takes the time: 10-100 ms a config). :func:`measure.worker_main.serve`
imports :mod:`autotune.tuner.features` once the worker is set up.
"""

from __future__ import annotations

import sys

from measure.worker_main import serve

if __name__ == "__main__":
    sys.exit(serve("autotune.tuner.features"))
