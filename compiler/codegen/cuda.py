"""The CUDA code generator: PTX for the kernels of a module, and the host module that launches them.

:func:`build_cuda` takes a module the CUDA backend's pipeline has split into host functions
(each with its launch plan) and kernels (:mod:`compiler.backends.cuda`), compiles every
kernel into one PTX module (:mod:`.nvptx`) and wraps it in a
:class:`~compiler.runtime.cuda.CUDAModule`.
"""

from __future__ import annotations

from ..errors import CompilerError
from ..runtime.cuda import CUDADeviceModule, CUDAModule
from ..target import Target
from ..tir.analysis import stored_buffers
from ..tir.function import IRModule
from ..transform.split_host_device import gpu_functions
from . import function_info
from .cuda_source import cuda_source
from .nvptx import generate_ptx, resolve_arch

__all__ = ["build_cuda"]


def build_cuda(mod: IRModule, target: Target, on_text=None) -> CUDAModule:
    """PTX for every kernel of ``mod`` and the host module that launches them; ``on_text(label,
    text, suffix)``, when given, sees the LLVM IR and the PTX (the IR dump)."""
    gfs = gpu_functions(mod)
    if not gfs:
        raise CompilerError("cannot build an empty IRModule")
    kernels = [k for g in gfs for k in g.kernels]
    arch = resolve_arch(target)
    ll, ptx = generate_ptx(kernels, arch, target.fast_math)
    if on_text is not None:
        on_text("cuda-nvptx", ll, "ll")
        on_text("cuda-ptx", ptx, "ptx")
    sources = {"ll": ll, "cuda": cuda_source(kernels)}
    device = CUDADeviceModule(ptx, arch, [k.name for k in kernels], sources, functions=kernels)
    infos, plans = {}, {}
    for g in gfs:
        # The host function stores nothing itself: what its kernels store, it writes.
        written = set().union(*(stored_buffers(k.body) for k in g.kernels))
        infos[g.host.name] = function_info(g.host, stored=written)
        plans[g.host.name] = g.to_json()
    return CUDAModule(device, plans, infos, next(iter(infos)))
