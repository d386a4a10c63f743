"""The plain data of measurement: inputs, artifacts and measure results.

Every record here is a dataclass that round-trips through JSON (``to_json`` /
``from_json``); an artifact's bytes travel base64-encoded. A failed candidate is a
:class:`MeasureResult` whose ``error_kind`` says what went wrong, never a lost trial.
The messages between processes are in :mod:`measure.protocol`.
"""

from __future__ import annotations

import enum
import functools
import json
import math
from dataclasses import dataclass

from compiler.backends import Artifact  # compiled code: its bytes and metadata (one class for both)
from search_spaces.task import Task

__all__ = ["ErrorKind", "MeasureInput", "Artifact", "MeasureResult"]


class ErrorKind(enum.Enum):
    """Why a candidate has no time (``MeasureResult.error_kind`` is None on success)."""

    INSTANTIATION_ERROR = "instantiation_error"  # the template failed with this config
    COMPILE_ERROR = "compile_error"              # lowering or code generation failed
    BUILD_TIMEOUT = "build_timeout"              # the build ran past the builder's timeout
    RUNTIME_ERROR = "runtime_error"              # the candidate raised or crashed its process
    RUN_TIMEOUT = "run_timeout"                  # the run ran past the runner's timeout
    WRONG_ANSWER = "wrong_answer"                # outputs differ from the reference
    WORKER_CRASH = "worker_crash"                # a worker died outside the candidate's code (twice)


@dataclass
class MeasureInput:
    """One candidate: a task and a config of its space."""

    task: object    # search_spaces.Task
    config: object  # search_spaces.ConfigEntity

    @functools.cached_property
    def config_json(self) -> dict:
        """``config.to_json()``, made once per input (the build request and the log record
        share it)."""
        return self.config.to_json()

    def to_json(self) -> dict:
        return {"task": self.task.to_json(), "config": self.config_json}

    @classmethod
    def from_json(cls, data: dict | str) -> MeasureInput:
        data = json.loads(data) if isinstance(data, str) else data
        task = Task.from_json(data["task"])
        return cls(task, task.config_space.from_json(data["config"]))


@dataclass
class MeasureResult:
    """Seconds per run of one candidate (one entry per repeat), or the error that stopped it.

    ``build_time`` and ``run_time`` are the wall seconds of its build and of its whole
    run (loading, checking, timing); ``timestamp`` is when it finished (epoch
    seconds); ``worker`` names where it ran ("host:pid", or a Ray node id). ``busy`` is the
    share of a core that other work on the machine took while the costs were timed (0.0: the
    machine was otherwise idle; see :mod:`measure.contention`).
    """

    costs: tuple
    error_kind: ErrorKind | None
    error_msg: str
    build_time: float
    run_time: float
    timestamp: float
    worker: str
    busy: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def mean_cost(self) -> float:
        """The mean of ``costs``; infinity for a failed candidate."""
        return sum(self.costs) / len(self.costs) if self.ok and self.costs else math.inf

    def to_json(self) -> dict:
        kind = None if self.error_kind is None else self.error_kind.value
        return {"costs": list(self.costs), "error_kind": kind,
                "error_msg": self.error_msg, "build_time": self.build_time, "run_time": self.run_time,
                "timestamp": self.timestamp, "worker": self.worker, "busy": self.busy}

    @classmethod
    def from_json(cls, data: dict | str) -> MeasureResult:
        data = json.loads(data) if isinstance(data, str) else data
        kind = data.get("error_kind")
        return cls(tuple(float(c) for c in data["costs"]), None if kind is None else ErrorKind(kind),
                   data.get("error_msg", ""), float(data["build_time"]), float(data["run_time"]),
                   float(data["timestamp"]), data.get("worker", ""), float(data.get("busy", 0.0)))
