"""The runtime: devices, device arrays, compiled modules, timing, and shared-library export/load.

Importing it does not import llvmlite, so exported modules run without a compiler. It keeps
the heap blocks that kernels allocate for their next call (:mod:`.heap`).
"""

from . import ndarray
from . import ndarray as nd
from .arguments import FunctionInfo
from .device import Device, cpu, cuda, device
from .heap import keep_heap
from .library import load_module
from .module import Function, Module
from .ndarray import NDArray
from .threads import num_threads
from .timer import BenchmarkResult

__all__ = ["Device", "device", "cpu", "cuda", "NDArray", "nd", "ndarray", "Module", "Function",
           "FunctionInfo", "BenchmarkResult", "load_module", "num_threads", "keep_heap"]

keep_heap()
