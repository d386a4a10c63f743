"""CPU benchmark: hand-written schedules against numpy (and OpenBLAS), timed side by side.

Run with ``python3 scripts/benchmarks/bench_cpu.py``. Every kernel is checked against numpy
before it is timed. Then each kernel, exported as a shared library, and its numpy peer
are timed in fresh processes, interleaved over several rounds (ours, numpy, ours,
numpy, ...), and the table gives each one's median (see ``bench_common``). On a CPU
with AVX-512, matmul has a second OpenBLAS peer: ``OPENBLAS_CORETYPE=SkylakeX`` (its
AVX-512 kernels), and PyTorch's ``a @ b`` (MKL) where PyTorch is installed.

The FP32 FMA peak comes from a kernel of our own (``cpu_kernels.fma_peak``), on one
thread and on all: before and after the timings the script checks that the machine is
quiet (all threads together reach 0.9x per thread of the one-thread peak), and says
so in the table's title when it is not. GFLOPS figures are also given as a share of the
measured peak.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import bench_common as B
import cpu_kernels as K
import numpy as np

import compiler
from compiler.runtime import num_threads

RNG = np.random.default_rng(0)


class Bench:
    """Kernels checked and exported, with their peers; timed together by :meth:`run`."""

    def __init__(self, workdir: Path, rounds: int):
        self.workdir, self.rounds = workdir, rounds
        self.items: list[tuple[str, str, float, str, list[B.Contender]]] = []  # kernel, shape, work, unit
        self.timings: list[dict[str, B.Timing]] = []

    def add(self, kernel: str, shape: str, f, arrays, work: float, unit: str, peers: list[B.Contender]):
        """Export ``f`` and queue it with its ``peers``; ``work`` (bytes or FLOP) per call gives the rate."""
        path = self.workdir / f"{kernel.replace(' ', '_')}_{len(self.items)}.so"
        f.export_library(path)
        ours = B.Contender("ours", B.module_spec(path, arrays))
        self.items.append((kernel, shape, work, unit, [ours, *peers]))

    def run(self) -> None:
        """Time every kernel and its peers, interleaved in fresh processes."""
        self.timings = []
        for kernel, shape, _, _, contenders in self.items:
            print(f"timing {kernel} {shape}: {', '.join(c.label for c in contenders)} x {self.rounds} rounds",
                  flush=True)
            self.timings.append(B.time_interleaved(contenders, num_threads(), self.rounds))
            B.print_rounds(self.timings[-1])

    def rows(self, peak: float) -> list[tuple]:
        """Table rows of :meth:`run`'s timings; GFLOPS rates also as a share of ``peak`` FLOP/s."""
        rows = []
        for (kernel, shape, work, unit, contenders), timings in zip(self.items, self.timings, strict=True):
            ours = timings["ours"].median
            for c in contenders:
                t = timings[c.label]
                label = kernel if c.label == "ours" else f"  {c.label}"
                if t.median is None:
                    rows.append((label, shape, "", "", "", "", f"did not run: {t.error}"))
                    continue
                rate = work / t.median
                share = f"{rate / peak:.0%}" if unit == "GFLOPS" else ""
                ratio = f"{t.median / ours:.2f}" if ours and c.label != "ours" else ""
                rows.append((label, shape, f"{t.median * 1e3:.3f}", f"{rate / 1e9:.1f} {unit}", share, ratio,
                             t.info))
        return rows


def check(f, inputs, out, want, rtol=1e-5, atol=0.0):
    """Run ``f(*inputs, out)`` on a NaN-poisoned ``out`` and compare it with ``want``."""
    out[...] = np.nan
    f(*inputs, out)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, want, rtol=rtol, atol=atol)


def numpy_peer(op: str, shape, label: str = "numpy", env: dict | None = None) -> B.Contender:
    """A contender timing numpy's ``op`` on ``shape`` in a child process."""
    return B.Contender(label, {"kind": "numpy", "op": op, "shape": list(shape)}, env or {})


def add_vector_add(bench: Bench, n: int = 1 << 24) -> None:
    """Check and queue ``c = a + b`` on ``n`` floats, beside numpy."""
    f = compiler.build(*K.vector_add(n), name="vector_add")
    a, b = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    c = np.empty_like(a)
    check(f, (a, b), c, a + b, rtol=0)
    bench.add("vector add", "2^24", f, (a, b, c), 3 * 4 * n, "GB/s", [numpy_peer("add", (n,))])


def add_row_sum(bench: Bench, rows: int = 4096, cols: int = 4096) -> None:
    """Check and queue the row sums of a ``rows x cols`` matrix, beside numpy."""
    f = compiler.build(*K.row_sum(rows, cols), name="row_sum")
    a = RNG.random((rows, cols), dtype=np.float32)
    out = np.empty(rows, np.float32)
    check(f, (a,), out, a.sum(axis=1), rtol=1e-4)
    bench.add("row sum", f"{rows}x{cols}", f, (a, out), 4 * rows * cols, "GB/s",
              [numpy_peer("row_sum", a.shape)])


def add_matmul(bench: Bench, sizes=(1024, 2048)) -> float:
    """Both sizes; returns the median milliseconds of ``build()`` for the first."""
    for n in sizes:
        f = compiler.build(*K.matmul(n, n, n), name="matmul")
        a, b = RNG.random((n, n), dtype=np.float32), RNG.random((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        check(f, (a, b), c, a @ b, rtol=1e-4)
        bench.add("matmul", f"{n}^3", f, (a, b, c), 2.0 * n ** 3, "GFLOPS", B.matmul_peers(n, n, n))
    times = []
    for _ in range(B.REPEAT):
        s, args = K.matmul(sizes[0], sizes[0], sizes[0])
        start = time.perf_counter()
        compiler.build(s, args, name="matmul")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def add_softmax(bench: Bench, rows: int = 4096, cols: int = 1024) -> None:
    """Check and queue a row softmax of ``rows x cols``, beside numpy."""
    f = compiler.build(*K.softmax(rows, cols), name="softmax")
    x = RNG.standard_normal((rows, cols), dtype=np.float32)
    y = np.empty_like(x)
    check(f, (x,), y, K.reference_softmax(x), rtol=1e-5, atol=1e-8)
    bench.add("softmax", f"{rows}x{cols}", f, (x, y), 2 * 4 * rows * cols, "GB/s",
              [numpy_peer("softmax", x.shape, "numpy exp/sum")])


def empty_region_rows() -> list[tuple]:
    """What a parallel region costs, back to back and after the caller worked or slept a while
    (in this process: it is the runtime's own overhead, there is no peer)."""
    f = compiler.build(K.empty_parallel())
    ids = np.full(num_threads(), -1, np.int32)
    f(ids)
    assert sorted(ids.tolist()) == list(range(num_threads())), ids
    back_to_back = f.time_evaluator(f.entry_name, number=1000, repeat=B.REPEAT)(ids).median
    rows = [("empty parallel region", "back to back", f"{back_to_back * 1e3:.4f}", "", "", "", "")]
    serial = compiler.build(K.empty_parallel(parallel=False))

    def busy(seconds: float) -> None:  # the caller at work (a Python loop between calls)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    # One call after a gap, less the same call of a serial loop: after the caller worked (the
    # workers may still be spinning) and after it slept (they are asleep).
    gaps = [(f"after {us} us of work", us * 1e-6, busy, 40) for us in (5, 20, 100)]
    gaps += [(f"after {ms} ms idle", ms * 1e-3, time.sleep, 20 if ms < 100 else 8) for ms in (1, 10, 100)]
    for label, seconds, wait, samples in gaps:
        costs = []
        for _ in range(samples):
            pair = []
            for g in (f, serial):
                wait(seconds)
                start = time.perf_counter()
                g(ids)
                pair.append(time.perf_counter() - start)
            costs.append(pair[0] - pair[1])
        rows.append(("empty parallel region", label, f"{statistics.median(costs) * 1e3:.4f}", "", "", "", ""))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description="Hand-written CPU kernels against numpy, in fresh processes.")
    p.add_argument("--rounds", type=int, default=B.ROUNDS,
                   help=f"processes per contender (default {B.ROUNDS})")
    opts = p.parse_args()
    run_start = time.perf_counter()
    threads = num_threads()
    print(f"# {compiler.target.host_cpu_name()}, {threads} threads, numpy {np.__version__}; each figure the "
          f"median of {opts.rounds} fresh processes (interleaved), each the median of {B.REPEAT} timings",
          flush=True)
    before = B.measure_quietness(threads)
    print(f"# before: {before.describe()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_cpu_") as tmp:
        bench = Bench(Path(tmp), opts.rounds)
        add_vector_add(bench)
        add_row_sum(bench)
        build_ms = add_matmul(bench)
        add_softmax(bench)
        bench.run()
    rows = empty_region_rows()
    rows.append(("build() matmul 1024", "tiled+packed", f"{build_ms:.1f}", "", "", "", ""))
    after = B.measure_quietness(threads)
    print(f"# after: {after.describe()}", flush=True)
    peak = max(before.many, after.many)
    rows = bench.rows(peak) + rows
    print()
    note = B.busy_note([before, after])
    print(f"# {note}" if note else "# quiet machine (checked before and after)")
    print(f"# FP32 FMA peak {peak / 1e9:.1f} GFLOPS on {threads} threads (the higher of the two checks)")
    print(B.format_table(("kernel", "shape", "median ms", "rate", "% peak", "peer/ours time", "notes"), rows))
    print(f"# whole run: {(time.perf_counter() - run_start) / 60:.1f} min wall time")


if __name__ == "__main__":
    main()
