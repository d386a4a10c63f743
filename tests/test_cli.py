import shutil
import subprocess
import sys

import pytest

from autotune import __version__
from autotune.cli import PLANNED_COMMANDS, main


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, timeout=60
    )


def test_version():
    p = _run("--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"autotune {__version__}"
    assert __version__ == "0.1.0"


def test_help_describes_tool_and_subcommands():
    p = _run("--help")
    assert p.returncode == 0, p.stderr
    assert "usage: autotune" in p.stdout
    assert "tuner" in p.stdout
    for name in PLANNED_COMMANDS:
        assert name in p.stdout


def test_no_arguments_prints_help():
    p = _run()
    assert p.returncode == 0, p.stderr
    assert "usage: autotune" in p.stdout


def test_unknown_subcommand_is_one_line_and_exit_2():
    p = _run("frobnicate")
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "frobnicate" in lines[0]


def test_main_returns_codes(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "autotune 0.1.0"
    assert main([]) == 0
    assert main(["nope"]) == 2


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("db", ("compiler", "search_spaces", "measure", "autotune")),
        ("compiler", ("search_spaces", "measure", "autotune", "db")),
    ],
)
def test_dependencies_point_one_way(package, forbidden):
    # compiler <- search_spaces <- measure <- autotune, and db <- autotune.
    code = f"import sys, {package}; print(sorted(m for m in {forbidden!r} if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_console_script_installed():
    exe = shutil.which("autotune")
    assert exe is not None, "the `autotune` console script is not on PATH; run `pip install -e '.[dev]'`"
    p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"autotune {__version__}"


@pytest.mark.parametrize(
    "module, names",
    [
        ("search_spaces.errors", ["SearchSpaceError", "InstantiationError"]),
        ("measure.errors", ["MeasureError"]),
        ("db.errors", ["TuningLogError"]),
        ("autotune.errors", ["AutotuneError"]),
    ],
)
def test_error_types(module, names):
    import importlib

    mod = importlib.import_module(module)
    for name in names:
        cls = getattr(mod, name)
        assert issubclass(cls, Exception) and name in mod.__all__
