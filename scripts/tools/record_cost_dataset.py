"""Record the fixed cost dataset that the cost-model test trains and evaluates on.

Run with ``python3 scripts/tools/record_cost_dataset.py [--configs 240] [--out PATH]``.
It draws configs of ``matmul(128, 128, 128, float32)`` on the CPU with a fixed seed,
builds each, checks it against numpy, times it (median of ``repeat`` runs of
``number`` calls), and writes ``tests/autotune/data/matmul_128_costs.json``::

    {"task": {...Task.to_json()...}, "flop": int, "seed": int, "machine": str,
     "records": [{"index": int, "knobs": {...}, "cost": seconds}, ...]}

Configs that fail to build or compute a wrong result are left out (and counted).
Timings are noisy on a shared machine; run it when the machine is quiet. It only
needs to be run once: the test reads the file, it never measures.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import compiler
import search_spaces

ARGS = (128, 128, 128, "float32")
# A pinned AVX-512 CPU: the matmul space follows the vector width and register count, so the
# recorded configs belong to this target's space whichever machine runs the tests.
TARGET = "llvm -mcpu=znver4"
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests" / "autotune" / "data" / "matmul_128_costs.json"


def measure(task, config, inputs, expected, dev, number: int, repeat: int) -> float | None:
    """Median seconds of one call of ``config``'s kernel, or None if it fails or is wrong."""
    try:
        s, args = task.instantiate(config)
        f = compiler.build(s, args, target=task.target)
    except Exception as exc:  # a failed candidate is a gap in the dataset, not a crash
        print(f"  index {config.index}: build failed: {type(exc).__name__}: {exc}")
        return None
    out = np.full_like(expected, np.nan)  # poisoned: an unwritten element is a wrong result
    f(*inputs, out)
    if not np.allclose(out, expected, rtol=1e-4, atol=1e-4, equal_nan=False):
        print(f"  index {config.index}: wrong result")
        return None
    timer = f.time_evaluator(f.entry_name, dev, number=number, repeat=repeat, min_repeat_ms=10)
    return float(timer(*inputs, out).median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=240, help="configs to draw")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default=TARGET,
                        help="the target whose space the configs come from (default %(default)s, the one "
                             "the tests rebuild the task for; run on a CPU that can execute its code)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    opts = parser.parse_args()

    task = search_spaces.create_task("matmul", ARGS, opts.target)
    dev = compiler.cpu(0)
    (a, b), (c,) = task.reference_data(np.random.default_rng(opts.seed))
    configs = task.config_space.sample(opts.configs, np.random.default_rng(opts.seed))
    records, failed = [], 0
    start = time.perf_counter()
    for k, config in enumerate(configs):
        cost = measure(task, config, (a, b), c, dev, opts.number, opts.repeat)
        if cost is None:
            failed += 1
            continue
        records.append({"index": config.index, "knobs": config.knob_values(), "cost": cost})
        if (k + 1) % 20 == 0:
            print(f"{k + 1:4d}/{len(configs)}  {time.perf_counter() - start:6.1f} s")
    data = {"task": task.to_json(), "flop": task.flop, "seed": opts.seed,
            "machine": f"{platform.machine()} {platform.processor() or platform.system()}",
            "records": records}
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(data, indent=1) + "\n")
    costs = np.array([r["cost"] for r in records])
    print(f"\n{'configs':>10} {'failed':>7} {'best GFLOPS':>12} {'median GFLOPS':>14} {'worst GFLOPS':>13}")
    gflops = task.flop / costs / 1e9
    print(f"{len(records):>10} {failed:>7} {gflops.max():>12.2f} {np.median(gflops):>14.2f} "
          f"{gflops.min():>13.2f}")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
