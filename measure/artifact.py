"""Artifacts: compiling a candidate to bytes, and loading those bytes as a runtime Module.

For CUDA targets the artifact is ``"ptx"``: the bytes of
:meth:`compiler.runtime.cuda.CUDAModule.save_artifact` (the PTX and the launch plans,
as JSON); building it needs neither a GPU nor pycuda, running it needs both.

For CPU targets the artifact is a relocatable object file plus the functions'
metadata. The builder lowers, generates and optimises LLVM IR and emits the object
directly (no JIT compile in the builder, no ``cc -shared`` link anywhere); the
runner hands the object to an MCJIT engine, which relocates it in about 2 ms
against the symbols of its own process (libgomp, libm, libc). Timing then uses the
runtime's native timer like any other Module.
"""

from __future__ import annotations

from compiler.errors import CompilerError
from compiler.runtime.arguments import FunctionInfo
from compiler.runtime.module import Module
from compiler.target import Target
from compiler.tir.function import IRModule
from measure.records import Artifact

__all__ = ["build_artifact", "compile_object", "ptx_artifact", "load_artifact", "ENTRY_NAME"]

ENTRY_NAME = "default_function"


def build_artifact(task, config) -> Artifact:
    """Instantiate ``task`` with ``config``, lower and compile it (raises on failure:
    :class:`search_spaces.InstantiationError`, :class:`compiler.CompilerError`, ...)."""
    import compiler

    s, args = task.instantiate(config)
    target = Target(task.target)
    if target.kind == "cuda":
        return ptx_artifact(compiler.build(s, args, target=target, name=ENTRY_NAME), target)
    return compile_object(compiler.lower(s, args, name=ENTRY_NAME), target)


def ptx_artifact(module, target: Target) -> Artifact:
    """The artifact of a built CUDA module (:class:`compiler.runtime.cuda.CUDAModule`)."""
    metadata = {"target": str(target), "entry": module.entry_name,
                "arch": module.imported_modules[0].arch,
                "functions": [module.function_info(n).to_json() for n in module.function_names]}
    return Artifact("ptx", module.save_artifact(), metadata)


def compile_object(mod: IRModule, target: Target) -> Artifact:
    """What ``compiler.build`` does for a CPU target, ending in an object file instead of a JIT."""
    from compiler.codegen import function_info
    from compiler.codegen.llvm_jit import create_target_machine, optimize, parse
    from compiler.passes import llvm_ir

    tm = create_target_machine(target, reloc="pic", codemodel="default")
    funcs, text = llvm_ir(mod, target, tm)
    module = parse(text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    optimize(module, tm)
    metadata = {"target": str(target), "entry": next(iter(funcs)),
                "functions": [function_info(f).to_json() for f in funcs.values()]}
    return Artifact("object", tm.emit_object(module), metadata)


class _ObjectCode:
    """A :class:`compiler.runtime.module.Backend` over an object file loaded by MCJIT."""

    type_key = "llvm"

    def __init__(self, data: bytes, target: Target):
        import llvmlite.binding as llvm

        from compiler.codegen.llvm_jit import create_target_machine

        self.target = target
        self._data = data
        tm = create_target_machine(target)  # also loads libgomp for the engine to link against
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        from compiler.runtime.timer import TIMER_SYMBOL

        if name == TIMER_SYMBOL:
            from compiler.codegen import llvm_timer

            return llvm_timer.address()
        return self._engine.get_function_address(name) or 0

    def source(self, fmt: str) -> str:
        raise CompilerError(f"a module loaded from an artifact has no {fmt!r} source")

    def export(self, path: str, metadata_json: str) -> None:
        from compiler.codegen import llvm_timer
        from compiler.runtime.library import link_shared

        link_shared(path, [self._data, llvm_timer.object_code(self.target)], metadata_json)


def load_artifact(artifact: Artifact) -> Module:
    """The callable Module of ``artifact`` (no rebuilding); a CUDAModule for ``"ptx"``
    (loading needs no GPU, calling it does)."""
    if artifact.kind == "ptx":
        from compiler.runtime.cuda import load_artifact as load_cuda

        return load_cuda(artifact.data)
    if artifact.kind != "object":
        raise CompilerError(f"cannot load a {artifact.kind!r} artifact on this runner")
    meta = artifact.metadata
    infos = [FunctionInfo.from_json(f) for f in meta["functions"]]
    backend = _ObjectCode(artifact.data, Target(meta["target"]))
    return Module(backend, {info.name: info for info in infos}, meta["entry"])
