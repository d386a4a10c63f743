"""Pin files: the chosen config of each workload of a tuning log, in a small JSON file.

A deployment ships the pin file instead of the log: it holds one entry per workload, the
config the ranking (:mod:`autotune.selection`) puts first, and reading it needs no
database. The same log gives the same file in every process (the ranking breaks ties by a
fixed rule, and entries are sorted)::

    {"format": "autotune-pin", "version": 1,
     "entries": [{"template": "matmul", "args": [1024, 1024, 1024, "float32"],
                  "target": "llvm -mcpu=znver4", "model": "znver4",
                  "config": {"tile_y": [-1, 32], ...},     # knob values
                  "cost": 0.00123,                         # median seconds of the config
                  "records": 7}]}                          # records pooled into it

>>> with db.open("tuning.db") as log:
...     autotune.pin.write_pin(log, "pinned.json", template="matmul")
>>> autotune.pin.read_pin("pinned.json")[0]["config"]
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import db as tuning_db

from . import selection
from .errors import AutotuneError

__all__ = ["PIN_FORMAT", "PIN_VERSION", "PinError", "pin_entries", "write_pin", "read_pin"]

PIN_FORMAT = "autotune-pin"
PIN_VERSION = 1
_FIELDS = ("template", "args", "target", "model", "config", "cost", "records")


class PinError(AutotuneError, ValueError):
    """A pin file that cannot be read: not JSON, another format or version, or a bad entry."""


def _open(log) -> tuple[tuning_db.TuningLog, bool]:
    if isinstance(log, tuning_db.TuningLog):
        return log, False
    return tuning_db.open(log), True


def pin_entries(log, *, template: str | None = None, target: str | None = None) -> list[dict[str, Any]]:
    """The entries of a pin file for ``log`` (an open log, a path or a URL): the best config of
    each workload with a successful measurement, of ``template`` and on ``target`` (a target
    string, or its kind such as ``"llvm"``) when given; sorted by template, target, then args."""
    opened, close = _open(log)
    try:
        entries = []
        for w in opened.workloads():
            if template is not None and w.template != template:
                continue
            if target is not None and target not in (w.target, w.target_kind):
                continue
            found = selection.best(opened, w.key)
            if not found:
                continue
            top = found[0]
            entries.append({"template": w.template, "args": w.args, "target": w.target,
                            "model": w.target_model, "config": selection.knobs_of(top.config),
                            "cost": top.median, "records": len(top.records)})
    finally:
        if close:
            opened.close()
    return sorted(entries, key=lambda e: (e["template"], e["target"], e["model"],
                                          tuning_db.canonical_json(e["args"])))


def write_pin(log, path: str | os.PathLike[str], *, template: str | None = None,
              target: str | None = None) -> int:
    """Write the pin file of ``log`` (see :func:`pin_entries` for the filters) to ``path``,
    atomically (a reader never sees half a file); returns the number of entries."""
    entries = pin_entries(log, template=template, target=target)
    text = json.dumps({"format": PIN_FORMAT, "version": PIN_VERSION, "entries": entries}, indent=1,
                      sort_keys=True) + "\n"
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(entries)


def _check_entry(path: str, k: int, entry: Any) -> dict[str, Any]:
    where = f"{path}: entry {k}"
    if not isinstance(entry, dict):
        raise PinError(f"{where} is not a JSON object")
    missing = [f for f in _FIELDS if f not in entry]
    if missing:
        raise PinError(f"{where} lacks {', '.join(missing)}")
    kinds = {"template": str, "args": list, "target": str, "model": str, "config": dict}
    for name, kind in kinds.items():
        if not isinstance(entry[name], kind):
            raise PinError(f"{where}: {name} must be a {kind.__name__}, got {entry[name]!r}")
    cost, records = entry["cost"], entry["records"]
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost <= 0:
        raise PinError(f"{where}: cost must be a positive number of seconds, got {cost!r}")
    if isinstance(records, bool) or not isinstance(records, int) or records < 0:
        raise PinError(f"{where}: records must be a count, got {records!r}")
    return {name: entry[name] for name in _FIELDS}


def read_pin(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of the pin file at ``path`` (dicts with the fields of the format above).

    Raises :class:`PinError` naming the file for anything but a pin file of a version this
    library reads, and ``OSError`` when it cannot be read.
    """
    name = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as err:
            raise PinError(f"{name} is not JSON: {err}") from None
    if not isinstance(data, dict) or data.get("format") != PIN_FORMAT:
        raise PinError(f"{name} is not an autotune pin file (no \"format\": \"{PIN_FORMAT}\")")
    if data.get("version") != PIN_VERSION:
        raise PinError(f"{name} is a pin file of version {data.get('version')!r}; this library reads "
                       f"version {PIN_VERSION}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise PinError(f"{name}: entries must be a list")
    return [_check_entry(name, k, e) for k, e in enumerate(entries)]
