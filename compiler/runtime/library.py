"""Shared libraries: linking compiled objects into one, and loading one back as a Module.

An exported library holds the kernels (``void name(void **buffers, int64_t *scalars)``),
the thread-count setter, ``const char *__autotune_metadata(void)`` returning
the JSON that :meth:`Module.metadata_json` produced, and
``const char *__autotune_metadata_sha256(void)`` returning that JSON's checksum.
Loading uses ctypes only, so a process that runs exported modules needs neither
llvmlite nor a compiler.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import itertools
import json
import mmap
import os
import platform
import shutil
import struct
import subprocess
import tempfile

from ..errors import CompilerError
from .arguments import FunctionInfo
from .cpu import check_cpu
from .module import METADATA_VERSION, Module
from .threads import load_libgomp

__all__ = ["link_shared", "link_object", "data_object", "run_linker", "c_compiler", "load_module",
           "check_elf", "SharedLibrary", "METADATA_SYMBOL", "CHECKSUM_SYMBOL"]

METADATA_SYMBOL = "__autotune_metadata"
CHECKSUM_SYMBOL = "__autotune_metadata_sha256"  # hex SHA-256 of the metadata's bytes


def c_compiler() -> str:
    """The C compiler that links libraries: $CC, else cc, gcc or clang (the first found)."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise CompilerError("linking a library needs a C compiler (cc, gcc or clang); none was found")


def _metadata_source(metadata_json: str) -> str:
    # Bytes as integers: no escaping rules to get wrong, whatever the JSON holds.
    text = metadata_json.encode("utf-8")
    data = text + b"\0"
    body = ",".join(str(b) for b in data)
    return (f"static const char metadata[{len(data)}] = {{{body}}};\n"
            f"const char *{METADATA_SYMBOL}(void) {{ return metadata; }}\n"
            f"const char *{CHECKSUM_SYMBOL}(void) {{ return \"{hashlib.sha256(text).hexdigest()}\"; }}\n")


def link_shared(path: str, objects: list[bytes], metadata_json: str) -> None:
    """Link object files (position independent) and the metadata into the shared library ``path``."""
    _link(path, objects, metadata_json, ["-shared", "-O1"], ["-lgomp", "-lm"])


def link_object(path: str, objects: list[bytes], metadata_json: str) -> None:
    """Combine object files and the metadata into one relocatable object file ``path``.

    Linking it into a shared library (:func:`compiler.contrib.cc.create_shared`) gives a
    library that :func:`load_module` reads, as one written by :func:`link_shared` is.
    """
    _link(path, objects, metadata_json, ["-r", "-nostdlib"], [])


def _link(path: str, objects: list[bytes], metadata_json: str, mode: list[str], libs: list[str]) -> None:
    """Run the C compiler over ``objects`` and the metadata source, writing ``path`` atomically."""
    cc = c_compiler()
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="autotune_link_") as tmp:
        inputs = []
        for k, obj in enumerate(objects):
            name = os.path.join(tmp, f"part{k}.o")
            with open(name, "wb") as f:
                f.write(obj)
            inputs.append(name)
        meta = os.path.join(tmp, "metadata.c")
        with open(meta, "w") as f:
            f.write(_metadata_source(metadata_json))
        out = os.path.join(tmp, "out")
        cmd = [cc, *mode, "-fPIC", "-o", out, *inputs, meta, *libs]
        run_linker(cmd, path)
        # Copy then rename, so readers never see a half-written file.
        staged = f"{path}.tmp{os.getpid()}"
        shutil.copyfile(out, staged)
        os.replace(staged, path)


def data_object(symbol: str, data: bytes, align: int = 64) -> bytes:
    """A relocatable object file defining the read-only global ``symbol``: ``data``, aligned to
    ``align`` bytes. The assembler includes the bytes as they are (``.incbin``), so a block of
    weights of any size costs one file copy, not a compilation."""
    if not symbol.isidentifier():
        raise CompilerError(f"data_object: {symbol!r} is not a symbol name")
    cc = c_compiler()
    with tempfile.TemporaryDirectory(prefix="autotune_data_") as tmp:
        blob, source, obj = (os.path.join(tmp, name) for name in ("data.bin", "data.s", "data.o"))
        with open(blob, "wb") as f:
            f.write(data)
        with open(source, "w") as f:
            f.write(f'\t.section .rodata.{symbol},"a"\n\t.balign {align}\n\t.globl {symbol}\n'
                    f"\t.type {symbol}, @object\n\t.size {symbol}, {max(len(data), 1)}\n{symbol}:\n"
                    f'\t.incbin "{blob}"\n' + ("\t.byte 0\n" if not data else "")
                    + '\t.section .note.GNU-stack,"",@progbits\n')
        run_linker([cc, "-c", "-o", obj, source], obj)
        with open(obj, "rb") as f:
            return f.read()


def run_linker(cmd: list[str], path: str) -> None:
    """Run a C compiler command line; CompilerError with its messages if it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompilerError(f"linking {path} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")


class SharedLibrary:
    """The backend of a Module loaded from a shared library (see :mod:`runtime.module`).

    ``source`` is the file as it was loaded (an open copy, removed from the file system): exporting
    the module writes it again, whatever has happened to ``path`` since, and the library's bytes
    are not held in memory twice (a model's weights are most of them).
    """

    def __init__(self, path: str, lib: ctypes.CDLL, type_key: str, source: io.BufferedReader,
                 vector_features: list[str] = ()):
        self.path = path
        self.type_key = type_key
        self.vector_features = list(vector_features)  # kept for an export of the loaded module
        self._lib = lib
        self._source = source

    def address(self, name: str) -> int:
        try:
            return ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0

    def source(self, fmt: str) -> str:
        raise CompilerError(f"a module loaded from {self.path} has no {fmt!r} source; "
                            "call get_source on the module returned by build()")

    def export(self, path: str, metadata_json: str) -> None:
        path = os.path.abspath(path)
        staged = f"{path}.tmp{os.getpid()}"
        with open(staged, "wb") as f:
            self._source.seek(0)
            shutil.copyfileobj(self._source, f)
        os.replace(staged, path)


def load_module(path) -> Module:
    """Load a library written by :meth:`Module.export_library` as a callable Module.

    Every call loads what the file holds now, even if a library of the same path
    was loaded before (the dynamic loader would hand back the old one). A file that
    is not a complete shared library of this machine, or whose metadata is damaged, or
    whose code uses vector extensions this machine's CPU lacks (AVX-512 compiled elsewhere),
    raises :class:`CompilerError` before any of its code is run.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such library: {path}")
    load_libgomp()  # before the library pulls it in, so that it starts with the runtime's wait policy
    lib, source = _load_private_copy(path)
    meta = _metadata(path, lib)
    try:
        infos = [FunctionInfo.from_json(f) for f in meta["functions"]]
    except CompilerError as e:
        raise CompilerError(f"{path} has corrupt metadata: {e}") from None
    functions = {info.name: info for info in infos}
    if len(functions) != len(infos) or meta["entry"] not in functions:
        raise CompilerError(f"{path} has corrupt metadata: entry {meta['entry']!r} among "
                            f"functions {[i.name for i in infos]}")
    features = meta.get("vector_features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise CompilerError(f"{path} has corrupt metadata: 'vector_features' must be a list of names")
    check_cpu(path, features)
    backend = SharedLibrary(path, lib, meta["type_key"], source, features)
    missing = [name for name in functions if not backend.address(name)]
    if missing:
        raise CompilerError(f"{path} has corrupt metadata: it names functions the library does not "
                            f"define: {missing}")
    attrs = meta.get("attrs", {})
    if not isinstance(attrs, dict):
        raise CompilerError(f"{path} has corrupt metadata: 'attrs' must be a JSON object")
    return Module(backend, functions, meta["entry"], attrs)


# ---------------------------------------------------------------------- loading safely

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
_DYNAMIC_ENTRY = struct.Struct("<qQ")  # d_tag, d_val
_PT_LOAD, _PT_DYNAMIC, _ET_DYN = 1, 2, 3
_MACHINES = {"x86_64": 62, "aarch64": 183, "ppc64le": 21, "riscv64": 243}


def check_elf(path: str, data: bytes) -> None:
    """Raise CompilerError unless ``data`` is a whole 64-bit little-endian shared library
    for this machine: every part its headers point to lies inside the file, and the section
    table and the dynamic section are where they say.

    The dynamic loader maps a library by its headers; mapping a truncated file and
    touching a page past its end kills the process with SIGBUS, and reading a dynamic
    section that bytes added before it have moved, with SIGSEGV.
    """
    def bad(why: str) -> CompilerError:
        return CompilerError(f"{path} is not a usable shared library: {why} ({len(data)} bytes)")

    if len(data) < _ELF_HEADER.size or data[:4] != b"\x7fELF":
        raise bad("it does not start with an ELF header")
    (ident, e_type, machine, _version, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
     shentsize, shnum, _shstrndx) = _ELF_HEADER.unpack_from(data)
    if ident[4] != 2 or ident[5] != 1:
        raise bad("it is not a 64-bit little-endian ELF file")
    if e_type != _ET_DYN:
        raise bad(f"its ELF type is {e_type}, not a shared object (3)")
    want = _MACHINES.get(platform.machine())
    if want is not None and machine != want:
        raise bad(f"it is built for ELF machine {machine}, this machine ({platform.machine()}) is {want}")
    if phentsize != _PROGRAM_HEADER.size or phnum == 0 or phoff + phnum * phentsize > len(data):
        raise bad("its program headers are missing or lie past the end of the file (truncated?)")
    if shoff + shnum * shentsize > len(data):
        raise bad("its section headers lie past the end of the file (truncated?)")
    # The first section header is all zeros in every ELF file: elsewhere, the bytes before the
    # table were cut or added to (what the headers point to has moved).
    if shnum and bytes(data[shoff:shoff + shentsize]) != bytes(shentsize):
        raise bad("its section headers are not where its ELF header says (bytes cut or added?)")
    for k in range(phnum):
        p_type, _, offset, _, _, filesz, _, _ = _PROGRAM_HEADER.unpack_from(data, phoff + k * phentsize)
        if p_type in (_PT_LOAD, _PT_DYNAMIC) and offset + filesz > len(data):
            raise bad(f"segment {k} ends at byte {offset + filesz}, past the end of the file (truncated?)")
        if p_type == _PT_DYNAMIC and not _dynamic_table(data, offset, filesz):
            raise bad(f"its dynamic section (segment {k}) is not a table of entries (bytes cut or added?)")


def _dynamic_table(data, offset: int, size: int) -> bool:
    """Whether ``size`` bytes at ``offset`` read as a dynamic section: entries whose tags are
    those ELF defines (0 to 0x7fffffff), up to a terminating DT_NULL; what the dynamic loader
    reads first, and where it crashes on anything else."""
    for at in range(offset, offset + size - _DYNAMIC_ENTRY.size + 1, _DYNAMIC_ENTRY.size):
        tag, _ = _DYNAMIC_ENTRY.unpack_from(data, at)
        if tag == 0:
            return True
        if not 0 < tag <= 0x7FFFFFFF:
            return False
    return False


_staging: tempfile.TemporaryDirectory | None = None
_loads = itertools.count()


def _load_private_copy(path: str) -> tuple[ctypes.CDLL, io.BufferedReader]:
    """dlopen a copy of ``path`` under a name never used before in this process, after checking
    the copy (:func:`check_elf`); the library and the copy, open for reading.

    The dynamic loader hands back an already loaded library for a known path (or file),
    so loading ``path`` itself would run the code of its first load forever. The copy is
    made by the kernel, not through this process's memory (a model's weights are most of a
    library), and removed once loaded (its mapping stays); it goes beside ``path`` if the
    temporary directory does not allow running code.
    """
    global _staging
    if _staging is None:
        _staging = tempfile.TemporaryDirectory(prefix="autotune_load_")
    name = f"{os.getpid()}-{next(_loads)}-{os.path.basename(path)}"
    errors = []
    for folder, prefix in ((_staging.name, ""), (os.path.dirname(path), ".")):
        copy = os.path.join(folder, prefix + name)
        try:
            shutil.copyfile(path, copy)
            try:
                source = open(copy, "rb")  # the copy stays readable while open
                try:
                    _check_copy(path, source)
                    return ctypes.CDLL(copy), source
                except BaseException:
                    source.close()
                    raise
            finally:
                os.unlink(copy)
        except OSError as e:
            errors.append(str(e))
    raise CompilerError(f"cannot load {path}: {'; '.join(errors)}")


def _check_copy(path: str, f: io.BufferedReader) -> None:
    """:func:`check_elf` on the open file ``f`` (a copy of ``path``), through a read-only mapping:
    only the pages of its headers are read."""
    if os.fstat(f.fileno()).st_size == 0:
        check_elf(path, b"")
        return
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        check_elf(path, data)


def _metadata(path: str, lib: ctypes.CDLL) -> dict:
    """The library's metadata, checked against its checksum and for the fields load_module reads."""
    try:
        get_meta = getattr(lib, METADATA_SYMBOL)
    except AttributeError:
        raise CompilerError(f"{path} was not written by export_library "
                            f"(it has no {METADATA_SYMBOL})") from None
    get_meta.restype = ctypes.c_char_p
    get_meta.argtypes = []
    raw = get_meta() or b""
    digest = _symbol_text(lib, CHECKSUM_SYMBOL)
    if digest is not None and digest != hashlib.sha256(raw).hexdigest():
        raise CompilerError(f"{path} has corrupt metadata: it does not match its checksum")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompilerError(f"{path} has corrupt metadata: not JSON text ({e})") from None
    if not isinstance(meta, dict):
        raise CompilerError(f"{path} has corrupt metadata: expected a JSON object, got {type(meta).__name__}")
    if meta.get("version") != METADATA_VERSION:
        raise CompilerError(f"{path} has metadata version {meta.get('version')!r}, "
                            f"expected {METADATA_VERSION}")
    meta.setdefault("type_key", "llvm")
    if meta["type_key"] != "llvm":
        raise CompilerError(f"{path} has corrupt metadata: type_key {meta['type_key']!r}, expected 'llvm'")
    if not isinstance(meta.get("entry"), str) or not isinstance(meta.get("functions"), list) \
            or not meta["functions"]:
        raise CompilerError(f"{path} has corrupt metadata: it needs an 'entry' name and a non-empty "
                            "'functions' list")
    return meta


def _symbol_text(lib: ctypes.CDLL, name: str) -> str | None:
    try:
        func = getattr(lib, name)
    except AttributeError:
        return None  # libraries exported before the checksum existed
    func.restype = ctypes.c_char_p
    func.argtypes = []
    return (func() or b"").decode("ascii", "replace")
