"""Measure results in the tuning log, and the best of them, in one place.

This module is the one home of

- the mapping from a measure result to a log record (:func:`record_of`);
- the figures and labels people read (:func:`gflops`, :func:`workload_label`,
  :func:`target_label`);
- the ranking of configs, and the log queries that use it: :func:`best`,
  :func:`prune` (borrowing for workloads never tuned is :mod:`autotune.transfer`'s).

The ranking: a config measured once may look fast by luck; one measured many times has a
trustworthy median. So every measurement of a config counts (search trials, end-of-run
re-measurements and earlier runs alike), and a config's score is the median of all its
costs, raised a little for configs with few costs (:func:`confident_cost`), so that a
well-measured config wins a near tie. Every measurement, that is, made with the config's
latest code version (:func:`measure.code_version`, kept by each record): once a config has
been measured with changed code (a new compiler, a changed template), its costs from before
no longer count, since today's kernel for it is not the one they timed. ``tune()`` chooses
its winner this way, ``apply_history_best`` applies it, ``autotune best`` and the report show
it, :mod:`autotune.transfer` ranks a neighbour workload's configs by it, and ``prune`` keeps it.

Configs are pooled by their knob values (the index and key order of the stored JSON do not
matter). The order is total and depends on the multiset of measurements alone, never on
the order in which records arrived (the latest code version is that of the config's latest
record, by time, then by version), so every process, rank and machine reading the same log
picks the same config:

1. the lower score (:func:`confident_cost` of the config's usable costs of its latest code
   version) first;
2. on equal scores, the config whose knob fingerprint (:func:`db.knobs_fingerprint`: the
   SHA-256, in hex, of the canonical JSON of its knobs: sorted keys, no spaces) is smaller.

Reading a log does not rank its records here: the log keeps each config's costs, median
and score in SQL as records arrive (:mod:`db.stats`), and :func:`best` reads them in this
order with an indexed query. :func:`rank_records` ranks records in Python the same way, for
records at hand (and as the reference the log's ranking is tested against).
"""

from __future__ import annotations

import logging
import math
import socket
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import db as tuning_db
from compiler.target import Target
from measure import code_version

__all__ = ["gflops", "workload_label", "target_label", "knobs_of", "record_of", "confident_cost",
           "ConfigScore", "Ranking", "rank_configs", "rank_records", "config_median", "best", "prune"]

logger = logging.getLogger(__name__)

#: The score of a config: the median of its costs raised by ``0.1 / sqrt(count)`` (a config
#: timed 3 times is charged ~6%, 27 times ~2%). One formula, kept by the log on insert.
confident_cost = tuning_db.confident_cost

#: The knob values of a config as the log stores it (``{"index", "knobs"}``, or bare knobs).
knobs_of = tuning_db.knobs_of


# ---------------------------------------------------------------------------- figures and labels


def gflops(flop: float | None, seconds: float | None) -> float | None:
    """``flop / seconds`` in GFLOPS; None when either is missing or not positive."""
    if not flop or not seconds or not math.isfinite(seconds) or seconds <= 0:
        return None
    return flop / seconds / 1e9


def workload_label(template: str, args: Sequence) -> str:
    """``matmul(1024,1024,1024,float32)``: a workload as people read it."""
    def fmt(v) -> str:
        if isinstance(v, list | tuple):
            return "(" + ",".join(fmt(x) for x in v) + ")"
        return str(v)

    return f"{template}({','.join(fmt(a) for a in args)})"


def target_label(target: str, model: str = "") -> str:
    """The target string, with the CPU or GPU model when the string does not name it:
    ``llvm (znver4)``, ``llvm -mcpu=znver4``."""
    return f"{target} ({model})" if model and model not in target else target


# ---------------------------------------------------------------------------- results to records


def record_of(task, config, result, *, run_id: str | None = None, kind: str = tuning_db.TRIAL,
              target_model: str | None = None, host: str | None = None,
              config_json: dict | None = None) -> tuning_db.Record:
    """The log record of measuring ``config`` of ``task`` with ``result`` (a
    :class:`measure.MeasureResult`): its costs, or its error; where, when, in which run, and
    with which code (:func:`measure.code_version`).

    ``kind`` is :data:`db.TRIAL` for a search trial, :data:`db.REMEASURE` for a config
    measured again. ``target_model`` (default: the model of the task's target), ``host``
    (default: this machine) and ``config_json`` (default: ``config.to_json()``; a
    :class:`measure.MeasureInput` has it already) may be passed by a caller that makes many
    records.
    """
    if target_model is None:
        target_model = Target(task.target).model
    ok = result.error_kind is None
    costs = list(result.costs) if ok else []
    mean = statistics.fmean(costs) if costs else None
    return tuning_db.Record(
        workload_key=task.workload_key, template=task.name, args=list(task.args), target=task.target,
        target_model=target_model, config=config.to_json() if config_json is None else config_json,
        config_index=config.index, costs=costs,
        error_kind=None if ok else result.error_kind.value, error_msg=result.error_msg or "",
        build_time=result.build_time, run_time=result.run_time,
        host=socket.gethostname() if host is None else host, device=result.worker or "",
        timestamp=result.timestamp, run_id=run_id, gflops=gflops(task.flop, mean), kind=kind,
        code_version=code_version())


# ---------------------------------------------------------------------------- the ranking


@dataclass
class ConfigScore:
    """All the costs gathered for one config (ascending), and its confident score (seconds).

    ``config`` is the config as stored (of several stored spellings of the same knobs, the
    one whose canonical JSON sorts first); ``records`` are the log records pooled into it, in
    the order stored (empty when ranked from bare ``(config, costs)`` pairs);
    ``code_version`` the code version its costs come from: the config's latest (see
    :mod:`db.stats`; costs of an earlier version are not pooled).
    """

    config: dict
    costs: list
    score: float
    records: list = field(default_factory=list, repr=False)
    fingerprint: str = ""
    code_version: str = ""

    @property
    def median(self) -> float:
        """The median of every cost of the config (seconds)."""
        return statistics.median(self.costs)


class _Version:
    """The measurements of one config with one code version: its costs, records, least
    spelling and latest time."""

    __slots__ = ("version", "latest", "config", "text", "costs", "records")

    def __init__(self, version: str, latest: float, config: dict, text: str):
        self.version, self.latest, self.config, self.text = version, latest, config, text
        self.costs: list[float] = []
        self.records: list = []

    def absorb(self, config: dict, text: str, when: float) -> None:
        if text < self.text:  # the same config for any order of the records
            self.config, self.text = config, text
        self.latest = max(self.latest, when)


class Ranking:
    """Measurements pooled by config (its knobs) as they arrive, ranked on demand.

    A config's figure is made of the costs of its latest code version (that of its latest
    measurement, then the greater version): the log's rule (:mod:`db.stats`). Adding a
    measurement updates its own config's costs and score only, so a tuning loop can ask for
    the best config after every result without pooling its whole history again.
    """

    def __init__(self):
        self._pooled: dict[str, ConfigScore] = {}
        self._versions: dict[str, dict[str, _Version]] = {}  # fingerprint -> code version -> its part
        self._best: ConfigScore | None = None  # kept as measurements arrive; None: to be found again

    def add(self, config: dict, costs, record=None, *, code_version: str = "", when: float = 0.0) -> None:
        """Pool one measurement (failed ones, with no usable cost, are ignored), made with
        ``code_version`` at time ``when`` (a ``record``'s own, where one is given)."""
        costs = tuning_db.stats.usable_costs(costs)
        if not costs:
            return
        if record is not None:
            code_version, when = record.code_version, record.timestamp
        key = tuning_db.knobs_fingerprint(config)
        text = tuning_db.canonical_json(config)
        versions = self._versions.setdefault(key, {})
        part = versions.get(code_version)
        if part is None:
            part = versions[code_version] = _Version(code_version, when, config, text)
        else:
            part.absorb(config, text, when)
        part.costs.extend(costs)
        part.costs.sort()
        if record is not None:
            part.records.append(record)
        latest = max(versions.values(), key=lambda v: (v.latest, v.version))
        entry = self._pooled.get(key)
        if entry is None:
            entry = self._pooled[key] = ConfigScore(config, [], 0.0, fingerprint=key)
        entry.config, entry.costs, entry.records = latest.config, latest.costs, latest.records
        entry.code_version, entry.score = latest.version, confident_cost(latest.costs)
        if entry is self._best:  # its score may have risen past another's: find the best again
            self._best = None
        elif self._best is not None and _order(entry) < _order(self._best):
            self._best = entry

    def ranked(self) -> list[ConfigScore]:
        """Every config, best first."""
        return sorted(self._pooled.values(), key=_order)

    def best(self) -> ConfigScore | None:
        """The config ranked first (None before any usable measurement)."""
        if self._best is None:
            self._best = min(self._pooled.values(), key=_order, default=None)
        return self._best


def _order(entry: ConfigScore) -> tuple[float, str]:
    return entry.score, entry.fingerprint


def _rank(entries: Iterable[tuple[dict, list, object]]) -> list[ConfigScore]:
    ranking = Ranking()
    for config, costs, record in entries:
        ranking.add(config, costs, record)
    return ranking.ranked()


def rank_configs(pairs: Iterable[tuple[dict, list]]) -> list[ConfigScore]:
    """Pool ``(config_json, costs)`` pairs by config (its knobs) and rank them, best first.

    Failed measurements (no costs) are ignored.
    """
    return _rank((config, costs, None) for config, costs in pairs)


def rank_records(records: Iterable[tuning_db.Record]) -> list[ConfigScore]:
    """Pool log records by config and rank them, best first; error records are ignored."""
    return _rank((r.config, r.costs, r) for r in records if r.error_kind is None)


def config_median(records: Sequence[tuning_db.Record], knobs: dict) -> tuple[float | None, int]:
    """The median cost (seconds) of every successful measurement of the config with ``knobs``
    among ``records``, and how many there were."""
    costs = [c for r in records if r.error_kind is None and knobs_of(r.config) == knobs for c in r.costs]
    return (statistics.median(costs) if costs else None), len(costs)


# ---------------------------------------------------------------------------- the log, ranked


Validate = Callable[[dict], object]


def _valid(where: str, config: dict, validate: Validate | None) -> bool:
    if validate is None:
        return True
    try:
        verdict = validate(config)
    except Exception as err:  # noqa: BLE001 - any failure of the validator means "invalid"
        reason = f"{type(err).__name__}: {err}"
    else:
        if verdict is not False:
            return True
        reason = "rejected by the validator"
    logger.warning("ignoring an invalid tuning record for %s: config %s (%s)", where, config, reason)
    return False


def best(log: tuning_db.TuningLog, task_or_key, k: int = 1, *,
         validate: Validate | None = None) -> list[ConfigScore]:
    """The ``k`` best configs of a workload (a task or a workload key) in ``log``, best first,
    under the ranking, one :class:`ConfigScore` each (``.config``, ``.median``, ``.records``).

    ``validate(config)`` is called on each candidate; one that raises or returns ``False``
    is reported through logging and skipped (the next best takes its place).

    The candidates come from the statistics the log keeps per config, read in ranking order
    a page at a time, so the cost does not grow with the workload's records; only the
    records of the ``k`` configs returned are read (found through their costs' rows). Equal
    scores go to the config with the smaller knob fingerprint (see the module's docstring), the
    same in every process.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"best: k must be a positive int, got {k!r}")
    where = getattr(task_or_key, "workload_name", None) or getattr(task_or_key, "workload_key", task_or_key)
    found: list[tuning_db.ConfigStats] = []
    offset, page = 0, max(8, 2 * k)
    while len(found) < k:
        stats = log.config_stats(task_or_key, limit=page, offset=offset)
        for entry in stats:
            if _valid(str(where), entry.config, validate):
                found.append(entry)
                if len(found) == k:
                    break
        if len(stats) < page:
            break
        offset, page = offset + page, min(4 * page, 4096)
    return [_score_of(log, task_or_key, entry) for entry in found]


def _score_of(log: tuning_db.TuningLog, task_or_key, entry: tuning_db.ConfigStats) -> ConfigScore:
    """The :class:`ConfigScore` of a config the log ranked, with its records (an indexed read of
    the config's own records) and their usable costs."""
    records = log.records(task_or_key, knobs_hash=entry.knobs_hash)
    costs = sorted(tuning_db.stats.usable_costs(c for r in records for c in r.costs))
    return ConfigScore(entry.config, costs, entry.score, records=records, fingerprint=entry.knobs_hash,
                       code_version=entry.code_version)


def prune(log: tuning_db.TuningLog, keep_best: int = 1) -> int:
    """Keep, per workload of ``log``, every successful measurement of its ``keep_best`` best
    configs under the ranking (so their ranking, and the config a build applies, stay as they
    were); delete every other record, error records included, and workloads left with none.
    Returns the number of records deleted."""
    if isinstance(keep_best, bool) or not isinstance(keep_best, int) or keep_best < 1:
        raise ValueError(f"prune: keep_best must be a positive int, got {keep_best!r}")
    keep = {}
    for w in log.workloads():
        keep[w.key] = [r.config for entry in best(log, w.key, keep_best) for r in entry.records]
    return log.prune(keep)
