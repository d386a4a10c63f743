"""The steps of a CPU build, in order: LLVM IR from the code generator (:mod:`.llvm`), LLVM's
O3 (:mod:`.llvm_machine`), then MCJIT in this process (:class:`.llvm_jit.JITCode`) or an
object file for another (an artifact, loaded back as :class:`.llvm_jit.ObjectCode`).

The ``llvm`` backend (:mod:`compiler.backends.llvm`) calls these on modules its pipeline
prepared; ``COMPILER_DUMP_IR`` also gets the LLVM IR before and after O3.
"""

from __future__ import annotations

from ..runtime.module import Module
from ..target import Target
from ..tir.function import IRModule
from ..transform.pipeline import dump_directory, dump_text
from . import function_info
from .llvm import argument_align, generate_llvm_ir
from .llvm_jit import JITCode, ObjectCode
from .llvm_machine import create_target_machine, optimized_module
from .llvm_scratch import scratch_layout

__all__ = ["build", "build_linked", "save_object", "load_object"]


def build(mod: IRModule, target: Target) -> Module:
    """JIT-compile ``mod`` for ``target`` in this process."""
    tm = create_target_machine(target)
    return Module(JITCode(_optimized(mod, target, tm), target, tm), _infos(mod), next(iter(mod.functions)))


def build_linked(mod: IRModule, target: Target, llvm_ir: str, infos: dict, entry: str,
                 objects: tuple[bytes, ...] = (), attrs: dict | None = None) -> Module:
    """JIT-compile ``mod`` together with hand-written LLVM IR (``llvm_ir``, whose functions
    ``infos`` describe and may call ``mod``'s) and the given object files (data it refers to),
    optimised as one module: ``entry`` is the module's entry function."""
    tm = create_target_machine(target)
    module = _optimized(mod, target, tm, (llvm_ir,))
    return Module(JITCode(module, target, tm, objects), {**_infos(mod), **infos}, entry, attrs)


def save_object(mod: IRModule, target: Target) -> tuple[bytes, dict]:
    """What :func:`build` compiles, as a relocatable object file, and its functions' FunctionInfo
    by name (the entry first)."""
    tm = create_target_machine(target, reloc="pic", codemodel="default")
    return tm.emit_object(_optimized(mod, target, tm)), _infos(mod)


def load_object(data: bytes, target: Target, infos: dict, entry: str) -> Module:
    """The module of :func:`save_object`'s output, loaded by MCJIT against this process's symbols."""
    return Module(ObjectCode(data, target), infos, entry)


def _optimized(mod: IRModule, target: Target, tm, linked: tuple[str, ...] = ()):
    text = generate_llvm_ir(mod, tm.triple, str(tm.target_data), target.fast_math)
    module = optimized_module(text, tm, linked)
    directory = dump_directory()
    if directory:
        dump_text(directory, "llvm-codegen", text, "ll")
        dump_text(directory, "llvm-optimize", str(module), "ll")
    return module


def _infos(mod: IRModule) -> dict:
    infos = {}
    for name, f in mod.items():
        infos[name] = function_info(f, argument_align)
        infos[name].scratch_bytes = scratch_layout(f).nbytes
    return infos
