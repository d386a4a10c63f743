"""Every pass of the CPU and CUDA paths, in order, and the one build dispatch.

A pass is a function ``PrimFunc -> PrimFunc``. Reading top to bottom:

* :data:`LOWER` is what :func:`compiler.lower` runs for every target (passes marked
  ``optimize`` are skipped with ``simple_mode=True``);
* ``llvm``: :data:`LLVM_CODEGEN` runs inside :func:`~compiler.codegen.llvm.generate_llvm_ir`,
  then LLVM's optimiser and JIT (:mod:`compiler.codegen.llvm_jit`);
* ``cuda``: :data:`CUDA_HOST` on each function, :func:`split_host_device` into kernels and a
  launch plan, :data:`CUDA_KERNEL` on each kernel, then PTX (:mod:`compiler.codegen.nvptx`).

:func:`build_module` is the only place that picks a backend by the target's kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from .errors import CompilerError
from .runtime.module import Module
from .target import Target
from .tir.function import IRModule, PrimFunc
from .transform import loop_partition, remove_no_op, simplify, unroll_loops, vectorize_loops
from .transform.inject_double_buffer import inject_double_buffer
from .transform.inject_virtual_thread import inject_virtual_thread
from .transform.lower_intrin import lower_intrin
from .transform.normalize_loops import normalize_loops
from .transform.split_host_device import DeviceLimits, GPUFunction, split_host_device
from .transform.storage_flatten import storage_flatten

__all__ = ["Pass", "LOWER", "LLVM_CODEGEN", "CUDA_HOST", "CUDA_KERNEL", "run_passes", "lower_cuda",
           "build_module", "llvm_ir"]


@dataclass(frozen=True)
class Pass:
    """One step of a pipeline; ``optimize`` steps are skipped by ``lower(simple_mode=True)``."""

    name: str
    run: Callable[[PrimFunc], PrimFunc]
    optimize: bool = False


LOWER: tuple[Pass, ...] = (
    Pass("storage_flatten", storage_flatten),
    Pass("simplify", simplify),
    Pass("loop_partition", loop_partition, optimize=True),
    Pass("unroll_loops", unroll_loops, optimize=True),
    Pass("simplify", simplify, optimize=True),
    # Last of the optimisations: later passes (the simplifier in particular) do not know vector nodes.
    Pass("vectorize_loops", vectorize_loops, optimize=True),
    Pass("remove_no_op", remove_no_op),
)

LLVM_CODEGEN: tuple[Pass, ...] = (
    Pass("lower_intrin", partial(lower_intrin, target_kind="llvm")),
)

CUDA_HOST: tuple[Pass, ...] = (  # on each lowered function, before it is split into kernels
    Pass("normalize_loops", normalize_loops),
    Pass("inject_virtual_thread", inject_virtual_thread),
    Pass("inject_double_buffer", inject_double_buffer),
    Pass("simplify", simplify),
)

CUDA_KERNEL: tuple[Pass, ...] = (  # on each kernel split_host_device made
    Pass("simplify", simplify),
    Pass("remove_no_op", remove_no_op),
    Pass("lower_intrin", partial(lower_intrin, target_kind="cuda")),
)


def run_passes(func: PrimFunc, passes: tuple[Pass, ...], simple_mode: bool = False) -> PrimFunc:
    """``func`` after each pass of ``passes`` in order (``optimize`` ones skipped in simple mode)."""
    for p in passes:
        if not (simple_mode and p.optimize):
            func = p.run(func)
    return func


def lower_cuda(mod: IRModule, limits: DeviceLimits | None = None) -> list[GPUFunction]:
    """Every function of ``mod`` split into kernels and a launch plan (checked against ``limits``)."""
    out = []
    for func in _named(mod).values():
        gf = split_host_device(run_passes(func, CUDA_HOST), limits)
        gf.kernels = [run_passes(k, CUDA_KERNEL) for k in gf.kernels]
        out.append(gf)
    return out


def build_module(mod: IRModule, target: Target) -> Module:
    """Compile every function of ``mod`` for ``target``; the first is the entry function."""
    if len(mod) == 0:
        raise CompilerError("cannot build an empty IRModule")
    backend = _BACKENDS.get(target.kind)
    if backend is None:
        raise CompilerError(f"no backend builds target kind {target.kind!r}; known: {sorted(_BACKENDS)}")
    return backend(mod, target)


def _named(mod: IRModule) -> dict[str, PrimFunc]:
    """The functions of ``mod``, each carrying the name it has in the module."""
    return {name: (f if f.name == name else f.with_name(name)) for name, f in mod.items()}


def llvm_ir(mod: IRModule, target: Target, tm) -> tuple[dict[str, PrimFunc], str]:
    """The functions of ``mod`` under their names in the module, and their LLVM IR text for
    the target machine ``tm`` (what a JIT build and an exported object file both compile)."""
    from .codegen.llvm import generate_llvm_ir

    if len(mod) == 0:
        raise CompilerError("cannot build an empty IRModule")
    funcs = _named(mod)
    return funcs, generate_llvm_ir(IRModule(funcs, mod.attrs), tm.triple, str(tm.target_data),
                                   target.fast_math)


def _build_llvm(mod: IRModule, target: Target) -> Module:
    from .codegen import function_info
    from .codegen.llvm import argument_align
    from .codegen.llvm_jit import LLVMBackend, create_target_machine

    tm = create_target_machine(target)
    funcs, text = llvm_ir(mod, target, tm)
    backend = LLVMBackend(text, target, tm)
    infos = {name: function_info(f, argument_align) for name, f in funcs.items()}
    return Module(backend, infos, next(iter(funcs)))


def _build_cuda(mod: IRModule, target: Target) -> Module:
    from .codegen.cuda import build_cuda

    return build_cuda(mod, target)


_BACKENDS: dict[str, Callable[[IRModule, Target], Module]] = {"llvm": _build_llvm, "cuda": _build_cuda}
