"""The steps of a CPU build, in order: LLVM IR from the code generator (:mod:`.llvm`), LLVM's
O3 (:mod:`.llvm_machine`), then a position-independent object file, which the JIT links into
this process (:class:`.llvm_jit.ObjectCode`) or a measure worker sends back as its artifact.

The object is kept in the compile cache (:mod:`.object_cache`), under the LLVM IR before O3 and
the target machine: the same code built again, in this process or another, skips LLVM.

The ``llvm`` backend (:mod:`compiler.backends.llvm`) calls these on modules its pipeline
prepared; ``COMPILER_DUMP_IR`` also gets the LLVM IR before and after O3 (and then skips the
cache, so that both are written).
"""

from __future__ import annotations

from ..runtime.module import Module
from ..target import Target
from ..tir.function import IRModule
from ..transform.pipeline import dump_directory, dump_text
from . import function_info
from .llvm import argument_align, generate_llvm_ir
from .llvm_jit import ObjectCode
from .llvm_machine import object_key, object_machine, optimized_module
from .llvm_scratch import scratch_layout
from .object_cache import cached

__all__ = ["build", "build_linked", "save_object", "load_object"]


def build(mod: IRModule, target: Target) -> Module:
    """Compile ``mod`` for ``target`` and load it into this process."""
    data, optimized_ir = _compiled(mod, target)
    return Module(ObjectCode(data, target, optimized_ir=optimized_ir), _infos(mod), next(iter(mod.functions)))


def build_linked(mod: IRModule, target: Target, llvm_ir: str, infos: dict, entry: str,
                 objects: tuple[bytes, ...] = (), attrs: dict | None = None) -> Module:
    """Compile ``mod`` together with hand-written LLVM IR (``llvm_ir``, whose functions
    ``infos`` describe and may call ``mod``'s), optimised as one module, and load it into this
    process with the given object files (data it refers to): ``entry`` is the module's entry
    function."""
    data, optimized_ir = _compiled(mod, target, (llvm_ir,))
    return Module(ObjectCode(data, target, objects, optimized_ir), {**_infos(mod), **infos}, entry, attrs)


def save_object(mod: IRModule, target: Target) -> tuple[bytes, dict]:
    """What :func:`build` compiles, as a relocatable object file, and its functions' FunctionInfo
    by name (the entry first)."""
    return _compiled(mod, target)[0], _infos(mod)


def load_object(data: bytes, target: Target, infos: dict, entry: str) -> Module:
    """The module of :func:`save_object`'s output, linked against this process's symbols."""
    return Module(ObjectCode(data, target), infos, entry)


def _compiled(mod: IRModule, target: Target, linked: tuple[str, ...] = ()):
    """``mod``'s object file (with the ``linked`` LLVM IR texts), from the compile cache where it
    holds it, and a function that gives its optimised LLVM IR (optimising it again where the
    object came from the cache)."""
    tm = object_machine(target)
    text = generate_llvm_ir(mod, tm.triple, str(tm.target_data), target.fast_math)
    directory = dump_directory()
    optimized: dict[str, str] = {}

    def compile_object() -> bytes:
        module = optimized_module(text, tm, linked)
        optimized["ir"] = str(module)  # before code generation, which may change the module
        if directory:
            dump_text(directory, "llvm-codegen", text, "ll")
            dump_text(directory, "llvm-optimize", optimized["ir"], "ll")
        return tm.emit_object(module)

    def optimized_ir() -> str:
        if "ir" not in optimized:
            optimized["ir"] = str(optimized_module(text, tm, linked))
        return optimized["ir"]

    # with the IR dumped, always compiled: a cached object would write neither text
    data = compile_object() if directory else cached(object_key(target, (text, *linked)), compile_object)
    return data, optimized_ir


def _infos(mod: IRModule) -> dict:
    infos = {}
    for name, f in mod.items():
        infos[name] = function_info(f, argument_align)
        infos[name].scratch_bytes = scratch_layout(f).nbytes
    return infos
