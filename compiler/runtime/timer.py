"""Timing compiled functions: the object behind ``Module.time_evaluator``.

The repeat loop runs in native code: :data:`TIMER_SYMBOL` (emitted by
:mod:`compiler.codegen.llvm_timer`, JIT-compiled once per process and linked into
every exported library) calls the kernel's exported wrapper through its address, in
batches (the first of ``number`` calls) until a measurement lasted ``min_repeat_ms``,
timing with ``clock_gettime(CLOCK_MONOTONIC)``; no Python runs between calls. Arguments
are checked and packed once, in Python, before the loop starts. :func:`time_calls` is the
same loop in Python, for callables and for libraries exported before the native timer
existed.

``cache_flush=True`` evicts the kernel's arguments but the first from every cache level
before *each* call (``clflush`` line by line on x86, outside the timed interval), as TVM's
``enable_cpu_cache_flush`` does (its ``cache_flush_cpu_non_first_arg``): the first argument
is an operator's input, which inside a model the operator before has just written, while its
weights come from memory. ``cache_flush="weights"`` (:data:`FLUSH_WEIGHTS`) keeps the last
argument too, the output, which inside a model is a workspace buffer other operators have just
used. ``cache_flush="model"`` (:data:`FLUSH_MODEL`) evicts as ``"weights"`` does (but the
arguments named ``warm``: a residual that the kernels before wrote inside a model), and the
kernel's scratch too (a Winograd layer's transformed tiles: :mod:`compiler.codegen.llvm_scratch`;
a model's executor places it in a workspace that other kernels used since, so its first touch
misses the caches), then has the thread pool write the input, as the operator before leaves it
inside a model. Elsewhere than on x86 a 64 MiB scratch buffer is overwritten, which evicts every
argument. After the eviction a parallel region wakes the thread pool, untimed, so that the
kernel does not pay for waking threads that slept through the eviction.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .cpu import ON_X86
from .threads import num_threads

__all__ = ["BenchmarkResult", "time_calls", "NativeTimer", "TIMER_SYMBOL", "BATCH_NS", "flushed_ranges",
           "check_cache_flush", "touched_planes", "FLUSH_WEIGHTS", "FLUSH_MODEL", "CACHE_FLUSH_CHOICES"]

# The name changes with the function's arguments: a library exported with another version has
# none of this name, and is timed by time_calls.
TIMER_SYMBOL = "__autotune_time_evaluator_v4"
#: ``cache_flush="weights"``: evict the arguments between the first and the last, which for an
#: operator of a model are its weights (the input, first, the operator before has just written;
#: the output, last, is a workspace buffer that other operators have just used).
FLUSH_WEIGHTS = "weights"
#: ``cache_flush="model"``: as :data:`FLUSH_WEIGHTS` and the kernel's scratch evicted too (when
#: timed through :meth:`compiler.runtime.Module.time_evaluator`), then the thread pool writes the input, each
#: thread its equal share, as the operator before leaves it inside a model: in the caches of the
#: cores that wrote it, not of the one that last read it. A channel-blocked image
#: ``(N, C/b, H, W, b)`` is written as a convolution whose threads split the height writes it:
#: each thread its share of the rows of every channel block (:func:`touched_planes`).
FLUSH_MODEL = "model"
#: What ``cache_flush`` may be: False (nothing evicted), True (every argument but the first, as
#: TVM's ``enable_cpu_cache_flush``), :data:`FLUSH_WEIGHTS` or :data:`FLUSH_MODEL`.
CACHE_FLUSH_CHOICES = (False, True, FLUSH_WEIGHTS, FLUSH_MODEL)
BATCH_NS = 10_000  # a batch of calls doubles until it lasts this long (a clock read is ~25 ns)
_FLUSH_BYTES = 64 << 20  # larger than the last-level cache of the CPUs we tune for
_flush_buffer: np.ndarray | None = None


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per run, one entry per repeat. ``simulated``: the code ran on a simulator
    (the CUDA simulator), so the seconds say nothing of the hardware's speed."""

    results: tuple
    simulated: bool = False

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
                f"min={self.min:.3e}s, max={self.max:.3e}s, std={self.std:.3e}s, repeat={len(self.results)}"
                + (", simulated)" if self.simulated else ")"))


def _scratch() -> np.ndarray:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.empty(_FLUSH_BYTES, dtype=np.uint8)
    return _flush_buffer


def flush_cache() -> None:
    """Evict the CPU caches by writing a buffer larger than the last-level cache."""
    _scratch().fill(1)


def check_cache_flush(cache_flush) -> bool | str:
    """``cache_flush`` as one of :data:`CACHE_FLUSH_CHOICES` (a truth value as a bool); ValueError
    for anything else, naming the choices."""
    if cache_flush in (FLUSH_WEIGHTS, FLUSH_MODEL) or (not isinstance(cache_flush, str)
                                                       and cache_flush in (0, 1)):
        return cache_flush if isinstance(cache_flush, str) else bool(cache_flush)
    raise ValueError(f"cache_flush must be one of {CACHE_FLUSH_CHOICES}, got {cache_flush!r}")


def flushed_ranges(arrays: list, cache_flush: bool | str = True, warm=()) -> list[tuple[int, int]]:
    """``(address, bytes)`` of the buffers that ``cache_flush`` evicts on x86, none empty: every
    one of ``arrays`` (a kernel's buffer arguments, in order) but the first with ``True``, and
    with ``"weights"`` or ``"model"`` but the last too; never those at the positions ``warm``
    (what a model's kernels before this one wrote, besides its first input: a residual)."""
    kept_last = check_cache_flush(cache_flush) in (FLUSH_WEIGHTS, FLUSH_MODEL)
    return [(a.ctypes.data, a.nbytes) for k, a in enumerate(arrays[:len(arrays) - kept_last])
            if k and k not in warm and a.nbytes]


def _check_counts(number: int, repeat: int, min_repeat_ms: float) -> None:
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be positive, got number={number}, repeat={repeat}")
    if min_repeat_ms < 0:
        raise ValueError(f"min_repeat_ms must not be negative, got {min_repeat_ms}")


class NativeTimer:
    """Calls :data:`TIMER_SYMBOL` at ``address`` on a kernel and its packed arguments."""

    _PROTO = ctypes.CFUNCTYPE(
        ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
        ctypes.c_double, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
        ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

    def __init__(self, address: int):
        self._fn = self._PROTO(address)

    def time(self, kernel: int, buffers, scalars, arrays: list, number: int = 10, repeat: int = 1,
             min_repeat_ms: float = 0, cache_flush: bool | str = False, warm=(),
             evicted: list = ()) -> BenchmarkResult:
        """Time the kernel at address ``kernel``; ``arrays`` are its buffers, in order (with
        ``cache_flush``, those of :func:`flushed_ranges` with ``warm`` are evicted before each
        call, and the arrays ``evicted`` too, memory the kernel uses besides its arguments; with
        ``"model"`` the thread pool then writes the first, see :data:`FLUSH_MODEL`)."""
        _check_counts(number, repeat, min_repeat_ms)
        cache_flush = check_cache_flush(cache_flush)
        if not cache_flush:
            mode, ranges = 0, []
        elif ON_X86:
            mode, ranges = 1, flushed_ranges(arrays, cache_flush, warm)
            ranges += [(a.ctypes.data, a.nbytes) for a in evicted]
        else:
            scratch = _scratch()
            mode, ranges = 2, [(scratch.ctypes.data, scratch.nbytes)]
        ptrs = (ctypes.c_void_p * max(1, len(ranges)))(*(p for p, _ in ranges))
        sizes = (ctypes.c_int64 * max(1, len(ranges)))(*(n for _, n in ranges))
        out = (ctypes.c_double * repeat)()
        wake = num_threads() if cache_flush else 0  # the pool falls asleep while the caches are evicted
        touched = arrays[0] if cache_flush == FLUSH_MODEL and arrays else None
        if touched is not None and not touched.flags.writeable:
            raise ValueError("cache_flush='model' has the threads write the first argument (the input) back "
                             "as it is before each call: it must be a writeable array, not a read-only one")
        touch = ((touched.ctypes.data, touched.nbytes, touched_planes(touched)) if touched is not None
                 else (None, 0, 0))
        self._fn(kernel, buffers, scalars, number, repeat, float(min_repeat_ms), mode, ptrs, sizes,
                 len(ranges), out, wake, *touch)
        return BenchmarkResult(tuple(out))


def touched_planes(array: np.ndarray) -> int:
    """Into how many planes ``cache_flush="model"`` splits its input, each thread then writing its
    equal share of every plane: a channel-blocked image's ``N * C/b`` (the rows of each channel
    block, as a convolution whose threads split the height writes them), else 1 (equal shares
    of the whole, as a parallel loop over the outermost axis writes it)."""
    if array.ndim == 5 and array.flags.c_contiguous and array.shape[0] * array.shape[1] > 0:
        return array.shape[0] * array.shape[1]
    return 1


def time_calls(run: Callable[[], None], number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
               cache_flush: bool | str = False, sync: Callable[[], None] | None = None,
               warm=()) -> BenchmarkResult:
    """Time ``run`` from Python: ``repeat`` measurements, each the mean of its calls.

    The same protocol as the native timer: a measurement makes batches, the first of
    ``number`` calls, until ``min_repeat_ms`` have passed, a batch doubling while it lasts
    less than ``BATCH_NS``; except that ``cache_flush`` (any choice) overwrites a 64 MiB buffer once
    before each measurement (``warm`` does not apply). One untimed call warms up first.
    """
    _check_counts(number, repeat, min_repeat_ms)
    check_cache_flush(cache_flush)
    sync = sync or (lambda: None)
    run()
    sync()
    results = []
    for _ in range(repeat):
        if cache_flush:
            flush_cache()
        calls, batch = 0, number
        start = mark = time.perf_counter()
        while True:
            for _ in range(batch):
                run()
            sync()
            end = time.perf_counter()
            calls += batch
            if (end - start) * 1e3 >= min_repeat_ms:
                break
            if (end - mark) * 1e9 < BATCH_NS:
                batch *= 2
            mark = end
        results.append((end - start) / calls)
    return BenchmarkResult(tuple(results))
