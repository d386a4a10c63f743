"""A feature worker: ``python -m autotune.tuner.feature_worker [name]``.

Started by :class:`~autotune.tuner.features.FeatureCache` through a
:class:`measure.pool.WorkerPool` (a fresh interpreter that never imports the tuner's
``__main__``), it answers one call, ``"features"``: the features of some configs of a
task, computed exactly as :func:`~autotune.tuner.features.config_features` computes them
in the tuner (lowering each config is what takes the time: 10-100 ms a config).
"""

from __future__ import annotations

import json
import sys

from measure.worker_main import serve

_tasks: dict[str, object] = {}  # the tasks this worker has seen, by their JSON


def features(request: dict, phase=None) -> dict:
    """``{"task": Task.to_json(by_value=True), "feature_type", "indices"}`` -> ``{"rows"}``:
    one list of floats per index, or None where the config has no features."""
    from autotune.tuner.features import config_features
    from search_spaces.task import Task

    key = json.dumps(request["task"], sort_keys=True)
    task = _tasks.get(key)
    if task is None:
        task = _tasks[key] = Task.from_json(request["task"], allow_code=True)
    space, kind = task.config_space, request["feature_type"]
    rows = []
    for index in request["indices"]:
        row = config_features(task, space.from_index(int(index), check=False), kind)
        rows.append(None if row is None else row.tolist())
    return {"rows": rows}


CALLS = {"features": features}

if __name__ == "__main__":
    sys.exit(serve(CALLS, "autotune.tuner.features"))
