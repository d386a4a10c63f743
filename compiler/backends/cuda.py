"""The ``cuda`` backend: NVIDIA GPUs, through LLVM's NVPTX backend and pycuda.

After :func:`compiler.lower`, :data:`PIPELINE` prepares each function for the GPU (virtual
threads and double buffers injected), splits it into kernels and a host launch plan, puts
the barriers its shared buffers need into each kernel and lowers the kernels' intrinsics;
the code generator then emits PTX (:mod:`compiler.codegen.cuda`). Building needs neither a
GPU nor pycuda; running does. An artifact is the built module's PTX and launch plans.

Where the code runs is decided here, in one place (:func:`_runtime`): on the GPU through
pycuda, or, when ``COMPILER_CUDA_SIMULATOR=1`` asks for it, on the GPU simulator
(:mod:`compiler.backends.cuda_simulator`), for the modules this backend builds and loads
and for the arrays of the ``cuda`` device alike.

The code generator loads llvmlite, so it is imported on the first build (see
:mod:`compiler.backends.llvm`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from functools import partial

from ..runtime.cuda import (
    MEMORY,
    SIMULATED_MEMORY,
    CUDAModule,
    DeviceLimits,
    attached_arch,
    simulator_enabled,
)
from ..runtime.cuda import load_artifact as load_cuda_artifact
from ..runtime.device import DeviceMemory
from ..runtime.module import Module
from ..target import Target
from ..tir.function import IRModule
from ..transform import remove_no_op, simplify
from ..transform.inject_double_buffer import inject_double_buffer
from ..transform.inject_virtual_thread import inject_virtual_thread
from ..transform.lower_intrin import lower_intrin
from ..transform.normalize_loops import normalize_loops
from ..transform.pipeline import Pass, Pipeline, dump_directory, dump_text
from ..transform.split_host_device import GPUFunction, gpu_functions, split_host_device_module
from ..transform.thread_sync import insert_thread_sync
from .base import Artifact, Backend, register

__all__ = ["PIPELINE", "BACKEND", "DEVICE_MEMORY", "build", "save_artifact", "load_artifact", "lower_cuda"]

KIND = "cuda"

PIPELINE = Pipeline(KIND, (
    # on each lowered function
    Pass("normalize_loops", normalize_loops),
    Pass("inject_virtual_thread", inject_virtual_thread),
    Pass("inject_double_buffer", inject_double_buffer),
    Pass("simplify", simplify),
    # each function becomes a host function with a launch plan, and its kernels
    Pass("split_host_device", split_host_device_module, scope="module"),
    # on each kernel
    Pass("insert_thread_sync", insert_thread_sync, scope="kernel"),
    Pass("simplify", simplify, scope="kernel"),
    Pass("remove_no_op", remove_no_op, scope="kernel"),
    Pass("lower_intrin", partial(lower_intrin, target_kind=KIND), scope="kernel"),
))


def lower_cuda(mod: IRModule, limits: DeviceLimits | None = None) -> list[GPUFunction]:
    """Every function of ``mod`` (from :func:`compiler.lower`) through :data:`PIPELINE`: its
    kernels and launch plan, checked against ``limits`` (default: a typical GPU's)."""
    pipeline = PIPELINE
    if limits is not None:
        split = Pass("split_host_device", partial(split_host_device_module, limits=limits), scope="module")
        pipeline = dataclasses.replace(PIPELINE, steps=tuple(
            split if getattr(p, "name", None) == "split_host_device" else p for p in PIPELINE.steps))
    return gpu_functions(pipeline.run(mod))


def _runtime() -> tuple[DeviceMemory, Callable[[CUDAModule], Module]]:
    """Where CUDA code runs now: the device memory of ``cuda`` arrays and what makes a built or
    loaded module runnable. The GPU through pycuda, unless ``COMPILER_CUDA_SIMULATOR=1``
    asks for the simulator (read at every use; nothing simulates unasked)."""
    if simulator_enabled():
        from .cuda_simulator import simulated_module  # the simulator's module loads only when asked for

        return SIMULATED_MEMORY, simulated_module
    return MEMORY, lambda module: module


def build(mod: IRModule, target: Target) -> Module:
    """PTX for the kernels of ``mod`` (after :data:`PIPELINE`) and the host module that runs them."""
    from ..codegen.cuda import build_cuda  # loads llvmlite: on the first build only

    directory = dump_directory()
    module = build_cuda(mod, target, partial(dump_text, directory) if directory else None)
    return _runnable(module)


def _runnable(module: CUDAModule) -> Module:
    return _runtime()[1](module)


def save_artifact(mod: IRModule, target: Target) -> Artifact:
    """The PTX and launch plans of :func:`build`'s module, as JSON bytes."""
    module = build(mod, target)
    infos = {n: module.function_info(n) for n in module.function_names}
    return Artifact.of_functions("ptx", module.save_artifact(), target, infos,
                                 arch=module.imported_modules[0].arch)


def load_artifact(artifact: Artifact) -> Module:
    """The module of a ``"ptx"`` artifact (loading needs no GPU; calling it does)."""
    return _runnable(load_cuda_artifact(artifact.data))


#: The memory of ``cuda`` arrays: the GPU's, or the simulator's (see :func:`_runtime`).
DEVICE_MEMORY = DeviceMemory(
    from_host=lambda host, device: _runtime()[0].from_host(host, device),
    empty=lambda shape, dtype, device: _runtime()[0].empty(shape, dtype, device),
    upload=lambda storage, host: storage.upload(host),
    check_available=lambda: _runtime()[0].check_available(),
    synchronize=lambda device_id: _runtime()[0].synchronize(device_id),
    unavailable_reason=lambda: _runtime()[0].unavailable_reason(),
    device_count=lambda: _runtime()[0].device_count(),
    simulated=lambda: _runtime()[0].simulated(),
)


@functools.lru_cache(maxsize=1)
def _attached_arch() -> str | None:
    return attached_arch()  # asked once per process, as the host CPU's name is


def _model(target: Target) -> str | None:
    # The architecture it compiles for: that of the attached GPU when -arch is not given.
    return target.arch or _attached_arch()


BACKEND = register(Backend(
    kind=KIND,
    device_type="cuda",
    template_kind="cuda",
    pipeline=PIPELINE,
    codegen=build,
    save_artifact=save_artifact,
    load_artifact=load_artifact,
    target_options={"arch": True, "fast-math": False},
    model=_model,
    model_option="arch",
    default_host="llvm",
    device_memory=DEVICE_MEMORY,
    device_aliases=("gpu",),
    intrinsic_keys=(KIND, "nvptx"),
    native_math=frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "fabs", "abs",
                           "floor", "ceil", "round", "trunc", "isnan", "nearbyint", "fmod"}),
))
