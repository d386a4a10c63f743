"""Plain data that goes into and comes out of a tuning log.

A :class:`Record` is one measurement: which workload (template, arguments, target), which
configuration, what it cost (or why it failed), where and when. Records are plain
dataclasses that round-trip through JSON; nothing in them is ever executed or unpickled.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from db.errors import RecordError

__all__ = ["Record", "Workload", "RunInfo", "SummaryRow", "canonical_json", "target_kind", "TRIAL",
           "REMEASURE", "RECORD_KINDS"]

#: The kinds of record: a search ``TRIAL`` (a config the tuner chose, counted against the
#: run's budget), or a ``REMEASURE``, a config measured again at the end of a run to choose
#: the best with more confidence. Both are measurements of their config; only trials count
#: as trials.
TRIAL = "trial"
REMEASURE = "remeasure"
RECORD_KINDS = (TRIAL, REMEASURE)


def _plain(value: Any) -> Any:
    """``json.dumps`` hook: numpy-like scalars become Python numbers, anything else is refused."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no spaces, tuples as lists.

    Two values that are equal as JSON data have the same canonical text, so the text can be
    compared and grouped in SQL. Raises ``TypeError`` or ``ValueError`` for values that are
    not JSON data.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)


def target_kind(target: str) -> str:
    """The kind of a target string: its first word (``"llvm -mcpu=znver4"`` -> ``"llvm"``)."""
    words = target.split()
    return words[0] if words else ""


def _json_data(name: str, value: Any) -> Any:
    try:
        return json.loads(canonical_json(value))
    except (TypeError, ValueError) as err:
        raise RecordError(f"record field {name!r} is not JSON data: {err}") from None


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool | str | bytes) or value is None:
        raise RecordError(f"record field {name!r} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RecordError(f"record field {name!r} must be a number, got {value!r}") from None


def _opt_float(name: str, value: Any) -> float | None:
    return None if value is None else _float(name, value)


def _string(name: str, value: Any, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise RecordError(f"record field {name!r} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise RecordError(f"record field {name!r} must not be empty")
    return value


@dataclass(kw_only=True)
class Record:
    """One measurement of one configuration of one workload.

    ``costs`` are the repeated timings in seconds; ``kind`` says why the config was measured
    (:data:`TRIAL` or :data:`REMEASURE`); ``code_version`` names the code that built and timed
    it (``measure.code_version()``; ``""`` where unknown, as in logs written before it was
    kept): a config's figure in the ranking comes from the costs of its latest code version
    only (see :mod:`db.stats`). A record with an ``error_kind`` is a
    failed candidate: it keeps its error but has no mean or median cost and never comes out
    of a ranking of the best configs. A record without an error needs at least
    one finite, non-negative cost.

    Construction checks and normalises the fields (tuples become lists, numpy scalars
    Python numbers) and raises :class:`~db.errors.RecordError` naming a bad field.
    """

    workload_key: str
    template: str
    args: list[Any]
    target: str
    target_model: str = ""
    config: dict[str, Any]
    config_index: int | None = None
    costs: list[float] = field(default_factory=list)
    error_kind: str | None = None
    error_msg: str = ""
    build_time: float | None = None
    run_time: float | None = None
    host: str = ""
    device: str = ""
    timestamp: float = field(default_factory=time.time)
    run_id: str | None = None
    gflops: float | None = None
    kind: str = TRIAL
    code_version: str = ""

    def __post_init__(self) -> None:
        _string("workload_key", self.workload_key, empty=False)
        _string("template", self.template, empty=False)
        _string("target", self.target, empty=False)
        _string("target_model", self.target_model)
        if not isinstance(self.args, list | tuple):
            raise RecordError(f"record field 'args' must be a list, got {type(self.args).__name__}")
        self.args = _json_data("args", list(self.args))
        if not isinstance(self.config, dict) or not all(isinstance(k, str) for k in self.config):
            raise RecordError(f"record field 'config' must be a dict with string keys, got {self.config!r}")
        self.config = _json_data("config", self.config)
        if self.config_index is not None:
            try:
                if isinstance(self.config_index, bool):
                    raise TypeError
                self.config_index = operator.index(self.config_index)
            except TypeError:
                raise RecordError(f"record field 'config_index' must be an int or None, "
                                  f"got {self.config_index!r}") from None
        if not isinstance(self.costs, list | tuple):
            raise RecordError(f"record field 'costs' must be a list of seconds, got {self.costs!r}")
        self.costs = [_float("costs", c) for c in self.costs]
        if self.error_kind is not None:
            _string("error_kind", self.error_kind, empty=False)
        elif not self.costs:
            raise RecordError(f"record of workload {self.workload_key!r} has neither costs nor an error")
        elif not all(math.isfinite(c) and c >= 0 for c in self.costs):
            raise RecordError(f"record of workload {self.workload_key!r} has costs that are not "
                              f"finite non-negative seconds: {self.costs!r}")
        self.error_msg = _string("error_msg", "" if self.error_msg is None else self.error_msg)
        self.build_time = _opt_float("build_time", self.build_time)
        self.run_time = _opt_float("run_time", self.run_time)
        self.gflops = _opt_float("gflops", self.gflops)
        self.host = _string("host", self.host)
        self.device = _string("device", self.device)
        self.timestamp = _float("timestamp", self.timestamp)
        if self.run_id is not None:
            _string("run_id", self.run_id, empty=False)
        self.code_version = _string("code_version", "" if self.code_version is None else self.code_version)
        if self.kind not in RECORD_KINDS:
            raise RecordError(f"record field 'kind' must be one of {', '.join(RECORD_KINDS)}, "
                              f"got {self.kind!r}")

    @property
    def is_error(self) -> bool:
        """Whether the candidate failed (``error_kind`` is set)."""
        return self.error_kind is not None

    @property
    def mean_cost(self) -> float | None:
        """Mean of ``costs`` in seconds; ``None`` for errors."""
        return None if self.is_error or not self.costs else statistics.fmean(self.costs)

    @property
    def median_cost(self) -> float | None:
        """Median of ``costs`` in seconds; ``None`` for errors."""
        return None if self.is_error or not self.costs else float(statistics.median(self.costs))

    @property
    def uid(self) -> str:
        """A fingerprint of every field: the record's identity across logs.

        Adding, importing or merging a record whose ``uid`` a log already holds adds nothing.
        The ``kind`` is left out, and an empty ``code_version``: records written before either
        existed keep their identity.
        """
        # The fields as to_dict() has them (JSON data already), without its deep copy: hashing
        # only reads them, and this runs for every record stored.
        data = {f.name: getattr(self, f.name) for f in _FIELDS if f.name != "kind"}
        if not self.code_version:
            del data["code_version"]
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict of JSON data (a copy)."""
        return asdict(self)

    def to_json(self) -> str:
        """The record as one line of JSON."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """A record from :meth:`to_dict`'s output; unknown keys (from newer writers) are ignored."""
        if not isinstance(data, dict):
            raise RecordError(f"a record must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        missing = [n for n in ("workload_key", "template", "args", "target", "config") if n not in data]
        if missing:
            raise RecordError(f"record lacks field(s) {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> Record:
        """A record from :meth:`to_json`'s output (or an already parsed dict)."""
        if isinstance(text, dict):
            return cls.from_dict(text)
        try:
            data = json.loads(text)
        except ValueError as err:
            raise RecordError(f"a record is not valid JSON: {err}") from None
        return cls.from_dict(data)


_FIELDS = fields(Record)


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload as a log knows it: its key, template, arguments and target."""

    key: str
    template: str
    args: list[Any]
    target: str
    target_model: str = ""

    @property
    def workload_key(self) -> str:
        """Alias of ``key``, so a workload can be passed where a task is expected."""
        return self.key

    @property
    def target_kind(self) -> str:
        """The first word of the target string (``"llvm"``, ``"cuda"``)."""
        return target_kind(self.target)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One tuning run: which tuner with which options, when, and how it ended.

    ``status`` is ``"running"`` while the run goes on, then how it ended (``"budget"``,
    ``"early_stopping"``, ``"exhausted"``, ``"interrupted"``...). A running tuner writes a
    ``heartbeat`` (seconds since the epoch) every ``heartbeat_interval`` seconds; a run
    still marked running whose heartbeat stopped reads as ``"dead"`` (see
    :meth:`TuningLog.runs <db.TuningLog.runs>`).
    """

    run_id: str
    tuner: str
    options: dict[str, Any]
    started: float
    ended: float | None
    status: str
    heartbeat: float | None = None
    heartbeat_interval: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The run as a dict of JSON data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        """A run from :meth:`to_dict`'s output; raises :class:`RecordError` when malformed."""
        if not isinstance(data, dict):
            raise RecordError(f"a run must be a JSON object, got {type(data).__name__}")
        try:
            run = cls(run_id=_string("run_id", data["run_id"], empty=False),
                      tuner=_string("tuner", data["tuner"]),
                      options=_json_data("options", data.get("options") or {}),
                      started=_float("started", data["started"]),
                      ended=_opt_float("ended", data.get("ended")),
                      status=_string("status", data.get("status", "unknown")),
                      heartbeat=_opt_float("heartbeat", data.get("heartbeat")),
                      heartbeat_interval=_opt_float("heartbeat_interval", data.get("heartbeat_interval")))
        except KeyError as err:
            raise RecordError(f"run lacks field {err}: {data!r}") from None
        if not isinstance(run.options, dict):
            raise RecordError(f"run options must be a JSON object, got {run.options!r}")
        return run


@dataclass(slots=True)
class SummaryRow:
    """One line of :meth:`TuningLog.summary <db.TuningLog.summary>`: a workload's counts
    (``trials`` and the failed ones among them, ``errors``, by error kind in ``error_kinds``;
    ``remeasured``: the records that measured a config again)."""

    workload_key: str
    template: str
    target: str
    target_model: str
    trials: int
    errors: int
    remeasured: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
