"""Threads for parallel loops: libgomp's persistent pool, sized by ``AUTOTUNE_NUM_THREADS``.

Parallel loops run on the thread pool of libgomp, the OpenMP runtime that ships
with GCC: ``GOMP_parallel`` hands the loop to threads that live as long as the
process (created on the first region, reused by every later one).

How idle pool threads wait decides what a parallel region costs. libgomp's
default is to spin for ~300,000 iterations (milliseconds) before sleeping on a
futex. On a machine with few cores that is the worst of both: a sleeping worker
that the kernel wakes onto the core where the caller is spinning at the region's
end barrier runs only once the caller's spin ends, so a region after an idle gap
took 1-8 ms on a 2-vCPU VM. ``OMP_WAIT_POLICY=passive`` (no spinning) costs ~40
us per region even back to back. A short spin gives most of both: before libgomp
is loaded (:func:`load_libgomp`), the runtime sets ``GOMP_SPINCOUNT`` to
:data:`SPIN_COUNT` unless the user set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``,
then restores the environment.

:data:`SPIN_COUNT` is a few tens of microseconds of spinning on a 2-vCPU Zen 4
VM, about as long as a call from Python or the imbalance of two threads' shares
takes. Measured there, an empty region right after 5 us of work in the caller
costs ~1 us (~40 us at 300 iterations, a futex wake each time: ResNet-18's 3x3
convolutions, two or three regions per call, ran ~5% slower); after 50 us of
work or more 25-60 us (45-85 us at 300); back to back ~1 us; after 10-100 ms asleep
~0.2 ms (~0.05 ms at 300 iterations, 1-8 ms at libgomp's default).
``scripts/benchmarks/bench_cpu.py`` measures these.

Compiled modules keep the count in a module-level variable that the runtime sets
before each call, so changing the environment variable takes effect at the next
call (of any module, built before or after the change).

libgomp cannot run parallel regions in a child forked after the parent ran one
(the child waits forever for the parent's thread pool). As PyTorch does, such a
child runs parallel loops on one thread, and says so once in the log; start
worker processes with "spawn" or "forkserver" to keep them parallel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os

__all__ = ["num_threads", "process_cpus", "load_libgomp", "ThreadCountSetter", "ENV_VAR", "SETTER_SYMBOL",
           "SPIN_COUNT"]

logger = logging.getLogger(__name__)

ENV_VAR = "AUTOTUNE_NUM_THREADS"
SETTER_SYMBOL = "__autotune_set_num_threads"  # void(int32), exported by every compiled CPU module


SPIN_COUNT = "3000"  # libgomp spin iterations before a waiting thread sleeps (default 300000)


@functools.lru_cache(maxsize=1)
def load_libgomp() -> str:
    """Load libgomp (globally, once) with a short spin count; return the name it was loaded by.

    Call it before anything else loads libgomp: it reads its environment only then.
    """
    name = ctypes.util.find_library("gomp") or "libgomp.so.1"
    tuned = "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ
    if tuned:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        logger.warning("cannot load libgomp (%s): %s", name, e)
    finally:
        if tuned:
            del os.environ["GOMP_SPINCOUNT"]
    return name


def _affinity() -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return None


# The affinity when the runtime was imported, before a parallel region could have bound it.
_IMPORT_AFFINITY = _affinity()


def _binding_requested() -> bool:
    bind = os.environ.get("OMP_PROC_BIND", "").strip().lower()
    return (bool(bind) and bind != "false") or bool(os.environ.get("OMP_PLACES", "").strip())


def process_cpus() -> list[int]:
    """The CPUs this process may run on, sorted: the calling thread's affinity, and where
    OpenMP binds threads (``OMP_PROC_BIND``, ``OMP_PLACES``) the CPUs of libgomp's places and
    the affinity this module was imported with.

    Binding pins the initial thread to the first place at the first parallel region of an
    OpenMP runtime (libgomp's, or another library's, such as the one XGBoost bundles), which
    narrows the affinity that thread reads to one CPU: counted from it, every kernel ran on one
    thread (ResNet-18 1.9x slower on 2 vCPUs), and a worker process started from that thread
    inherited the one CPU."""
    cpus = _affinity()
    if cpus is None:
        return list(range(os.cpu_count() or 1))
    if _binding_requested():
        cpus |= _bound_place_cpus() | (_IMPORT_AFFINITY or frozenset())
    return sorted(cpus)


@functools.lru_cache(maxsize=1)
def _affinity_count() -> int:
    return len(process_cpus())


@functools.lru_cache(maxsize=1)
def _bound_place_cpus() -> frozenset[int]:
    """The CPUs of the places libgomp binds threads to; none where it binds none (or cannot
    say). Only asked where the environment asks for binding: the question initialises
    libgomp's runtime, which a process that binds nothing has no reason to do this early."""
    if not _binding_requested():
        return frozenset()
    try:
        gomp = ctypes.CDLL(load_libgomp())
        if gomp.omp_get_proc_bind() == 0:  # omp_proc_bind_false
            return frozenset()
        cpus: set[int] = set()
        for place in range(gomp.omp_get_num_places()):
            ids = (ctypes.c_int * gomp.omp_get_place_num_procs(place))()
            gomp.omp_get_place_proc_ids(place, ids)
            cpus.update(ids)
        return frozenset(cpus)
    except (OSError, AttributeError):  # no libgomp, or one older than OpenMP 4.5
        return frozenset()


_state = {"pool_started": False, "forked": False}


def _after_fork_in_child() -> None:
    # Sticky: a grandchild inherits the same stale pool.
    _state["forked"] = _state["forked"] or _state["pool_started"]


os.register_at_fork(after_in_child=_after_fork_in_child)


def num_threads() -> int:
    """The thread count for parallel loops: ``$AUTOTUNE_NUM_THREADS`` if set, else the usable CPUs.

    1 in a process forked after its parent ran parallel code (see the module docstring).
    """
    if _state["forked"]:
        if _state["forked"] is True:
            logger.warning("this process was forked after its parent ran parallel loops; libgomp "
                           "cannot run them here, so they run on one thread (use 'spawn' workers)")
            _state["forked"] = "warned"
        return 1
    value = os.environ.get(ENV_VAR)
    if value:
        try:
            n = int(value)
            if n >= 1:
                return n
        except ValueError:
            pass
        logger.warning("ignoring %s=%r: expected a positive integer", ENV_VAR, value)
    return _affinity_count()


class ThreadCountSetter:
    """Pushes :func:`num_threads` into a compiled module when it changes."""

    _PROTO = ctypes.CFUNCTYPE(None, ctypes.c_int32)

    def __init__(self, address: int | None):
        self._set = self._PROTO(address) if address else None
        self._last: int | None = None

    def update(self) -> None:
        if self._set is None:
            return
        n = num_threads()
        if n != self._last:
            self._set(n)
            self._last = n
        if n > 1:
            _state["pool_started"] = True
