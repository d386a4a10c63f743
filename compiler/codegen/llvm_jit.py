"""From LLVM IR text to running machine code: target machines, O3, MCJIT, object files.

:class:`JITCode` is the code object of a :class:`compiler.runtime.Module` compiled in this
process, :class:`ObjectCode` that of an object file compiled elsewhere (a measure worker's
artifact); see :mod:`compiler.runtime.module`. The LLVM backend (:mod:`compiler.backends.llvm`)
puts the steps together.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ..errors import CodegenError
from ..runtime.library import link_object, link_shared
from ..runtime.timer import TIMER_SYMBOL
from ..target import Target
from . import llvm_timer
from .llvm_machine import create_target_machine, parse, vector_features

__all__ = ["JITCode", "ObjectCode"]


class _NativeCode:
    """What the JIT and a loaded object file share: symbol lookup (the native timer is one copy
    per process, shared by every module) and export into a shared library."""

    type_key = "llvm"

    def __init__(self, target: Target, engine, objects: tuple[bytes, ...] = ()):
        self.target = target
        self._engine = engine  # owns the machine code; kept alive with this object
        self._objects = tuple(objects)  # other object files the code links against (data blocks)

    @property
    def vector_features(self) -> list[str]:
        """The x86 vector extensions the code may use (see :func:`llvm_machine.vector_features`)."""
        return vector_features(self.target)

    def address(self, name: str) -> int:
        if name == TIMER_SYMBOL:
            return llvm_timer.address()
        return self._engine.get_function_address(name) or 0

    def object_code(self) -> bytes:
        raise NotImplementedError

    def export(self, path: str, metadata_json: str) -> None:
        """Write a shared library (:func:`compiler.runtime.load_module` reads it)."""
        link_shared(path, [self.object_code(), llvm_timer.object_code(self.target), *self._objects],
                    metadata_json)


class JITCode(_NativeCode):
    """Machine code JIT-compiled in this process from an optimised LLVM module, plus what is
    needed to show and save it."""

    def __init__(self, module, target: Target, tm=None, objects: tuple[bytes, ...] = ()):
        tm = tm or create_target_machine(target)
        self._tm = tm
        self._optimized = str(module)
        engine = llvm.create_mcjit_compiler(module, tm)  # the engine owns the module from here on
        for data in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        super().__init__(target, engine, objects)

    def source(self, fmt: str) -> str:
        if fmt in ("ll", "llvm"):
            return self._optimized
        if fmt in ("asm", "s"):
            # A fresh module: code generation may change the one the JIT already compiled.
            return self._tm.emit_assembly(parse(self._optimized))
        raise ValueError(f"unknown source format {fmt!r}; use 'll' or 'asm'")

    def object_code(self) -> bytes:
        """Position-independent object code, for linking into a shared library."""
        tm = create_target_machine(self.target, reloc="pic", codemodel="default")
        return tm.emit_object(parse(self._optimized))

    def save_object(self, path: str, metadata_json: str) -> None:
        """Write an object file (``Module.save``) that ``contrib.cc.create_shared`` links."""
        link_object(path, [self.object_code(), llvm_timer.object_code(self.target), *self._objects],
                    metadata_json)


class ObjectCode(_NativeCode):
    """Machine code of a relocatable object file, loaded by MCJIT against this process's symbols
    (libgomp, libm, libc) in about 2 ms."""

    def __init__(self, data: bytes, target: Target):
        self._data = data
        tm = create_target_machine(target)  # also loads libgomp for the engine to link against
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        super().__init__(target, engine)

    def source(self, fmt: str) -> str:
        raise CodegenError(f"a module loaded from an object file has no {fmt!r} source")

    def object_code(self) -> bytes:
        return self._data
