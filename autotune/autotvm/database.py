"""AutoTVM's ``autotvm.database``: a store of ``(MeasureInput, MeasureResult)`` pairs for
replaying measurements.

:class:`MemoryDatabase` (AutoTVM's ``DummyDatabase``, also under that name) keeps them in an
in-memory tuning log (:mod:`db`, SQLite): each pair is a record, found again by its task,
target and config (AutoTVM's :func:`~.record.measure_str_key`). :class:`RedisDatabase` is
not available: this project has no Redis store; a tuning log opened on a database server
(``db.open("postgresql://...")``) is the shared store here.
"""

from __future__ import annotations

import socket

import db as tuning_db
from measure import ErrorKind

from ..errors import AutotuneError
from ..selection import record_of
from .measure import MeasureInput, MeasureResult, error_no, to_measure_result
from .record import measure_str_key

__all__ = ["Database", "MemoryDatabase", "DummyDatabase", "RedisDatabase", "filter_inputs"]


class Database:
    """AutoTVM's base of record databases: ``load(inp, get_all=False)``,
    ``save(inp, res, extend=False)``."""

    def load(self, inp, get_all: bool = False):
        """The latest MeasureResult saved for ``inp`` (all of them, oldest first, with
        ``get_all``); None if there is none."""
        raise NotImplementedError(f"{type(self).__name__}.load is not implemented")

    def save(self, inp, res, extend: bool = False) -> None:
        """Save ``res`` for ``inp``, replacing what was saved for it (adding to it with
        ``extend``)."""
        raise NotImplementedError(f"{type(self).__name__}.save is not implemented")


def filter_inputs(database: Database, measure_inputs, retry: bool = False):
    """AutoTVM's ``filter_inputs``: ``(partial_results, unsaved)``: the saved result of each of
    ``measure_inputs`` (None where there is none, or, with ``retry``, where it failed) and
    the inputs without one."""
    partial, unsaved = [], []
    for inp in measure_inputs:
        res = database.load(inp)
        if res is None or (retry and res.error_no != 0):
            unsaved.append(inp)
            partial.append(None)
        else:
            partial.append(res)
    return partial, unsaved


class MemoryDatabase(Database):
    """A :class:`Database` in an in-memory tuning log.

    A pair saved twice, identical to the field, is one record (the log keeps one record of
    each fingerprint); a result read back keeps its costs (a failure's: its message),
    error number, ``all_cost`` and timestamp.
    """

    def __init__(self):
        self._log = tuning_db.open(":memory:")
        self._host = socket.gethostname()
        self._inputs: dict[str, MeasureInput] = {}  # key -> the input first saved under it
        self._hidden: set[str] = set()              # uids of records replaced by a later save

    @property
    def log(self) -> tuning_db.TuningLog:
        """The tuning log that holds the records."""
        return self._log

    def save(self, inp, res, extend: bool = False) -> None:
        key = measure_str_key(inp)
        record = record_of(inp.task, inp.config, to_measure_result(res), host=self._host)
        if not extend:
            self._hidden.update(r.uid for r in self._records(inp) if r.uid != record.uid)
        self._hidden.discard(record.uid)
        self._log.add(record)
        self._inputs.setdefault(key, MeasureInput(inp.target, inp.task, inp.config))

    def load(self, inp, get_all: bool = False):
        results = [_result(r) for r in self._records(inp)]
        if get_all:
            return results
        return max(results, key=lambda res: res.timestamp) if results else None

    def filter(self, func) -> list:
        """AutoTVM's ``filter``: the ``(MeasureInput, latest MeasureResult)`` of each saved input
        for which ``func(inp, results)`` (all its results) is true, in the order first saved."""
        matched = []
        for inp in self._inputs.values():
            results = self.load(inp, get_all=True)
            if results and func(inp, results):
                matched.append((inp, max(results, key=lambda res: res.timestamp)))
        return matched

    def flush(self) -> None:
        """Forget every record."""
        self._log.close()
        self._log = tuning_db.open(":memory:")
        self._inputs.clear()
        self._hidden.clear()

    def _records(self, inp) -> list:
        task = inp.task
        return [r for r in self._log.records(task)
                if r.config_index == inp.config.index and r.uid not in self._hidden]


DummyDatabase = MemoryDatabase  # AutoTVM's name of its in-memory database


def _result(record: tuning_db.Record) -> MeasureResult:
    """AutoTVM's MeasureResult of a tuning-log record."""
    ok = record.error_kind is None
    kind = None if ok else ErrorKind(record.error_kind)
    costs = tuple(record.costs) if ok else (record.error_msg,)
    all_cost = (record.build_time or 0.0) + (record.run_time or 0.0)
    return MeasureResult(costs, int(error_no(kind)), all_cost, record.timestamp)


class RedisDatabase(Database):
    """AutoTVM's Redis-backed database: not available here."""

    REDIS_PROD, REDIS_LOCA, REDIS_TEST, REDIS_NIGHT_TEMP = 15, 14, 13, 12
    MAGIC_SPLIT = "$"

    def __init__(self, db_index: int = REDIS_PROD):
        raise AutotuneError("autotvm.database.RedisDatabase is not supported: there is no Redis store here. "
                            "Use autotvm.database.MemoryDatabase in one process, or a tuning log on a "
                            "database server (db.open('postgresql://...')) to share records")
