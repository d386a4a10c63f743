"""Tune a matrix multiply with the Python API, then deploy the best config and check it.

Run with ``python3 scripts/examples/tune_matmul.py --size 1024 --trials 200``. The steps:

1. ``autotune.create_task("matmul", (N, L, M, dtype), target)``: the template on concrete
   arguments; ``task.config_space`` lists its knobs;
2. ``autotune.tune(task, trials, tuner, db)``: search, recording every measurement in the
   tuning log (tuning the same workload again resumes from the log);
3. ``with autotune.apply_history_best(db):`` a template call picks the best config of the
   log; ``compiler.build`` compiles it;
4. check against numpy and time both in this run.

Every option has a default; ``--help`` lists them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import autotune
import compiler
import search_spaces
from compiler.runtime.timer import time_calls


def main() -> None:
    p = argparse.ArgumentParser(description="Tune matmul(N, L, M, dtype) and compare it with numpy.")
    p.add_argument("--size", type=int, nargs="+", default=[1024], metavar="N",
                   help="N, or N L M (default 1024)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--tuner", default="xgb", choices=["xgb", "ga", "random", "grid", "optuna"])
    p.add_argument("--early-stopping", type=int, default=None)
    p.add_argument("--db", default="tuning.db")
    p.add_argument("--target", default="llvm")
    opts = p.parse_args()
    if len(opts.size) not in (1, 3):
        p.error("--size takes N or N L M")
    N, L, M = opts.size * 3 if len(opts.size) == 1 else opts.size
    args = (N, L, M, opts.dtype)

    task = autotune.create_task("matmul", args, target=opts.target)
    print(f"{task.workload_name}: {task.flop / 1e9:.3g} GFLOP per run")
    print(task.config_space)

    start = time.perf_counter()
    result = autotune.tune(task, trials=opts.trials, tuner=opts.tuner, db=opts.db,
                           early_stopping=opts.early_stopping)
    print(f"tuned in {time.perf_counter() - start:.0f} s ({result.trials} trials, stopped: {result.stopped}, "
          f"errors: {result.errors or 'none'})")
    print(f"best config: {result.best_config}")

    # Deploy: inside apply_history_best, the template picks the best config in the log.
    with autotune.apply_history_best(opts.db):
        s, tensors = search_spaces.matmul(*args, target=opts.target)
        f = compiler.build(s, tensors, target=opts.target, name="matmul")

    rng = np.random.default_rng(0)
    a = rng.random((N, L)).astype(opts.dtype)
    b = rng.random((L, M)).astype(opts.dtype)
    c = np.empty((N, M), opts.dtype)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)

    timer = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=5, min_repeat_ms=100)
    ours = timer(a, b, c).median
    peer = time_calls(lambda: np.matmul(a, b, out=c), number=1, repeat=5, min_repeat_ms=100).median
    print(f"{'':<10}{'median ms':>10}{'GFLOPS':>9}")
    for name, t in (("tuned", ours), ("numpy", peer)):
        print(f"{name:<10}{t * 1e3:>10.3f}{task.flop / t / 1e9:>9.1f}")
    print(f"tuned / numpy speed: {peer / ours:.2f}x (results match numpy)")


if __name__ == "__main__":
    main()
