"""AutoTVM's tuning-record format: JSON lines, read into and written from the tuning log.

Each line of an AutoTVM log is one measurement::

    {"input": [target, task name, args, kwargs],
     "config": {"index": int, "code_hash": str | null, "entity": [[knob, kind, value], ...]},
     "result": [costs, error_no, all_cost, timestamp], "version": 0.2, "tvm_version": "..."}

(logs of AutoTVM before v0.7 have ``{"i": [...], "r": [...], "v": 0.1}``, read too).
AutoTVM's functions: :func:`encode` and :func:`decode` (one line), :func:`load_from_file`,
:func:`pick_best`, :func:`split_workload` and :func:`measure_str_key`;
:func:`import_log` adds a file's records to a :class:`db.TuningLog`.

What a record holds that the tuning log cannot use is reported, never dropped in
silence: records of templates not registered here, or whose config is not in the
template's space here, are skipped with a warning naming the reason, the count and the
first line; fields with no place in the log (``all_cost``, ``code_hash``, target options
such as ``-keys``) are named in one warning per file.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field

import db as tuning_db
from autotune import __version__
from compiler.target import Target, target_kinds
from search_spaces import SearchSpaceError, create_task, list_templates

from ..errors import AutotuneError
from ..selection import gflops
from .measure import MeasureErrorNo, MeasureInput, MeasureResult, error_kind, error_no, to_measure_result

__all__ = ["encode", "decode", "read_log", "import_log", "load_from_file", "pick_best", "split_workload",
           "measure_str_key", "LogReading", "AUTOTVM_LOG_VERSION"]

logger = logging.getLogger(__name__)

AUTOTVM_LOG_VERSION = 0.2

# Our knob kinds and AutoTVM's entity kinds.
_KIND_CODE = {"split": "sp", "reorder": "re", "annotate": "an", "knob": "ot"}
# Target options that a record's target keeps are those its kind takes (compiler.target.target_kinds())
# but these; the rest (such as -keys) name things this project has no use for.
_DROPPED_OPTIONS = frozenset({"fast-math"})


# ---------------------------------------------------------------------------- writing


def encode(inp, result, protocol: str = "json") -> str:
    """One line of AutoTVM's JSON log for measure input ``inp`` and its ``result``: AutoTVM's
    :class:`~.measure.MeasureInput` and :class:`~.measure.MeasureResult` (or
    :mod:`measure`'s). As in AutoTVM, a failure's costs are written as ``[1e9]``.
    Only ``protocol="json"`` is supported (AutoTVM's "pickle" lines hold pickled TVM objects)."""
    if protocol != "json":
        raise ValueError(f"encode: protocol {protocol!r} is not supported; AutoTVM records are written as "
                         "JSON lines (protocol='json')")
    task, config = inp.task, inp.config
    res = result if hasattr(result, "error_kind") else to_measure_result(result)
    spec = _target_spec(task.target)
    space = task.config_space.space_map
    entity = [[name, _KIND_CODE.get(space[name].kind, "ot"), value]
              for name, value in config.knob_values().items()]
    ok = res.error_kind is None
    all_cost = getattr(result, "all_cost", None)
    row = {
        "input": [spec, task.name, list(task.args), {}],
        "config": {"index": config.index, "code_hash": None, "entity": entity},
        "result": [list(res.costs) if ok else [1e9], int(error_no(res.error_kind)),
                   all_cost if all_cost is not None else res.build_time + res.run_time, res.timestamp],
        "version": AUTOTVM_LOG_VERSION,
        "tvm_version": f"autotune {__version__}",
    }
    return json.dumps(row)


def decode(row, protocol: str = "json"):
    """AutoTVM's ``decode``: the ``(MeasureInput, MeasureResult)`` of one line of an AutoTVM
    log (its text, or the parsed dict), or None (with a warning saying why) for a line that
    cannot be used here: a template not registered (import the module that defines it
    first), a config not in its space, a target kind not supported, a malformed line.
    The result is the line's own ``[costs, error_no, all_cost, timestamp]``."""
    if protocol != "json":
        raise ValueError(f"decode: protocol {protocol!r} is not supported; AutoTVM records are read as "
                         "JSON lines (protocol='json')")
    reading = LogReading("<record>")
    try:
        return _pair(json.loads(row) if isinstance(row, str | bytes) else row, reading)
    except _Skip as skip:
        logger.warning("decode: record skipped: %s", skip)
    except json.JSONDecodeError as exc:
        logger.warning("decode: record skipped: not JSON (%s)", exc.msg)
    return None


def measure_str_key(inp, include_config: bool = True) -> str:
    """AutoTVM's ``measure_str_key``: a string naming the target, task name, args (and, with
    ``include_config``, the config) of measure input ``inp``. The target is written with the
    CPU model it means (``llvm`` on this machine and ``llvm -mcpu=<its CPU>`` are one key)."""
    config = str(inp.config) if include_config else ""
    return "".join([_target_spec(inp.target), inp.task.name, str(list(inp.task.args)), "{}", config])


def _target_spec(target) -> str:
    """``target`` as records write it: with the CPU it means (``-mcpu``) where its kind takes one."""
    target = Target(str(target))
    spec = str(target)
    if "mcpu" in target.kind_info.options and "mcpu" not in target.options:
        spec += f" -mcpu={target.model}"  # the CPU it was measured on, for readers elsewhere
    return spec


# ---------------------------------------------------------------------------- reading


@dataclass
class LogReading:
    """What :func:`read_log` made of an AutoTVM log: ``records`` for the tuning log,
    ``skipped`` (reason -> count), ``first_line`` (reason -> first line number with it) and
    ``dropped`` (field or target option -> how many records had it)."""

    path: str
    records: list = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    first_line: dict = field(default_factory=dict)
    dropped: Counter = field(default_factory=Counter)

    def skip(self, reason: str, lineno: int) -> None:
        self.skipped[reason] += 1
        self.first_line.setdefault(reason, lineno)

    def report(self, dropped: bool = True) -> list[str]:
        """One line per reason records were skipped, then (with ``dropped``) one for the fields
        left out."""
        lines = [f"{self.path}: skipped {n} record(s) (first at line {self.first_line[why]}): {why}"
                 for why, n in self.skipped.items()]
        if dropped and self.dropped:
            what = ", ".join(f"{name} ({n})" for name, n in self.dropped.items())
            lines.append(f"{self.path}: AutoTVM fields with no place in the tuning log, not imported: {what}")
        return lines


def read_log(path: str | os.PathLike) -> LogReading:
    """Read an AutoTVM JSON-lines log into :class:`db.Record` objects (see :class:`LogReading`).

    The templates of its records must be registered (import the module that defines them
    first); the file itself need not have been written here.
    """
    reading = LogReading(str(path))
    reading.records = [record for record in _rows(path, reading, _record)]
    return reading


def import_log(log: tuning_db.TuningLog, path: str | os.PathLike, report_dropped: bool = True) -> int:
    """Add the records of AutoTVM log ``path`` to the tuning log ``log``; returns how many were
    new (importing a file twice adds nothing the second time).

    Records that cannot be used are skipped and each reason is logged as a warning, as are
    (with ``report_dropped``) the AutoTVM fields that have no place in the log. A file none
    of whose records can be used raises :class:`AutotuneError` with the reasons.
    """
    reading = read_log(path)
    report = reading.report(dropped=report_dropped)
    if reading.skipped and not reading.records:
        raise AutotuneError(f"no record of AutoTVM log {path} could be imported:\n  " + "\n  ".join(report))
    for line in report:
        logger.warning("%s", line)
    return log.add(reading.records) if reading.records else 0


def load_from_file(filename: str | os.PathLike):
    """AutoTVM's ``load_from_file``: the ``(MeasureInput, MeasureResult)`` pairs of the usable
    records of an AutoTVM log, in file order, each as :func:`decode` makes it. Records that
    cannot be used are skipped, the reasons logged as by :func:`import_log`."""
    reading = LogReading(str(filename))
    pairs = [pair for pair in _rows(filename, reading, _pair)]
    for line in reading.report(dropped=False):
        logger.warning("%s", line)
    yield from pairs


def pick_best(in_file: str | os.PathLike, out_file) -> int:
    """AutoTVM's ``pick_best``: write to ``out_file`` (a path or an open text file) the best
    record of each workload of AutoTVM log ``in_file``, as its original line; returns how
    many. A workload is a target, task name and args; the best is the successful record of
    least mean cost (the first of equal ones). Unlike AutoTVM's, it reads the lines
    themselves, so their templates need not be registered. ``in_file`` may also be an
    iterable of ``(MeasureInput, MeasureResult)`` pairs, such as :func:`load_from_file` gives."""
    if not isinstance(in_file, str | bytes | os.PathLike):
        return _write_lines(out_file, _best_pairs(in_file))
    best: dict[str, tuple[float, str]] = {}
    for _, line, row in _raw_rows(in_file):
        try:
            inp, _, result = _parts(row)
        except _Skip:
            continue
        costs = result[0] if result else None
        if len(result) < 2 or result[1] != 0 or not isinstance(costs, list) or not costs \
                or not all(isinstance(c, int | float) for c in costs):
            continue
        key = _workload_text(inp)
        mean = sum(costs) / len(costs)
        if key not in best or mean < best[key][0]:
            best[key] = (mean, line)
    return _write_lines(out_file, [line for _, line in best.values()])


def _best_pairs(pairs) -> list[str]:
    """The encoded best pair of each workload (:func:`measure_str_key` without the config)."""
    best: dict[str, tuple[float, object, object]] = {}
    for inp, res in pairs:
        if res.error_no != 0 or not res.costs:
            continue
        key, mean = measure_str_key(inp, include_config=False), sum(res.costs) / len(res.costs)
        if key not in best or mean < best[key][0]:
            best[key] = (mean, inp, res)
    return [encode(inp, res) for _, inp, res in best.values()]


def _write_lines(out_file, lines: list[str]) -> int:
    """Write ``lines`` to a path or an open text file; returns how many."""
    text = "".join(line + "\n" for line in lines)
    if hasattr(out_file, "write"):
        out_file.write(text)
    else:
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(text)
    return len(lines)


def split_workload(in_file: str | os.PathLike, clean: bool = True) -> list[str]:
    """AutoTVM's ``split_workload``: write the records of each workload of AutoTVM log
    ``in_file`` to a file of its own, ``<in_file>.000.wkl``, ``<in_file>.001.wkl``, ... (in
    the order workloads first appear); returns their paths. With ``clean``, failures and
    repeated measurements of one config (all but the first) are left out."""
    groups: dict[str, list[str]] = {}
    seen: set[str] = set()
    for _, line, row in _raw_rows(in_file):
        try:
            inp, config, result = _parts(row)
        except _Skip:
            continue
        key = _workload_text(inp)
        group = groups.setdefault(key, [])
        if clean:
            config_key = key + json.dumps(config.get("entity"), sort_keys=True)
            if config_key in seen or len(result) < 2 or result[1] != 0:
                continue
            seen.add(config_key)
        group.append(line)
    paths = []
    for i, (key, lines) in enumerate(groups.items()):
        path = f"{os.fspath(in_file)}.{i:03d}.wkl"
        logger.info("workload %s: %d record(s) in %s", key, len(lines), path)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        paths.append(path)
    return paths


def _lines(path):
    """``(line number, line)`` of the lines of ``path`` that hold something: not blank, no comment."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                yield lineno, line


def _raw_rows(path):
    """``(line number, line, parsed row)`` of the JSON lines of ``path`` (others are skipped)."""
    for lineno, line in _lines(path):
        try:
            yield lineno, line, json.loads(line)
        except json.JSONDecodeError:
            continue


def _workload_text(inp: list) -> str:
    """The workload of an AutoTVM record's input: target, task name, args and kwargs."""
    return json.dumps([inp[0], inp[1], inp[2], inp[3] if len(inp) > 3 else {}], sort_keys=True)


class _Skip(Exception):
    """A record that cannot be imported; the message says why."""


def _rows(path, reading: LogReading, make) -> list:
    """``make(row, reading)`` of each line of AutoTVM log ``path`` that it can make (the others
    are noted in ``reading``)."""
    out = []
    for lineno, line in _lines(path):
        try:
            out.append(make(json.loads(line), reading))
        except _Skip as skip:
            reading.skip(str(skip), lineno)
        except json.JSONDecodeError as exc:
            reading.skip(f"not JSON ({exc.msg})", lineno)
    return out


def _pair(row, reading: LogReading) -> tuple[MeasureInput, MeasureResult]:
    """AutoTVM's ``(MeasureInput, MeasureResult)`` of one parsed line."""
    inp, config, result = _parts(row)
    target, _ = _target(inp[0])
    task = _task(inp[1], inp[2], inp[3] if len(inp) > 3 else {}, target)
    cfg = _config(task, config)
    if len(result) < 4:
        raise _Skip(f"its result has {len(result)} fields, not [costs, error_no, all_cost, timestamp]")
    costs, number, all_cost, timestamp = result[:4]
    try:
        error_kind(number)
    except (TypeError, ValueError):
        raise _Skip(f"unknown AutoTVM error number {number!r}") from None
    costs = tuple(costs) if isinstance(costs, list) else (costs,)
    return (MeasureInput(Target(task.target), task, cfg),
            MeasureResult(costs, int(number), all_cost, timestamp))


def _record(row, reading: LogReading) -> tuning_db.Record:
    """The tuning-log record of one parsed AutoTVM line."""
    inp, config, result = _parts(row)
    target, dropped = _target(inp[0])
    for option in dropped:
        reading.dropped[f"target option {option}"] += 1
    task = _task(inp[1], inp[2], inp[3] if len(inp) > 3 else {}, target)
    cfg = _config(task, config)
    if config.get("code_hash") is not None:
        reading.dropped["code_hash"] += 1
    if len(result) < 4:
        raise _Skip(f"its result has {len(result)} fields, not [costs, error_no, all_cost, timestamp]")
    costs, number, all_cost, timestamp = result[:4]
    if all_cost is not None:
        reading.dropped["all_cost"] += 1
    try:
        kind = error_kind(number)
    except (TypeError, ValueError):
        raise _Skip(f"unknown AutoTVM error number {number!r}") from None
    ok = kind is None
    if ok and not (isinstance(costs, list) and costs and all(isinstance(c, int | float) for c in costs)):
        raise _Skip(f"a successful result without costs in seconds: {costs!r}")
    message = "" if ok else f"AutoTVM {MeasureErrorNo(number).name}" + _error_text(costs)
    mean = sum(costs) / len(costs) if ok else None
    try:
        return tuning_db.Record(
            workload_key=task.workload_key, template=task.name, args=list(task.args), target=task.target,
            target_model=Target(task.target).model, config=cfg.to_json(), config_index=cfg.index,
            costs=list(costs) if ok else [], error_kind=None if ok else kind.value, error_msg=message,
            timestamp=float(timestamp), gflops=gflops(task.flop, mean))
    except (tuning_db.RecordError, TypeError, ValueError) as exc:
        raise _Skip(f"not a valid record: {exc}") from None


def _error_text(costs) -> str:
    """The error message AutoTVM keeps in ``costs`` in memory (its files hold ``[1e9]``)."""
    texts = [c for c in costs if isinstance(c, str)] if isinstance(costs, list) else []
    return f": {texts[0][:500]}" if texts else ""


def _parts(row) -> tuple[list, dict, list]:
    """``(input, config, result)`` of a line of either AutoTVM format."""
    if isinstance(row, dict) and {"input", "config", "result"} <= set(row):
        inp, config, result = row["input"], row["config"], row["result"]
    elif isinstance(row, dict) and {"i", "r"} <= set(row) and isinstance(row["i"], list) \
            and len(row["i"]) >= 6:
        inp, config, result = row["i"][:4], row["i"][5], row["r"]
    else:
        raise _Skip("not an AutoTVM record (no 'input', 'config' and 'result')")
    if not (isinstance(inp, list) and len(inp) >= 3 and isinstance(inp[0], str) and isinstance(inp[1], str)):
        raise _Skip(f"its input is not [target, task name, args, kwargs]: {inp!r}")
    if not isinstance(config, dict) or not isinstance(config.get("entity"), list):
        raise _Skip("its config has no 'entity' list")
    if not isinstance(result, list):
        raise _Skip(f"its result is not a list: {result!r}")
    return inp, config, result


def _target(spec: str) -> tuple[str, list[str]]:
    """Our spelling of AutoTVM target ``spec`` and the options left out of it."""
    tokens = spec.split()
    kind = tokens[0] if tokens else ""
    kinds = target_kinds()
    if kind not in kinds:
        raise _Skip(f"target kind {kind!r} is not supported here (only {' and '.join(sorted(kinds))})")
    options = set(kinds[kind].options) - _DROPPED_OPTIONS
    kept, dropped = [kind], []
    for tok in tokens[1:]:
        name = tok.lstrip("-").partition("=")[0]
        (kept if name in options else dropped).append(tok)
    return " ".join(kept), [tok.partition("=")[0] for tok in dropped]


def _task(name: str, args, kwargs, target: str):
    if name not in list_templates():
        raise _Skip(f"template {name!r} is not registered here (import the module that defines it first)")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise _Skip(f"task {name!r}: args must be a list and kwargs a dict, got {args!r}, {kwargs!r}")
    try:
        task = create_task(name, args, target, kwargs=kwargs or None)
        task.config_space  # noqa: B018 - defined here, so that a failing template is a skip
    except Exception as exc:  # noqa: BLE001 - any failure of the user's template is a reason to skip
        why = exc if isinstance(exc, SearchSpaceError) else f"{type(exc).__name__}: {exc}"
        raise _Skip(f"task {name}{tuple(args)!r} on {target!r} cannot be made here: {why}") from None
    return task


def _config(task, config: dict):
    """The config of ``task`` that AutoTVM's ``config`` describes (AutoTVM's index is not ours:
    the knob values decide)."""
    space = task.config_space.space_map
    knobs = {}
    for item in config["entity"]:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            raise _Skip(f"config entity {item!r} is not [knob, kind, value]")
        name, code, value = item
        knob = space.get(name)
        if knob is None:
            raise _Skip(f"knob {name!r} is not in the space of {task.name!r} here "
                        f"(it has {', '.join(space) or 'no knobs'})")
        if code == "sp" and isinstance(value, list) and value and value[0] == -1:
            value = _full_split(knob, value)
        knobs[name] = value
    try:
        return task.config_space.from_json({"knobs": knobs})
    except SearchSpaceError as exc:
        raise _Skip(f"config not in the space of {task.name!r} here: {exc}") from None


def _full_split(knob, value: list) -> list:
    """A split written as ``[-1, inner...]`` (AutoTVM leaves the outer size implicit) as the
    split of the knob with those inner sizes."""
    for entity in knob.entities:
        if list(entity.size[1:]) == value[1:]:
            return list(entity.size)
    raise _Skip(f"split {value!r} of knob {knob.name!r} is not in its space here")
