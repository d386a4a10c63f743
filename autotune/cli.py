# PYTHON_ARGCOMPLETE_OK  (argcomplete: this entry point answers tab completion)
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
    autotune tune-model model.onnx --time-budget 30m --db tuning.db     every kernel of a model
    autotune build-model model.onnx --db tuning.db -o model.so          the model in one library
    autotune run-model model.so --inputs x.npz --outputs y.npz         run it, time it

Every subcommand has ``--help``. Errors a user can make (an unknown template, bad
``--args``, an unknown target, an unreachable database) print one line on stderr
and exit with 2 (usage) or 1 (a failure at run time); ``--debug`` shows tracebacks.
``templates``, ``space``, ``best``, ``tune`` and ``run-model`` take ``--json``: one JSON document on
stdout, everything else (headers, progress) on stderr. Tab completion comes from
argcomplete: ``eval "$(register-python-argcomplete autotune)"``.

This module only parses the command line; :mod:`autotune.commands` does the work. That
module imports the compiler, the tuners and the database, so it is imported only once a
command runs, and ``autotune --help`` answers at once. The ``--tuner`` choices are the names of
the tuner registry (:data:`autotune.tuner.TUNERS`).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence

from autotune import __version__
from autotune.scheduler import SCHEDULERS
from autotune.tuner import TUNERS

__all__ = ["COMMANDS", "PLANNED_COMMANDS", "UsageError", "main"]

COMMANDS = ("tune", "best", "report", "export", "import", "pin", "build", "templates", "space", "tune-model",
            "build-model", "run-model")
PLANNED_COMMANDS = COMMANDS  # the name older code and tests use

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_TARGET = "llvm"  # this machine's CPU, as users spell it

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

machine-readable output: 'templates', 'space', 'best', 'tune' and 'run-model' take --json (one JSON
document on stdout; progress and messages go to stderr).

tab completion (bash, zsh): eval "$(register-python-argcomplete autotune)"
  (put that line in ~/.bashrc or ~/.zshrc to keep it)

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


def _template_names(**_kwargs) -> list[str]:
    """The registered templates' names: what tab completion offers for TEMPLATE (it imports
    the templates, but only while completing)."""
    import search_spaces

    return list(search_spaces.list_templates())


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout instead of text (messages go to stderr)")


def _add_task(p: argparse.ArgumentParser) -> None:
    p.add_argument("template", help="template name (see 'autotune templates')").completer = _template_names
    p.add_argument("--args", required=True, metavar="VALUES",
                   help="the template's arguments, e.g. 1024,1024,1024,float32 (see 'autotune --help')")
    p.add_argument("--target", default=DEFAULT_TARGET,
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
    p.add_argument("--tuner", default="xgb", choices=tuple(TUNERS),
                   help="search strategy (default: xgb)")
    _add_db(p)
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="measure on a Ray cluster: 'auto' (this node belongs to one), 'ray://host:10001', "
                        "or 'local' (start Ray here)")
    p.add_argument("--early-stopping", type=_positive_int, metavar="N",
                   help="stop after N trials without improvement")
    p.add_argument("--seed", type=_seed, help="random seed of the tuner (0 to 2**32-1)")
    p.add_argument("--batch-size", type=_positive_int, metavar="N",
                   help="candidates per round (default: the tuner's: 16 for xgb and ga, 8 for the others)")
    p.add_argument("--timeout", type=_positive_seconds, default=10.0, metavar="S",
                   help="seconds a build or a run may take before it counts as an error (default: 10)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    p.add_argument("--warm-start", type=_count, default=0, metavar="N",
                   help="first measure up to N configs borrowed (and adapted) from the log's nearest "
                        "tuned workloads of the template; they count as trials (default: 0)")
    _add_json(p)

    p = sub.add_parser("templates", parents=[common], help="list the registered templates",
                       description="List every registered template with its targets and arguments.")
    _add_json(p)

    p = sub.add_parser("space", parents=[common], help="show a template's knobs and the size of its space",
                       description="Show the knobs of a template on given arguments and how many "
                                   "configs its space holds.")
    _add_task(p)
    _add_json(p)

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
    _add_json(p)

    p = sub.add_parser("report", parents=[common], help="an HTML report (or a plot) of a tuning log",
                       description="Write an interactive HTML page (self-contained, works offline) with "
                                   "the summary table and per workload its tuning history (every trial a "
                                   "point, hover shows its config, cost and error; the chosen config, the "
                                   "default config and --peak-gflops as lines), knob importance and a "
                                   "timeline of the workers; or, for an --out ending in .png, .svg or "
                                   ".pdf, the histories alone.")
    _add_db(p)
    p.add_argument("-o", "--out", default="report.html",
                   help="report.html, or curve.png (default: report.html)")
    p.add_argument("--workload", metavar="TEXT", help="only workloads whose name contains TEXT")
    p.add_argument("--peak-gflops", type=float, metavar="GFLOPS",
                   help="mark this peak (e.g. the FMA peak scripts/benchmarks measure) on the plots")

    p = sub.add_parser("export", parents=[common], help="write a log as JSON lines",
                       description="Write every run and record of a tuning log as JSON lines "
                                   "(readable by 'autotune import').")
    _add_db(p)
    p.add_argument("-o", "--out", required=True, metavar="FILE.jsonl", help="the file to write")

    p = sub.add_parser("import", parents=[common], help="add JSON-lines records to a log",
                       description="Add the runs and records of JSON-lines files (from 'autotune export', "
                                   "or AutoTVM logs with --format autotvm) to a tuning log; records it "
                                   "already holds are not added twice.")
    p.add_argument("files", nargs="+", metavar="FILE.jsonl")
    p.add_argument("--format", choices=("jsonl", "autotvm"), default="jsonl",
                   help="jsonl: 'autotune export' files; autotvm: AutoTVM's JSON-lines tuning logs "
                        "(default: jsonl)")
    _add_db(p)

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

    p = sub.add_parser("tune-model", parents=[common], help="tune every kernel of an ONNX model",
                       description="Import an ONNX model, list its tuning tasks (the fused kernels that "
                                   "have templates, each with how often the model runs it) and tune them "
                                   "with one budget (--trials per task on average, --time-budget, or "
                                   "both), spent where the model's latency falls most, every task's "
                                   "candidates measured at once. The log's earlier trials of the model "
                                   "count against --trials, so the same command run again after Ctrl-C "
                                   "finishes the budget. At the end the model is built with the log and "
                                   "timed, beside its estimated latency. Then: autotune build-model.")
    _add_model(p)
    p.add_argument("--trials", type=_positive_int, default=None,
                   help="trials per task on average; the budget is this times the tasks, the log's "
                        "earlier trials of them included (another model's, up to each task's share; "
                        "default: 64 unless --time-budget is given)")
    p.add_argument("--time-budget", type=_duration, default=None, metavar="DURATION",
                   help="wall time to tune for, the final re-measurement included: 90s, 30m, 2h or "
                        "seconds (default: none)")
    p.add_argument("--tuner", default="xgb", choices=tuple(TUNERS), help="search strategy (default: xgb)")
    p.add_argument("--scheduler", default="gradient", choices=tuple(SCHEDULERS),
                   help="which task gets the next batch (default: gradient)")
    p.add_argument("--warm-start", type=_count, default=None, metavar="N",
                   help="each task first measures up to N configs borrowed from the log's nearest tuned "
                        "workloads (default: autotune.model.DEFAULT_WARM_START, 4)")
    _add_db(p)
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="measure on a Ray cluster: 'auto', 'ray://host:10001', or 'local'")
    p.add_argument("--seed", type=_seed, help="random seed of the tuners (0 to 2**32-1)")
    p.add_argument("--timeout", type=_positive_seconds, default=10.0, metavar="S",
                   help="seconds a build or a run may take before it counts as an error (default: 10)")
    p.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=True,
                   help="time each CPU candidate with its weights evicted from the caches, as it runs "
                        "inside the model (default); --no-cache-flush times it hot, as 'tune' does, to "
                        "resume a log tuned so")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    p.add_argument("--deployed", action=argparse.BooleanOptionalAction, default=True,
                   help="build the tuned model and time it at the end (default: yes)")
    p.add_argument("--measure-algorithms", action="store_true",
                   help="first time each 3x3 layer direct and by Winograd inside the model with the log's "
                        "configs, as build-model --measure-algorithms does, and tune the tasks of the plan "
                        "that ran faster (the log must hold a tuning of the model already, so that tuned "
                        "kernels are compared; default: the tasks of the rule's plan)")

    p = sub.add_parser("build-model", parents=[common], help="build an ONNX model into one .so",
                       description="Import an ONNX model, compile every kernel with the log's best config "
                                   "(borrowed from the nearest tuned workload, or the default config, where "
                                   "the log has none: one warning lists them) and an ahead-of-time "
                                   "executor, and export one shared library that "
                                   "compiler.runtime.load_module runs without the tuner, the log or onnx.")
    _add_model(p)
    p.add_argument("--db", default=None, metavar="PATH_OR_URL",
                   help="tuning log (or pin file) to take the best configs from (default: none)")
    p.add_argument("-o", "--out", required=True, metavar="MODEL.so", help="the shared library to write")
    p.add_argument("--name", default="run", help="name of the entry function (default: run)")
    p.add_argument("--measure-algorithms", action="store_true",
                   help="time each 3x3 layer direct and by Winograd inside the model on this machine "
                        "and build each the faster way, then each kernel whose threads split by the "
                        "output's height against its best other split (each kept only if the whole "
                        "model runs faster; default: by the size of the Winograd kernel, the log's best)")

    p = sub.add_parser("run-model", parents=[common], help="run and time a built model (.so)",
                       description="Load a model library (from build-model) alone, as a deployment does: "
                                   "run it on the inputs of an .npz file (random ones where none is given), "
                                   "say what it returned, write its outputs, and time it (each timing the "
                                   "mean of calls over at least 50 ms, or of --number calls; the median of "
                                   "--repeat timings). --profile times each kernel inside the model too.")
    p.add_argument("library", help="a model library written by build-model")
    p.add_argument("--inputs", metavar="IN.npz",
                   help="the model's inputs, each under its name (numpy.savez(path, x=...)); a model of one "
                        "input takes a file of one array under any name (default: random inputs, seed 0)")
    p.add_argument("--outputs", metavar="OUT.npz",
                   help="write the model's outputs there, each under its name")
    p.add_argument("--repeat", type=_positive_int, default=10,
                   help="timings to take the median of (default: 10)")
    p.add_argument("--number", type=_positive_int, default=None,
                   help="calls per timing (default: as many as take 50 ms)")
    p.add_argument("--profile", action="store_true",
                   help="also time each kernel inside the model: its calls per run, its time per call and "
                        "its share of a run")
    _add_json(p)
    return parser


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="an ONNX model file")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                   help="bind an input's shape (for dynamic dimensions such as the batch), e.g. "
                        "input=1,3,224,224; repeat for several inputs")
    p.add_argument("--target", default=DEFAULT_TARGET,
                   help="compilation target: 'llvm' (this CPU) or 'llvm -mcpu=...' (default: llvm)")


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


_UNITS = {"s": 1, "m": 60, "h": 3600}


def _duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1.5h``: seconds."""
    number, unit = (text[:-1], text[-1]) if text[-1:].lower() in _UNITS else (text, "s")
    try:
        value = float(number) * _UNITS[unit.lower()]
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 30m or 2h, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


# ---------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    _autocomplete(parser)
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    if ns.command is None:
        parser.print_help()
        return EXIT_OK
    # Deferred on purpose: the commands import the compiler, the tuners and the database.
    from autotune import commands

    return commands.run(ns)


def _autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer a shell's tab completion request (argcomplete's environment variables) and
    exit; without such a request, or without argcomplete, do nothing."""
    try:
        import argcomplete
    except ImportError:  # a dependency, but completion is a convenience: the CLI works without it
        return
    argcomplete.autocomplete(parser)
