"""``build(..., target="cuda")``: PTX, and the host module that launches it.

:func:`build_cuda` runs the GPU passes of :mod:`compiler.passes` (:func:`lower_cuda`) on
functions that :func:`compiler.lower` produced, compiles the kernels of every function
into one PTX module (:mod:`.nvptx`) and wraps it in a
:class:`~compiler.runtime.cuda.CUDAModule`.
"""

from __future__ import annotations

from ..errors import CompilerError
from ..passes import lower_cuda
from ..runtime.cuda import CUDADeviceModule, CUDAModule
from ..target import Target
from ..tir.function import IRModule

__all__ = ["lower_cuda", "build_cuda"]


def build_cuda(mod: IRModule, target: Target) -> CUDAModule:
    """PTX for every kernel of ``mod`` and the host module that launches them."""
    from . import function_info
    from .cuda_source import cuda_source
    from .nvptx import generate_ptx, resolve_arch

    if len(mod) == 0:
        raise CompilerError("cannot build an empty IRModule")
    gfs = lower_cuda(mod)
    kernels = [k for g in gfs for k in g.kernels]
    arch = resolve_arch(target)
    ll, ptx = generate_ptx(kernels, arch, target.fast_math)
    names = [k.name for k in kernels]
    sources = {"ll": ll, "cuda": cuda_source(kernels)}
    device = CUDADeviceModule(ptx, arch, names, sources)
    infos = {}
    plans = {}
    for (name, func), g in zip(mod.items(), gfs, strict=True):
        infos[name] = function_info(func if func.name == name else func.with_name(name))
        plans[name] = g.to_json()
    return CUDAModule(device, plans, infos, next(iter(infos)))
