"""Benchmark of configs borrowed for shapes nobody tuned, timed side by side with numpy/PyTorch.

Run with ``python3 scripts/benchmarks/bench_transfer.py`` (about ten minutes on a quiet 8-core machine;
``--trials 8 --warm-trials 8 --rounds 3`` is a quick check). It tunes a small log of
power-of-two shapes (``--trials`` each: matmul 512 and 1024, 3x3 convolutions of 64 and
128 channels at 28x28, float32, on this CPU), then deploys shapes whose extents no factor
of those logs divides: matmul 1000, 1001 and 1536, and a convolution of 100 channels.
For each new shape it builds

* the template's untuned default config;
* the config ``apply_history_best`` borrows from the log (adapted to the new shape by
  :mod:`autotune.transfer`; the notes say from which workload, and what changed);
* the best config after ``--warm-trials`` trials of ``tune(..., warm_start=K)``, which
  measures the top ``K`` borrowed configs first (in a copy of the log, so that one new
  shape never borrows from another);

checks each against the template's numpy reference, exports it, and times it against
numpy's ``a @ b`` (PyTorch's too where installed) and, for the convolution, PyTorch's
``conv2d`` when installed: each contender in fresh processes, interleaved over
``--rounds`` rounds, the median of each (see ``bench_common``). The machine's quietness
is checked before and after the timings; on a busy machine the figures are indicative.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import bench_common as B
import numpy as np

import autotune
import compiler
import db
from autotune import selection
from compiler.runtime import num_threads
from measure import LocalBuilder, MeasureOptions


def _conv(channels: int) -> tuple:
    return (1, channels, 28, 28, channels, 3, 3, 1, 1, 1, "float32")


TUNED = {
    "matmul": [("matmul", (n, n, n, "float32")) for n in (512, 1024)],
    "conv2d": [("conv2d_nchw", _conv(c)) for c in (64, 128)],
}
NEW = {
    "matmul": [(f"matmul {n}^3", "matmul", (n, n, n, "float32")) for n in (1000, 1001, 1536)],
    "conv2d": [("conv 3x3 100ch 28x28", "conv2d_nchw", _conv(100))],
}


@dataclass
class Built:
    """One kernel of a new shape: how its config was found, and the exported library."""

    label: str
    config: dict
    path: Path
    note: str = ""


def tune_log(opts) -> None:
    """Tune every power-of-two shape up to ``opts.trials`` trials (those in the log count)."""
    for family in opts.only:
        for template, args in TUNED[family]:
            task = autotune.create_task(template, args, target=opts.target)
            with db.open(opts.db) as log:
                todo = max(0, opts.trials - log.count(task, kind=db.TRIAL))
            print(f"tuning {task.workload_name}: {todo} trials", flush=True)
            if todo:
                autotune.tune(task, trials=todo, tuner=opts.tuner, db=opts.db, seed=opts.seed,
                              measure_option=opts.measure, progress=opts.progress)


def build_checked(task, config, path: Path, label: str, note: str = "") -> Built:
    """Build ``task`` with ``config``, check it against the reference (poisoned outputs), export it."""
    s, tensors = task.instantiate(config)
    f = compiler.build(s, tensors, target=task.target, name=task.name)
    inputs, (expected,) = task.reference_data(0)
    out = np.full_like(expected, np.nan)
    f(*inputs, out)
    assert np.isfinite(out).all(), f"{task.workload_name} ({label}): outputs left unwritten"
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    f.export_library(path)
    return Built(label, config.knob_values(), path, note)


def borrowed_and_warm(task, opts, workdir: Path) -> list[Built]:
    """The default, the borrowed config and the best after warm-started trials, built and checked."""
    stem = workdir / f"{task.name}_{'_'.join(str(a) for a in task.args[:3])}"
    default = task.config_space.default_config
    out = [build_checked(task, default, stem.with_suffix(".default.so"), "default (untuned)")]
    with db.open(opts.db) as log:
        borrowed = autotune.apply_history_best(log).lookup(task.target, task)
    if getattr(borrowed, "borrowed_from", None) is None:
        raise RuntimeError(f"{task.workload_name}: nothing to borrow from in {opts.db}")
    changed = ", ".join(f"{k} {a}->{b}" for k, (a, b) in borrowed.changed.items()) or "as tuned"
    out.append(build_checked(task, borrowed, stem.with_suffix(".borrowed.so"), "borrowed",
                             f"from {borrowed.borrowed_from}; {changed}"))
    copy = workdir / f"{stem.name}.db"
    shutil.copyfile(opts.db, copy)
    start = time.perf_counter()
    autotune.tune(task, trials=opts.warm_trials, tuner=opts.tuner, db=str(copy), seed=opts.seed,
                  warm_start=opts.warm_start, measure_option=opts.measure, progress=opts.progress)
    took = time.perf_counter() - start
    with db.open(copy) as log:
        best = selection.best(log, task)
        errors = [r.error_msg for r in log.records(task) if r.error_kind is not None]
    if not best:
        print(f"  no warm-started trial of {task.workload_name} succeeded; first error: "
              f"{(errors or ['none'])[0][:300]}", flush=True)
        return out
    warm = task.config_space.from_json(best[0].config)
    rank = "borrowed config won" if warm.index == borrowed.index else "a later trial won"
    out.append(build_checked(task, warm, stem.with_suffix(".warm.so"),
                             f"{opts.warm_trials} warm-started trials",
                             f"warm_start={opts.warm_start}, {took:.0f} s; {rank}"))
    return out


def peers(template: str, args: tuple) -> list[B.Contender]:
    """numpy (and PyTorch) for matmul; PyTorch's conv2d where installed."""
    if template == "matmul":
        return B.matmul_peers(*args[:3])
    if importlib.util.find_spec("torch") is None:
        return []
    N, C, H, W, F, KH, KW, stride, pad, dilation, _ = args
    return [B.Contender("torch conv2d", {"kind": "torch", "op": "conv2d", "x": [N, C, H, W],
                                         "w": [F, C, KH, KW], "groups": 1, "stride": stride,
                                         "padding": pad, "dilation": dilation})]


def rows_of(label: str, task, built: list[Built], times: dict[str, B.Timing]) -> list[tuple]:
    """Table rows of one new shape: each contender's median, GFLOPS, speed-up over the default."""
    default = times[built[0].label].median
    fastest_peer = min((t.median for k, t in times.items() if k not in {b.label for b in built}
                        and t.median is not None), default=None)
    notes = {b.label: b.note for b in built}
    rows = []
    for k, t in times.items():
        name = label if not rows else ""
        if t.median is None:
            rows.append((name, k, "", "", "", "", f"did not run: {t.error}"))
            continue
        s = t.median
        vs_default = f"{default / s:.2f}x" if default else ""
        vs_peer = f"{fastest_peer / s:.2f}x" if fastest_peer else ""
        rows.append((name, k, f"{s * 1e3:.3f}", f"{task.flop / s / 1e9:.1f}", vs_default, vs_peer,
                     notes.get(k) or t.info))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description="Borrowed configs for untuned shapes, against the default "
                                            "and numpy/PyTorch, in fresh processes.")
    p.add_argument("--trials", type=int, default=24, help="trials per tuned power-of-two shape (default 24)")
    p.add_argument("--warm-trials", type=int, default=16, help="trials of each new shape (default 16)")
    p.add_argument("--warm-start", type=int, default=8, metavar="K",
                   help="borrowed configs measured first in those trials (default 8)")
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--build-timeout", type=float, default=60,
                   help="seconds a candidate's build may take (default 60: convolutions on a busy machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default="llvm")
    p.add_argument("--db", default="bench_transfer.db", help="the log of tuned shapes (kept between runs)")
    p.add_argument("--only", nargs="+", choices=list(TUNED), default=list(TUNED))
    p.add_argument("--rounds", type=int, default=B.ROUNDS,
                   help=f"processes per contender (default {B.ROUNDS})")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty())
    opts = p.parse_args()

    threads = num_threads()
    print(f"# {platform.processor() or platform.machine()} ({compiler.target.host_cpu_name()}), "
          f"{threads} threads, {os.cpu_count()} CPUs; each time the median of {opts.rounds} fresh processes "
          f"(interleaved), each the median of {B.REPEAT} timings", flush=True)
    shapes = []
    with tempfile.TemporaryDirectory(prefix="bench_transfer_") as tmp, \
            MeasureOptions(LocalBuilder(timeout=opts.build_timeout)) as opts.measure:
        tune_log(opts)
        for family in opts.only:
            for label, template, args in NEW[family]:
                task = autotune.create_task(template, args, target=opts.target)
                print(f"{task.workload_name}: default, borrowed, {opts.warm_trials} warm-started trials",
                      flush=True)
                shapes.append((label, task, borrowed_and_warm(task, opts, Path(tmp))))
        before = B.measure_quietness(threads)
        print(f"# before the timings: {before.describe()}", flush=True)
        timings = []
        for label, task, built in shapes:
            inputs, (expected,) = task.reference_data(0)
            contenders = [B.Contender(b.label, B.module_spec(b.path, [*inputs, expected])) for b in built]
            contenders += peers(task.name, task.args)
            print(f"timing {label}: {', '.join(c.label for c in contenders)}", flush=True)
            timings.append(B.time_interleaved(contenders, threads, opts.rounds))
            B.print_rounds(timings[-1])
        after = B.measure_quietness(threads)
        print(f"# after the timings: {after.describe()}", flush=True)

    print()
    note = B.busy_note([before, after])
    print(f"# {note}" if note else "# quiet machine (checked before and after the timings)")
    rows = [row for (label, task, built), times in zip(shapes, timings, strict=True)
            for row in rows_of(label, task, built, times)]
    header = ("new shape", "config", "median ms", "GFLOPS", "vs default", "vs fastest peer", "notes")
    print(B.format_table(header, rows))
    if not importlib.util.find_spec("torch"):
        print("# PyTorch is not installed: no conv2d peer")


if __name__ == "__main__":
    main()
