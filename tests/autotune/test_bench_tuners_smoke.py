"""scripts/bench_tuners.py: its core runs end to end on a small matmul (2 tuners x 6 trials)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import autotune
from measure import MeasureOptions

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_tuners.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_tuners", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bench_tuners_small(tmp_path, capsys):
    bench = _load_script()
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    with MeasureOptions() as options:
        runs = bench.benchmark(task, ["random", "xgb"], seeds=1, trials=6, options=options,
                               db_dir=tmp_path, verbose=False)
    assert set(runs) == {"random", "xgb"}
    for rs in runs.values():
        (run,) = rs
        assert len(run.curve) == 6
        assert all(a <= b for a, b in zip(run.curve, run.curve[1:]))  # best so far never drops
        assert run.curve[-1] > 0 and run.wall > 0
    assert {p.name for p in tmp_path.glob("*.db")} == {"random-seed0.db", "xgb-seed0.db"}

    numpy_gflops = task.flop / min(bench.numpy_seconds(32, 32, 32, repeat=3, min_ms=5)) / 1e9
    bench.report(task, runs, 6, numpy_gflops)
    out = capsys.readouterr().out
    assert "random" in out and "xgb" in out and ("PASS" in out or "FAIL" in out)
    png = tmp_path / "curves.png"
    bench.plot(runs, 6, numpy_gflops, "smoke", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
