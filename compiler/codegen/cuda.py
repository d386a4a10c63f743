"""``build(..., target="cuda")``: GPU lowering, PTX, and the host module that launches it.

:func:`lower_cuda` runs the GPU passes on functions that :func:`compiler.lower` produced
(target-agnostic): loops from 0 (:mod:`~compiler.tir.transform.normalize_loops`),
virtual threads (:mod:`~compiler.tir.transform.inject_virtual_thread`), double
buffers (:mod:`~compiler.tir.transform.inject_double_buffer`), then the split into
kernels with their launch dimensions and barriers
(:mod:`~compiler.tir.transform.split_host_device`), whose kernels' intrinsics are lowered
by the ``cuda`` rules (:mod:`~compiler.tir.transform.lower_intrin`). :func:`build_cuda` compiles the
kernels of every function into one PTX module (:mod:`.nvptx`) and wraps it in a
:class:`~compiler.runtime.cuda.CUDAModule`.
"""

from __future__ import annotations

from ..errors import CompilerError
from ..runtime.cuda import CUDADeviceModule, CUDAModule
from ..target import Target
from ..tir import transform
from ..tir.function import IRModule
from ..tir.transform.inject_double_buffer import inject_double_buffer
from ..tir.transform.inject_virtual_thread import inject_virtual_thread
from ..tir.transform.lower_intrin import lower_intrin
from ..tir.transform.normalize_loops import normalize_loops
from ..tir.transform.split_host_device import DeviceLimits, GPUFunction, split_host_device

__all__ = ["lower_cuda", "build_cuda"]


def lower_cuda(mod: IRModule, limits: DeviceLimits | None = None) -> list[GPUFunction]:
    """Every function of ``mod`` split into kernels and a launch plan (checked against ``limits``)."""
    out = []
    for name, func in mod.items():
        func = func if func.name == name else func.with_name(name)
        func = transform.simplify(inject_double_buffer(inject_virtual_thread(normalize_loops(func))))
        gf = split_host_device(func, limits)
        gf.kernels = [lower_intrin(transform.remove_no_op(transform.simplify(k)), "cuda") for k in gf.kernels]
        out.append(gf)
    return out


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
