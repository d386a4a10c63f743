"""Fixtures of the autotune tests: the recorded matmul cost dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import search_spaces

COST_DATA = Path(__file__).parent / "data" / "matmul_128_costs.json"

# The recorded configs belong to the matmul space of a CPU with 64-byte vectors (AVX-512), whose
# register tiles are wider than an AVX2 CPU's. The task is rebuilt for such a CPU, so that its
# space, and the tests on it, are the same whichever machine runs them.
COST_DATA_TARGET = "llvm -mcpu=znver4"


@pytest.fixture(scope="session")
def cost_dataset():
    """``(task, records)``: the matmul task and its measured configs, ``{"index", "knobs", "cost"}``."""
    data = json.loads(COST_DATA.read_text())
    task = search_spaces.create_task(data["task"]["template"], data["task"]["args"], COST_DATA_TARGET)
    return task, data["records"]
