"""Benchmark of tuned kernels against numpy (OpenBLAS) and PyTorch, measured in one run.

Run with ``python3 scripts/bench_tuned.py`` (the full run tunes each workload for up
to 500 trials: allow an hour or more on two cores; ``--trials 24`` is a quick check).
It tunes, on this CPU,

* ``matmul`` 1024x1024x1024 float32, compared with numpy's ``a @ b`` twice: OpenBLAS
  as numpy loads it (its AVX2 "Haswell" kernels on this CPU) and with
  ``OPENBLAS_CORETYPE=SkylakeX`` (its AVX-512 kernels);
* ``conv2d_nchw``, the ResNet-18 layer 1x64x56x56 with 64 filters of 3x3, stride 1,
  padding 1, compared with PyTorch's ``torch.nn.functional.conv2d`` on the CPU
  (``pip install torch==2.13.0``; without PyTorch that column is skipped, with a note).

The trials count those already in the log (``--db``, default ``bench_tuned.db``): a
second run with the same log re-measures without tuning again. Every kernel is
checked against its reference before it is timed. Each peer runs in a process of its
own (OpenBLAS reads ``OPENBLAS_CORETYPE`` when it loads, and thread pools of different
libraries spin against each other when they share a process), with as many threads
as our kernels use. Rates are also given as a share of the FP32 FMA peak, measured by
a kernel of our own (``scripts/cpu_kernels.py``). Goals: matmul at least 0.95x the
SkylakeX kernels, conv2d at least 1.0x PyTorch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cpu_kernels as K  # noqa: E402

import autotune  # noqa: E402
import compiler  # noqa: E402
import db  # noqa: E402
from compiler.runtime import num_threads  # noqa: E402

REPEAT = 7
MATMUL = ("matmul", (1024, 1024, 1024, "float32"))
CONV2D = ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1, 1, "float32"))
GOALS = {"numpy SkylakeX": 0.95, "torch": 1.0}

# The peers, each timed in a process of its own: argv = kind, threads, repeat.
_PEER = r"""
import json, statistics, sys, time
kind, threads, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import numpy as np

def median_seconds(fn, min_s=0.2):
    fn(); t0 = time.perf_counter(); fn(); once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(min_s / once)); runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)

rng = np.random.default_rng(0)
if kind == "matmul":
    a = rng.random((1024, 1024), dtype=np.float32); b = rng.random((1024, 1024), dtype=np.float32)
    c = np.empty((1024, 1024), np.float32)
    seconds = median_seconds(lambda: np.matmul(a, b, out=c))
    core = "?"
    try:  # which kernels OpenBLAS picked at load time (its "core")
        import ctypes
        paths = {l.split()[-1] for l in open("/proc/self/maps") if "openblas" in l and ".so" in l}
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            for sym in ("openblas_get_corename", "scipy_openblas_get_corename64_",
                        "openblas_get_corename64_"):
                fn = getattr(lib, sym, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    core = fn().decode()
                    break
    except Exception:
        pass
    print(json.dumps({"seconds": seconds, "version": f"numpy {np.__version__}", "core": core}))
else:
    import torch
    torch.set_num_threads(threads)
    x = torch.from_numpy(rng.random((1, 64, 56, 56), dtype=np.float32))
    w = torch.from_numpy(rng.random((64, 64, 3, 3), dtype=np.float32))
    with torch.no_grad():
        seconds = median_seconds(lambda: torch.nn.functional.conv2d(x, w, stride=1, padding=1))
    print(json.dumps({"seconds": seconds, "version": f"torch {torch.__version__}"}))
"""


def peer(kind: str, env: dict | None = None) -> dict | None:
    """Time a peer in a subprocess; None (with the reason printed) if it cannot run."""
    proc = subprocess.run([sys.executable, "-c", _PEER, kind, str(num_threads()), str(REPEAT)],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        print(f"  ({kind} peer {env or ''} did not run: {last})", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fma_peak_flops() -> float:
    """FP32 FLOP/s of a kernel that does only FMAs on every thread: the fastest of its timings
    (a peak is an upper bound; other work on the machine only slows a timing down)."""
    threads, iterations = num_threads(), 200_000
    f = compiler.build(K.fma_peak(iterations, threads), target="llvm -fast-math")
    out = np.zeros((threads, K.FMA_LANES), np.float32)
    seconds = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=2 * REPEAT,
                               min_repeat_ms=50)(out, 0.5, 1.0).min
    return threads * iterations * K.FMA_FLOPS_PER_ITER / seconds


def tune_and_time(name: str, args: tuple, opts) -> dict:
    """Tune ``name(args)`` up to ``opts.trials`` trials (those in the log count), build the best,
    check it and time it."""
    task = autotune.create_task(name, args, target="llvm")
    with db.open(opts.db) as log:
        earlier = log.count(task)
    todo = max(0, opts.trials - earlier)
    print(f"{task.workload_name}: {len(task.config_space):,} configs; {earlier} trials in {opts.db}, "
          f"tuning {todo} more with {opts.tuner}", flush=True)
    start = time.perf_counter()
    if todo:
        autotune.tune(task, trials=todo, tuner=opts.tuner, db=opts.db, early_stopping=opts.early_stopping,
                      seed=opts.seed, progress=opts.progress)
    tune_s = time.perf_counter() - start
    with db.open(opts.db) as log:
        trials = log.count(task)
        f = autotune.build(name, args, target="llvm", db=log)
    inputs, (expected,) = task.reference_data(0)
    out = np.empty_like(expected)
    f(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    seconds = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=REPEAT,
                               min_repeat_ms=200)(*inputs, out).median
    return {"task": task, "seconds": seconds, "tune_s": tune_s, "tuned_now": todo, "trials": trials}


def main() -> None:
    p = argparse.ArgumentParser(description="Tuned matmul and conv2d against numpy and PyTorch.")
    p.add_argument("--trials", type=int, default=500, help="trials per workload, log included (default 500)")
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--early-stopping", type=int, default=None, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default="bench_tuned.db")
    p.add_argument("--only", choices=["matmul", "conv2d"], help="run one workload")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty())
    opts = p.parse_args()

    threads = num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(f"# {platform.processor() or platform.machine()} ({compiler.target.host_cpu_name()}), "
          f"{threads} threads, {os.cpu_count()} CPUs, load average {load:.1f}", flush=True)
    peak = fma_peak_flops()
    print(f"# FP32 FMA peak {peak / 1e9:.1f} GFLOPS", flush=True)

    rows = []  # (workload, impl, seconds, flop, peer ratio text, tuning text)
    verdicts = []

    def add(workload, impl, seconds, flop, ours=None, tuning=""):
        ratio = f"{seconds / ours:.2f}" if ours else ""
        rows.append((workload, impl, f"{seconds * 1e3:.3f}", f"{flop / seconds / 1e9:.1f}",
                     f"{flop / seconds / peak:.0%}", ratio, tuning))

    if opts.only in (None, "matmul"):
        r = tune_and_time(*MATMUL, opts)
        flop = r["task"].flop
        tuning = f"{r['tune_s']:.0f} s ({r['tuned_now']} trials; {r['trials']} in log)"
        add("matmul 1024^3 f32", "ours (tuned)", r["seconds"], flop, tuning=tuning)
        for label, env in (("numpy", None), ("numpy SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX"})):
            got = peer("matmul", env)
            if got:
                add("", f"{label} (OpenBLAS core {got['core']})", got["seconds"], flop, ours=r["seconds"])
                if label in GOALS:
                    verdicts.append((f"matmul vs {label}", got["seconds"] / r["seconds"], GOALS[label]))
    if opts.only in (None, "conv2d"):
        r = tune_and_time(*CONV2D, opts)
        flop = r["task"].flop
        tuning = f"{r['tune_s']:.0f} s ({r['tuned_now']} trials; {r['trials']} in log)"
        add("conv2d resnet18 3x3", "ours (tuned)", r["seconds"], flop, tuning=tuning)
        try:
            import importlib.util

            have_torch = importlib.util.find_spec("torch") is not None
        except ImportError:
            have_torch = False
        got = peer("conv2d") if have_torch else None
        if got:
            add("", f"{got['version']} CPU", got["seconds"], flop, ours=r["seconds"])
            verdicts.append(("conv2d vs torch", got["seconds"] / r["seconds"], GOALS["torch"]))
        elif not have_torch:
            rows.append(("", "torch: not installed (pip install torch==2.13.0)", "", "", "", "", ""))

    # Measured again at the end: the higher figure is the better estimate of the peak.
    final_peak = max(peak, fma_peak_flops())
    if final_peak > peak:
        rows = [r[:4] + ((f"{float(r[3]) * 1e9 / final_peak:.0%}",) if r[3] else ("",)) + r[5:] for r in rows]
        peak = final_peak
    print()
    print(f"# FP32 FMA peak {peak / 1e9:.1f} GFLOPS (the higher of the timings at the start and the end)")
    header = ("workload", "implementation", "median ms", "GFLOPS", "% peak", "ours/peer speed", "tuning wall")
    widths = [max(len(str(x[k])) for x in [header, *rows]) for k in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    print()
    for what, ratio, goal in verdicts:
        print(f"{what}: {ratio:.2f}x (goal {goal:.2f}x) {'met' if ratio >= goal else 'NOT met'}")
    if load > threads / 2:
        print(f"note: the load average was {load:.1f} on {os.cpu_count()} CPUs when the run began; "
              "other work on the machine makes these figures noisy")


if __name__ == "__main__":
    main()
