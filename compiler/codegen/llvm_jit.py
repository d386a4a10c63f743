"""Running machine code: an object file linked into this process by LLVM's JIT linker.

The code of an object file (position-independent, small code model) reaches its constants and
globals by 32-bit offsets from itself. ORC's JITLink maps all of an object's sections in one
block and gives it GOT entries and stubs for what lies outside (libgomp, libm, the other objects
of the module). MCJIT's default memory manager mapped code and data apart, wherever free pages
lay: in a process holding gigabytes of other mappings (a Ray driver maps its object store) they
could land more than 2 GB apart, which aborted the process in LLVM's linker.

:class:`ObjectCode` is the code object of a :class:`compiler.runtime.Module` of CPU code (see
:mod:`compiler.runtime.module`); :mod:`.llvm_build` compiles the objects.
"""

from __future__ import annotations

import itertools
import struct
import threading
from collections.abc import Callable

import llvmlite.binding as llvm

from ..errors import CodegenError
from ..runtime.library import link_object, link_shared
from ..runtime.timer import TIMER_SYMBOL
from ..target import Target
from . import llvm_timer
from .llvm_machine import (
    HALF_BUILTIN_ADDRESSES,
    create_target_machine,
    object_machine,
    parse,
    process_has_symbol,
    vector_features,
)

__all__ = ["ObjectCode"]


class ObjectCode:
    """Machine code of a relocatable object file, linked against this process's symbols
    (libgomp, libm, libc) in about a millisecond, together with the object files of data it
    refers to.

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
        jit = _jit()  # first: sets LLVM up (libgomp loaded, float16 helpers compiled)
        builder = llvm.JITLibraryBuilder()
        for obj in (data, *self._objects):
            builder.add_object_img(obj)
        builder.add_current_process()
        for name, address in HALF_BUILTIN_ADDRESSES.items():
            builder.import_symbol(name, address)
        for name in global_symbols(data)[0]:
            builder.export_symbol(name)
        try:
            # owns the machine code; kept alive with this object, the code unloaded with it
            self._library = builder.link(jit, f"autotune_code_{next(_names)}")
        except RuntimeError as e:
            missing = _missing_symbols((data, *self._objects))
            if missing:
                raise CodegenError(f"the compiled code calls what this process does not have: "
                                   f"{', '.join(missing)}; load the library defining it first "
                                   "(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))") from None
            raise CodegenError(f"cannot link the compiled code into this process: {e}") from None

    @property
    def vector_features(self) -> list[str]:
        """The x86 vector extensions the code may use (see :func:`llvm_machine.vector_features`)."""
        return vector_features(self.target)

    def address(self, name: str) -> int:
        if name == TIMER_SYMBOL:
            return llvm_timer.address()
        try:
            return self._library[name]
        except KeyError:
            return 0

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


_names = itertools.count()  # a JIT library's name may not be used twice in a JIT
# A JIT keeps a little of each library it linked after the library is gone (its JITDylib, about
# 9 KB), until the JIT itself goes, which is when no library of it is left: a measure worker
# linking a candidate after another would grow by that much each time. So each JIT links so
# many libraries, then the next library starts a fresh one.
_LINKS_PER_JIT = 256
_jit_state = {"jit": None, "links": 0}
_jit_lock = threading.Lock()


def _jit():
    """The JIT that links the next library."""
    with _jit_lock:  # however many threads build at once
        if _jit_state["jit"] is None or _jit_state["links"] >= _LINKS_PER_JIT:
            _jit_state["jit"] = llvm.create_lljit_compiler(create_target_machine(None), use_jit_link=True)
            _jit_state["links"] = 0
        _jit_state["links"] += 1
        return _jit_state["jit"]


_SHT_SYMTAB = 2
_STB_LOCAL = 0
_SHN_UNDEF = 0


def global_symbols(data: bytes) -> tuple[list[str], list[str]]:
    """The global symbols an ELF64 (little-endian) object file defines, and those it refers to
    but leaves to others."""
    if data[:6] != b"\x7fELF\x02\x01":  # the magic number, 64-bit, little-endian
        raise CodegenError(f"not a 64-bit little-endian ELF object file (it starts {bytes(data[:6])!r})")
    section_table, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    # (name, type, flags, address, offset, size, link, info, alignment, entry size)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_table + i * entry_size)
                for i in range(count)]
    defined, undefined = [], []
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != _SHT_SYMTAB:
            continue
        strings = sections[link][4]
        for at in range(offset + symbol_size, offset + size, symbol_size):  # entry 0 is null
            name, info, _, section, _, _ = struct.unpack_from("<IBBHQQ", data, at)
            if info >> 4 != _STB_LOCAL:
                start = strings + name
                text = data[start:data.index(b"\0", start)].decode()
                (undefined if section == _SHN_UNDEF else defined).append(text)
    return defined, undefined


def _missing_symbols(objects) -> list[str]:
    """The symbols ``objects`` refer to that neither they nor this process define."""
    tables = [global_symbols(obj) for obj in objects]
    defined = {name for names, _ in tables for name in names} | set(HALF_BUILTIN_ADDRESSES)
    wanted = {name for _, names in tables for name in names if name not in defined}
    return sorted(name for name in wanted if not process_has_symbol(name))
