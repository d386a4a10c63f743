"""The ``autotune`` command line.

::

    autotune templates                                    every template, its targets and arguments
    autotune space matmul --args 1024,1024,1024,float32   its knobs and the size of its space
    autotune tune matmul --args 1024,1024,1024,float32 --trials 500 --tuner xgb --db tuning.db
    autotune best --db tuning.db                          the best of each workload, as a table
    autotune report --db tuning.db --out report.html      tuning curves and the table (or --out curve.png)
    autotune export --db tuning.db -o log.jsonl           the log as JSON lines (and `autotune import`)
    autotune import --format autotvm --db tuning.db tvm.log   an AutoTVM log's records, into the log
    autotune pin --db tuning.db -o pinned.json            the chosen config of each workload, to ship
    autotune build matmul --args 1024,1024,1024,float32 --db tuning.db -o kernel.so

Every subcommand has ``--help``. Errors a user can make (an unknown template, bad
``--args``, an unknown target, an unreachable database) print one line on stderr
and exit with 2 (usage) or 1 (a failure at run time); ``--debug`` shows tracebacks.
Heavy modules (the compiler, the tuners, the database) are imported only by the
subcommand that needs them, so ``autotune --help`` answers at once.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence

from autotune import __version__

__all__ = ["COMMANDS", "PLANNED_COMMANDS", "UsageError", "main"]

COMMANDS = ("tune", "best", "report", "export", "import", "pin", "build", "templates", "space")
PLANNED_COMMANDS = COMMANDS  # the name older code and tests use

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_DESCRIPTION = (
    "Autotuning tensor compiler: describe a tensor computation once, pick a schedule "
    "template whose choices are knobs, and let the tuner find the fastest knob values "
    "for your hardware, keeping every measurement in an SQL tuning log."
)
_EPILOG = """\
quick start:
  autotune templates
  autotune tune matmul --args 512,512,512,float32 --trials 64 --db tuning.db
  autotune best --db tuning.db
  autotune report --db tuning.db --out report.html
  autotune build matmul --args 512,512,512,float32 --db tuning.db -o matmul.so

--args: comma-separated values in the template's parameter order (ints, floats,
true/false, strings); quote a string holding commas ("64,128,'add,mul,relu',float32"),
write pairs as (1,1), set a parameter by name (stride=2), or give a JSON list
('[64, 128, "add,mul,relu", "float32"]').

Run 'autotune COMMAND --help' for the options of a command."""


class UsageError(Exception):
    """A mistake in the command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2), and
    which reads a word that starts with '-' and a digit as a value, never as an option."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # argparse up to Python 3.12 takes "-64" for a value but "-64,128,128,float32" for an
        # unknown option ("--args: expected one argument"); newer versions match this prefix
        # instead. No option of ours looks like a number, so nothing else changes meaning.
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ---------------------------------------------------------------------------- parser


def _add_db(p: argparse.ArgumentParser, required: bool = False, help_extra: str = "") -> None:
    p.add_argument("--db", required=required, default=None if required else "tuning.db",
                   metavar="PATH_OR_URL",
                   help="tuning log: an SQLite file (tuning.db), sqlite:///... or postgresql://user:pw@host/db"
                        + help_extra + ("" if required else " (default: tuning.db)"))


def _add_task(p: argparse.ArgumentParser) -> None:
    p.add_argument("template", help="template name (see 'autotune templates')")
    p.add_argument("--args", required=True, metavar="VALUES",
                   help="the template's arguments, e.g. 1024,1024,1024,float32 (see 'autotune --help')")
    p.add_argument("--target", default="llvm",
                   help="compilation target: 'llvm' (this CPU), 'llvm -mcpu=...', 'cuda' (default: llvm)")


def _build_parser() -> _Parser:
    parser = _Parser(prog="autotune", description=_DESCRIPTION, epilog=_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", help="log what the library does (INFO)")
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=_Parser)

    p = sub.add_parser("tune", parents=[common], help="tune a template on arguments; record every trial",
                       description="Search a template's config space for the fastest config on this "
                                   "machine (or a Ray cluster), recording every measurement in the log. "
                                   "Tuning a workload again resumes where the log left off: configs the "
                                   "log holds are not measured again and guide the tuner. A rerun (after "
                                   "Ctrl-C or a kill, too) makes --trials new trials on top of the log's; "
                                   "with --total, --trials counts the log's earlier trials of the workload, "
                                   "so the same command run again finishes the budget. At the end the "
                                   "best few configs are measured again (re-measurements, not trials).")
    _add_task(p)
    p.add_argument("--trials", type=_positive_int, default=500,
                   help="new trials to make (default: 500); with --total, trials in all")
    p.add_argument("--total", action="store_true",
                   help="count the log's earlier trials of this workload in --trials: make only the trials "
                        "left, and nothing once the log holds --trials (to finish a run that was cut short)")
    p.add_argument("--tuner", default="xgb", choices=("xgb", "ga", "random", "grid", "optuna"),
                   help="search strategy (default: xgb)")
    _add_db(p)
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="measure on a Ray cluster: 'auto' (this node belongs to one), 'ray://host:10001', "
                        "or 'local' (start Ray here)")
    p.add_argument("--early-stopping", type=_positive_int, metavar="N",
                   help="stop after N trials without improvement")
    p.add_argument("--seed", type=_seed, help="random seed of the tuner (0 to 2**32-1)")
    p.add_argument("--batch-size", type=_positive_int, metavar="N",
                   help="candidates per round (default: 16 for xgb and ga, 8 otherwise)")
    p.add_argument("--timeout", type=_positive_seconds, default=10.0, metavar="S",
                   help="seconds a build or a run may take before it counts as an error (default: 10)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    p.add_argument("--warm-start", type=_count, default=0, metavar="N",
                   help="first measure up to N configs borrowed (and adapted) from the log's nearest "
                        "tuned workloads of the template; they count as trials (default: 0)")
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("templates", parents=[common], help="list the registered templates",
                       description="List every registered template with its targets and arguments.")
    p.set_defaults(func=_cmd_templates)

    p = sub.add_parser("space", parents=[common], help="show a template's knobs and the size of its space",
                       description="Show the knobs of a template on given arguments and how many "
                                   "configs its space holds.")
    _add_task(p)
    p.set_defaults(func=_cmd_space)

    p = sub.add_parser("best", parents=[common], help="the best result of each workload in a log",
                       description="Print a table: workload, target, best time, GFLOPS, trials, errors. "
                                   "The best time is the median of every measurement of the config "
                                   "that 'autotune build' would use. Then the tuning runs by status; "
                                   "a run whose process died (no heartbeat for a while) shows as "
                                   "dead.")
    _add_db(p)
    p.add_argument("--workload", metavar="TEXT", help="only workloads whose name contains TEXT "
                                                      "(or whose key starts with it)")
    p.add_argument("--configs", action="store_true", help="also print each best config")
    p.set_defaults(func=_cmd_best)

    p = sub.add_parser("report", parents=[common], help="an HTML report (or a plot) of a tuning log",
                       description="Write an HTML page with a tuning curve per workload (best GFLOPS "
                                   "against trials, every trial a point, errors as red crosses) and the "
                                   "summary table; or, for an --out ending in .png, .svg or .pdf, the "
                                   "curves alone.")
    _add_db(p)
    p.add_argument("-o", "--out", default="report.html",
                   help="report.html, or curve.png (default: report.html)")
    p.add_argument("--workload", metavar="TEXT", help="only workloads whose name contains TEXT")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("export", parents=[common], help="write a log as JSON lines",
                       description="Write every run and record of a tuning log as JSON lines "
                                   "(readable by 'autotune import').")
    _add_db(p)
    p.add_argument("-o", "--out", required=True, metavar="FILE.jsonl", help="the file to write")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("import", parents=[common], help="add JSON-lines records to a log",
                       description="Add the runs and records of JSON-lines files (from 'autotune export', "
                                   "or AutoTVM logs with --format autotvm) to a tuning log; records it "
                                   "already holds are not added twice.")
    p.add_argument("files", nargs="+", metavar="FILE.jsonl")
    p.add_argument("--format", choices=("jsonl", "autotvm"), default="jsonl",
                   help="jsonl: 'autotune export' files; autotvm: AutoTVM's JSON-lines tuning logs "
                        "(default: jsonl)")
    _add_db(p)
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("pin", parents=[common], help="write the chosen config of each workload to a file",
                       description="Write a small JSON file with the config the log's ranking chooses for "
                                   "each workload (its knobs, median time and record count), for a "
                                   "deployment to ship instead of the log: apply_history_best reads it. "
                                   "The same log gives the same file in every process.")
    _add_db(p)
    p.add_argument("-o", "--out", required=True, metavar="FILE.json", help="the pin file to write")
    p.add_argument("--template", help="only workloads of this template")
    p.add_argument("--target", help="only workloads on this target (a target string, or its kind: "
                                    "llvm, cuda)")
    p.set_defaults(func=_cmd_pin)

    p = sub.add_parser("build", parents=[common], help="build a template with its best config into a .so",
                       description="Build a template on arguments with the best config of the log (the "
                                   "default config when the log has none) and export a shared object "
                                   "that compiler.runtime.load_module loads without the tuner or the "
                                   "database.")
    _add_task(p)
    p.add_argument("--db", default=None, metavar="PATH_OR_URL",
                   help="tuning log to take the best config from (default: none, the default config)")
    p.add_argument("-o", "--out", required=True, metavar="KERNEL.so", help="the shared object to write")
    p.add_argument("--name", help="name of the entry function (default: the template's name)")
    p.set_defaults(func=_cmd_build)
    return parser


# Type functions of numeric options: argparse prefixes their message with the option's name
# ("argument --timeout: ...") and exits with status 2 before anything runs.


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


_MAX_SEED = 2**32 - 1  # the largest seed numpy's RandomState (optuna's sampler) accepts


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= _MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {_MAX_SEED}, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


# ---------------------------------------------------------------------------- shared steps


def _out(text: str = "") -> None:
    print(text, flush=True)


def _hide_passwords(text: str) -> str:
    """``text`` with every database password hidden (:func:`db.hide_passwords`, imported late
    so that ``--help`` stays light)."""
    from db import hide_passwords

    return hide_passwords(text)


def _db_arg(where: str) -> str:
    """A ``--db`` value as the hints print it: shell-quoted, its password hidden."""
    return shlex.quote(_hide_passwords(where))


def _make_task(ns):
    """The task of ``ns.template`` on ``ns.args`` for ``ns.target``, its space defined;
    every mistake in them is a UsageError."""
    from autotune.cli_args import ArgsError, bind_template_args, parse_args_text
    from compiler.errors import CompilerError
    from compiler.target import Target

    try:
        Target(ns.target)  # an unknown kind, option or CPU stops here, before any worker starts
    except CompilerError as err:
        raise UsageError(f"--target: {err}") from None
    positional, keywords = parse_args_text(ns.args)

    import search_spaces
    from search_spaces.template import target_kind

    registered = search_spaces.list_templates()
    if ns.template not in registered:
        known = ", ".join(registered) or "none"
        raise UsageError(f"unknown template {ns.template!r} (registered: {known}; "
                         "see 'autotune templates')")
    kind = target_kind(ns.target)
    try:
        impl = search_spaces.get_template(ns.template).impl(kind)
    except search_spaces.SearchSpaceError as err:
        raise UsageError(f"{err}; pick another --target") from None
    try:
        args = bind_template_args(ns.template, impl.func, positional, keywords)
        task = search_spaces.create_task(ns.template, args, ns.target)
        task.config_space  # noqa: B018 - defines the space: bad values fail here, not in a worker
    except (ArgsError, search_spaces.SearchSpaceError) as err:
        raise UsageError(_bad_args_message(str(err), positional)) from None
    return task


def _bad_args_message(text: str, positional: list) -> str:
    # The template's own message is the useful part of "failed while defining its space".
    text = text.replace(" failed while defining its space for args", ": bad arguments")
    bare = [isinstance(v, str) for v in positional]
    if any(a and b for a, b in zip(bare, bare[1:])):
        text += " (a value that holds commas must be quoted: --args \"64,128,'add,mul,relu',float32\")"
    return text


def _open_log(where: str, must_exist: bool = False):
    import db

    if must_exist and "://" not in where and where != ":memory:" and not os.path.exists(where):
        raise db.TuningLogError(f"no tuning log at {where} (tune something into it first: "
                                "autotune tune ... --db " + shlex.quote(where) + ")")
    return db.open(where)


def _labels(task, on: str = "on") -> str:
    """``matmul(64,64,64,float32) on llvm (znver4)``: a task as the summaries name it."""
    from autotune.selection import target_label, workload_label
    from compiler.target import Target

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
    from autotune.cli_args import format_args

    return shlex.quote(format_args(task.args))


# ---------------------------------------------------------------------------- commands


def _cmd_templates(ns) -> int:
    import search_spaces
    from autotune.cli_args import signature_text
    from autotune.report import format_table

    targets = {"cpu": "llvm", "cuda": "cuda"}
    rows = [("template", "targets", "arguments")]
    docs = []
    for name, kinds in search_spaces.list_templates().items():
        impl = search_spaces.get_template(name).impl(kinds[0])
        doc = (impl.func.__doc__ or "").strip().splitlines()
        rows.append((name, ",".join(targets.get(k, k) for k in kinds), signature_text(impl.func)))
        docs.append(doc[0].replace("``", "") if doc else "")
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
    from autotune.report import format_table

    task = _make_task(ns)
    space = task.config_space
    default = space.default_config.knob_values()
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


def _measure_options(ns):
    from measure import LocalBuilder, LocalRunner, MeasureOptions

    if not ns.cluster:
        return MeasureOptions(LocalBuilder(timeout=ns.timeout), LocalRunner(timeout=ns.timeout))
    try:
        from measure.ray import RayBuilder, RayRunner
    except ImportError as err:
        raise UsageError(f"--cluster needs Ray and measure.ray: {err}") from None
    address = None if ns.cluster == "local" else ns.cluster
    gpu = ns.target.split()[0] == "cuda"
    return MeasureOptions(RayBuilder(address=address, timeout=ns.timeout),
                          RayRunner(address=address, timeout=ns.timeout, gpu=gpu))


def _cmd_tune(ns) -> int:
    import autotune
    from autotune.report import format_table
    from autotune.selection import config_median, gflops
    from autotune.tuning import check_measurable
    from db import TRIAL

    task = _make_task(ns)
    space = task.config_space
    options = _measure_options(ns)
    try:
        check_measurable([task], options)  # before the header, the log or any worker
        log = _open_log(ns.db)
    except BaseException:
        options.close()
        raise
    try:
        where = f"Ray cluster {ns.cluster}" if ns.cluster else "this machine"
        earlier = log.count(task, kind=TRIAL)
        if ns.total:
            budget = f"{ns.trials} trials in all ({earlier} in the log already)"
        else:
            budget = f"{ns.trials} trials" + (f" on top of the log's {earlier}" if earlier else "")
        _out(f"Tuning {_labels(task)}")
        _out(f"  {space.size:,} configs, {len(space.knobs)} knobs; tuner {ns.tuner}, {budget} "
             f"on {where}; log {_hide_passwords(log.where)}")
        progress = sys.stderr.isatty() if ns.progress is None else ns.progress
        start = time.perf_counter()
        try:
            result = autotune.tune(task, trials=ns.trials, tuner=ns.tuner, db=log, measure_option=options,
                                   early_stopping=ns.early_stopping, batch_size=ns.batch_size,
                                   seed=ns.seed, progress=progress, total=ns.total,
                                   warm_start=ns.warm_start)
        finally:
            options.close()
        wall = time.perf_counter() - start
        records = log.records(task)
    finally:
        log.close()

    errors = ", ".join(f"{k}: {n}" for k, n in sorted(result.errors.items()))
    _out()
    _out(f"workload  {_labels(task)}")
    _out(f"trials    {result.trials} this run" + (f" (+{result.resumed} earlier)" if result.resumed else "")
         + f", {sum(result.errors.values())} errors" + (f" ({errors})" if errors else "")
         + f"; stopped: {result.stopped}; {wall:.1f} s")
    if result.remeasured:
        _out(f"          then {result.remeasured} re-measurements of the best configs (not trials)")
    _out(_rerun_line(ns, result))
    if result.best_config is None:
        _out("no config ran successfully; see the errors with: autotune report --db " + _db_arg(ns.db))
        return EXIT_FAILURE
    best_knobs = result.best_config.knob_values()
    best, n_best = config_median(records, best_knobs)
    default, n_default = config_median(records, space.default_config.knob_values())
    rate = gflops(task.flop, best)
    _out(f"best      {_fmt_ms(best)}  {rate:.1f} GFLOPS  (median of {n_best} measurements)")
    if default is not None:
        _out(f"default   {_fmt_ms(default)}  {gflops(task.flop, default):.1f} GFLOPS  "
             f"(the untuned default config; median of {n_default})")
        _out(f"speedup   {default / best:.2f}x over the default config")
    else:
        _out("default   - (the default config has no successful measurement)")
    _out("best config:")
    _out(format_table([(f"  {k}", repr(v)) for k, v in best_knobs.items()], right=()))
    _out()
    db_arg = _db_arg(ns.db)
    target = "" if ns.target == "llvm" else f" --target {shlex.quote(ns.target)}"
    _out(f"next: autotune build {task.name} --args {_shell_args(task)}{target} --db {db_arg} "
         f"-o {task.name}.so")
    _out(f"      autotune report --db {db_arg} --out report.html")
    return EXIT_OK if result.stopped != "interrupted" else EXIT_INTERRUPTED


def _rerun_line(ns, result) -> str:
    """What running the same command again would do (after Ctrl-C or a kill, too)."""
    done = result.resumed + result.trials
    if not ns.total:
        return (f"rerun     the same command makes {ns.trials} more trials on top of these {done}; with "
                f"--total, --trials {ns.trials} counts them (to finish a run that was cut short)")
    if done >= ns.trials:
        return f"rerun     the same command makes no trial: the log holds {done} of --trials {ns.trials}"
    return (f"rerun     the same command makes the {ns.trials - done} trials left: the log holds {done} "
            f"of --trials {ns.trials}")


def _cmd_best(ns) -> int:
    from autotune.report import format_table, run_lines, summarize, summary_table

    with _open_log(ns.db, must_exist=True) as log:
        rows = summarize(log, ns.workload)
        runs = log.runs()
    if not rows:
        matching = f" of a workload matching {ns.workload!r}" if ns.workload else ""
        _out(f"{_hide_passwords(ns.db)}: no records{matching}")
        return EXIT_OK
    _out(format_table(summary_table(rows)))
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


def _cmd_report(ns) -> int:
    from pathlib import Path

    from autotune.report import IMAGE_SUFFIXES, write_html, write_plot

    suffix = Path(ns.out).suffix.lower()
    if suffix not in (".html", ".htm", *IMAGE_SUFFIXES):
        raise UsageError(f"--out {ns.out}: write a .html report or a {', '.join(IMAGE_SUFFIXES)} plot")
    with _open_log(ns.db, must_exist=True) as log:
        if suffix in IMAGE_SUFFIXES:
            n = write_plot(log, ns.out, ns.workload)
            _out(f"wrote {ns.out}: tuning curves of {n} workload{'s' * (n != 1)}")
        else:
            n = write_html(log, ns.out, ns.workload)
            _out(f"wrote {ns.out}: {n} workload{'s' * (n != 1)}, a tuning curve each and the summary table")
    return EXIT_OK


def _cmd_export(ns) -> int:
    with _open_log(ns.db, must_exist=True) as log:
        n = log.export_jsonl(ns.out)
        runs = len(log.runs())
    _out(f"exported {n} records and {runs} runs from {_hide_passwords(ns.db)} to {ns.out}")
    return EXIT_OK


def _cmd_import(ns) -> int:
    import db

    for path in ns.files:
        if not os.path.isfile(path):
            raise db.TuningLogError(f"cannot read {path}: no such file")
    if ns.format == "autotvm":
        from autotune.autotvm import import_log

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
    _out(f"{_hide_passwords(ns.db)} now holds {total} records ({total - before} new)")
    return EXIT_OK


def _cmd_pin(ns) -> int:
    from autotune.pin import write_pin

    with _open_log(ns.db, must_exist=True) as log:
        n = write_pin(log, ns.out, template=ns.template, target=ns.target)
    what = " of " + " on ".join(f for f in (ns.template, ns.target) if f) if ns.template or ns.target else ""
    _out(f"pinned the chosen config of {n} workload{'s' * (n != 1)}{what} from {_hide_passwords(ns.db)} "
         f"to {ns.out}")
    if not n:
        _out("(no workload with a successful measurement matched: the file has no entry)")
    return EXIT_OK


def _cmd_build(ns) -> int:
    import autotune
    from autotune.selection import config_median

    task = _make_task(ns)
    out_dir = os.path.dirname(os.path.abspath(ns.out))
    if not os.path.isdir(out_dir):
        raise OSError(f"cannot write {ns.out}: no directory {out_dir}")
    log = _open_log(ns.db, must_exist=True) if ns.db else None
    try:
        config = autotune.apply_history_best(log).query(task.target, task) if log is not None else None
        measured = config_median(log.records(task), config.knob_values())[0] if config is not None else None
        mod = autotune.build(task.name, task.args, target=task.target, db=log,
                             func_name=ns.name or task.name)
    finally:
        if log is not None:
            log.close()
    mod.export_library(ns.out)
    if config is None:
        source = "the untuned default config"
        if ns.db:
            source += f" ({_hide_passwords(ns.db)} has no record of this workload)"
    else:
        when = f", {_fmt_ms(measured)} when tuned" if measured is not None else ""
        source = f"the best config of {_hide_passwords(ns.db)}{when}"
    _out(f"built {_labels(task, on='for')} with {source}")
    _out(f"wrote {ns.out}: entry function {mod.entry_name!r}; load it with "
         f"compiler.runtime.load_module({ns.out!r})")
    return EXIT_OK


# ---------------------------------------------------------------------------- main


def _exit_code(err: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message for an error a command raised."""
    from autotune.cli_args import ArgsError
    from autotune.errors import AutotuneError
    from compiler.errors import CompilerError, TargetError

    message = _hide_passwords(" ".join(str(err).split())) or type(err).__name__
    if isinstance(err, UsageError | ArgsError | TargetError):
        return EXIT_USAGE, message
    db_errors: tuple = ()
    search_errors: tuple = ()
    if "db" in sys.modules:
        import db

        db_errors = (db.TuningLogError,)
    if "search_spaces" in sys.modules:
        import search_spaces

        search_errors = (search_spaces.SearchSpaceError,)
    if isinstance(err, db_errors + search_errors + (AutotuneError, CompilerError)):
        return EXIT_FAILURE, message
    if isinstance(err, OSError):
        return EXIT_FAILURE, message
    return EXIT_FAILURE, f"{type(err).__name__}: {message} (run with --debug for the traceback)"


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"autotune: {record.levelname.lower()}: {_hide_passwords(record.getMessage())}"


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    if ns.command is None:
        parser.print_help()
        return EXIT_OK
    _setup_logging(ns.verbose)
    try:
        return ns.func(ns)
    except KeyboardInterrupt:
        print(f"autotune {ns.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `autotune templates | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:  # noqa: BLE001 - every error becomes one line and an exit status
        if ns.debug:
            import traceback

            print(_hide_passwords(traceback.format_exc()), end="", file=sys.stderr)
        code, message = _exit_code(err)
        print(f"autotune {ns.command}: error: {message}", file=sys.stderr)
        return code
