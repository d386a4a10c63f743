"""The quick start runs to its end: it tunes, builds, checks against numpy and times the
tuned kernel, the default config and numpy, each in a fresh process."""

from __future__ import annotations

import re

import pytest

from autotune import quickstart


@pytest.mark.slow
def test_the_quick_start_runs_small_to_its_end(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    quickstart.main(["--size", "64", "--trials", "4", "--db", str(tmp_path / "qs.db")])
    out = capsys.readouterr().out
    assert "results match numpy" in out and "tuning: 4 trials" in out
    rows = {name: float(ms) for name, ms in
            re.findall(r"^(tuned \(best in log\)|default config|numpy a @ b)\s+([0-9.]+)", out, re.M)}
    assert set(rows) == {"tuned (best in log)", "default config", "numpy a @ b"}
    assert all(ms > 0 for ms in rows.values())
    assert re.search(r"speedup of the tuned kernel: [0-9.]+x over the default config, [0-9.]+x over numpy",
                     out)


def test_a_kernel_is_timed_in_a_fresh_process(tmp_path):
    import compiler
    from compiler import te

    n = 32
    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    library = str(tmp_path / "mm.so")
    compiler.build(te.create_schedule(C.op), [A, B, C], target="llvm").export_library(library)
    for timing in (quickstart.seconds_in_fresh_process(n, lib) for lib in (library, None)):
        assert timing.seconds > 0 and 0 <= timing.busy < 2
    with pytest.raises(RuntimeError, match="fresh process failed"):
        quickstart.seconds_in_fresh_process(n, str(tmp_path / "missing.so"))


def _rounds(**contenders) -> dict:
    return {name: [quickstart.FreshTiming(*t) for t in runs] for name, runs in contenders.items()}


def test_the_speedups_are_flagged_when_other_work_ran_or_the_rounds_disagree():
    quiet = _rounds(tuned=[(1.0, 0.0), (1.02, 0.1), (0.99, 0.0)], numpy=[(2.0, 0.0)] * 3)
    assert quickstart.disturbance(quiet) is None
    busy = _rounds(tuned=[(1.0, 0.0), (1.0, 0.6), (1.0, 0.0)], numpy=[(2.0, 0.0)] * 3)
    assert "60% of a core" in quickstart.disturbance(busy)
    spread = _rounds(tuned=[(1.0, 0.0)] * 3, numpy=[(2.0, 0.0), (3.0, 0.0), (2.1, 0.0)])
    assert "rounds of 'numpy' disagree by 50%" in quickstart.disturbance(spread)
