"""Code generators: from an IRModule of lowered PrimFuncs to a runtime Module.

CPUs: :mod:`.llvm` builds the IR, :mod:`.llvm_jit` optimises and JIT-compiles it.
NVIDIA GPUs: :mod:`.cuda` lowers for the GPU, :mod:`.nvptx` emits PTX.
"""

from __future__ import annotations

from ..errors import CompilerError
from ..runtime.arguments import FunctionInfo
from ..runtime.module import Module
from ..target import Target
from ..tir.analysis import stored_buffers
from ..tir.function import IRModule, PrimFunc

__all__ = ["build_module", "function_info"]


def function_info(func: PrimFunc) -> FunctionInfo:
    """How to call ``func`` and which of its buffer arguments it writes."""
    stored = stored_buffers(func.body)
    written = [i for i, p in enumerate(func.params) if not _is_var(p) and id(p.data) in stored]
    return FunctionInfo(func.signature(), written)


def _is_var(p) -> bool:
    return not hasattr(p, "data")


def build_module(mod: IRModule, target: Target) -> Module:
    """Compile every function of ``mod`` for ``target``; the first is the entry function."""
    if target.kind == "cuda":
        from .cuda import build_cuda

        return build_cuda(mod, target)
    if len(mod) == 0:
        raise CompilerError("cannot build an empty IRModule")
    from .llvm import generate_llvm_ir
    from .llvm_jit import LLVMBackend, create_target_machine

    funcs = {name: (f if f.name == name else f.with_name(name)) for name, f in mod.items()}
    tm = create_target_machine(target)
    text = generate_llvm_ir(IRModule(funcs, mod.attrs), tm.triple, str(tm.target_data), target.fast_math)
    backend = LLVMBackend(text, target, tm)
    infos = {name: function_info(f) for name, f in funcs.items()}
    return Module(backend, infos, next(iter(funcs)))
