"""Sharing the cores of one process with numpy's OpenBLAS: what each library's idle threads
cost the other, and what helps.

Run with ``python3 scripts/benchmarks/bench_shared_cores.py [--db tuning.db]``. A parallel
512x512x512 float32 matmul of ours (the log's best config with ``--db``, else the template's
default config) and numpy's ``a @ b`` are timed call by call, each scenario in fresh
processes interleaved over rounds:

- ours alone; ours right after 20 numpy calls; ours 0.2 s after them (and, for comparison,
  0.2 s after 20 calls of its own, when only our pool has gone idle); ours right after and
  0.2 s after numpy calls with ``OPENBLAS_NUM_THREADS=1``, and 0.2 s after them with our pool
  spinning (``OMP_WAIT_POLICY=active``);
- numpy alone; numpy right after 20 calls of ours, with our runtime's short spin (the
  default), with libgomp's own long spin (``GOMP_SPINCOUNT=300000``) and with no spin at all
  (``OMP_WAIT_POLICY=passive``).

Each row is the median of the per-process medians of single calls; the ratio is against the
library timed alone. The machine must be quiet (the FMA check before and after); otherwise
the table says so and the figures measure the load as much as the libraries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_common as B
import numpy as np

N = 512
CALLS = 20  # calls of the other library before each timed call
SAMPLES = 60  # timed calls per process
_HERE = Path(__file__).resolve()

#: label, what is timed, what runs before each timed call, pause (s) after that, extra environment
SCENARIOS = [
    ("ours alone", "ours", None, 0.0, {}),
    ("ours right after numpy", "ours", "numpy", 0.0, {}),
    ("ours 0.2 s after numpy", "ours", "numpy", 0.2, {}),
    ("ours 0.2 s after ours (idle pool)", "ours", "ours", 0.2, {}),
    ("ours right after numpy, OPENBLAS_NUM_THREADS=1", "ours", "numpy", 0.0, {"OPENBLAS_NUM_THREADS": "1"}),
    ("ours 0.2 s after numpy, OPENBLAS_NUM_THREADS=1", "ours", "numpy", 0.2, {"OPENBLAS_NUM_THREADS": "1"}),
    ("ours 0.2 s after numpy, OMP_WAIT_POLICY=active", "ours", "numpy", 0.2, {"OMP_WAIT_POLICY": "active"}),
    ("numpy alone", "numpy", None, 0.0, {}),
    ("numpy right after ours (runtime's short spin)", "numpy", "ours", 0.0, {}),
    ("numpy right after ours, GOMP_SPINCOUNT=300000", "numpy", "ours", 0.0, {"GOMP_SPINCOUNT": "300000"}),
    ("numpy right after ours, OMP_WAIT_POLICY=passive", "numpy", "ours", 0.0, {"OMP_WAIT_POLICY": "passive"}),
]


def _child(spec: dict) -> float:
    """The median seconds of ``SAMPLES`` single calls of ``spec["timed"]``, each after
    ``CALLS`` calls of ``spec["before"]`` (if any) and a pause of ``spec["pause"]`` seconds."""
    import compiler

    rng = np.random.default_rng(0)
    a_np, b_np = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
    c_np = np.empty((N, N), np.float32)
    f = compiler.runtime.load_module(spec["library"])
    dev = compiler.cpu(0)
    a, b = compiler.nd.array(a_np, dev), compiler.nd.array(b_np, dev)
    c = compiler.nd.empty((N, N), "float32", dev)
    calls = {"ours": lambda: f(a, b, c), "numpy": lambda: np.matmul(a_np, b_np, out=c_np)}
    timed, before = calls[spec["timed"]], calls.get(spec["before"])
    for call in {timed, before} - {None}:  # the pools in play started, their code paged in; a library
        call()                              # left out stays untouched: its idle threads would count
    samples = []
    for _ in range(SAMPLES):
        if before is not None:
            for _ in range(CALLS):
                before()
        if spec["pause"]:
            time.sleep(spec["pause"])
        start = time.perf_counter()
        timed()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _in_fresh_process(spec: dict, env: dict) -> float:
    proc = subprocess.run([sys.executable, str(_HERE), "--child", json.dumps(spec)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "child failed")
    return float(proc.stdout.split()[-1])


def _kernel(db: str | None, path: str) -> str:
    """Export the matmul (the log's best config, else the default one) to ``path``."""
    import autotune
    import compiler

    args = (N, N, N, "float32")
    if db:
        module = autotune.build("matmul", args, target="llvm", db=db)
        what = f"the best config in {db}"
    else:
        task = autotune.create_task("matmul", args, target="llvm")
        module = compiler.build(*task.instantiate(task.config_space.default_config), target="llvm")
        what = "the template's default config"
    module.export_library(path)
    return what


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="our kernel's config from this tuning log (default: the default config)")
    parser.add_argument("--rounds", type=int, default=B.ROUNDS,
                        help=f"fresh processes per scenario (default {B.ROUNDS})")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(_child(json.loads(opts.child)))
        return
    from compiler.runtime import num_threads
    from compiler.target import host_cpu_name

    threads = num_threads()
    checks = [B.measure_quietness(threads)]
    with tempfile.TemporaryDirectory() as tmp:
        library = os.path.join(tmp, "matmul.so")
        what = _kernel(opts.db, library)
        runs: dict[str, list[float]] = {label: [] for label, *_ in SCENARIOS}
        for _ in range(opts.rounds):
            for label, timed, before, pause, env in SCENARIOS:
                spec = {"library": library, "timed": timed, "before": before, "pause": pause}
                runs[label].append(_in_fresh_process(spec, {**B.thread_env(threads), **env}))
    checks.append(B.measure_quietness(threads))
    alone = {"ours": statistics.median(runs["ours alone"]), "numpy": statistics.median(runs["numpy alone"])}
    print(f"matmul {N}^3 float32 on {host_cpu_name()}, {threads} threads; ours is {what}; each row the "
          f"median of {opts.rounds} fresh processes, each the median of {SAMPLES} single calls")
    for check in checks:
        print(check.describe())
    note = B.busy_note(checks)
    if note:
        print(note)
    rows = []
    for label, timed, *_ in SCENARIOS:
        median = statistics.median(runs[label])
        rows.append([label, f"{median * 1e3:.3f}", f"{median / alone[timed]:.2f}x"])
    print(B.format_table(["scenario", "median ms", "vs alone"], rows))


if __name__ == "__main__":
    main()
