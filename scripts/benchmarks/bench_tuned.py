"""Benchmark of tuned kernels against numpy (OpenBLAS) and PyTorch (MKL, oneDNN), timed side by side.

Run with ``python3 scripts/benchmarks/bench_tuned.py`` (every workload tuned for up to 128 trials;
``--only matmul1024 conv3x3_56`` chooses workloads, ``--trials 24`` a quicker check). It
tunes, on this CPU, each workload of :data:`WORKLOADS`, all float32: matmul 1024 and
2048; every 3x3 convolution of ResNet-18 (64x56x56, 128x28x28, 256x14x14 and 512x7x7
channels x rows x columns, as many filters, stride 1, padding 1); the 1x1 convolution
that opens ResNet-50's conv4 blocks (1024x14x14 to 256); and MobileNet's first depthwise
layer (3x3 over 32x112x112, stride 1, padding 1). The last line gives the whole run's wall
time, with the tuning's and the timings' parts.

The trials count those already in the log (``--db``, default ``bench_tuned.db``): a
second run with the same log re-measures without tuning again. Every kernel is built
with the log's best config, checked against its reference and exported as a shared
library. Then our kernel and each peer are timed in fresh processes, interleaved over
``--rounds`` rounds (ours, peer, ours, peer, ...), each with as many threads as our
kernels use, and the table gives each one's median (see ``bench_common``). The peers:
numpy's ``a @ b`` (OpenBLAS; with ``OPENBLAS_CORETYPE=SkylakeX`` too on AVX-512 CPUs),
and where PyTorch is installed (``pip install torch==2.13.0``) its ``a @ b`` (MKL) and
``torch.nn.functional.conv2d`` (oneDNN). Goals compare with the fastest peer.

Columns: the rate as a share of the FP32 FMA peak the script measures; the tuning wall
time and trials per minute of this run; and "log vs deployed": the best cost in the
tuning log next to the exported library's median in fresh processes.

Each workload is timed right after it is tuned. Before the first tuning and after the
last timing the script checks that the machine is quiet (the FMA
peak on all threads at least 0.9x per thread of the one-thread peak: 1.8x on two; and the
threads get at least 90% of their cores' time while they run). On a busy machine it says
so and prints no PASS/FAIL verdict. Load that comes and goes between the two checks shows
in the rounds, printed under each workload: where our kernel's rounds spread more than
:data:`bench_common.MAX_SPREAD` (10%), that workload's speed and log-vs-deployed goals get
no verdict either.

The goals (:data:`WORKLOADS`, :data:`LOG_VS_DEPLOYED`, :data:`TRIALS_PER_MINUTE`): matmul
at least 0.95x the fastest peer; each 3x3 layer at least 1.0x; the 1x1 and depthwise
layers at least 0.8x; every deployed kernel within 10% of the log's figure, either way;
at least 40 trials per minute tuning matmul 1024.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import bench_common as B
import numpy as np

import autotune
import compiler
import db
from autotune import selection
from compiler.runtime import num_threads

LOG_VS_DEPLOYED = 0.10  # the deployed kernel's time within 10% of the log's best cost, either way
TRIALS_PER_MINUTE = 40.0  # tuning throughput goal, on matmul 1024


@dataclass(frozen=True)
class Workload:
    """A template and its arguments, the peers it is compared with, and the goal against the fastest."""

    label: str
    template: str
    args: tuple
    goal: float
    throughput_goal: bool = False  # whether trials per minute are held to TRIALS_PER_MINUTE


def _conv(C, H, K, k, stride, pad):
    return ("conv2d_nchw", (1, C, H, H, K, k, k, stride, pad, 1, "float32"))


WORKLOADS = {
    "matmul1024": Workload("matmul 1024^3", "matmul", (1024, 1024, 1024, "float32"), 0.95, True),
    "matmul2048": Workload("matmul 2048^3", "matmul", (2048, 2048, 2048, "float32"), 0.95),
    "conv3x3_56": Workload("conv 3x3 64x56x56", *_conv(64, 56, 64, 3, 1, 1), 1.0),
    "conv3x3_28": Workload("conv 3x3 128x28x28", *_conv(128, 28, 128, 3, 1, 1), 1.0),
    "conv3x3_14": Workload("conv 3x3 256x14x14", *_conv(256, 14, 256, 3, 1, 1), 1.0),
    "conv3x3_7": Workload("conv 3x3 512x7x7", *_conv(512, 7, 512, 3, 1, 1), 1.0),
    "conv1x1": Workload("conv 1x1 1024x14x14 to 256", *_conv(1024, 14, 256, 1, 1, 0), 0.8),
    "depthwise": Workload("depthwise 3x3 32x112x112", "depthwise_conv2d_nchw",
                          (1, 32, 112, 112, 3, 3, 1, 1, 1, "float32"), 0.8),
}


def peers(w: Workload) -> list[B.Contender]:
    """The peers of ``w`` that this machine can run."""
    if w.template == "matmul":
        return B.matmul_peers(*w.args[:3])
    if importlib.util.find_spec("torch") is None:
        return []
    if w.template == "conv2d_nchw":
        N, C, H, W, K, KH, KW, stride, pad, dilation, _ = w.args
        spec = {"x": [N, C, H, W], "w": [K, C, KH, KW], "groups": 1}
    else:  # depthwise_conv2d_nchw
        N, C, H, W, KH, KW, stride, pad, dilation, _ = w.args
        spec = {"x": [N, C, H, W], "w": [C, 1, KH, KW], "groups": C}
    spec.update(kind="torch", op="conv2d", stride=stride, padding=pad, dilation=dilation)
    return [B.Contender("torch conv2d", spec)]


@dataclass
class Tuned:
    """A workload tuned and exported: what the tuning took and what the log says."""

    workload: Workload
    flop: float
    trials: int  # in the log
    tuned_now: int  # trials this run measured
    tune_s: float
    logged_s: float | None  # the median cost of the log's best config
    so_path: Path
    arrays: list = field(default_factory=list)

    @property
    def trials_per_minute(self) -> float | None:
        """Trials measured per minute of this run's tuning (``None`` if it tuned none)."""
        return self.tuned_now / self.tune_s * 60 if self.tuned_now and self.tune_s > 0 else None


def tune_and_export(w: Workload, opts, workdir: Path) -> Tuned:
    """Tune ``w`` up to ``opts.trials`` trials (those in the log count), build the log's best,
    check it against the reference and export it."""
    task = autotune.create_task(w.template, w.args, target="llvm")
    with db.open(opts.db) as log:
        earlier = log.count(task, kind=db.TRIAL)
    todo = max(0, opts.trials - earlier)
    print(f"{task.workload_name}: {len(task.config_space):,} configs; {earlier} trials in {opts.db}, "
          f"tuning up to {todo} more with {opts.tuner}", flush=True)
    start = time.perf_counter()
    if todo:
        autotune.tune(task, trials=todo, tuner=opts.tuner, db=opts.db, early_stopping=opts.early_stopping,
                      seed=opts.seed, progress=opts.progress)
    tune_s = time.perf_counter() - start
    with db.open(opts.db) as log:
        trials = log.count(task, kind=db.TRIAL)
        best = selection.best(log, task)  # the ranking tune(), autotune best and deployment use
        f = autotune.build(w.template, w.args, target="llvm", db=log)
    inputs, (expected,) = task.reference_data(0)
    out = np.full_like(expected, np.nan)
    f(*inputs, out)
    assert np.isfinite(out).all(), f"{w.label}: the built kernel left outputs unwritten"
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    path = workdir / f"{w.template}_{len(list(workdir.iterdir()))}.so"
    f.export_library(path)
    measured = trials - earlier  # fewer than ``todo`` where the tuner ran out of configs to try
    return Tuned(w, float(task.flop), trials, measured, tune_s, best[0].median if best else None, path,
                 [*inputs, out])


def table_rows(tuned: list[Tuned], timings: list[dict[str, B.Timing]], peak: float):
    """The table, and the verdicts its figures give."""
    rows, verdicts = [], []
    for t, times in zip(tuned, timings, strict=True):
        w, ours = t.workload, times["ours"].median
        tpm = t.trials_per_minute
        tuning = f"{t.tune_s:.0f} s, {t.tuned_now} trials" + (f", {tpm:.1f}/min" if tpm else "") + \
            f" ({t.trials} in log)"
        for label, timing in times.items():
            name = w.label if label == "ours" else ""
            impl = "ours (tuned)" if label == "ours" else label
            if timing.median is None:
                rows.append((name, impl, "", "", "", "", "", "", f"did not run: {timing.error}"))
                continue
            s = timing.median
            ratio = f"{s / ours:.2f}" if ours and label != "ours" else ""
            log_col = ""
            if label == "ours":
                log_col = f"{t.logged_s * 1e3:.3f} / {s * 1e3:.3f}" if t.logged_s else "no record"
            rows.append((name, impl, f"{s * 1e3:.3f}", f"{t.flop / s / 1e9:.1f}", f"{t.flop / s / peak:.0%}",
                         ratio, log_col, tuning if label == "ours" else "", timing.info))
        verdicts += workload_verdicts(t, times)
    return rows, verdicts


def workload_verdicts(t: Tuned, times: dict[str, B.Timing]) -> list[B.Verdict]:
    """Ours against the fastest peer; the deployed kernel against the log; tuning throughput.
    The first two are withheld when our kernel's rounds disagree (:meth:`Timing.noise`)."""
    w, ours = t.workload, times["ours"].median
    out = []
    if ours is None:
        return out
    noise = times["ours"].noise()
    peer_times = {k: v.median for k, v in times.items() if k != "ours" and v.median is not None}
    if peer_times:
        fastest = min(peer_times, key=peer_times.get)
        out.append(B.Verdict(f"{w.label} vs {fastest} (fastest peer)", peer_times[fastest] / ours, w.goal,
                             withheld=noise))
    if t.logged_s:
        out.append(B.Verdict(f"{w.label} deployed / log's best", ours / t.logged_s, 1.0,
                             within=LOG_VS_DEPLOYED, withheld=noise))
    if w.throughput_goal and t.trials_per_minute:
        out.append(B.Verdict(f"{w.label} tuning throughput", t.trials_per_minute, TRIALS_PER_MINUTE,
                             unit=" trials/min"))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description="Tuned kernels against numpy and PyTorch, in fresh processes.")
    p.add_argument("--trials", type=int, default=128, help="trials per workload, log included (default 128)")
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--early-stopping", type=int, default=None, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default="bench_tuned.db")
    p.add_argument("--only", nargs="+", choices=list(WORKLOADS), metavar="WORKLOAD",
                   help=f"run these workloads only, of: {', '.join(WORKLOADS)}")
    p.add_argument("--rounds", type=int, default=B.ROUNDS,
                   help=f"processes per contender (default {B.ROUNDS})")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty())
    opts = p.parse_args()

    run_start = time.perf_counter()
    threads = num_threads()
    print(f"# {platform.processor() or platform.machine()} ({compiler.target.host_cpu_name()}), "
          f"{threads} threads, {os.cpu_count()} CPUs; each time the median of {opts.rounds} fresh processes "
          f"(interleaved), each the median of {B.REPEAT} timings", flush=True)
    chosen = [WORKLOADS[k] for k in (opts.only or WORKLOADS)]
    before = B.measure_quietness(threads)
    print(f"# before tuning: {before.describe()}", flush=True)
    tuned, timings, timing_s = [], [], 0.0
    with tempfile.TemporaryDirectory(prefix="bench_tuned_") as tmp:
        for w in chosen:
            # Timed right after its tuning, so that the log's figure and the deployed one
            # are seconds apart, not the whole run: a drift of the machine in between would
            # show as a gap that no measurement protocol causes.
            t = tune_and_export(w, opts, Path(tmp))
            timing_start = time.perf_counter()
            contenders = [B.Contender("ours", B.module_spec(t.so_path, t.arrays)), *peers(t.workload)]
            print(f"timing {t.workload.label}: {', '.join(c.label for c in contenders)}", flush=True)
            timings.append(B.time_interleaved(contenders, threads, opts.rounds))
            B.print_rounds(timings[-1])
            tuned.append(t)
            timing_s += time.perf_counter() - timing_start
        after = B.measure_quietness(threads)
        print(f"# after the timings: {after.describe()}", flush=True)

    peak = max(before.many, after.many)
    rows, verdicts = table_rows(tuned, timings, peak)
    print()
    note = B.busy_note([before, after])
    print(f"# {note}" if note else "# quiet machine (checked before tuning and after the timings)")
    print(f"# FP32 FMA peak {peak / 1e9:.1f} GFLOPS on {threads} threads (the higher of the two checks)")
    header = ("workload", "implementation", "median ms", "GFLOPS", "% peak", "peer/ours time",
              "log vs deployed ms", "tuning", "notes")
    print(B.format_table(header, rows))
    if not importlib.util.find_spec("torch"):
        print("# PyTorch is not installed (pip install torch==2.13.0): no MKL or oneDNN peer")
    print()
    for line in B.verdict_lines(verdicts, [before, after]):
        print(line)
    print(wall_time_line(time.perf_counter() - run_start, sum(t.tune_s for t in tuned), timing_s,
                         sum(t.tuned_now for t in tuned)))


def wall_time_line(total_s: float, tune_s: float, timing_s: float, trials: int) -> str:
    """The whole run's wall time, and the parts tuning (``trials`` measured) and timing took."""
    rate = f", {trials / tune_s * 60:.1f} trials/min" if trials and tune_s > 0 else ""
    return (f"# whole run: {total_s / 60:.1f} min wall time (tuning {tune_s / 60:.1f} min, {trials} trials"
            f"{rate}; quietness checks and timings {timing_s / 60:.1f} min)")


if __name__ == "__main__":
    main()
