"""Fixtures shared by the whole suite; ``tests/`` is put on ``sys.path`` for ``helpers``.

PostgreSQL comes from ``AUTOTUNE_TEST_POSTGRES_URL`` (e.g.
``postgresql+psycopg://autotune:autotune@127.0.0.1:5432/autotune_test``; ``.ci/run`` starts
such a server). A test that needs it gets a schema of its own in that database, dropped
afterwards. Where the variable is unset or the server unreachable, such tests skip and say
why; under ``CI=true`` they fail instead, since CI must run them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

# Every pipeline the suite runs checks the IR between passes (compiler.transform.verify); the
# measure workers it starts inherit this.
os.environ.setdefault("COMPILER_VERIFY_IR", "1")

# The suite starts hundreds of Python processes that import the project (the command line,
# measure and Ray workers, scripts): with PYTHONDONTWRITEBYTECODE set, as some images do, each
# compiled every module from source again (0.7 s apiece here). Bytecode caches are written, as
# Python does by default (``__pycache__`` is ignored by git), by this process, the xdist workers
# and every process they start.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# Compiled CPU code is cached on disk (compiler.codegen.object_cache): this process, the xdist
# workers and every process they start share a cache of the suite's own, not the user's, kept
# between runs (its key is the code itself, so a change to the compiler misses it).
os.environ.setdefault("COMPILER_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), f"autotune-compiler-tests-{os.getuid()}"))

POSTGRES_ENV = "AUTOTUNE_TEST_POSTGRES_URL"


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded random generator, the same in every test run."""
    return np.random.default_rng(20240601)


def in_ci() -> bool:
    """Whether the suite runs in CI (``CI=true``), where nothing that should run may skip."""
    return os.environ.get("CI", "").strip().lower() == "true"


def skip_or_fail_in_ci(reason: str) -> None:
    """Skip the test with ``reason``; in CI, fail it instead."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: this test must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[object]:
    """An SQLAlchemy engine on the test PostgreSQL database; skips the test when there is none
    (fails it under ``CI=true``)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from db import hide_passwords

    raw = os.environ.get(POSTGRES_ENV)
    if not raw:
        skip_or_fail_in_ci(f"PostgreSQL tests need {POSTGRES_ENV} (e.g. postgresql+psycopg://autotune:"
                           f"autotune@127.0.0.1:5432/autotune_test); it is unset")
    try:
        url = make_url(raw)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as err:  # unreachable server, missing driver, bad URL: all make it unusable
        reason = (f"PostgreSQL at {hide_passwords(raw)} ({POSTGRES_ENV}) is unusable: {type(err).__name__}: "
                  f"{' '.join(str(err).split())[:200]}")
    else:
        reason = None
    if reason is not None:
        skip_or_fail_in_ci(reason)
    yield engine
    engine.dispose()


@pytest.fixture
def new_postgres_url(postgres_admin: object) -> Iterator[Callable[[], str]]:
    """A function that creates a fresh schema in the test database and returns a URL (with its
    password) whose search path is that schema; every schema made is dropped after the test."""
    from sqlalchemy import text

    made: list[str] = []

    def make() -> str:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with postgres_admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        made.append(schema)
        url = postgres_admin.url.update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    yield make
    with postgres_admin.begin() as conn:
        for schema in made:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def postgres_url(new_postgres_url: Callable[[], str]) -> str:
    """The URL of a fresh, empty schema in the test PostgreSQL database."""
    return new_postgres_url()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test that passed but could not assemble its PTX (no ptxas) is reported as skipped."""
    report = (yield).get_result()
    helpers = sys.modules.get("cuda_helpers")
    if helpers is None:
        return
    if call.when == "setup":
        helpers.UNASSEMBLED.clear()
    elif call.when == "call" and report.passed and helpers.UNASSEMBLED:
        path, line, _ = item.location
        report.outcome = "skipped"
        report.longrepr = (path, (line or 0) + 1, f"Skipped: {helpers.UNASSEMBLED[0]}")


def _cuda_unavailable() -> str | None:
    """Why tests marked ``cuda`` cannot run here (None when they can: a GPU, or the simulator)."""
    import compiler  # noqa: F401 - registers the cuda device
    from compiler.runtime.device import device_memory

    return device_memory("cuda").unavailable_reason()


def _cuda_simulated() -> bool:
    from compiler.runtime.device import device_memory

    return bool(device_memory("cuda").simulated())


def pytest_report_header(config):
    reason = _cuda_unavailable()
    if reason is None and _cuda_simulated():
        return ("cuda: the GPU simulator (COMPILER_CUDA_SIMULATOR=1); tests marked cuda_hardware are skipped")
    return f"cuda: {'available' if reason is None else 'tests marked cuda are skipped: ' + reason}"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run on a GPU or, with ``COMPILER_CUDA_SIMULATOR=1``, on the GPU
    simulator, except those also marked ``cuda_hardware(reason)``: they need a real GPU (they
    time kernels, ask the GPU itself, or run PTX), and say so when they skip."""
    marked = [item for item in items if "cuda" in item.keywords]
    if not marked:
        return
    reason = _cuda_unavailable()
    if reason is not None:
        skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU and pycuda: {reason}")
        for item in marked:
            item.add_marker(skip)
        return
    if _cuda_simulated():
        for item in marked:
            hardware = item.get_closest_marker("cuda_hardware")
            if hardware is not None:
                why = hardware.kwargs.get("reason") or (hardware.args[0] if hardware.args else "")
                item.add_marker(pytest.mark.skip(reason=f"needs a real GPU, not the simulator "
                                                        f"(COMPILER_CUDA_SIMULATOR=1): {why}"))
