"""CPU benchmark: hand-written schedules against numpy (and OpenBLAS) in one run.

Run with ``python3 scripts/bench_cpu.py``. Every kernel is checked against numpy
before it is timed; every figure is the median of several runs after a warm-up
(ours through ``time_evaluator``, numpy through a ``perf_counter`` loop). The
matmul peer runs twice: in this process (OpenBLAS as it picks its kernels) and in
a subprocess with ``OPENBLAS_CORETYPE=SkylakeX`` (its AVX-512 kernels). The FP32
FMA peak comes from a kernel of our own, so GFLOPS read as a share of it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cpu_kernels as K  # noqa: E402

import compiler  # noqa: E402
from compiler.runtime import num_threads  # noqa: E402

REPEAT = 7
RNG = np.random.default_rng(0)
_ROWS: list[tuple] = []


def median_seconds(fn, repeat: int = REPEAT, min_ms: float = 50.0) -> float:
    """Median seconds per call of ``fn()``: warm up, then ``repeat`` timings of enough calls."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_ms / 1e3 / once))
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def ours_seconds(f, *args, min_ms: float = 50.0) -> float:
    return f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=REPEAT,
                            min_repeat_ms=min_ms)(*args).median


def row(kernel: str, shape: str, seconds: float, work: float, unit: str, peer: str = "",
        peer_seconds: float | None = None) -> None:
    ratio = f"{peer_seconds / seconds:.2f}" if peer_seconds else ""
    rate = f"{work / seconds / 1e9:.1f} {unit}" if work else ""
    _ROWS.append((kernel, shape, f"{seconds * 1e3:.3f}", rate, peer, ratio))


def bench_vector_add(n: int = 1 << 24) -> None:
    s, args = K.vector_add(n)
    f = compiler.build(s, args, name="vector_add")
    a, b = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    c = compiler.nd.empty((n,), "float32")
    f(a, b, c)
    np.testing.assert_array_equal(c.numpy(), a + b)
    out = np.empty_like(a)
    peer = median_seconds(lambda: np.add(a, b, out=out))
    row("vector add", "2^24", ours_seconds(f, a, b, c), 3 * 4 * n, "GB/s", "np.add(out=)", peer)
    row("  numpy", "2^24", peer, 3 * 4 * n, "GB/s")


def bench_row_sum(rows: int = 4096, cols: int = 4096) -> None:
    s, args = K.row_sum(rows, cols)
    f = compiler.build(s, args, name="row_sum")
    a = RNG.random((rows, cols), dtype=np.float32)
    out = np.empty(rows, np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-4)
    peer = median_seconds(lambda: a.sum(axis=1))
    row("row sum", f"{rows}x{cols}", ours_seconds(f, a, out), 4 * rows * cols, "GB/s", "a.sum(axis=1)", peer)
    row("  numpy", f"{rows}x{cols}", peer, 4 * rows * cols, "GB/s")


_BLAS_PEER = """
import json, statistics, sys, time
import numpy as np
out = {}
for n in map(int, sys.argv[1:]):
    a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
    a @ b
    runs = []
    for _ in range(REPEAT):
        start = time.perf_counter(); a @ b; runs.append(time.perf_counter() - start)
    out[n] = statistics.median(runs)
print(json.dumps(out))
""".replace("REPEAT", str(REPEAT))


def blas_skylakex(sizes: list[int]) -> dict:
    env = {**os.environ, "OPENBLAS_CORETYPE": "SkylakeX"}
    proc = subprocess.run([sys.executable, "-c", _BLAS_PEER, *map(str, sizes)], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"OPENBLAS_CORETYPE=SkylakeX peer failed: {proc.stderr.strip()}", file=sys.stderr)
        return {}
    return {int(k): v for k, v in json.loads(proc.stdout).items()}


def bench_matmul(sizes=(1024, 2048)) -> float:
    skx = blas_skylakex(list(sizes))
    build_ms = 0.0
    for n in sizes:
        s, args = K.matmul(n, n, n)
        f = compiler.build(s, args, name="matmul")
        a, b = RNG.random((n, n), dtype=np.float32), RNG.random((n, n), dtype=np.float32)
        c = compiler.nd.empty((n, n), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)
        flops = 2.0 * n ** 3
        ours = ours_seconds(f, a, b, c, min_ms=200)
        peer = median_seconds(lambda a=a, b=b: a @ b, min_ms=200)
        row("matmul", f"{n}^3", ours, flops, "GFLOPS", "a @ b (OpenBLAS)", peer)
        row("  numpy", f"{n}^3", peer, flops, "GFLOPS")
        if n in skx:
            row("matmul", f"{n}^3", ours, flops, "GFLOPS", "a @ b SkylakeX", skx[n])
            row("  numpy SkylakeX", f"{n}^3", skx[n], flops, "GFLOPS")
        if n == sizes[0]:
            times = []
            for _ in range(REPEAT):
                s, args = K.matmul(n, n, n)
                start = time.perf_counter()
                compiler.build(s, args, name="matmul")
                times.append(time.perf_counter() - start)
            build_ms = statistics.median(times) * 1e3
    return build_ms


def bench_peak(iterations: int = 200_000) -> None:
    threads = num_threads()
    f = compiler.build(K.fma_peak(iterations, threads), target="llvm -fast-math")
    out = np.zeros((threads, K.FMA_LANES), np.float32)
    f(out, 0.5, 1.0)
    np.testing.assert_allclose(out, K.FMA_CHAINS * 2.0, rtol=1e-6)  # every chain converges to 2
    seconds = ours_seconds(f, out, 0.5, 1.0)
    flops = float(threads) * iterations * K.FMA_FLOPS_PER_ITER
    row("FMA peak", f"{threads} threads", seconds, flops, "GFLOPS")


def bench_softmax(rows: int = 4096, cols: int = 1024) -> None:
    s, args = K.softmax(rows, cols)
    f = compiler.build(s, args, name="softmax")
    x = RNG.standard_normal((rows, cols), dtype=np.float32)
    y = np.empty_like(x)
    f(x, y)
    np.testing.assert_allclose(y, K.reference_softmax(x), rtol=1e-5, atol=1e-8)
    peer = median_seconds(lambda: K.reference_softmax(x))
    traffic = 2 * 4 * rows * cols
    row("softmax", f"{rows}x{cols}", ours_seconds(f, x, y), traffic, "GB/s", "numpy exp/sum", peer)
    row("  numpy", f"{rows}x{cols}", peer, traffic, "GB/s")


def bench_empty_region() -> None:
    f = compiler.build(K.empty_parallel())
    ids = np.full(num_threads(), -1, np.int32)
    f(ids)
    assert sorted(ids.tolist()) == list(range(num_threads())), ids
    back_to_back = f.time_evaluator(f.entry_name, number=1000, repeat=REPEAT)(ids).median
    row("empty parallel region", "back to back", back_to_back, 0, "")
    # After an idle gap: one call from Python, less the same call of a serial loop.
    serial = compiler.build(K.empty_parallel(parallel=False))
    for gap_ms in (1, 10, 100):
        costs = []
        for _ in range(20 if gap_ms < 100 else 8):
            pair = []
            for g in (f, serial):
                time.sleep(gap_ms / 1e3)
                start = time.perf_counter()
                g(ids)
                pair.append(time.perf_counter() - start)
            costs.append(pair[0] - pair[1])
        row("empty parallel region", f"after {gap_ms} ms idle", statistics.median(costs), 0, "")


def main() -> None:
    print(f"# {num_threads()} threads, numpy {np.__version__}; medians of {REPEAT} runs after warm-up",
          flush=True)
    bench_peak()
    bench_vector_add()
    bench_row_sum()
    build_ms = bench_matmul()
    bench_softmax()
    bench_empty_region()
    _ROWS.append(("build() matmul 1024", "tiled+packed", f"{build_ms:.1f}", "", "", ""))
    header = ("kernel", "shape", "median ms", "rate", "peer", "ours/peer speed")
    widths = [max(len(str(r[k])) for r in [header, *_ROWS]) for k in range(len(header))]
    for r in [header, *_ROWS]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
