"""The PTX check of the CUDA tests: it runs where ptxas is, and where it is not the tests
that rely on it still make their other checks and then skip, naming ptxas."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PTX_TEST = "tests/compiler/codegen/test_cuda_codegen.py::test_vector_add_ptx"


def _path_without_ptxas() -> str:
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not os.path.exists(os.path.join(d, "ptxas")))


def _pytest(*args: str, path: str, cwd: Path = TESTS.parent) -> subprocess.CompletedProcess:
    # The repository first: tests/compiler/<subpackage> folders would otherwise stand in for
    # the compiler's subpackages when the run starts outside the repository.
    env = {**os.environ, "PATH": path, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _summary(proc: subprocess.CompletedProcess) -> str:
    """pytest's last line: the counts of outcomes."""
    return proc.stdout.strip().splitlines()[-1]


def test_ptx_checks_skip_with_a_reason_without_ptxas():
    proc = _pytest(PTX_TEST, path=_path_without_ptxas())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc).startswith("1 skipped in"), proc.stdout
    assert "ptxas is not on PATH, so the sm_80 PTX was not assembled" in proc.stdout, proc.stdout


def test_without_ptxas_the_other_checks_still_fail_a_test(tmp_path):
    (tmp_path / "test_inner.py").write_text(
        "from cuda_helpers import assemble\n"
        "def test_other_check_fails():\n"
        "    assemble('not PTX')\n"
        "    assert 1 + 1 == 3, 'the other check'\n"
        "def test_nothing_else():\n"
        "    assemble('not PTX')\n"
        "def test_no_ptx_at_all():\n"
        "    pass\n")
    proc = _pytest("-p", "conftest", "test_inner.py", path=_path_without_ptxas(), cwd=tmp_path)
    assert _summary(proc).startswith("1 failed, 1 passed, 1 skipped in"), proc.stdout + proc.stderr
    assert "the other check" in proc.stdout
    assert "test_inner.py:5: ptxas is not on PATH" in proc.stdout, proc.stdout


def test_ptx_checks_run_where_ptxas_is():
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on PATH")
    proc = _pytest(PTX_TEST, path=os.environ["PATH"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc).startswith("1 passed in"), proc.stdout
