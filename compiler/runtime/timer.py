"""Timing compiled functions: the object behind ``Module.time_evaluator``."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BenchmarkResult", "time_calls"]

_FLUSH_BYTES = 64 << 20  # larger than the last-level cache of the CPUs we tune for
_flush_buffer: np.ndarray | None = None


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per run, one entry per repeat."""

    results: tuple

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __repr__(self) -> str:
        return (f"BenchmarkResult(mean={self.mean:.3e}s, median={self.median:.3e}s, "
                f"min={self.min:.3e}s, max={self.max:.3e}s, std={self.std:.3e}s, repeat={len(self.results)})")


def flush_cache() -> None:
    """Evict the CPU caches by writing a buffer larger than the last-level cache."""
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.empty(_FLUSH_BYTES, dtype=np.uint8)
    _flush_buffer.fill(1)


def time_calls(run: Callable[[], None], number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
               cache_flush: bool = False, sync: Callable[[], None] | None = None) -> BenchmarkResult:
    """Time ``run``: ``repeat`` measurements, each the mean of ``number`` calls.

    As in TVM, when one measurement takes less than ``min_repeat_ms`` the number of
    calls per measurement grows until it does not. ``cache_flush`` flushes the
    caches before every measurement. One untimed call warms up first.
    """
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be positive, got number={number}, repeat={repeat}")
    sync = sync or (lambda: None)
    run()
    sync()
    results = []
    for _ in range(repeat):
        while True:
            if cache_flush:
                flush_cache()
            start = time.perf_counter()
            for _ in range(number):
                run()
            sync()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms:
                break
            # Aim a little past the minimum, as TVM does, instead of creeping up on it.
            number = max(number * 2, int(number * min_repeat_ms / max(elapsed * 1e3, 1e-3) * 1.618))
        results.append(elapsed / number)
    return BenchmarkResult(tuple(results))
