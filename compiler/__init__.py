"""An autotuning-first tensor compiler: tensor expressions -> schedules -> loop IR -> machine code.

>>> import compiler
>>> from compiler import te
>>> A = te.placeholder((1024,), name="A")
>>> B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
>>> s = te.create_schedule(B.op)
>>> f = compiler.build(s, [A, B], target="llvm", name="double")
"""

from . import backends, error, errors, passes, runtime, target, te, tir, topi, transform
from .driver import build
from .dtypes import DataType
from .error import TVMError
from .errors import CompilerError, LoweringError, RuntimeArgumentError, ScheduleError
from .lowering import lower
from .runtime import ndarray as nd
from .runtime.device import Device, cpu, cuda, device
from .runtime.packed import get_global_func, register_func
from .target import Target

# The one place the version is written: the distribution (pyproject.toml, [tool.setuptools.dynamic])
# and autotune.__version__ take it from here.
__version__ = "0.1.0"

__all__ = [
    "te", "tir", "error", "errors", "runtime", "target", "backends", "passes", "transform", "nd", "lower",
    "build", "device", "cpu", "cuda",
    "Device", "Target", "TVMError", "CompilerError", "ScheduleError", "LoweringError", "RuntimeArgumentError",
    "register_func", "get_global_func", "topi", "graph", "frontend", "DataType",
]


def __getattr__(name: str):
    # The model layer and its importers load on first use: ``compiler.graph.run(...)`` works
    # after ``import compiler``, and a process that never touches a model never loads them.
    if name in ("graph", "frontend"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
