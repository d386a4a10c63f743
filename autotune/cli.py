"""The ``autotune`` command line.

For now it knows ``--version`` and ``--help``; the subcommands (tune, best, report,
export, import, build, templates, space) arrive with the tuner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from autotune import __version__

__all__ = ["PLANNED_COMMANDS", "main"]

PLANNED_COMMANDS = ("tune", "best", "report", "export", "import", "build", "templates", "space")

_DESCRIPTION = (
    "Autotuning tensor compiler: describe a tensor computation once, pick a schedule "
    "template whose choices are knobs, and let the tuner find the fastest knob values "
    "for your hardware, keeping every measurement in an SQL tuning log."
)
_EPILOG = (
    f"The subcommands ({', '.join(PLANNED_COMMANDS)}) arrive with the tuner; "
    "this version offers --version and --help."
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autotune", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    parser.add_argument("command", nargs="?", help="subcommand (none available yet)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _build_parser()
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if ns.command is None:
        parser.print_help()
        return 0
    print(f"autotune: unknown command {ns.command!r} (available: --version, --help)", file=sys.stderr)
    return 2
