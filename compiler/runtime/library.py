"""Shared libraries: linking compiled objects into one, and loading one back as a Module.

An exported library holds the kernels (``void name(void **buffers, int64_t *scalars)``),
the thread-count setter, and ``const char *__autotune_metadata(void)`` returning
the JSON that :meth:`Module.metadata_json` produced. Loading uses ctypes only, so a
process that runs exported modules needs neither llvmlite nor a compiler.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile

from ..errors import CompilerError
from .arguments import FunctionInfo
from .module import METADATA_VERSION, Module
from .threads import load_libgomp

__all__ = ["link_shared", "load_module", "SharedLibrary", "METADATA_SYMBOL"]

METADATA_SYMBOL = "__autotune_metadata"


def _c_compiler() -> str:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise CompilerError("export_library needs a C compiler to link (cc, gcc or clang); none was found")


def _metadata_source(metadata_json: str) -> str:
    # Bytes as integers: no escaping rules to get wrong, whatever the JSON holds.
    data = metadata_json.encode("utf-8") + b"\0"
    body = ",".join(str(b) for b in data)
    return (f"static const char metadata[{len(data)}] = {{{body}}};\n"
            f"const char *{METADATA_SYMBOL}(void) {{ return metadata; }}\n")


def link_shared(path: str, objects: list[bytes], metadata_json: str) -> None:
    """Link object files (position independent) and the metadata into the shared library ``path``."""
    cc = _c_compiler()
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
        out = os.path.join(tmp, "lib.so")
        cmd = [cc, "-shared", "-fPIC", "-O1", "-o", out, *inputs, meta, "-lgomp", "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompilerError(f"linking {path} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
        # Copy then rename, so readers never see a half-written library.
        staged = f"{path}.tmp{os.getpid()}"
        shutil.copyfile(out, staged)
        os.replace(staged, path)


class SharedLibrary:
    """The backend of a Module loaded from a shared library (see :mod:`runtime.module`)."""

    def __init__(self, path: str, lib: ctypes.CDLL, type_key: str):
        self.path = path
        self.type_key = type_key
        self._lib = lib

    def address(self, name: str) -> int:
        try:
            return ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0

    def source(self, fmt: str) -> str:
        raise CompilerError(f"a module loaded from {self.path} has no {fmt!r} source; "
                            "call get_source on the module returned by build()")

    def export(self, path: str, metadata_json: str) -> None:
        if os.path.abspath(path) != os.path.abspath(self.path):
            shutil.copyfile(self.path, path)


def load_module(path) -> Module:
    """Load a library written by :meth:`Module.export_library` as a callable Module."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such library: {path}")
    load_libgomp()  # before the library pulls it in, so that it starts with the runtime's wait policy
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise CompilerError(f"cannot load {path}: {e}") from None
    try:
        get_meta = getattr(lib, METADATA_SYMBOL)
    except AttributeError:
        raise CompilerError(f"{path} was not written by export_library "
                            f"(it has no {METADATA_SYMBOL})") from None
    get_meta.restype = ctypes.c_char_p
    get_meta.argtypes = []
    meta = json.loads(get_meta().decode("utf-8"))
    if meta.get("version") != METADATA_VERSION:
        raise CompilerError(f"{path} has metadata version {meta.get('version')}, expected {METADATA_VERSION}")
    infos = [FunctionInfo.from_json(f) for f in meta["functions"]]
    backend = SharedLibrary(path, lib, meta.get("type_key", "llvm"))
    return Module(backend, {info.name: info for info in infos}, meta["entry"])
