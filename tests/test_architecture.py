"""The layers of docs/architecture.md hold: the import-linter contracts of pyproject.toml pass,
and one of them fails on an upward import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports")
pytestmark = pytest.mark.skipif(LINT is None,
                                reason="import-linter is not installed (pip install -e '.[dev]')")


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([LINT], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(cwd)})


def test_the_contracts_are_kept():
    p = _lint(ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout


def test_an_upward_import_breaks_a_contract(tmp_path):
    # A copy of the packages in which the IR imports the schedule (an upward import).
    for pkg in ("compiler", "search_spaces", "measure", "autotune", "db"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "compiler" / "tir" / "stmt.py", "a") as f:
        f.write("\nfrom ..schedule import schedule as _upward  # noqa: E402,F401\n")
    p = _lint(tmp_path)
    assert p.returncode != 0
    assert "compiler.tir.stmt -> compiler.schedule.schedule" in p.stdout, p.stdout
