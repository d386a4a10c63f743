"""The GPU limits that the CUDA templates' constraints keep configs within."""

from __future__ import annotations

__all__ = ["MAX_THREADS", "MAX_SHARED_BYTES", "register_tile_fits"]

MAX_THREADS = 1024             # per block
MAX_SHARED_BYTES = 48 * 1024   # static shared memory per block
_MAX_REGISTERS = 255           # per thread
_REGISTER_FILE = 64 * 1024     # 32-bit registers per block, shared by its threads
_REGISTER_OVERHEAD = 16        # addressing and loop state


def register_tile_fits(rows: int, cols: int, threads: int) -> bool:
    """Whether a thread's ``rows x cols`` accumulators, one step of both operands
    (``rows + cols`` values) and its bookkeeping fit the registers it can have in a
    block of ``threads`` threads."""
    return rows * cols + rows + cols + _REGISTER_OVERHEAD <= min(_MAX_REGISTERS, _REGISTER_FILE // threads)
