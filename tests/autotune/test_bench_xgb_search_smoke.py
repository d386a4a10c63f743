"""scripts/benchmarks/bench_xgb_search.py runs end to end on a small matmul (two variants x 4 trials), and its
table holds one row per variant with a figure per checkpoint (no timings checked)."""

from __future__ import annotations

import re

import bench_xgb_search  # scripts/benchmarks, on the path through pyproject.toml's pytest pythonpath

_CELL = r"\d+\.\d \[\d+\.\d-\d+\.\d\]"


def test_each_variant_gets_a_row(capsys):
    assert bench_xgb_search.main(["--trials", "4", "--seeds", "1", "--workloads", "mm1024",
                                  "--shortlists", "0,2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("mm1024")]
    assert [row.split()[1] for row in rows] == ["0", "2"]
    for row in rows:
        assert re.fullmatch(rf"mm1024\s+\d\s+{_CELL}\s+{_CELL}\s+\d+ \[\d+-\d+\]", row), row
    assert "GFLOPS @4" in out and ("figures stand" in out or "MACHINE BUSY" in out)
