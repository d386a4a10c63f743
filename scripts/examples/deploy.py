"""Deploy: apply a tuning log, export a shared object, run it where the tuner is absent.

Run with ``python3 scripts/examples/deploy.py`` (after ``scripts/examples/quickstart.py``, which tunes
matmul 512 into ``tuning.db``; without a record this script tunes a few trials
first). It

1. builds ``matmul`` with the best config of the log (``autotune.build``, which applies
   the log with ``autotune.apply_history_best``);
2. exports it as a shared object (``Module.export_library``);
3. loads and runs that file in a fresh Python process that imports only numpy and
   ``compiler.runtime``, and checks there that neither the tuner (``autotune``,
   ``search_spaces``, ``measure``) nor the database (``db``, ``sqlalchemy``) was loaded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import autotune
import db

# What the deployed process runs: only compiler.runtime and numpy.
_DEPLOYED = r"""
import sys, time
import numpy as np
from compiler.runtime import load_module

path, n = sys.argv[1], int(sys.argv[2])
f = load_module(path)
rng = np.random.default_rng(1)
a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
c = np.empty((n, n), np.float32)
f(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
seconds = f.time_evaluator(f.entry_name, number=1, repeat=5, min_repeat_ms=50)(a, b, c).median
loaded = sorted(m for m in ("autotune", "search_spaces", "measure", "db", "sqlalchemy", "xgboost", "ray")
                if m in sys.modules)
print(f"deployed process: {f.entry_name} from {path}: correct, {seconds * 1e3:.3f} ms "
      f"({2 * n ** 3 / seconds / 1e9:.1f} GFLOPS); tuner or database modules loaded: {loaded or 'none'}")
sys.exit(1 if loaded else 0)
"""


def main() -> None:
    p = argparse.ArgumentParser(description="Build matmul with a tuning log, export it, run it elsewhere.")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--db", default="tuning.db")
    p.add_argument("--out", default="matmul_tuned.so")
    p.add_argument("--trials", type=int, default=16,
                   help="trials to tune first if the log lacks the workload")
    opts = p.parse_args()
    args = (opts.size, opts.size, opts.size, "float32")
    task = autotune.create_task("matmul", args, target="llvm")

    with db.open(opts.db) as log:
        known = log.count(task, errors=False)
    if not known:
        print(f"{opts.db} has no record of {task.workload_name}: tuning {opts.trials} trials first")
        autotune.tune(task, trials=opts.trials, tuner="xgb", db=opts.db)

    with db.open(opts.db) as log:
        config = autotune.apply_history_best(log).lookup(task.target, task)
        kernel = autotune.build("matmul", args, target="llvm", db=log)
    print(f"built {task.workload_name} with the best config of {opts.db}: {config.knob_values()}")
    kernel.export_library(opts.out)
    print(f"exported {opts.out} ({Path(opts.out).stat().st_size:,} bytes)")

    # The deployed side needs the compiler's runtime on its path, nothing else of the project.
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)}
    done = subprocess.run([sys.executable, "-c", _DEPLOYED, opts.out, str(opts.size)], env=env)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
