"""CUDA modules on the GPU simulator: ``COMPILER_CUDA_SIMULATOR=1`` on a machine without a GPU.

As Triton's interpreter mode (``TRITON_INTERPRET=1``), the variable makes CUDA code run
on the CPU: :func:`compiler.build` for ``cuda`` still generates the real PTX
(``get_source("ptx")``), but calling the module runs its kernels' loop IR in the GPU
simulator (:mod:`compiler.tir.gpu_interpreter`), every thread of a launch in lockstep,
barriers and race checks included. ``compiler.cuda(0)`` is the simulated device: its arrays
live in host memory (:class:`~compiler.runtime.cuda.HostStorage`).

The CUDA backend (:mod:`compiler.backends.cuda`) decides, in one place, whether its
modules and arrays go to the GPU or here. Timings of a simulated module are wall-clock
seconds of the simulator: :meth:`SimulatedCUDAModule.time_evaluator` marks them
(``BenchmarkResult.simulated``) and warns (:class:`SimulatedTimingWarning`); tuning refuses
them. A module loaded from an artifact holds PTX only, not the loop IR the simulator
runs: calling it raises an error that says so.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..errors import CompilerError, RuntimeArgumentError
from ..runtime.arguments import FunctionInfo
from ..runtime.cuda import SIMULATOR_ENV, CUDAArgumentChecker, CUDADeviceModule, CUDAModule, HostStorage
from ..runtime.device import Device
from ..runtime.ndarray import NDArray
from ..runtime.timer import BenchmarkResult
from ..tir.gpu_interpreter import run_plan

__all__ = ["SimulatedCUDAModule", "SimulatedFunction", "SimulatedTimingWarning", "simulated_module"]


class SimulatedTimingWarning(UserWarning):
    """A timing taken on the GPU simulator: it says nothing of a GPU's speed."""


def simulated_module(module: CUDAModule) -> SimulatedCUDAModule:
    """``module`` (a CUDA build, or a module loaded from its artifact) running on the simulator."""
    return SimulatedCUDAModule(module.imported_modules[0],
                               {n: module.launch_plan(n) for n in module.function_names},
                               {n: module.function_info(n) for n in module.function_names},
                               module.entry_name)


class SimulatedCUDAModule(CUDAModule):
    """A CUDA module whose functions run their kernels on the GPU simulator."""

    def _function(self, info: FunctionInfo, plan: dict, device_module: CUDADeviceModule):
        return SimulatedFunction(info, plan, device_module)

    def time_evaluator(self, func_name: str, dev: Device | None = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cache_flush: bool | str = False):
        """A callable timing ``func_name`` on the simulator: ``repeat`` wall-clock means of
        ``number`` simulated calls, marked ``simulated`` (``min_repeat_ms`` and ``cache_flush``
        do not apply). Every evaluation warns with :class:`SimulatedTimingWarning`."""
        del min_repeat_ms, cache_flush
        if dev is not None and dev.device_type != "cuda":
            raise ValueError(f"a CUDA module runs on a GPU, not on {dev}")
        func = self.get_function(func_name)

        def evaluate(*args) -> BenchmarkResult:
            warnings.warn(f"{func_name}: timed on the GPU simulator ({SIMULATOR_ENV}=1); the seconds say "
                          "nothing of a GPU's speed", SimulatedTimingWarning, stacklevel=2)
            return func.time(args, number=number, repeat=repeat)

        return evaluate

    def __repr__(self) -> str:
        return "<Simulated" + super().__repr__()[1:]


class SimulatedFunction:
    """One host function of a CUDA module, run on the simulator: the arguments are checked as
    on a GPU, then its launch plan runs kernel by kernel on the arrays' host memory."""

    def __init__(self, info: FunctionInfo, plan: dict, device_module: CUDADeviceModule):
        self.info = info
        self.plan = plan
        self._dev = device_module
        self._checker = CUDAArgumentChecker(info)

    @property
    def name(self) -> str:
        return self.info.name

    def _prepare(self, args: tuple):
        if self._dev.functions is None:
            raise CompilerError(f"{self.name}: this CUDA module was loaded from an artifact, which holds "
                                f"PTX only; the GPU simulator ({SIMULATOR_ENV}=1) runs the kernels' loop IR, "
                                "so build the module in this process (compiler.build)")
        arrays, bound = self._checker.check(args)
        env = {name: value for name, (value, _) in bound.items()}
        host, copy_back = {}, []
        for i, a in arrays.items():
            if isinstance(a, NDArray):
                storage = a._data
                if not isinstance(storage, HostStorage):
                    raise RuntimeArgumentError(f"{self.name}: argument {i} was made on a real GPU, but "
                                               f"this module runs on the GPU simulator ({SIMULATOR_ENV}=1)")
                host[i] = storage.host
            else:  # copied "to the device" and back, as on a GPU: only written arguments change
                host[i] = np.array(a, copy=True, order="C")
                if i in self._checker.written:
                    copy_back.append((host[i], a))
        return host, env, copy_back

    def _run(self, host: dict, env: dict) -> None:
        run_plan(self.plan, self._dev.functions, host, env)

    def __call__(self, *args) -> None:
        host, env, copy_back = self._prepare(args)
        self._run(host, env)
        for copy, target in copy_back:
            np.copyto(target, copy)

    def time(self, args: tuple, number: int = 10, repeat: int = 1) -> BenchmarkResult:
        """Wall-clock seconds per simulated call (``repeat`` means of ``number`` calls), marked
        ``simulated``."""
        host, env, copy_back = self._prepare(args)
        results = []
        for _ in range(max(1, repeat)):
            n = max(1, number)
            start = time.perf_counter()
            for _ in range(n):
                self._run(host, env)
            results.append((time.perf_counter() - start) / n)
        for copy, target in copy_back:
            np.copyto(target, copy)
        return BenchmarkResult(tuple(results), simulated=True)

    def __repr__(self) -> str:
        return f"<SimulatedFunction {self.name}>"
