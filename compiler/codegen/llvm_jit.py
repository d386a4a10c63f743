"""Running machine code: an object file loaded by MCJIT into this process.

:class:`ObjectCode` is the code object of a :class:`compiler.runtime.Module` of CPU code (see
:mod:`compiler.runtime.module`); :mod:`.llvm_build` compiles the objects.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.binding as llvm

from ..errors import CodegenError
from ..runtime.library import link_object, link_shared
from ..runtime.timer import TIMER_SYMBOL
from ..target import Target
from . import llvm_timer
from .llvm_machine import create_target_machine, object_machine, parse, vector_features

__all__ = ["ObjectCode"]


class ObjectCode:
    """Machine code of a relocatable object file, loaded by MCJIT against this process's symbols
    (libgomp, libm, libc) in about 2 ms, together with the object files of data it refers to.

    Every CPU build makes such an object (:mod:`.llvm_build`), whether it runs in the process
    that compiled it, in one that loaded it from the compile cache, or in a measure worker's
    parent: the code that runs is the code a tuning run timed and the code a library exports.
    ``optimized_ir`` gives the optimised LLVM IR it was compiled from, for :meth:`source`
    (compiled again when asked: none where the object came from another process)."""

    type_key = "llvm"

    def __init__(self, data: bytes, target: Target, objects: tuple[bytes, ...] = (),
                 optimized_ir: Callable[[], str] | None = None):
        self.target = target
        self._data = data
        self._objects = tuple(objects)  # other object files the code links against (data blocks)
        self._optimized_ir = optimized_ir
        tm = create_target_machine(target)  # also loads libgomp for the engine to link against
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        for obj in (data, *self._objects):
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        self._engine = engine  # owns the machine code; kept alive with this object

    @property
    def vector_features(self) -> list[str]:
        """The x86 vector extensions the code may use (see :func:`llvm_machine.vector_features`)."""
        return vector_features(self.target)

    def address(self, name: str) -> int:
        if name == TIMER_SYMBOL:
            return llvm_timer.address()
        return self._engine.get_function_address(name) or 0

    def source(self, fmt: str) -> str:
        if self._optimized_ir is None:
            raise CodegenError(f"a module loaded from an object file has no {fmt!r} source")
        if fmt in ("ll", "llvm"):
            return self._optimized_ir()
        if fmt in ("asm", "s"):
            return object_machine(self.target).emit_assembly(parse(self._optimized_ir()))
        raise ValueError(f"unknown source format {fmt!r}; use 'll' or 'asm'")

    def object_code(self) -> bytes:
        """The position-independent object code, as linked into a shared library."""
        return self._data

    def export(self, path: str, metadata_json: str) -> None:
        """Write a shared library (:func:`compiler.runtime.load_module` reads it)."""
        link_shared(path, self._linked_objects(), metadata_json)

    def save_object(self, path: str, metadata_json: str) -> None:
        """Write an object file (``Module.save``) that ``contrib.cc.create_shared`` links."""
        link_object(path, self._linked_objects(), metadata_json)

    def _linked_objects(self) -> list[bytes]:
        return [self._data, llvm_timer.object_code(self.target), *self._objects]
