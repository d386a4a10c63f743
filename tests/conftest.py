"""Fixtures shared by the whole suite; ``tests/`` is put on ``sys.path`` for ``helpers``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded random generator, the same in every test run."""
    return np.random.default_rng(20240601)


def _cuda_unavailable() -> str | None:
    from compiler.runtime.cuda import unavailable_reason

    return unavailable_reason()


def pytest_report_header(config):
    reason = _cuda_unavailable()
    return f"cuda: {'available' if reason is None else 'tests marked cuda are skipped: ' + reason}"


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if "cuda" in item.keywords]
    if not marked:
        return
    reason = _cuda_unavailable()
    if reason is not None:
        skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU and pycuda: {reason}")
        for item in marked:
            item.add_marker(skip)
