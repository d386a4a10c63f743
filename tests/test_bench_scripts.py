"""The benchmarks' own logic: when a machine counts as quiet, when verdicts are printed, how
contenders are interleaved, and the child process that times one of them (no timings checked)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import bench_common as B  # scripts/benchmarks, on the path through pyproject.toml's pytest pythonpath
import bench_model as M
import bench_tuned
import cpu_kernels as K
import numpy as np
import pytest

import compiler

GFLOPS = 1e9


@pytest.mark.parametrize("threads, one, many, quiet", [
    (2, 100, 185, True),
    (2, 100, 180, True),   # exactly QUIET_SCALING per thread
    (2, 100, 179, False),
    (2, 100, 100, False),  # one core taken by other work: two threads do what one does
    (4, 100, 350, False),
    (4, 100, 390, True),
])
def test_quiet_needs_the_peak_to_scale_with_the_threads(threads, one, many, quiet):
    q = B.Quietness(threads, one * GFLOPS, many * GFLOPS)
    assert q.quiet is quiet
    assert ("BUSY" in q.describe()) is not quiet


@pytest.mark.parametrize("share, quiet", [(1.0, True), (0.9, True), (0.89, False), (0.15, False)])
def test_quiet_needs_the_threads_to_get_their_cores_time(share, quiet):
    # every core shared with other work: one thread and two slow down alike, so the scaling
    # looks fine, but the threads got a fraction of the cores' time
    q = B.Quietness(2, 20 * GFLOPS, 39 * GFLOPS, cpu_share=share)
    assert q.quiet is quiet
    assert ("BUSY" in q.describe()) is not quiet and f"{share:.0%} of 2 cores' time" in q.describe()


QUIET = B.Quietness(2, 100 * GFLOPS, 195 * GFLOPS)
BUSY = B.Quietness(2, 100 * GFLOPS, 110 * GFLOPS)
VERDICTS = [B.Verdict("matmul vs numpy", 1.2, 0.95), B.Verdict("conv vs torch", 0.5, 1.0),
            B.Verdict("deployed / log", 1.3, 1.1, at_most=True)]


def test_waiting_for_a_quiet_machine_checks_again_while_it_is_busy():
    checks, said = [BUSY, BUSY, QUIET, BUSY], []
    found = B.wait_until_quiet(lambda: checks.pop(0), minutes=1, interval_s=0, say=said.append)
    assert found is QUIET and checks == [BUSY]  # stopped at the first quiet check
    assert len(said) == 2 and all("BUSY" in line and "checking again" in line for line in said)


def test_waiting_for_a_quiet_machine_gives_up_when_its_minutes_have_passed():
    calls, said = [], []
    found = B.wait_until_quiet(lambda: calls.append(1) or BUSY, minutes=0, interval_s=0, say=said.append)
    assert found is BUSY and len(calls) == 1 and said == []  # no time to wait: one check
    found = B.wait_until_quiet(lambda: calls.append(1) or BUSY, minutes=0.01, interval_s=0.2, say=said.append)
    assert found is BUSY and 2 <= len(calls) <= 5 and len(said) == len(calls) - 2


def test_bench_model_refuses_a_negative_wait_for_quiet(capsys):
    with pytest.raises(SystemExit):
        M._parse(["--wait-quiet", "-1"])
    assert "--wait-quiet takes minutes, 0 or more" in capsys.readouterr().err
    assert M._parse(["--wait-quiet", "2.5"]).wait_quiet == 2.5


def test_verdicts_printed_on_a_quiet_machine():
    lines = B.verdict_lines(VERDICTS, [QUIET, QUIET])
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["PASS", "FAIL", "FAIL"]
    assert "1.20x" in lines[0] and "0.95x" in lines[0]


@pytest.mark.parametrize("checks", [[BUSY, QUIET], [QUIET, BUSY], [BUSY, BUSY], []],
                         ids=["busy-before", "busy-after", "busy-both", "unchecked"])
def test_no_verdict_unless_every_check_found_the_machine_quiet(checks):
    lines = B.verdict_lines(VERDICTS, checks)
    text = "\n".join(lines)
    assert "no PASS/FAIL verdict" in text
    residue = text.replace("no PASS/FAIL verdict", "")
    assert "PASS" not in residue and "FAIL" not in residue
    if checks:
        assert "BUSY" in text
        assert ("before" in text) is (not checks[0].quiet)
        assert ("after" in text) is (not checks[1].quiet)
        assert B.busy_note(checks)
    assert B.busy_note([QUIET, QUIET]) == ""


@pytest.mark.parametrize("before, after, verdict", [(1.4, 1.45, True), (2.8, 2.7, True), (1.4, 2.8, False),
                                                     (2.8, 1.4, False), (None, 2.8, True)])
def test_no_verdict_when_the_cores_moved_between_the_checks(before, after, verdict):
    # on a virtual machine the host may move the vCPUs between core complexes: reading another
    # core's data then costs twice as much, and kernels whose threads exchange data slow down
    checks = [dataclasses.replace(QUIET, exchange=before), dataclasses.replace(QUIET, exchange=after)]
    text = "\n".join(B.verdict_lines(VERDICTS, checks))
    assert ("no PASS/FAIL verdict" not in text) is verdict
    assert ("THE CORES MOVED" in text) is not verdict
    if not verdict:
        assert f"{before:.2f}x, {after:.2f}x" in text
    assert f"another core's block read in {after:.2f}x" in checks[1].describe()


@pytest.mark.parametrize("reads, quiet", [((30, 31, 29.5), True), ((30, 24), True),  # 1.25x: at the bound
                                           ((30, 23.9), False), ((34.7, 19.4, 32), False), ((), True)])
def test_quiet_needs_the_memory_reads_to_agree(reads, quiet):
    # another tenant's memory traffic leaves the FMA peak alone but slows every streaming read
    q = dataclasses.replace(QUIET, reads=tuple(r * GFLOPS for r in reads))
    assert q.quiet is quiet
    assert ("BUSY" in q.describe()) is not quiet
    if reads:
        assert f"{min(reads):.1f}-{max(reads):.1f} GB/s" in q.describe()


@pytest.mark.parametrize("before, after, verdict", [(30, 27, True), (30, 20, False), (20, 30, False)])
def test_no_verdict_when_the_memory_speed_changed_between_the_checks(before, after, verdict):
    checks = [dataclasses.replace(QUIET, reads=(before * GFLOPS,) * 3),
              dataclasses.replace(QUIET, reads=(after * GFLOPS,) * 3)]
    for by_round in (False, True):  # rounds checked for the cores' placement still need the memory's speed
        text = "\n".join(B.verdict_lines(VERDICTS, checks, by_round=by_round))
        assert ("no PASS/FAIL verdict" not in text) is verdict
        assert ("MEMORY BUSY" in text) is not verdict
        if not verdict:
            assert f"{before:.1f}, {after:.1f} GB/s" in text


def test_memory_reads_are_timed_and_survive_a_json_round_trip():
    reads = B.memory_reads(2, mib=8, reads=2, pause=0)
    assert len(reads) == 2 and all(math.isfinite(r) and r > 0 for r in reads)  # the size is the host's
    q = dataclasses.replace(QUIET, reads=reads)
    back = B.Quietness.from_dict(json.loads(json.dumps(dataclasses.asdict(q))))
    assert back == q and back.read_spread == q.read_spread


def test_cross_core_cost_is_measured_with_two_threads(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    cost = B.cross_core_cost(2, floats=4096, rounds=1)
    assert math.isfinite(cost) and cost > 0  # its size depends on the host: only that it is timed


def test_contenders_are_interleaved_in_fresh_runs_and_reported_as_medians():
    calls = []
    seconds = {"ours": iter([3.0, 1.0, 2.0]), "peer": iter([5.0, 4.0, 6.0])}

    def runner(spec, env):
        calls.append(spec["who"])
        assert env["AUTOTUNE_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "3"
        return next(seconds[spec["who"]]), f"info {spec['who']}"

    contenders = [B.Contender("ours", {"who": "ours"}), B.Contender("peer", {"who": "peer"})]
    timings = B.time_interleaved(contenders, threads=3, rounds=3, runner=runner)
    assert calls == ["ours", "peer"] * 3
    assert timings["ours"].rounds == [3.0, 1.0, 2.0] and timings["ours"].median == 2.0
    assert timings["peer"].median == 5.0 and timings["peer"].info == "info peer"


def test_rounds_run_with_the_vcpus_moved_are_left_out_of_the_medians(monkeypatch):
    # The cross-core cost checked before the first child and after each: ours, peer, ours, peer, ...
    # The host moved the vCPUs apart (2.8x) after the third child, and back during the fifth.
    checks = iter([1.4, 1.45, 1.4, 2.8, 2.9, 1.5, 1.4, 1.4, 1.42, 1.41, 1.4])
    seconds = {"ours": iter([1.0, 1.9, 1.8, 1.0, 1.05]), "peer": iter([2.0, 2.6, 2.1, 2.0, 2.05])}
    contenders = [B.Contender("ours", {"who": "ours"}), B.Contender("peer", {"who": "peer"})]
    timings = B.time_interleaved(contenders, threads=2, rounds=5, placement=lambda: next(checks),
                                 runner=lambda spec, env: (next(seconds[spec["who"]]), ""))
    ours, peer = timings["ours"], timings["peer"]
    assert ours.moved == [False, True, True, False, False]
    assert peer.moved == [False, True, False, False, False]
    assert ours.kept() == [1.0, 1.0, 1.05] and ours.median == 1.0 and ours.noise() == ""
    assert peer.kept() == [2.0, 2.1, 2.0, 2.05] and peer.median == pytest.approx(2.025)
    assert ours.describe().startswith("ours: 1000.000 1900.000* 1800.000* 1000.000 1050.000 ms")
    assert "* the vCPUs had moved, 2 left out" in ours.describe()
    # too few rounds left: every round counts, and the figures get no verdict
    jumpy = B.Timing("ours", rounds=[1.0, 1.9, 1.1], moved=[False, True, False])
    assert jumpy.kept() == [1.0, 1.9, 1.1]
    assert "the vCPUs moved during 1 of the 3 rounds of ours" in jumpy.noise()
    assert "too few rounds left: all counted" in jumpy.describe()
    # unchecked, or checked and none moved: every round counts, however few, and nothing is withheld
    assert B.Timing("ours", rounds=[1.0, 1.9, 1.1]).kept_indices() == [0, 1, 2]
    steady = B.Timing("ours", rounds=[1.0, 1.05], moved=[False, False])
    assert steady.kept_indices() == [0, 1] and steady.noise() == "" and "*" not in steady.describe()
    # too few rounds left after the planned ones: every contender runs more, until each has enough
    checks = iter([1.4, 2.8, 1.4, 2.9, 1.4, 1.4, 1.4, 1.45, 1.4, 1.4, 1.4])
    calls = []

    def runner(spec, env):
        calls.append(spec["who"])
        return 1.0, ""

    timings = B.time_interleaved(contenders, threads=2, rounds=3, placement=lambda: next(checks),
                                 runner=runner)
    assert timings["ours"].moved == [True, True, False, False, False] and not timings["ours"].too_few_kept
    assert timings["peer"].moved == [True, True, False, False, False]
    assert calls == ["ours", "peer"] * 5  # two extra rounds, interleaved as the first three
    # ... up to extra_rounds more: then the figures go without a verdict
    checks = iter([1.4, 2.8, 1.4, 2.9, 1.4, 1.4])
    timings = B.time_interleaved(contenders[:1], threads=2, rounds=3, placement=lambda: next(checks),
                                 runner=lambda spec, env: (1.0, ""), extra_rounds=2)
    assert len(timings["ours"].rounds) == 5 and timings["ours"].too_few_kept
    # off the usual placement either way: a third placement, cheaper, is a move too
    checks = iter([1.5, 1.5, 1.0, 1.5, 1.5])
    timings = B.time_interleaved(contenders[:1], threads=2, rounds=4, placement=lambda: next(checks),
                                 runner=lambda spec, env: (1.0, ""), extra_rounds=0)
    assert timings["ours"].moved == [False, True, True, False]
    # judged by its rounds, a run whose checks before and after disagree on the placement keeps its verdicts
    near, apart = dataclasses.replace(QUIET, exchange=1.4), dataclasses.replace(QUIET, exchange=2.8)
    assert B.busy_note([near, apart], by_round=True) == "" and "THE CORES MOVED" in B.busy_note([near, apart])
    assert B.verdict_lines(VERDICTS, [near, apart], by_round=True) == [v.line() for v in VERDICTS]
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    assert B.placement_check(2) > 0  # a fresh process measures it


def test_a_timing_describes_its_rounds_in_order_and_their_spread(capsys):
    ours = B.Timing("ours", rounds=[0.0030, 0.0010, 0.0020])
    assert ours.spread == pytest.approx(1.0)
    assert ours.describe() == "ours: 3.000 1.000 2.000 ms (middle 3 spread 100%)"
    # of five rounds the fastest and the slowest are left out of the spread, as of the median
    lone_outlier = B.Timing("ours", rounds=[0.0010, 0.0013, 0.00101, 0.00099, 0.00102])
    assert lone_outlier.middle() == [0.0010, 0.00101, 0.00102]
    assert lone_outlier.spread == pytest.approx(0.02 / 1.01) and lone_outlier.noise() == ""
    failed = B.Timing("torch", error="No module named 'torch'")
    assert failed.spread is None and failed.describe() == "torch: did not run (No module named 'torch')"
    B.print_rounds({"ours": ours, "torch": failed})
    assert capsys.readouterr().out.splitlines() == [f"  {ours.describe()}", f"  {failed.describe()}"]


def test_a_contender_that_fails_is_dropped_with_its_reason():
    calls = []

    def runner(spec, env):
        calls.append(spec["who"])
        if spec["who"] == "torch" and env.get("X") == "1":
            raise RuntimeError("ModuleNotFoundError: No module named 'torch'")
        return 1.0, ""

    contenders = [B.Contender("ours", {"who": "ours"}), B.Contender("torch", {"who": "torch"}, {"X": "1"})]
    timings = B.time_interleaved(contenders, threads=2, rounds=3, runner=runner)
    assert calls == ["ours", "torch", "ours", "ours"]
    assert timings["torch"].median is None and "No module named 'torch'" in timings["torch"].error
    assert timings["ours"].rounds == [1.0, 1.0, 1.0]


def test_child_times_an_exported_module_and_a_numpy_peer(tmp_path):
    f = compiler.build(*K.vector_add(256, block=64), name="vector_add")
    path = tmp_path / "vadd.so"
    f.export_library(path)
    arrays = [np.empty(256, np.float32)] * 3
    spec = B.module_spec(path, arrays, repeat=2, min_ms=1)
    assert spec["args"] == [[[256], "float32"]] * 3
    seconds, info = B.run_child(spec, B.thread_env(2))
    assert math.isfinite(seconds) and seconds > 0 and "vadd.so" in info
    peer = {"kind": "numpy", "op": "matmul", "shape": [8, 4, 8], "repeat": 2, "min_ms": 1}
    seconds, info = B.run_child(peer, B.thread_env(2))
    assert math.isfinite(seconds) and seconds > 0 and info.startswith("numpy")
    with pytest.raises(RuntimeError, match="unknown contender kind 'jax'"):
        B.run_child({"kind": "jax"}, {})


_MAPPED_BYTES = """
import ctypes
import numpy as np
import bench_common as B

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]

if {steady}:
    assert B.steady_heap()
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
held = np.ones(1 << 18, np.float32)  # 1 MiB, as a per-call buffer of a kernel
print(mallinfo2().hblkhd)
"""


@pytest.mark.parametrize("steady", [True, False])
def test_timing_children_keep_large_blocks_on_the_heap(steady):
    # glibc maps a fresh 1 MiB block by itself (and faults its pages in on every call that
    # allocates it); a timing child keeps such blocks on its heap, for every contender alike
    path = os.pathsep.join(p for p in (str(Path(B.__file__).parent), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _MAPPED_BYTES.format(steady=steady)],
                         env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                         check=True).stdout
    mapped = int(out)
    assert (mapped < 1 << 20) if steady else (mapped >= 1 << 20)


def _tuned(goal=0.95, throughput=True, tuned_now=60, tune_s=60.0, logged=1e-3):
    w = bench_tuned.Workload("mm", "matmul", (8, 8, 8, "float32"), goal, throughput)
    return bench_tuned.Tuned(w, 2e9, 100, tuned_now, tune_s, logged, Path("mm.so"))


def _timings(**medians):
    return {k: B.Timing(k, [v] if v else [], error="" if v else "failed") for k, v in medians.items()}


def test_bench_tuned_goals_use_the_fastest_peer_the_log_and_the_throughput():
    verdicts = bench_tuned.workload_verdicts(_tuned(), _timings(ours=1e-3, numpy=1.2e-3, torch=0.9e-3))
    by_what = {v.what: v for v in verdicts}
    vs_peer = by_what["mm vs torch (fastest peer)"]
    assert vs_peer.value == pytest.approx(0.9) and not vs_peer.met
    deployed = by_what["mm deployed / log's best"]
    assert deployed.value == pytest.approx(1.0) and deployed.met
    assert by_what["mm tuning throughput"].goal == 40.0
    assert by_what["mm tuning throughput"].value == pytest.approx(60.0)
    # a peer that did not run is no goal; nothing tuned in this run: no throughput figure
    verdicts = bench_tuned.workload_verdicts(_tuned(tuned_now=0), _timings(ours=1e-3, numpy=2e-3, torch=None))
    assert [v.what for v in verdicts] == ["mm vs numpy (fastest peer)", "mm deployed / log's best"]


def test_bench_tuned_table_gives_peak_share_and_log_vs_deployed():
    rows, verdicts = bench_tuned.table_rows([_tuned(logged=0.8e-3)], [_timings(ours=1e-3, numpy=2e-3)],
                                            peak=4e12)
    ours, numpy_row = rows
    assert ours[2:5] == ("1.000", "2000.0", "50%") and ours[6] == "0.800 / 1.000"
    assert "60.0/min" in ours[7]
    assert numpy_row[4:6] == ("25%", "2.00")
    assert any(v.what == "mm deployed / log's best" and not v.met for v in verdicts)


@pytest.mark.parametrize("logged, met", [(1e-3, True), (0.91e-3, True), (0.89e-3, False), (1.1e-3, True),
                                         (1.12e-3, False)])
def test_bench_tuned_deployed_must_be_within_ten_percent_of_the_log_either_way(logged, met):
    verdicts = bench_tuned.workload_verdicts(_tuned(logged=logged), _timings(ours=1e-3, numpy=1e-3))
    (deployed,) = [v for v in verdicts if v.what == "mm deployed / log's best"]
    assert deployed.met is met
    assert "within 10% of 1.00x" in deployed.line() and deployed.line().endswith("PASS" if met else "FAIL")


def test_bench_tuned_gives_no_verdict_where_our_rounds_disagree():
    # one slow round of five (the median's business), or two of five (the machine changed)
    steady = {"ours": B.Timing("ours", [1.00e-3, 1.40e-3, 0.99e-3, 1.01e-3, 1.02e-3]),
              "numpy": B.Timing("numpy", [2e-3] * 5)}
    jumpy = {"ours": B.Timing("ours", [1.00e-3, 1.22e-3, 0.97e-3, 1.25e-3, 1.01e-3]),
             "numpy": B.Timing("numpy", [2e-3] * 5)}
    for v in bench_tuned.workload_verdicts(_tuned(), steady):
        assert v.withheld == "" and v.line().endswith("PASS")
    verdicts = bench_tuned.workload_verdicts(_tuned(), jumpy)
    by_what = {v.what: v for v in verdicts}
    for what in ("mm vs numpy (fastest peer)", "mm deployed / log's best"):
        line = by_what[what].line()
        assert line.endswith("NO VERDICT: the middle 3 rounds of ours spread 22% (more than 10%): "
                             "the machine changed")
        assert "PASS" not in line and "FAIL" not in line
    assert by_what["mm tuning throughput"].line().endswith("PASS")  # not a timing of the kernel


def test_verdict_within_a_tolerance_either_way():
    assert B.Verdict("x", 1.05, 1.0, within=0.1).met and B.Verdict("x", 0.95, 1.0, within=0.1).met
    assert not B.Verdict("x", 1.2, 1.0, within=0.1).met and not B.Verdict("x", 0.8, 1.0, within=0.1).met


def test_bench_tuned_covers_the_goal_workloads_with_their_goals():
    W = bench_tuned.WORKLOADS
    goals = {(w.template, w.args): (w.goal, w.throughput_goal) for w in W.values()}
    assert len(goals) == len(W) == 8
    for n in (1024, 2048):
        assert goals[("matmul", (n, n, n, "float32"))] == (0.95, n == 1024)
    for c, hw in [(64, 56), (128, 28), (256, 14), (512, 7)]:  # every 3x3 layer of ResNet-18
        assert goals[("conv2d_nchw", (1, c, hw, hw, c, 3, 3, 1, 1, 1, "float32"))] == (1.0, False)
    one_by_one = [w for w in W.values() if w.template == "conv2d_nchw" and w.args[5:7] == (1, 1)]
    depthwise = [w for w in W.values() if w.template == "depthwise_conv2d_nchw"]
    assert len(one_by_one) == len(depthwise) == 1
    assert one_by_one[0].goal == depthwise[0].goal == 0.8
    assert bench_tuned.LOG_VS_DEPLOYED == 0.10


def test_bench_tuned_peers_are_numpy_and_torch():
    labels = [c.label for c in bench_tuned.peers(bench_tuned.WORKLOADS["matmul1024"])]
    assert labels[0] == "numpy a @ b"
    torch = importlib.util.find_spec("torch") is not None
    assert ("torch a @ b" in labels) is torch
    for key in ("conv3x3_56", "conv1x1", "depthwise"):
        peers = bench_tuned.peers(bench_tuned.WORKLOADS[key])
        assert [p.label for p in peers] == (["torch conv2d"] if torch else [])
    (dw,) = bench_tuned.peers(bench_tuned.WORKLOADS["depthwise"]) or [None]
    if dw is not None:
        assert dw.spec["groups"] == 32 and dw.spec["w"] == [32, 1, 3, 3]


def test_bench_tuned_prints_the_whole_run_wall_time():
    line = bench_tuned.wall_time_line(1500.0, 1200.0, 240.0, 1024)
    assert line.startswith("# whole run: 25.0 min wall time")
    assert "tuning 20.0 min, 1024 trials, 51.2 trials/min" in line and "timings 4.0 min" in line
    assert "trials/min" not in bench_tuned.wall_time_line(60.0, 0.0, 50.0, 0)


def test_bench_tuned_counts_the_trials_it_measured_not_those_it_asked_for(tmp_path):
    # a space of 4 configs on any host (4 filters: one block of 4, whatever the vector width):
    # asked for 6 trials, the tuner measures the 4 and stops
    w = bench_tuned.Workload("conv tiny", "conv2d_nchw", (1, 8, 4, 4, 4, 3, 3, 1, 1, 1, "float32"), 1.0)
    assert len(bench_tuned.autotune.create_task(w.template, w.args, target="llvm").config_space) == 4
    opts = SimpleNamespace(trials=6, db=str(tmp_path / "log.db"), tuner="xgb", early_stopping=None, seed=0,
                           progress=False)
    (tmp_path / "so").mkdir()
    tuned = bench_tuned.tune_and_export(w, opts, tmp_path / "so")
    assert (tuned.trials, tuned.tuned_now) == (4, 4)
    assert tuned.so_path.exists() and tuned.logged_s > 0
    again = bench_tuned.tune_and_export(w, opts, tmp_path / "so")  # the log's trials count: none to tune
    assert (again.trials, again.tuned_now) == (4, 0) and again.trials_per_minute is None


# ----------------------------------------------------------------------------- bench_model


def _onnx_conv_gemm_matmul(path):
    """Conv (4 filters of 3x3x3 over 1x3x8x8, padding 1), flattened by a reshape to
    ``(c.shape[0], -1)`` (its shape computed, as exporters write ``x.view(x.shape[0], -1)``),
    Gemm to 10, MatMul to 3."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def weight(name, shape):
        return numpy_helper.from_array(np.ones(shape, np.float32), name)

    def indices(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "rest"], ["flat"], axis=0),
             helper.make_node("Reshape", ["c", "flat"], ["f"]),
             helper.make_node("Gemm", ["f", "g"], ["h"]),
             helper.make_node("MatMul", ["h", "m"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    graph = helper.make_graph(nodes, "g", [x], [y],
                              [weight("w", (4, 3, 3, 3)), weight("g", (256, 10)), weight("m", (10, 3)),
                               indices("zero", [0]), indices("rest", [-1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_bench_model_transfer_replays_two_tasks_from_a_cost_table(tmp_path):
    # two dense layers of one template, a cost table of 4 sampled configs each measured once, then
    # alone and transfer replayed from it: the script's whole --replay path, in a minute
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)
               for name, shape in (("a", (64, 48)), ("b", (48, 32)))]
    nodes = [helper.make_node("MatMul", ["x", "a"], ["h"]), helper.make_node("MatMul", ["h", "b"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])
    graph = helper.make_graph(nodes, "two_dense", [x], [y], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    here = Path(B.__file__).parent
    path = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH")) if p)
    args = ["--model", str(tmp_path / "m.onnx"), "--replay", "--trials", "3", "--table-max", "4",
            "--passes", "1", "--db-dir", str(tmp_path / "logs"), "--no-progress"]
    proc = subprocess.run([sys.executable, str(here / "bench_model_transfer.py"), *args],
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "measuring the cost table, pass 1 of 1: 8 configs of 2 tasks" in out
    assert "# trials to 95% of the table's optimum over 1 task runs: alone " in out
    assert "transfer / alone" in out and ("PASS" in out or "FAIL" in out)  # the replay is judged: no timing
    assert (tmp_path / "logs" / "cost_table.db").exists()


def test_bench_model_counts_the_multiply_adds_of_conv_gemm_and_matmul(tmp_path):
    pytest.importorskip("onnx")
    _onnx_conv_gemm_matmul(tmp_path / "m.onnx")
    assert M.model_macs(tmp_path / "m.onnx") == 4 * 8 * 8 * 27 + 256 * 10 + 10 * 3
    assert M.output_shapes(tmp_path / "m.onnx") == [[1, 3]]


def test_bench_model_counts_a_peers_memory_for_the_weights_it_loads(tmp_path):
    # a model of 16 MiB of weights: ONNX Runtime, in its own timing child, holds them at least
    # once; nothing the child read before the peak's restart may lend it their pages
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).uniform(-1, 1, (2048, 2048)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2048])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big", [x], [y],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    m = M.Model("big", (1, 2048), tmp_path / "m.onnx", 2 * w.size)
    (spec,) = [c.spec for c in M.contenders(m, ["ort"], repeat=1, min_ms=1)]
    reply = M.ChildRunner().reply(spec, B.thread_env(1))
    assert reply["rss_kib"] >= w.nbytes // 1024, reply


def test_bench_model_compares_relative_to_the_output_scale():
    ref = np.array([100.0, 1.0, 0.0], np.float32)
    ok, abs_err, rel_err = M.compare(ref + np.float32(0.009), ref)  # within 1e-4 x 100
    assert ok and abs_err == pytest.approx(0.009, rel=1e-3) and rel_err == pytest.approx(9e-5, rel=1e-3)
    assert not M.compare(ref + np.float32(0.02), ref)[0]
    assert not M.compare(np.array([100.0, 1.0, np.nan], np.float32), ref)[0]


def _model_result(name="resnet18", tuned=True, mismatch=False, ours_rounds=(1e-3,) * 3):
    m = M.Model(name, (1, 3, 224, 224), Path("m.onnx"), 3.6e9, mismatch=mismatch)
    ours = M.TUNED if tuned else M.UNTUNED
    timings = {ours: B.Timing(ours, list(ours_rounds)), "onnxruntime": B.Timing("onnxruntime", [1.2e-3] * 3),
               "torch eager": B.Timing("torch eager", [2e-3] * 3),
               "torch.compile": B.Timing("torch.compile", error="compile failed")}
    replies = {ours: [{"seconds": 1e-3, "kernel_s": 0.98e-3, "kernel_in_model_s": 0.995e-3,
                       "rss_kib": 50 * 1024}] * 3,
               "onnxruntime": [{"seconds": 1.2e-3, "rss_kib": 100 * 1024}] * 3}
    return M.Result(m, timings, replies)


def test_bench_model_row_and_verdicts_for_a_tuned_model():
    r = _model_result()
    row = dict(zip(M.TABLE_HEADER, M.table_row(r, peak=7.2e12), strict=True))
    assert row["tuned ms"] == "1.00" and row["untuned ms"] == "n/a" and row["compile ms"] == "n/a"
    assert (row["vs ORT"], row["vs eager"], row["vs compile"]) == ("1.20x", "2.00x", "n/a")
    assert row["overhead"] == "+2.0%" and row["executor"] == "+0.5%" and row["% peak"] == "50%"
    assert (row["MiB ours"], row["MiB ORT"], row["MiB eager"]) == ("50", "100", "n/a")
    lines = {v.what: v.line() for v in M.verdicts(r)}
    assert lines["resnet18 ours tuned vs onnxruntime"].endswith("(goal >= 1.05x) PASS")
    assert lines["resnet18 ours tuned vs torch eager"].endswith("(goal >= 1.50x) PASS")
    assert lines["resnet18 ours tuned latency / its kernels' sum"].endswith("PASS")
    assert lines["resnet18 ours tuned peak memory / onnxruntime's"].endswith("PASS")
    assert not any("torch.compile" in what for what in lines)  # it did not run: no goal
    assert M.goal_vs_ort("mobilenet_v2") == 1.2 and M.goal_vs_ort("encoder_layer") == 1.0


def test_bench_model_compares_each_tuned_kernel_with_its_log_figure(tmp_path):
    import autotune
    import db
    from autotune.selection import record_of
    from measure import MeasureResult

    task = autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")
    space = task.config_space
    with db.open(tmp_path / "log.db") as log:
        for index, costs in ((0, (2e-3, 2e-3)), (1, (1e-3, 1.2e-3, 1e-3))):  # the second is the best
            log.add(record_of(task, space.get(index), MeasureResult(costs, None, "", 0.0, 0.0, 1.0, "w")))
    r = _model_result()
    tuned = {"k0_matmul": task.workload_key}
    r.replies[M.TUNED] = [{"seconds": 1e-3, "kernel_in_model_times": {"k0_matmul": t, "k1_relu": 1e-5},
                           "kernel_alone_model_times": {"k0_matmul": a}, "tuned_workloads": tuned}
                          for t, a in ((1.1e-3, 0.9e-3), (1.3e-3, 1.0e-3), (1.2e-3, 0.95e-3))]
    ((kernel, key, logged, deployed, alone),) = M.kernels_vs_log(r, str(tmp_path / "log.db"))
    assert (kernel, key) == ("k0_matmul", task.workload_key)
    assert logged == pytest.approx(1e-3) and deployed == pytest.approx(1.2e-3)  # medians: log, rounds
    assert alone == pytest.approx(0.95e-3)  # timed alone in the same rounds
    assert M.kernels_vs_log(_model_result(), str(tmp_path / "log.db")) == []  # no kernel times: no rows
    for reply in r.replies[M.TUNED]:
        del reply["kernel_alone_model_times"]  # children of an older script
    ((*_, alone),) = M.kernels_vs_log(r, str(tmp_path / "log.db"))
    assert alone is None
    # figures of today's code judge today's kernels; those of earlier code do not
    rows = M.kernels_vs_log(r, str(tmp_path / "log.db"))
    assert M.stale_figures(rows, str(tmp_path / "log.db")) == ""
    with db.open(tmp_path / "log.db") as log:
        older = [db.Record(**{**rec.to_dict(), "code_version": "0.0.9+older"}) for rec in log.records()]
    with db.open(tmp_path / "older.db") as log:
        log.add(older)
    rows = M.kernels_vs_log(r, str(tmp_path / "older.db"))
    assert M.stale_figures(rows, str(tmp_path / "older.db")).startswith(
        "1 of the 1 log figures were measured with other code than today's")


def test_bench_model_compares_deployed_kernels_with_the_same_kernels_alone_in_the_same_rounds():
    rows = [("k0_conv", "w0", 1.0e-4, 1.5e-4, 1.4e-4),  # the log is from a quieter hour: 1.07x now
            ("k1_dense", "w1", 2.0e-4, 1.8e-4, 2.0e-4),  # 0.90x: the furthest
            ("k2_pool", "w2", 1.0e-5, 3.0e-5, None)]  # not timed alone: left out
    line = M.deployed_vs_alone(rows)
    assert line.startswith("deployed / alone as the tuner times it, in the same children, "
                           "from 0.90x to 1.07x")
    assert line.endswith("furthest: k1_dense, 0.200 ms alone, 0.180 ms deployed")
    assert M.deployed_vs_alone([rows[2]]) == ""
    # against the log: every row, the furthest first (k2_pool's 3x)
    assert [(round(ratio, 2), row[0]) for ratio, row in M.deployed_ratios(rows, M.LOGGED)] == [
        (3.0, "k2_pool"), (1.5, "k0_conv"), (0.9, "k1_dense")]


def test_bench_model_names_the_kernels_that_lose_the_most_time_in_the_model():
    r = _model_result()
    r.replies[M.TUNED] = [{"seconds": 1e-3, "kernel_calls": {"k0_conv": 3, "k1_conv": 1, "k2_dense": 1}}]
    rows = [("k0_conv", "w0", 1.0e-4, 1.5e-4, None),  # 3 calls of +0.05 ms: the most lost
            ("k1_conv", "w1", 2.0e-4, 3.0e-4, None),  # one call of +0.1 ms
            ("k2_dense", "w2", 2.0e-4, 1.0e-4, None),  # faster in the model: not named
            ("k3_pool", "w3", 1.0e-5, 3.0e-5, None)]  # no call count: once
    line = M.time_lost_in_model(r, rows)
    assert line.split(", ")[0] == "k0_conv +0.150 ms (3 x 0.100 -> 0.150 ms)"
    assert line.index("k1_conv +0.100 ms") < line.index("k3_pool +0.020 ms")
    assert "k2_dense" not in line
    assert M.time_lost_in_model(r, rows, top=1) == "k0_conv +0.150 ms (3 x 0.100 -> 0.150 ms)"
    assert M.time_lost_in_model(r, [rows[2]]) == ""


def test_bench_model_splits_the_tuned_build_s_latency_against_the_estimate():
    r = _model_result(ours_rounds=(1.0e-3, 1.1e-3, 1.05e-3))
    assert r.deployed() is None  # no kernels timed inside the model: nothing to split
    # each round's child: its latency, the runs through the profiling entry whole, the seconds of the
    # kernels with a template inside the model, of the others, and how many others there are
    splits = ([0.9e-3, 0.05e-3, 2], [0.8e-3, 0.07e-3, 2], [0.85e-3, 0.06e-3, 2])
    rounds = [(1.0e-3, 0.86e-3), (1.1e-3, 0.97e-3), (1.05e-3, 0.90e-3)]
    r.replies[M.TUNED] = [{**reply, "in_model_split": s, "seconds": latency, "kernel_in_model_s": whole}
                          for reply, s, (latency, whole) in zip(r.replies[M.TUNED], splits, rounds)]
    deployed = r.deployed()
    assert deployed.measured == pytest.approx(1.05e-3)  # the median of the rounds, and of the parts
    assert (deployed.templated, deployed.untemplated) == (pytest.approx(0.85e-3), pytest.approx(0.06e-3))
    # the executor as each round saw it (0.14, 0.13, 0.15 ms), not the medians' difference (0.15 ms)
    assert deployed.executor == pytest.approx(0.14e-3) and deployed.untemplated_kernels == 2
    line = deployed.against(0.8e-3)
    assert "1.050 ms measured against 0.800 ms estimated from the tuning log (1.31x)" in line
    assert "kernels with a template 0.850 ms (1.06x their log figures)" in line
    assert "the 2 without one 60.00 us, the executor 0.140 ms (13.3% of the latency)" in line
    # The model timed whole and its kernels timed inside it are two timings: where they differ by
    # more than the executor takes, the line says so instead of giving the executor a negative time.
    r.replies[M.TUNED] = [{**reply, "kernel_in_model_s": reply["seconds"] + 0.1e-3}
                          for reply in r.replies[M.TUNED]]
    line = r.deployed().against(0.8e-3)
    assert "the executor too little to see (the model timed whole came out 0.100 ms below" in line


def test_bench_model_figures_leave_out_the_rounds_run_with_the_vcpus_moved():
    r = _model_result(ours_rounds=(1.0e-3, 1.6e-3, 1.1e-3, 1.0e-3))
    r.timings[M.TUNED].moved = [False, True, False, False]
    r.replies[M.TUNED] = [{"seconds": s, "kernel_s": 0.5e-3, "kernel_in_model_s": s - 0.01e-3,
                           "in_model_split": [s - 0.1e-3, 0.05e-3, 1]} for s in r.timings[M.TUNED].rounds]
    assert [reply["seconds"] for reply in r.kept_replies(M.TUNED)] == [1.0e-3, 1.1e-3, 1.0e-3]
    assert r.median(M.TUNED) == 1.0e-3 and r.overhead(M.TUNED) == pytest.approx(2.0)
    assert r.deployed().templated == pytest.approx(0.9e-3)  # not 1.5 ms, the moved round's
    r.timings[M.TUNED].moved = []  # unchecked: every round
    assert len(r.kept_replies(M.TUNED)) == 4 and r.deployed().templated == pytest.approx(0.95e-3)


def test_bench_model_judges_speed_only_for_the_tuned_build_and_nothing_on_a_mismatch():
    untuned = {v.what: v for v in M.verdicts(_model_result(tuned=False))}
    assert "--tune" in untuned["resnet18 ours untuned vs onnxruntime"].withheld
    assert not untuned["resnet18 ours untuned latency / its kernels' sum"].withheld
    assert M.verdicts(_model_result(mismatch=True)) == []
    assert "MISMATCH" in M.table_row(_model_result(mismatch=True), peak=1e12)[0]
    jumpy = M.verdicts(_model_result(ours_rounds=(1.0e-3, 1.3e-3, 1.0e-3, 1.3e-3, 1.0e-3)))
    assert all(v.withheld for v in jumpy if "memory" not in v.what)


def test_bench_model_runs_a_tiny_model_end_to_end(tmp_path):
    # the whole script on a small CNN: ours untuned (where the model layer exists), ONNX Runtime
    # and eager, one round of one short timing each; torch.compile takes too long for a test
    for module in ("onnx", "onnxruntime", "torch", "model_zoo"):
        pytest.importorskip(module)
    here = Path(B.__file__).parent
    path = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH")) if p)
    args = ["--models", "tiny", "--rounds", "1", "--repeat", "1", "--min-ms", "1", "--peers", "ort,eager",
            "--workdir", str(tmp_path)]
    proc = subprocess.run([sys.executable, str(here / "bench_model.py"), *args],
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "ours untuned vs onnxruntime" in out and ": ok" in out and "MISMATCH" not in out
    # the table's row (the verdict lines, printed on a quiet machine, start with the name too)
    (row,) = [line for line in out.splitlines() if re.match(r"tiny +[0-9]", line)]
    assert "n/a" not in row.split()[2:3]  # ours untuned ran
    cells = dict(zip(M.TABLE_HEADER, row.split(), strict=True))
    assert cells["overhead"].endswith("%") and cells["executor"].endswith("%")  # profiled both ways
    assert "onnxruntime: " in out and "torch eager: " in out
