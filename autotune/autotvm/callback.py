"""AutoTVM's tuning callbacks: ``log_to_file`` and ``progress_bar``.

A callback is called as ``callback(tuner, inputs, results)`` after each measurement
(AutoTVM's signature; ``inputs`` and ``results`` are lists of AutoTVM's
:class:`~.measure.MeasureInput` and :class:`~.measure.MeasureResult`).
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading

from tqdm.auto import tqdm

import db as tuning_db

from ..selection import record_of
from .measure import to_measure_result
from .record import encode

__all__ = ["log_to_file", "progress_bar", "LogToFile", "LogToTuningLog", "ProgressBar"]

_AUTOTVM_SUFFIXES = (".json", ".log")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def log_to_file(file_out, protocol: str = "json"):
    """A callback that logs every measurement.

    ``file_out`` is where: a path whose name ends in ``.json`` or ``.log`` (as AutoTVM users
    write) or an open text file gets AutoTVM's JSON lines, appended (unless the path is an
    SQLite tuning log already); any other path, an SQLAlchemy URL or an open
    :class:`db.TuningLog` gets tuning-log records.
    """
    if protocol != "json":
        raise ValueError(f"log_to_file: protocol {protocol!r} is not supported; AutoTVM logs are written "
                         "as JSON lines (protocol='json')")
    if isinstance(file_out, tuning_db.TuningLog):
        return LogToTuningLog(file_out)
    if hasattr(file_out, "write"):
        return LogToFile(file_out)
    if not isinstance(file_out, str | os.PathLike):
        raise TypeError(f"log_to_file: a path, URL, open file or TuningLog, got {file_out!r}")
    if is_autotvm_log(file_out):
        return LogToFile(file_out)
    return LogToTuningLog(file_out)


def is_autotvm_log(path) -> bool:
    """Whether ``path`` names an AutoTVM JSON-lines log: a file name ending in ``.json`` or
    ``.log`` (not a URL) that does not exist yet, is empty, or whose first record is
    AutoTVM's (not an SQLite database, nor another JSON file such as a pin file)."""
    text = os.fspath(path)
    if "://" in text or not text.lower().endswith(_AUTOTVM_SUFFIXES):
        return False
    try:
        with open(text, "rb") as f:
            if f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                return False
            f.seek(0)
            for line in f:
                line = line.strip()
                if line and not line.startswith(b"#"):
                    return _is_record(line)
    except FileNotFoundError:
        pass
    return True


def _is_record(line: bytes) -> bool:
    try:
        row = json.loads(line)
    except ValueError:
        return False
    return isinstance(row, dict) and ({"input", "result"} <= row.keys() or {"i", "r"} <= row.keys())


class LogToFile:
    """Appends each measurement to an AutoTVM JSON-lines file (a path or an open text file)."""

    def __init__(self, file_out):
        self.file_out = file_out
        self._lock = threading.Lock()

    def __call__(self, tuner, inputs, results) -> None:
        lines = "".join(encode(inp, res) + "\n" for inp, res in zip(inputs, results))
        with self._lock:
            if hasattr(self.file_out, "write"):
                self.file_out.write(lines)
                self.file_out.flush()
            else:
                with open(self.file_out, "a", encoding="utf-8") as f:
                    f.write(lines)

    def __repr__(self) -> str:
        return f"log_to_file({self.file_out!r})"


class LogToTuningLog:
    """Writes each measurement as a trial record of a tuning log (a path, URL or open log).

    The records belong to no run (``run_id`` None): AutoTVM's tuners tune into an
    in-memory log and callbacks only see measurements."""

    def __init__(self, log):
        self.where = log
        self._log: tuning_db.TuningLog | None = log if isinstance(log, tuning_db.TuningLog) else None
        self._own = self._log is None
        self._host = socket.gethostname()
        self._lock = threading.Lock()

    @property
    def log(self) -> tuning_db.TuningLog:
        """The tuning log, opened on first use."""
        with self._lock:
            if self._log is None:
                self._log = tuning_db.open(self.where)
            return self._log

    def __call__(self, tuner, inputs, results) -> None:
        records = [record_of(inp.task, inp.config, to_measure_result(res), host=self._host)
                   for inp, res in zip(inputs, results)]
        self.log.add(records)

    def close(self) -> None:
        """Close the log if this callback opened it."""
        with self._lock:
            if self._own and self._log is not None:
                self._log.close()
                self._log = None

    def __repr__(self) -> str:
        return f"log_to_file({self.where!r})"


def progress_bar(total: int, prefix: str = "", si_prefix: str = "G"):
    """A callback that shows a progress bar of ``total`` trials with the best and the current
    throughput (in ``si_prefix`` FLOPS: "K", "M", "G", "T")."""
    return ProgressBar(total, prefix, si_prefix)


_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class ProgressBar:
    """The progress bar of :func:`progress_bar` (tqdm), closed once ``total`` trials are in."""

    def __init__(self, total: int, prefix: str = "", si_prefix: str = "G"):
        if si_prefix not in _SI:
            raise ValueError(f"progress_bar: si_prefix is one of {', '.join(map(repr, _SI))}, "
                             f"got {si_prefix!r}")
        if total < 0:
            raise ValueError(f"progress_bar: total must be >= 0, got {total}")
        self.total, self.prefix, self.si_prefix = total, prefix, si_prefix
        self.count = 0
        self.best = 0.0  # best throughput so far, in si_prefix FLOPS
        self._bar = None

    def __call__(self, tuner, inputs, results) -> None:
        if self._bar is None:
            self._bar = tqdm(total=self.total, desc=self.prefix or None, unit="trial", dynamic_ncols=True)
        scale = _SI[self.si_prefix]
        for inp, res in zip(inputs, results):
            self.count += 1
            current = 0.0
            if res.error_no == 0 and res.costs:
                seconds = sum(res.costs) / len(res.costs)
                current = inp.task.flop / seconds / scale if seconds > 0 and math.isfinite(seconds) else 0.0
            self.best = max(self.best, current)
            self._bar.set_postfix_str(f"Current/Best: {current:.2f}/{self.best:.2f} {self.si_prefix}FLOPS")
            self._bar.update(1)
        if self.count >= self.total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
