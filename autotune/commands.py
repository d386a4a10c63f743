"""What the ``autotune`` commands do, once :mod:`autotune.cli` has parsed their arguments.

:func:`run` runs the command an argument namespace names and turns every error into one
line on stderr and an exit status: 2 for a usage error (an unknown template, bad
``--args``, an unknown target), 1 for a failure at run time (an unreachable database,
a failed build), 130 when interrupted; ``--debug`` shows the traceback. This module
imports the compiler, the templates, the measurement code and the tuning log, so the
command line imports it only once a command runs (``autotune --help`` stays fast).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import shlex
import sys
import time
import traceback
from pathlib import Path

import autotune
import db
import search_spaces
from autotune.autotvm import import_log
from autotune.cli import DEFAULT_TARGET, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError
from autotune.cli_args import (
    ArgsError,
    bind_template_args,
    format_args,
    nonpositive_sizes,
    parse_args_text,
    signature_text,
)
from autotune.errors import AutotuneError
from autotune.model_commands import cmd_build_model, cmd_run_model, cmd_tune_model
from autotune.pin import read_pin, write_pin
from autotune.report import (
    IMAGE_SUFFIXES,
    format_table,
    run_lines,
    stale_figures,
    summarize,
    summary_table,
    write_html,
    write_plot,
)
from autotune.selection import config_median, gflops, target_label, workload_label
from autotune.tuning import check_measurable
from compiler import backends
from compiler.errors import CompilerError, TargetError
from compiler.target import Target
from measure import LocalBuilder, LocalRunner, MeasureOptions
from search_spaces.registry import template_kind

__all__ = ["run", "measure_options", "cluster_error"]


# ---------------------------------------------------------------------------- shared steps


def _out(text: str = "") -> None:
    print(text, flush=True)


def _err(text: str = "") -> None:
    print(text, file=sys.stderr, flush=True)


def _print_json(data) -> None:
    """``data`` as the one JSON document on stdout of a command run with ``--json``."""
    print(json.dumps(data, indent=1, default=_json_default), flush=True)


def _json_default(value):
    if isinstance(value, tuple | set):
        return list(value)
    return str(value)


def _finite(x: float | None) -> float | None:
    """``x``, or None for a missing or infinite figure (JSON has no infinity)."""
    return x if x is not None and x == x and abs(x) != float("inf") else None


def _db_arg(where: str) -> str:
    """A ``--db`` value as the hints print it: shell-quoted, its password hidden."""
    return shlex.quote(db.hide_passwords(where))


def _make_task(ns):
    """The task of ``ns.template`` on ``ns.args`` for ``ns.target``, its space defined;
    every mistake in them is a UsageError."""
    try:
        Target(ns.target)  # an unknown kind, option or CPU stops here, before any worker starts
    except CompilerError as err:
        raise UsageError(f"--target: {err}") from None
    positional, keywords = parse_args_text(ns.args)
    registered = search_spaces.list_templates()
    if ns.template not in registered:
        known = ", ".join(registered) or "none"
        raise UsageError(f"unknown template {ns.template!r} (registered: {known}; "
                         "see 'autotune templates')")
    kind = template_kind(ns.target)
    try:
        impl = search_spaces.get_template(ns.template).impl(kind)
    except search_spaces.SearchSpaceError as err:
        raise UsageError(f"{err}; pick another --target") from None
    args = None
    try:
        args = bind_template_args(ns.template, impl.func, positional, keywords)
        task = search_spaces.create_task(ns.template, args, ns.target)
        space = task.config_space  # defines the space: bad values fail here, not in a worker
    except (ArgsError, search_spaces.SearchSpaceError) as err:
        sizes = nonpositive_sizes(impl.func, args) if args is not None else []
        if sizes:  # the template's own error ("max() arg is an empty sequence") would not say so
            bad = ", ".join(f"{name}={value}" for name, value in sizes)
            raise UsageError(f"template {ns.template!r}: --args {ns.args}: {bad}: sizes must be 1 or more "
                             f"(the template takes {signature_text(impl.func)})") from None
        raise UsageError(_bad_args_message(str(err), positional)) from None
    if space.size_is_exact and space.size == 0:
        raise UsageError(_empty_space_message(task))
    return task


def _empty_space_message(task) -> str:
    space = task.config_space
    return (f"{workload_label(task.name, task.args)}: the {space.describe_constraints()} reject every one of "
            f"the {space.raw_size:,} configs of its space: nothing to tune or build (other --args, or a "
            "template whose constraints fit them)")


def _bad_args_message(text: str, positional: list) -> str:
    # The template's own message is the useful part of "failed while defining its space".
    text = text.replace(" failed while defining its space for args", ": bad arguments")
    bare = [isinstance(v, str) for v in positional]
    if any(a and b for a, b in zip(bare, bare[1:])):
        text += " (a value that holds commas must be quoted: --args \"64,128,'add,mul,relu',float32\")"
    return text


def _open_log(where: str, must_exist: bool = False):
    if must_exist and "://" not in where and where != ":memory:" and not os.path.exists(where):
        raise db.TuningLogError(f"no tuning log at {where} (tune something into it first: "
                                "autotune tune ... --db " + shlex.quote(where) + ")")
    return db.open(where)


def _labels(task, on: str = "on") -> str:
    """``matmul(64,64,64,float32) on llvm (znver4)``: a task as the summaries name it."""
    target = target_label(task.target, Target(task.target).model)
    return f"{workload_label(task.name, task.args)} {on} {target}"


def _fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.4g} us" if seconds < 1e-3 else f"{seconds * 1e3:.4g} ms"


def _flop_text(flop: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if flop >= scale:
            return f"{flop / scale:.4g} {unit}"
    return f"{flop:g} FLOP"


def _shell_args(task) -> str:
    return shlex.quote(format_args(task.args))


# ---------------------------------------------------------------------------- commands


def _target_kind_for(kind: str) -> str:
    """The target kind that a template kind serves (the first registered backend's:
    ``"cpu"`` -> ``"llvm"``); ``kind`` itself for "any"."""
    return next((b.kind for b in backends.registered() if b.template_kind == kind), kind)


def _paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "")


# The end of a sentence: a full stop (or ! ?) before a space or the end, except after an
# abbreviation ("e.g. the"), and never inside a name such as topi.nn.softmax.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bcf)(?<!\bvs)[.!?](?=\s|$)")


def _first_sentence(paragraph: str) -> str:
    """The first whole sentence of a paragraph (the paragraph itself when it is one)."""
    end = _SENTENCE_END.search(paragraph)
    return paragraph[:end.end()] if end else paragraph


def _parameters(func) -> list[dict]:
    out = []
    for p in inspect.signature(func).parameters.values():
        item = {"name": p.name}
        if p.annotation is not inspect.Parameter.empty:
            ann = p.annotation
            item["type"] = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
        if p.default is not inspect.Parameter.empty:
            item["default"] = p.default
        out.append(item)
    return out


def _cmd_templates(ns) -> int:
    rows = [("template", "targets", "arguments")]
    docs, data = [], []
    for name, kinds in search_spaces.list_templates().items():
        impl = search_spaces.get_template(name).impl(kinds[0])
        targets = [_target_kind_for(k) for k in kinds]
        rows.append((name, ",".join(targets), signature_text(impl.func)))
        paragraph = _paragraph(impl.func.__doc__)
        docs.append(_first_sentence(paragraph))
        data.append({"name": name, "targets": targets, "arguments": signature_text(impl.func),
                     "parameters": _parameters(impl.func), "summary": docs[-1], "doc": paragraph})
    if ns.json:
        _print_json(data)
        return EXIT_OK
    header, *lines = format_table(rows, right=()).splitlines()
    _out(header)
    for line, doc in zip(lines, docs):
        _out(line)
        if doc:
            _out(f"    {doc}")
    _out()
    _out("Show a template's knobs with: autotune space TEMPLATE --args VALUES "
         "(e.g. autotune space matmul --args 1024,1024,1024,float32)")
    return EXIT_OK


def _cmd_space(ns) -> int:
    task = _make_task(ns)
    space = task.config_space
    default = space.default_config.knob_values()
    if ns.json:
        _print_json({"template": task.name, "args": list(task.args), "target": task.target,
                     "workload": workload_label(task.name, task.args), "flop": task.flop,
                     "size": space.size, "size_is_exact": space.size_is_exact, "raw_size": space.raw_size,
                     "knobs": [{"name": k.name, "kind": k.kind, "choices": len(k),
                                "default": default[k.name]} for k in space.knobs]})
        return EXIT_OK
    rows = [("knob", "kind", "choices", "default", "e.g.")]
    for knob in space.knobs:
        examples = [knob[k].value() for k in range(len(knob)) if k != knob.default][:2]
        rows.append((knob.name, knob.kind, str(len(knob)), repr(default[knob.name]),
                     ", ".join(repr(e) for e in examples)))
    _out(f"{_labels(task)}: {_flop_text(task.flop)} per run")
    _out(format_table(rows, right=[2]))
    exact = "" if space.size_is_exact else " (estimated by sampling)"
    _out(f"space: {space.size:,} valid configs{exact}; {space.raw_size:,} before constraints")
    return EXIT_OK


def measure_options(ns, timing: dict | None = None) -> MeasureOptions:
    """The builder and runner that ``ns`` asks for (``--cluster``, ``--timeout``, ``--target``):
    local workers, or Ray workers (with a GPU each for a target whose code runs on one); the
    runner times with ``timing`` (its keyword arguments: ``number``, ``repeat``, ``min_repeat_ms``,
    ``cache_flush``) where given."""
    timing = dict(timing or {})
    if not ns.cluster:
        return MeasureOptions(LocalBuilder(timeout=ns.timeout), LocalRunner(timeout=ns.timeout, **timing))
    try:
        from measure.ray import RayBuilder, RayRunner  # Ray is optional, and heavy: only for --cluster
    except ImportError as err:
        raise UsageError(f"--cluster needs Ray and measure.ray: {err}") from None
    address = None if ns.cluster == "local" else ns.cluster
    gpu = Target(ns.target).device_type != "cpu"
    return MeasureOptions(RayBuilder(address=address, timeout=ns.timeout),
                          RayRunner(address=address, timeout=ns.timeout, gpu=gpu, **timing))


def cluster_error(ns, err: Exception) -> AutotuneError:
    """Ray's failure to join ``--cluster`` in this command line's words: Ray's own message
    advises flags (``--address``) that ``autotune`` does not have."""
    text = " ".join(str(err).split())
    if "could not find any running ray instance" in text.lower():
        found = ("no running Ray cluster was found (none started with 'ray start' on this node, "
                 "no RAY_ADDRESS)")
    else:  # Ray's reason, without its advice (which begins "Please")
        found = f"Ray cannot join it: {text.split(' Please ')[0]}"
    return AutotuneError(
        f"--cluster {ns.cluster}: {found}. Start a cluster with 'ray start --head' on this node and run "
        "again, or give a running cluster's address (--cluster HOST:6379 or --cluster ray://HOST:10001), or "
        "use --cluster local to start Ray in this process, or leave out --cluster to measure on this machine")


def _cmd_tune(ns) -> int:
    say = _err if ns.json else _out  # with --json, stdout holds the JSON document alone
    task = _make_task(ns)
    space = task.config_space
    options = measure_options(ns)
    try:
        check_measurable([task], options)  # before the header, the log or any worker
        log = _open_log(ns.db)
    except BaseException:
        options.close()
        raise
    try:
        where = f"Ray cluster {ns.cluster}" if ns.cluster else "this machine"
        earlier = log.count(task, kind=db.TRIAL)
        if ns.total:
            budget = f"{ns.trials} trials in all ({earlier} in the log already)"
        else:
            budget = f"{ns.trials} trials" + (f" on top of the log's {earlier}" if earlier else "")
        say(f"Tuning {_labels(task)}")
        say(f"  {space.size:,} configs, {len(space.knobs)} knobs; tuner {ns.tuner}, {budget} "
            f"on {where}; log {db.hide_passwords(log.where)}")
        progress = sys.stderr.isatty() if ns.progress is None else ns.progress
        start = time.perf_counter()
        try:
            result = autotune.tune(task, trials=ns.trials, tuner=ns.tuner, db=log, measure_option=options,
                                   early_stopping=ns.early_stopping, batch_size=ns.batch_size,
                                   seed=ns.seed, progress=progress, total=ns.total,
                                   warm_start=ns.warm_start)
        except ConnectionError as err:
            if ns.cluster:
                raise cluster_error(ns, err) from err
            raise
        finally:
            options.close()
        wall = time.perf_counter() - start
        records = log.records(task)
    finally:
        log.close()

    errors = ", ".join(f"{k}: {n}" for k, n in sorted(result.errors.items()))
    label = workload_label(task.name, task.args)
    summary = {"workload": label, "template": task.name, "args": list(task.args), "target": task.target,
               "trials": result.trials, "earlier_trials": result.resumed,
               "errors": dict(result.errors), "stopped": result.stopped, "seconds": wall,
               "remeasured": result.remeasured, "rerun": _rerun_command(ns, task, result),
               "best_config": None, "best_seconds": None, "best_gflops": None, "best_measurements": 0,
               "default_seconds": None, "default_gflops": None, "speedup": None}
    say()
    say(f"workload  {_labels(task)}")
    say(f"trials    {result.trials} this run" + (f" (+{result.resumed} earlier)" if result.resumed else "")
        + f", {sum(result.errors.values())} errors" + (f" ({errors})" if errors else "")
        + f"; stopped: {result.stopped}; {wall:.1f} s")
    if result.remeasured:
        say(f"          then {result.remeasured} re-measurements of the best configs (not trials)")
    say(_rerun_line(ns, task, result))
    status = EXIT_OK if result.stopped != "interrupted" else EXIT_INTERRUPTED
    if result.best_config is None:
        if result.trials + result.resumed == 0 and result.stopped != "interrupted":
            # Nothing was measured and nothing failed: the tuner found no config to propose.
            say(f"no config was measured: the tuner found no config of {label} "
                f"that passes its {space.describe_constraints()} (the space holds {space.raw_size:,} configs "
                "before them)")
        else:
            say("no config ran successfully; see the errors with: autotune report --db " + _db_arg(ns.db))
        if ns.json:
            _print_json(summary)
        return status if status == EXIT_INTERRUPTED else EXIT_FAILURE
    best_knobs = result.best_config.knob_values()
    best, n_best = config_median(records, best_knobs)
    default, n_default = config_median(records, space.default_config.knob_values())
    rate = gflops(task.flop, best)
    summary.update(best_config=best_knobs, best_seconds=_finite(best), best_gflops=_finite(rate),
                   best_measurements=n_best, default_seconds=_finite(default),
                   default_gflops=_finite(gflops(task.flop, default)) if default is not None else None,
                   speedup=_finite(default / best) if default is not None and best else None)
    say(f"best      {_fmt_ms(best)}  {rate:.1f} GFLOPS  (median of {n_best} measurements)")
    if default is not None:
        say(f"default   {_fmt_ms(default)}  {gflops(task.flop, default):.1f} GFLOPS  "
            f"(the untuned default config; median of {n_default})")
        say(f"speedup   {default / best:.2f}x over the default config")
    else:
        say("default   - (the default config has no successful measurement)")
    say("best config:")
    say(format_table([(f"  {k}", repr(v)) for k, v in best_knobs.items()], right=()))
    say()
    db_arg = _db_arg(ns.db)
    say(f"next: autotune build {task.name} --args {_shell_args(task)}{_target_flag(ns)} --db {db_arg} "
        f"-o {task.name}.so")
    say(f"      autotune report --db {db_arg} --out report.html")
    if ns.json:
        _print_json(summary)
    return status


def _target_flag(ns) -> str:
    return "" if ns.target == DEFAULT_TARGET else f" --target {shlex.quote(ns.target)}"


def _rerun_command(ns, task, result) -> str:
    """The command that finishes this run's budget: the log's trials of the workload before
    this run plus --trials, counted with --total (so running it again does nothing more)."""
    goal = ns.trials if ns.total else result.resumed + ns.trials
    return (f"autotune tune {task.name} --args {_shell_args(task)}{_target_flag(ns)} --trials {goal} --total "
            f"--tuner {ns.tuner} --db {_db_arg(ns.db)}")


def _rerun_line(ns, task, result) -> str:
    """What running the same command again would do, and the command that finishes this
    run's budget when it stopped short (after Ctrl-C or a kill, too)."""
    done = result.resumed + result.trials
    if ns.total:
        if done >= ns.trials:
            return f"rerun     the same command makes no trial: the log holds {done} of --trials {ns.trials}"
        return (f"rerun     the same command makes the {ns.trials - done} trials left: the log holds {done} "
                f"of --trials {ns.trials}")
    text = f"rerun     the same command makes {ns.trials} more trials on top of these {done}"
    if result.stopped == "interrupted":
        text += (f"; to make only the {ns.trials - result.trials} trials this run has left: "
                 f"{_rerun_command(ns, task, result)}")
    return text


def _cmd_best(ns) -> int:
    with _open_log(ns.db, must_exist=True) as log:
        rows = summarize(log, ns.workload)
        runs = log.runs()
    if ns.json:
        _print_json({"workloads": [_summary_json(s) for s in rows],
                     "runs": [{"run_id": r.run_id, "tuner": r.tuner, "status": r.status, "started": r.started,
                               "ended": r.ended} for r in runs]})
        return EXIT_OK
    if not rows:
        matching = f" of a workload matching {ns.workload!r}" if ns.workload else ""
        _out(f"{db.hide_passwords(ns.db)}: no records{matching}")
        return EXIT_OK
    _out(format_table(summary_table(rows)))
    if stale := stale_figures(rows):
        _out(stale)
    _out()
    for line in run_lines(runs):
        _out(line)
    if ns.configs:
        for s in rows:
            if s.best_config:
                _out()
                _out(f"{s.label} on {s.target_label}:")
                _out(format_table([(f"  {k}", repr(v)) for k, v in s.best_config.items()], right=()))
    return EXIT_OK


def _summary_json(s) -> dict:
    """A workload of ``autotune best`` as JSON: the figures of its table row, unrounded."""
    return {"workload": s.label, "key": s.key, "template": s.template, "args": s.args, "target": s.target,
            "target_model": s.target_model, "best_seconds": _finite(s.best_cost),
            "best_gflops": _finite(s.best_gflops), "best_measurements": s.best_measurements,
            "best_config": s.best_config, "trials": s.trials, "errors": s.errors,
            "error_kinds": s.error_kinds, "remeasured": s.remeasured, "code_version": s.best_code_version}


def _make_out_dir(out: str) -> None:
    """Create the directory that ``--out`` names, if missing; one clear line if it cannot be."""
    parent = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        raise OSError(f"--out {out}: cannot create the directory {parent}: {err.strerror or err}") from None


def _cmd_report(ns) -> int:
    suffix = Path(ns.out).suffix.lower()
    if suffix not in (".html", ".htm", *IMAGE_SUFFIXES):
        raise UsageError(f"--out {ns.out}: write a .html report or a {', '.join(IMAGE_SUFFIXES)} plot")
    with _open_log(ns.db, must_exist=True) as log:
        _make_out_dir(ns.out)  # once the log is open: a mistaken --db leaves no new directory
        if suffix in IMAGE_SUFFIXES:
            n = write_plot(log, ns.out, ns.workload, peak_gflops=ns.peak_gflops)
            _out(f"wrote {ns.out}: tuning curves of {n} workload{'s' * (n != 1)}")
        else:
            n = write_html(log, ns.out, ns.workload, peak_gflops=ns.peak_gflops)
            _out(f"wrote {ns.out}: {n} workload{'s' * (n != 1)}, a tuning curve each and the summary table")
    return EXIT_OK


def _cmd_export(ns) -> int:
    with _open_log(ns.db, must_exist=True) as log:
        n = log.export_jsonl(ns.out)
        runs = len(log.runs())
    _out(f"exported {n} records and {runs} runs from {db.hide_passwords(ns.db)} to {ns.out}")
    return EXIT_OK


def _cmd_import(ns) -> int:
    for path in ns.files:
        if not os.path.isfile(path):
            raise db.TuningLogError(f"cannot read {path}: no such file")
    if ns.format == "autotvm":
        def read(log, path):
            return import_log(log, path)
    else:
        def read(log, path):
            return log.import_jsonl(path)
    with _open_log(ns.db) as log:
        before = log.count()
        for path in ns.files:
            added = read(log, path)
            _out(f"imported {added} new records from {path}")
        total = log.count()
    _out(f"{db.hide_passwords(ns.db)} now holds {total} records ({total - before} new)")
    return EXIT_OK


def _cmd_pin(ns) -> int:
    with _open_log(ns.db, must_exist=True) as log:
        n = write_pin(log, ns.out, template=ns.template, target=ns.target)
    what = " of " + " on ".join(f for f in (ns.template, ns.target) if f) if ns.template or ns.target else ""
    _out(f"pinned the chosen config of {n} workload{'s' * (n != 1)}{what} from {db.hide_passwords(ns.db)} "
         f"to {ns.out}")
    if not n:
        _out("(no workload with a successful measurement matched: the file has no entry)")
    return EXIT_OK


def _cmd_build(ns) -> int:
    task = _make_task(ns)
    out_dir = os.path.dirname(os.path.abspath(ns.out))
    if not os.path.isdir(out_dir):
        raise OSError(f"cannot write {ns.out}: no directory {out_dir}")
    if ns.db and _is_pin_file(ns.db):
        config, measured = _pinned(ns.db, task)
        mod = autotune.build(task.name, task.args, target=task.target, db=ns.db,
                             func_name=ns.name or task.name)
    else:
        log = _open_log(ns.db, must_exist=True) if ns.db else None
        try:
            config = autotune.apply_history_best(log).lookup(task.target, task) if log is not None else None
            measured = None if config is None else config_median(log.records(task), config.knob_values())[0]
            mod = autotune.build(task.name, task.args, target=task.target, db=log,
                                 func_name=ns.name or task.name)
        finally:
            if log is not None:
                log.close()
    mod.export_library(ns.out)
    if config is None:
        source = "the untuned default config"
        if ns.db:
            source += f" ({db.hide_passwords(ns.db)} has no record of this workload)"
    else:
        when = f", {_fmt_ms(measured)} when tuned" if measured is not None else ""
        source = f"the best config of {db.hide_passwords(ns.db)}{when}"
    _out(f"built {_labels(task, on='for')} with {source}")
    _out(f"wrote {ns.out}: entry function {mod.entry_name!r}; load it with "
         f"compiler.runtime.load_module({ns.out!r})")
    return EXIT_OK


def _is_pin_file(where: str) -> bool:
    """Whether ``--db`` names a pin file (``autotune pin``'s JSON) rather than a tuning log."""
    return "://" not in where and where.lower().endswith(".json")


def _pinned(where: str, task):
    """The config a pin file gives ``task`` (own or borrowed; None: the default config) and
    the pinned median time of the workload's own entry (None when it has none)."""
    if not os.path.isfile(where):
        raise db.TuningLogError(f"no pin file at {where} (write one with: autotune pin --db tuning.db -o "
                                f"{shlex.quote(where)})")
    config = autotune.apply_history_best(where).lookup(task.target, task)
    args = json.loads(json.dumps(list(task.args), default=list))
    own = [e for e in read_pin(where) if e["template"] == task.name and e["args"] == args
           and db.target_kind(e["target"]) == db.target_kind(task.target)]
    return config, (own[0]["cost"] if own and config is not None else None)


# ---------------------------------------------------------------------------- running a command

_COMMANDS = {"tune": _cmd_tune, "best": _cmd_best, "report": _cmd_report, "export": _cmd_export,
             "import": _cmd_import, "pin": _cmd_pin, "build": _cmd_build, "templates": _cmd_templates,
             "space": _cmd_space, "tune-model": cmd_tune_model, "build-model": cmd_build_model,
             "run-model": cmd_run_model}


def run(ns) -> int:
    """Run the command ``ns.command`` with the arguments :mod:`autotune.cli` parsed into ``ns``;
    returns the exit status (an error is one line on stderr, its traceback with ``--debug``)."""
    _setup_logging(ns.verbose)
    try:
        return _COMMANDS[ns.command](ns)
    except KeyboardInterrupt:
        print(f"autotune {ns.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `autotune templates | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:  # noqa: BLE001 - every error becomes one line and an exit status
        if ns.debug:
            print(db.hide_passwords(traceback.format_exc()), end="", file=sys.stderr)
        code, message = _exit_code(err)
        print(f"autotune {ns.command}: error: {message}", file=sys.stderr)
        return code


def _exit_code(err: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message for an error a command raised."""
    message = db.hide_passwords(" ".join(str(err).split())) or type(err).__name__
    if isinstance(err, UsageError | ArgsError | TargetError):
        return EXIT_USAGE, message
    if isinstance(err, db.TuningLogError | search_spaces.SearchSpaceError | AutotuneError | CompilerError):
        return EXIT_FAILURE, message
    if isinstance(err, OSError):
        return EXIT_FAILURE, message
    return EXIT_FAILURE, f"{type(err).__name__}: {message} (run with --debug for the traceback)"


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"autotune: {record.levelname.lower()}: {db.hide_passwords(record.getMessage())}"


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)


