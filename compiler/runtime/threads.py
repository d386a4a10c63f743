"""How many threads parallel loops use: ``AUTOTUNE_NUM_THREADS`` or the CPUs we may run on.

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
import functools
import logging
import os

__all__ = ["num_threads", "ThreadCountSetter", "ENV_VAR", "SETTER_SYMBOL"]

logger = logging.getLogger(__name__)

ENV_VAR = "AUTOTUNE_NUM_THREADS"
SETTER_SYMBOL = "__autotune_set_num_threads"  # void(int32), exported by every compiled CPU module


@functools.lru_cache(maxsize=1)
def _affinity_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


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
