"""Keeping the heap blocks that compiled kernels allocate, so that each call reuses them.

A kernel allocates its larger intermediates (a padded input, packed panels, a Winograd
convolution's transformed tiles: anything over ``codegen.llvm.MAX_STACK_BYTES``) with
``aligned_alloc`` when it is called and frees them when it returns. glibc's malloc decides by
the process's history what such a free does: a block above its mmap threshold is unmapped, and
once freed blocks at the top of the heap exceed its trim threshold they are given back to the
system. Both thresholds move with what the process allocated before (the "dynamic" threshold),
so the same kernel either reuses its blocks from the previous call or faults every page of them
in again, by chance of the process it runs in. Measured on a 2-vCPU Zen 4 VM: ResNet-18's
56x56 layer, 1.05 or 1.25 ms by process; its Winograd form (3.6 MB of tiles) 0.36 or 0.95 ms; a
tuning worker and the deployed model could see different ones.

A model's executor gives its kernels' blocks outside parallel loops a place in its workspace
(:mod:`compiler.codegen.llvm_scratch`); the rest (blocks each thread takes inside a parallel
loop, and every block of a kernel called alone, as the tuner times it) still come from malloc.

On import, the runtime fixes both thresholds (:func:`keep_heap`): blocks up to 32 MiB (the
largest mmap threshold glibc allows) come from the heap, and freed memory stays with the process
for the next call, as a workspace pool does. The cost is that the process keeps the largest
intermediates it has used, as TVM's workspace pool does. ``COMPILER_KEEP_HEAP=0`` leaves malloc
as it is. Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

__all__ = ["keep_heap", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

logger = logging.getLogger(__name__)

#: glibc's largest mmap threshold on 64-bit systems (``DEFAULT_MMAP_THRESHOLD_MAX``).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free memory at the top of the heap that is kept rather than given back.
TRIM_THRESHOLD = 1024 * 1024 * 1024

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)

_kept = False


def keep_heap() -> bool:
    """Fix glibc malloc's mmap and trim thresholds (see the module's docstring), once per process;
    whether they are set. False where the C library is not glibc, or ``COMPILER_KEEP_HEAP=0``."""
    global _kept
    if _kept:
        return True
    if os.environ.get("COMPILER_KEEP_HEAP", "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                              TRIM_THRESHOLD))
    if not _kept:
        logger.debug("mallopt refused the heap thresholds: kernels' heap blocks may be given back "
                     "after each call")
    return _kept
