"""Tune a 2-D convolution (by default a ResNet-18 layer) and check it against its reference.

Run with ``python3 scripts/examples/tune_conv2d.py --trials 200``. The default workload is the
3x3 convolution of ResNet-18's first stage: input 1x64x56x56 (NCHW), 64 filters of
3x3, stride 1, padding 1. ``--shape N,C,H,W,F,K`` and ``--stride``/``--padding``
choose another. The template's numpy reference checks the tuned kernel; PyTorch, when
installed (``pip install torch``), is timed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import autotune
import compiler


def main() -> None:
    p = argparse.ArgumentParser(description="Tune conv2d_nchw and check it.")
    p.add_argument("--shape", default="1,64,56,56,64,3", help="N,C,H,W,F,K (default: ResNet-18 layer)")
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--padding", type=int, default=1)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--tuner", default="xgb", choices=["xgb", "ga", "random", "grid", "optuna"])
    p.add_argument("--early-stopping", type=int, default=None)
    p.add_argument("--db", default="tuning.db")
    opts = p.parse_args()
    n, c, h, w, f, k = (int(v) for v in opts.shape.split(","))
    args = (n, c, h, w, f, k, k, opts.stride, opts.padding, 1, "float32")

    task = autotune.create_task("conv2d_nchw", args, target="llvm")
    print(f"{task.workload_name}: {task.flop / 1e9:.3g} GFLOP per run, {len(task.config_space):,} configs")
    start = time.perf_counter()
    result = autotune.tune(task, trials=opts.trials, tuner=opts.tuner, db=opts.db,
                           early_stopping=opts.early_stopping)
    print(f"tuned in {time.perf_counter() - start:.0f} s ({result.trials} trials, "
          f"errors: {result.errors or 'none'})")
    print(f"best config: {result.best_config}")

    kernel = autotune.build("conv2d_nchw", args, target="llvm", db=opts.db)
    (x, wt), (expected,) = task.reference_data(0)
    y = np.empty_like(expected)
    kernel(x, wt, y)
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-3)
    ours = kernel.time_evaluator(kernel.entry_name, compiler.cpu(0), number=1, repeat=7,
                                 min_repeat_ms=100)(x, wt, y).median
    rows = [("tuned", ours)]
    try:
        import torch
    except ImportError:
        print("(PyTorch is not installed: pip install torch, to time torch.nn.functional.conv2d beside it)")
    else:
        from compiler.runtime import num_threads

        torch.set_num_threads(num_threads())
        tx, tw = torch.from_numpy(x), torch.from_numpy(wt)
        with torch.no_grad():
            out = torch.nn.functional.conv2d(tx, tw, stride=opts.stride, padding=opts.padding)
            np.testing.assert_allclose(out.numpy(), expected, rtol=1e-3, atol=1e-3)
            runs = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(10):
                    torch.nn.functional.conv2d(tx, tw, stride=opts.stride, padding=opts.padding)
                runs.append((time.perf_counter() - t0) / 10)
        rows.append((f"torch {torch.__version__}", statistics.median(runs)))
    print(f"{'':<16}{'median ms':>10}{'GFLOPS':>9}")
    for name, t in rows:
        print(f"{name:<16}{t * 1e3:>10.3f}{task.flop / t / 1e9:>9.1f}")
    if len(rows) > 1:
        print(f"tuned / torch speed: {rows[1][1] / ours:.2f}x")


if __name__ == "__main__":
    main()
