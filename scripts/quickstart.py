"""Quick start: build a tiled, vectorized, parallel matmul and time it next to numpy.

Run with ``python3 scripts/quickstart.py``. It writes a 256x256x256 float32 matrix
multiply with the public API, checks it against numpy and prints a short table.
"""

from __future__ import annotations

import time

import numpy as np

import compiler
from compiler import te

N = 256
NUMBER, REPEAT = 10, 5


def build_matmul(n: int = N):
    """A 32x32-tiled matmul, k split by 4, inner axis vectorized, outer rows in parallel."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, x_factor=32, y_factor=32)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return compiler.build(s, [A, B, C], target="llvm", name="matmul")


def _numpy_median_ms(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> float:
    runs = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        for _ in range(NUMBER):
            np.matmul(a, b, out=out)
        runs.append((time.perf_counter() - start) / NUMBER)
    return float(np.median(runs)) * 1e3


def main() -> None:
    rng = np.random.default_rng(0)
    a_np = rng.random((N, N), dtype=np.float32)
    b_np = rng.random((N, N), dtype=np.float32)

    f = build_matmul()
    dev = compiler.cpu(0)
    a = compiler.nd.array(a_np, dev)
    b = compiler.nd.array(b_np, dev)
    c = compiler.nd.empty((N, N), "float32", dev)
    f(a, b, c)
    np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4)

    ours_ms = f.time_evaluator(f.entry_name, dev, number=NUMBER, repeat=REPEAT)(a, b, c).median * 1e3
    numpy_ms = _numpy_median_ms(a_np, b_np, np.empty((N, N), dtype=np.float32))
    gflop = 2 * N**3 / 1e9

    print(f"matmul {N}x{N}x{N} float32 (correct to rtol=1e-4 against numpy)")
    print(f"{'impl':<10}{'median ms':>12}{'GFLOP/s':>10}")
    print(f"{'compiler':<10}{ours_ms:>12.3f}{gflop / (ours_ms / 1e3):>10.1f}")
    print(f"{'numpy':<10}{numpy_ms:>12.3f}{gflop / (numpy_ms / 1e3):>10.1f}")
    print(f"ratio compiler/numpy time: {ours_ms / numpy_ms:.2f}")


if __name__ == "__main__":
    main()
