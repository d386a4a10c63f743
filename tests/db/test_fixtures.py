"""The PostgreSQL fixtures themselves: an unusable server skips a test, saying why, except in
CI (``CI=true``), where it fails it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/db/test_schema.py::test_a_fresh_log_has_the_current_version_and_the_models_tables[postgres]"
UNREACHABLE = "postgresql+psycopg://autotune:secret@127.0.0.1:1/autotune_test"


def _pytest(ci: str | None, url: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AUTOTUNE_TEST_POSTGRES_URL")}
    if ci is not None:
        env["CI"] = ci
    if url is not None:
        env["AUTOTUNE_TEST_POSTGRES_URL"] = url
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("url", [UNREACHABLE, None], ids=["unreachable", "unset"])
def test_an_unusable_postgres_skips_with_its_reason_outside_ci(url):
    proc = _pytest(None, url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "passed" not in proc.stdout, proc.stdout
    reason = "is unusable: OperationalError" if url else "AUTOTUNE_TEST_POSTGRES_URL"
    assert reason in proc.stdout, proc.stdout
    assert "secret" not in proc.stdout


@pytest.mark.parametrize("url", [UNREACHABLE, None], ids=["unreachable", "unset"])
def test_an_unusable_postgres_fails_in_ci(url):
    proc = _pytest("true", url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout, proc.stdout
    assert "CI=true: this test must run" in proc.stdout, proc.stdout
    assert "secret" not in proc.stdout
