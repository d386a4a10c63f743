"""The messages of measurement: the only things that cross a process or machine boundary.

A worker receives a request and answers with a reply, each a dataclass that
round-trips through JSON (``to_json``/``from_json``) or bytes (``encode``/``decode``,
UTF-8 JSON). Local workers (:mod:`measure.pool`) get them over pipes, Ray tasks and
actors (:mod:`measure.ray`) as arguments and return values, encoded the same way:

* :class:`BuildRequest` -> :class:`BuildReply`: instantiate one config of a task and
  compile it to an artifact (or say why not).
* :class:`RunRequest` -> :class:`RunReply`: check and time one artifact. A worker that
  has no inputs and expected outputs for the task yet makes them in the same call,
  within ``prepare_timeout``; the candidate then has ``timeout`` seconds.

Tasks and configs travel as their own JSON (:meth:`search_spaces.Task.to_json` with
``by_value=True``, :meth:`search_spaces.ConfigEntity.to_json`), each made once per
request; workers rebuild them and never see the tuner's objects.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from compiler.runtime.timer import check_cache_flush
from measure.errors import MeasureError
from measure.records import Artifact, ErrorKind, MeasureInput, MeasureResult

__all__ = ["BuildRequest", "BuildReply", "RunRequest", "RunReply", "task_key"]


def task_key(task: dict, check: bool) -> tuple:
    """What a run worker's data for a task (``Task.to_json(by_value=True)``) depends on:
    the workload, the template's code when it travels by value, and whether outputs are
    checked."""
    return (task.get("template"), json.dumps(task.get("args")), task.get("target"), task.get("code"),
            bool(check))


def _require(data, cls, keys: tuple) -> dict:
    if isinstance(data, (bytes, str)):
        data = json.loads(data)
    if not isinstance(data, dict):
        raise MeasureError(f"a {cls.__name__} is a JSON object, got {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise MeasureError(f"a {cls.__name__} needs {', '.join(missing)}; got {sorted(data)}")
    return data


def _kind(value) -> ErrorKind | None:
    return None if value is None else ErrorKind(value)


class _Message:
    """``encode``/``decode`` through the JSON form of a message."""

    def to_json(self) -> dict:
        """The message as a JSON-able dict."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, data):
        """The message of a :meth:`to_json` dict (or its JSON text); a :class:`MeasureError`
        names what is missing."""
        raise NotImplementedError

    def encode(self) -> bytes:
        """UTF-8 JSON bytes."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | str):
        """The message of :meth:`encode`'s bytes."""
        return cls.from_json(json.loads(data))


@dataclass
class BuildRequest(_Message):
    """Build one candidate.

    ``task`` is ``Task.to_json(by_value=True)`` (a template only the tuner can import
    comes along as code); ``config`` is ``ConfigEntity.to_json()``.
    """

    task: dict
    config: dict

    @classmethod
    def of(cls, inp: MeasureInput) -> BuildRequest:
        """The request that builds ``inp``."""
        return cls(inp.task.to_json(by_value=True), inp.config_json)

    def to_json(self) -> dict:
        return {"task": self.task, "config": self.config}

    @classmethod
    def from_json(cls, data) -> BuildRequest:
        data = _require(data, cls, ("task", "config"))
        return cls(dict(data["task"]), dict(data["config"]))


@dataclass
class BuildReply(_Message):
    """The artifact of one candidate, or why there is none (``error``, ``error_kind``).

    ``build_time`` is the wall seconds of the build; ``worker`` names where it ran
    ("host:pid", or a Ray node id); ``code_version`` is the worker's
    :func:`measure.code_version` where it says (a Ray node's), so that the tuner can refuse
    artifacts that other code built.
    """

    artifact: Artifact | None
    error: str | None
    build_time: float
    error_kind: ErrorKind | None = None
    worker: str = ""
    code_version: str = ""

    def to_json(self) -> dict:
        return {"artifact": None if self.artifact is None else self.artifact.to_json(), "error": self.error,
                "build_time": self.build_time,
                "error_kind": None if self.error_kind is None else self.error_kind.value,
                "worker": self.worker, "code_version": self.code_version}

    @classmethod
    def from_json(cls, data) -> BuildReply:
        data = _require(data, cls, ("artifact", "build_time"))
        art = data["artifact"]
        return cls(None if art is None else Artifact.from_json(art), data.get("error"),
                   float(data["build_time"]), _kind(data.get("error_kind")), data.get("worker", ""),
                   data.get("code_version", ""))


@dataclass
class RunRequest(_Message):
    """Check and time one artifact of ``task`` (``Task.to_json(by_value=True)``).

    The candidate is called once on the task's inputs and its outputs compared with
    the expected ones (``check_correctness``), then timed: ``repeat`` measurements of
    ``number`` calls each (more calls until one lasts ``min_repeat_ms``),
    ``cooldown_ms`` apart, caches evicted before each call with ``cache_flush`` (one of
    :data:`compiler.runtime.timer.CACHE_FLUSH_CHOICES`: JSON ``false``, ``true``, ``"weights"`` or
    ``"model"``).
    Making the task's data may take ``prepare_timeout`` seconds, the candidate
    ``timeout``. ``device_id`` is the CUDA ordinal for ``"ptx"`` artifacts.
    """

    task: dict
    artifact: Artifact
    number: int = 4
    repeat: int = 3
    min_repeat_ms: float = 50
    cooldown_ms: float = 0
    cache_flush: bool | str = False
    check_correctness: bool = True
    timeout: float = 10
    prepare_timeout: float = 60
    device_id: int | None = None

    @property
    def task_key(self) -> tuple:
        """What a worker's data for this task depends on: the task and whether outputs are checked."""
        return task_key(self.task, self.check_correctness)

    def to_json(self) -> dict:
        return {"task": self.task, "artifact": self.artifact.to_json(), "number": self.number,
                "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms, "cooldown_ms": self.cooldown_ms,
                "cache_flush": self.cache_flush, "check_correctness": self.check_correctness,
                "timeout": self.timeout, "prepare_timeout": self.prepare_timeout, "device_id": self.device_id}

    @classmethod
    def from_json(cls, data) -> RunRequest:
        data = _require(data, cls, ("task", "artifact", "number", "repeat", "min_repeat_ms", "cooldown_ms",
                                    "cache_flush", "check_correctness", "timeout", "prepare_timeout"))
        device = data.get("device_id")
        try:
            cache_flush = check_cache_flush(data["cache_flush"])
        except ValueError as err:
            raise MeasureError(f"a {cls.__name__}'s {err}") from None
        return cls(dict(data["task"]), Artifact.from_json(data["artifact"]), int(data["number"]),
                   int(data["repeat"]), float(data["min_repeat_ms"]), float(data["cooldown_ms"]),
                   cache_flush, bool(data["check_correctness"]), float(data["timeout"]),
                   float(data["prepare_timeout"]), None if device is None else int(device))


@dataclass
class RunReply(_Message):
    """Seconds per measurement of one candidate, or the error that stopped it.

    ``status`` is "ok" (``costs`` has one entry per repeat) or "error" (``error_kind``
    and ``message`` say why; ``costs`` is empty). ``replace_worker`` asks for a fresh
    worker (a CUDA context spoilt by a faulting kernel). ``run_time`` is the wall
    seconds of loading, checking and timing; ``worker`` names where it ran. ``busy`` is the
    share of a core that other work took from the timing kept (0.0: none; see
    :mod:`measure.contention`). ``code_version`` is as a :class:`BuildReply`'s.
    """

    costs: tuple
    error_kind: ErrorKind | None = None
    message: str = ""
    replace_worker: bool = False
    run_time: float = 0.0
    worker: str = ""
    busy: float = 0.0
    code_version: str = ""

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, run_time: float = 0.0, worker: str = "",
                replace_worker: bool = False) -> RunReply:
        """A reply without costs."""
        return cls((), kind, message, replace_worker, run_time, worker)

    @property
    def status(self) -> str:
        """``"ok"`` for a timed candidate, ``"error"`` for one that failed."""
        return "ok" if self.error_kind is None else "error"

    def result(self, build_time: float) -> MeasureResult:
        """The :class:`MeasureResult` of this reply, for a candidate built in ``build_time`` s."""
        return MeasureResult(tuple(self.costs), self.error_kind, self.message, build_time, self.run_time,
                             time.time(), self.worker, self.busy)

    def to_json(self) -> dict:
        return {"status": self.status, "costs": list(self.costs),
                "error_kind": None if self.error_kind is None else self.error_kind.value,
                "message": self.message, "replace_worker": self.replace_worker, "run_time": self.run_time,
                "worker": self.worker, "busy": self.busy, "code_version": self.code_version}

    @classmethod
    def from_json(cls, data) -> RunReply:
        data = _require(data, cls, ("status", "costs"))
        kind = _kind(data.get("error_kind"))
        if (data["status"] == "ok") != (kind is None):
            raise MeasureError(f"a RunReply with status {data['status']!r} has error kind {kind}")
        return cls(tuple(float(c) for c in data["costs"]), kind, data.get("message", ""),
                   bool(data.get("replace_worker", False)), float(data.get("run_time", 0.0)),
                   data.get("worker", ""), float(data.get("busy", 0.0)), data.get("code_version", ""))
