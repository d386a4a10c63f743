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
