"""scripts/benchmarks/bench_tuners.py: its core runs end to end on a small matmul (2 tuners x 6 trials), and
its table and verdicts say what the runs hold (checked on hand-made runs, numbers by hand)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

import autotune
from measure import MeasureOptions

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "benchmarks" / "bench_tuners.py"
_CELL = re.compile(r"^(\d+\.\d) \[(\d+\.\d)-(\d+\.\d)\]$")
_ROW = re.compile(r"^(?P<tuner>\w+)\s+(?P<cells>(?:(?:\d+\.\d \[\d+\.\d-\d+\.\d\]|-)\s+)+)"
                  r"(?P<share>\d+%|-)\s+(?P<wall>\d+)$")
_GOAL = re.compile(r"^(PASS|FAIL): (\w+) reaches (\d+\.\d) GFLOPS within (\d+) trials = (\d+)% of "
                   r"random@(\d+) \((\d+\.\d)\); goal >= 95% \((re-measured bests|best single trials)\)$")
_SPREAD = re.compile(r"^(PASS|FAIL): (\w+) seeds within (\d+) trials span (\d+\.\d)-(\d+\.\d) GFLOPS, "
                     r"slowest = (\d+)% of fastest; goal >= 90% \((re-measured bests|best single trials)\)$")
_BEST = re.compile(r"^(PASS|FAIL): best found (\d+\.\d) GFLOPS re-measured \((\w+) seed (\d+); best single "
                   r"trial (\d+\.\d)\) = (\d+\.\d\d)x numpy \((\d+\.\d)\); goal >= 1\.00x$")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tuners", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _parse(out: str) -> dict:
    """The report's header, table rows, numpy row and verdict lines; every line accounted for."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    parsed = {"title": lines[0], "columns": lines[1].split(), "rows": {}, "goals": {}, "spreads": {},
              "best": None}
    for line in lines[2:]:
        if m := _ROW.match(line):
            cells = [tuple(map(float, _CELL.match(c).groups())) if c != "-" else None
                     for c in re.split(r"\s{2,}", m["cells"].strip())]
            parsed["rows"][m["tuner"]] = (cells, m["share"], int(m["wall"]))
        elif m := re.match(r"^numpy\s+(\d+\.\d)  \(a @ b, median in this process\)$", line):
            parsed["numpy"] = float(m[1])
        elif m := _GOAL.match(line):
            parsed["goals"][m[2]] = (m[1], float(m[3]), int(m[4]), int(m[5]), float(m[7]))
            parsed.setdefault("bases", set()).add(m[8])
        elif m := _SPREAD.match(line):
            parsed["spreads"][m[2]] = (m[1], int(m[3]), float(m[4]), float(m[5]), int(m[6]))
            parsed.setdefault("bases", set()).add(m[7])
        elif m := _BEST.match(line):
            parsed["best"] = (m[1], float(m[2]), m[3], int(m[4]), float(m[5]), float(m[6]), float(m[7]))
        elif not line.startswith("goal 1 not checked"):
            raise AssertionError(f"unexpected report line {line!r}")
    return parsed


def test_bench_tuners_small(bench, tmp_path, capsys):
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    with MeasureOptions() as options:
        runs = bench.benchmark(task, ["random", "xgb"], seeds=1, trials=6, options=options,
                               db_dir=tmp_path, verbose=False)
    assert set(runs) == {"random", "xgb"}
    for rs in runs.values():
        (run,) = rs
        assert len(run.curve) == 6
        assert all(a <= b for a, b in zip(run.curve, run.curve[1:]))  # best so far never drops
        assert run.curve[-1] > 0 and run.wall > 0 and run.final_gflops > 0
    assert {p.name for p in tmp_path.glob("*.db")} == {"random-seed0.db", "xgb-seed0.db"}

    numpy_gflops = task.flop / min(bench.numpy_seconds(32, 32, 32, repeat=3, min_ms=5)) / 1e9
    ok = bench.report(task, runs, 6, numpy_gflops)
    report = _parse(capsys.readouterr().out)
    assert report["title"].startswith(f"{task.workload_name}, 6 trials x 1 seeds")
    assert report["columns"] == ["tuner", "k=6", "@1/random@6", "wall", "s"]
    assert list(report["rows"]) == ["random", "xgb"]
    random_full = runs["random"][0].curve[5]
    for tuner, (cells, share, wall) in report["rows"].items():
        (run,) = runs[tuner]
        # one seed: median, min and max are the run's best after 6 trials
        assert cells == [(pytest.approx(run.curve[5], abs=0.051),) * 3]
        assert share == f"{run.curve[0] / random_full:.0%}"
        assert wall == pytest.approx(run.wall, abs=0.51)
    assert report["numpy"] == pytest.approx(numpy_gflops, abs=0.051)
    # The verdicts follow from the numbers, whichever way they go on this machine.
    verdict, reached, at, share, random_shown = report["goals"]["xgb"]
    xgb_at = runs["xgb"][0].curve[0]  # a quarter of 6 trials: the first
    assert (reached, at, random_shown) == (pytest.approx(xgb_at, abs=0.051), 1,
                                           pytest.approx(random_full, abs=0.051))
    assert verdict == ("PASS" if xgb_at >= 0.95 * random_full else "FAIL")
    assert report["spreads"] == {}  # one seed: no spread to judge
    best = max((rs[0] for rs in runs.values()), key=lambda r: r.final_gflops)
    verdict, found, tuner, seed, *_ = report["best"]
    assert (found, tuner, seed) == (pytest.approx(best.final_gflops, abs=0.051), best.tuner, 0)
    assert verdict == ("PASS" if best.final_gflops >= numpy_gflops else "FAIL")
    assert ok == (report["goals"]["xgb"][0] == verdict == "PASS")
    png = tmp_path / "curves.png"
    bench.plot(runs, 6, numpy_gflops, "smoke", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _runs(bench, tuners):
    """Three seeds per tuner (so that a median is not a mean), 60 trials each, 2 s of wall each."""
    curves = {
        "random": ([10] * 30 + [20] * 30, [12] * 50 + [16] * 10, [11] * 60),
        "ga": ([19] * 60,) * 3,
        "xgb": ([18] * 60, [17] * 60, [16.5] * 60),
        "optuna": ([15] * 60, [5] * 20 + [16] * 40, [10] * 60),
    }
    finals = {"random": (20.0, 18.0, 17.0), "ga": (19.5, 21.0, 19.0), "xgb": (18.5, 17.0, 15.0),
              "optuna": (15.0, 16.0, 10.0)}
    return {t: [bench.Run(t, seed, [float(v) for v in curves[t][seed]], finals[t][seed], 2.0)
                for seed in range(3)] for t in tuners}


# Best after k trials over the seeds, as "median [min-max]", for k = 25, 50, 60, and the
# median at a quarter of the budget (15) over random's median at 60, by hand:
# random: k=25 {10, 12, 11}, k=50 {20, 12, 11}, k=60 {20, 16, 11}; at 15 {10, 12, 11}: 11 / 16.
_ROWS = {
    "random": ([(11.0, 10.0, 12.0), (12.0, 11.0, 20.0), (16.0, 11.0, 20.0)], "69%", 6),
    "ga": ([(19.0, 19.0, 19.0)] * 3, "119%", 6),
    "xgb": ([(17.0, 16.5, 18.0)] * 3, "106%", 6),  # the mean would be 17.2
    "optuna": ([(15.0, 10.0, 16.0)] * 3, "62%", 6),  # at 25: {15, 16, 10}; at 15: {15, 5, 10}
}
_XGB_GOAL = ("PASS", 17.0, 15, 106, 16.0)
# At 15 trials xgb's seeds span 16.5-18 (92% >= 90%), optuna's 5-15 (33%).
_XGB_SPREAD = ("PASS", 15, 16.5, 18.0, 92)
_OPTUNA_SPREAD = ("FAIL", 15, 5.0, 15.0, 33)


@pytest.mark.parametrize("tuners, numpy_gflops, goals, spreads, best, ok", [
    # xgb reaches 17 of random's 16 within 15 trials (106%), optuna 10 (62%, short of 95%);
    # ga seed 1 re-measured 21.0, 21 / 19 = 1.11x numpy; the best single trial is random's 20.0.
    (["random", "ga", "xgb", "optuna"], 19.0, {"xgb": _XGB_GOAL, "optuna": ("FAIL", 10.0, 15, 62, 16.0)},
     {"xgb": _XGB_SPREAD, "optuna": _OPTUNA_SPREAD}, ("PASS", 21.0, "ga", 1, 20.0, 1.11, 19.0), False),
    (["random", "ga", "xgb"], 19.0, {"xgb": _XGB_GOAL}, {"xgb": _XGB_SPREAD},
     ("PASS", 21.0, "ga", 1, 20.0, 1.11, 19.0), True),
    # numpy faster than anything found: 21 / 25 = 0.84x
    (["random", "ga", "xgb"], 25.0, {"xgb": _XGB_GOAL}, {"xgb": _XGB_SPREAD},
     ("FAIL", 21.0, "ga", 1, 20.0, 0.84, 25.0), False),
    # no random search to compare with: no reach lines, the spreads still judged (optuna's fails);
    # xgb seed 0 re-measured 18.5 = 1.23x of 15
    (["xgb", "optuna"], 15.0, {}, {"xgb": _XGB_SPREAD, "optuna": _OPTUNA_SPREAD},
     ("PASS", 18.5, "xgb", 0, 18.0, 1.23, 15.0), False),
    (["xgb"], 15.0, {}, {"xgb": _XGB_SPREAD}, ("PASS", 18.5, "xgb", 0, 18.0, 1.23, 15.0), True),
])
def test_report_table_and_verdicts_by_hand(bench, capsys, tuners, numpy_gflops, goals, spreads, best, ok):
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    assert bench.report(task, _runs(bench, tuners), 60, numpy_gflops) is ok
    report = _parse(capsys.readouterr().out)
    assert report["title"].startswith(f"{task.workload_name}, 60 trials x 3 seeds")
    assert report["columns"] == ["tuner", "k=25", "k=50", "k=60", "@15/random@60", "wall", "s"]
    expected_rows = {t: _ROWS[t] for t in tuners}
    if "random" not in tuners:
        expected_rows = {t: (cells, "-", wall) for t, (cells, _, wall) in expected_rows.items()}
    assert report["rows"] == expected_rows
    assert list(report["rows"]) == tuners
    assert report["numpy"] == numpy_gflops
    assert report["goals"] == goals
    assert report["spreads"] == spreads
    assert report["best"] == best
    assert report.get("bases", {"best single trials"}) == {"best single trials"}  # runs go past 15


def test_goals_judge_re_measured_bests_when_the_runs_end_where_they_are_judged(bench, capsys):
    """With ``--budget xgb=15`` beside random's 60, each run's re-measured best is judged, not
    its best single trial: xgb's re-measured 18.5, 17, 15 (median 17) against random's 20, 18,
    17 (median 18) is 94%, short of 95%, though its single trials (17 against 16) reach 106%;
    its seeds span 15-18.5 (81%)."""
    runs = _runs(bench, ["random", "xgb"])
    for run in runs["xgb"]:
        run.curve = run.curve[:15]
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    assert bench.report(task, runs, 60, 15.0) is False
    report = _parse(capsys.readouterr().out)
    assert report["goals"]["xgb"] == ("FAIL", 17.0, 15, 94, 18.0)
    assert report["spreads"]["xgb"] == ("FAIL", 15, 15.0, 18.5, 81)
    assert report["bases"] == {"re-measured bests"}
    assert report["rows"]["xgb"][1] == "106%"  # the table keeps the single-trial curves


def test_report_marks_checkpoints_a_run_did_not_reach(bench, capsys):
    """A tuner run with a smaller budget (``--budget xgb=20``) shows "-" past its last trial,
    and is judged at a quarter of random's budget (15 of 60)."""
    runs = _runs(bench, ["random", "xgb"])
    for run in runs["xgb"]:
        run.curve = run.curve[:20]
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    bench.report(task, runs, 60, 19.0)
    report = _parse(capsys.readouterr().out)
    assert report["rows"]["xgb"] == ([None, None, None], "106%", 6)
    assert report["goals"]["xgb"] == _XGB_GOAL


def test_budgets_parse_and_reject_bad_pairs(bench):
    assert bench.parse_budgets("xgb=50, optuna=60") == {"xgb": 50, "optuna": 60}
    assert bench.parse_budgets("") == {}
    for bad in ("xgb", "xgb=0", "xgb=ten"):
        with pytest.raises(ValueError, match="TUNER=TRIALS"):
            bench.parse_budgets(bad)
    assert [bench.goal_point(t) for t in (200, 60, 6, 2)] == [50, 15, 1, 1]


def test_report_gives_no_verdict_when_a_quietness_check_found_the_machine_busy(bench, capsys):
    """A busy spell makes any tuner look slow: the table is printed, the goal lines are not."""
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    runs = _runs(bench, ["random", "xgb"])
    quiet, busy = bench.B.Quietness(2, 1e11, 2e11), bench.B.Quietness(2, 1e11, 1.1e11)
    assert bench.report(task, runs, 60, 19.0, (quiet, quiet)) is True
    assert "PASS: xgb reaches" in capsys.readouterr().out
    assert bench.report(task, runs, 60, 19.0, (quiet, busy)) is False
    out = capsys.readouterr().out
    assert "MACHINE BUSY (after the timings)" in out and "xgb" in out
    assert "PASS:" not in out and "FAIL:" not in out
