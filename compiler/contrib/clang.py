"""C and C++ source compiled to LLVM IR text with clang (TVM's ``tvm.contrib.clang``).

The IR that :func:`create_llvm` returns is what the ``import_llvm`` pragma links into a
built module, as in TVM's tensorize tutorial::

    ll_code = compiler.contrib.clang.create_llvm(cc_code, options=["-O3"])
    s[C].pragma(x, "import_llvm", ll_code)

clang comes from Debian's ``clang`` package (``apt-get install clang``). A clang older than
the LLVM that llvmlite carries is fine: LLVM reads the IR of older versions.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import llvmlite.binding as llvm

from ..errors import CompilerError
from .utils import tempdir

__all__ = ["find_clang", "create_llvm"]

_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".C")


def find_clang(required: bool = True) -> list[str]:
    """The paths of the clang compilers on ``PATH``, the one matching llvmlite's LLVM major
    version first (``clang-<major>``), then plain ``clang``.

    With ``required`` and none found, raises :class:`~compiler.errors.CompilerError` naming
    the package to install.
    """
    major = llvm.llvm_version_info[0]
    names = [f"clang-{major}.0", f"clang-{major}", "clang"]
    found = []
    for name in names:
        path = shutil.which(name)
        if path and path not in found:
            found.append(path)
    if not found and required:
        raise CompilerError(
            f"clang is not installed (looked for {', '.join(names)} on PATH); install Debian's "
            "'clang' package (apt-get install clang) to compile C to LLVM IR")
    return found


def create_llvm(inputs, output: str | os.PathLike | None = None, options=None, cc: str | None = None) -> str:
    """Compile C/C++ ``inputs`` to LLVM IR text with clang and return that text.

    ``inputs`` is one or a list of source paths or source texts (a text is compiled as C++,
    so C functions meant for ``import_llvm`` are declared ``extern "C"``, as in TVM's
    tutorial). ``output`` keeps the ``.ll`` file there (a temporary file otherwise);
    ``options`` are extra clang arguments (``["-O3"]``); ``cc`` names the compiler
    (default: :func:`find_clang`'s first). A compile error raises
    :class:`~compiler.errors.CompilerError` with clang's messages.
    """
    cc = cc or find_clang()[0]
    inputs = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    if not inputs:
        raise ValueError("create_llvm needs at least one source file or source text")
    with tempdir() as temp:
        out = os.fspath(output) if output is not None else temp.relpath("output.ll")
        files = []
        for i, code in enumerate(inputs):
            if _is_source_path(code):
                files.append(os.fspath(code))
            else:
                path = temp.relpath(f"input{i}.cc")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(code)
                files.append(path)
        cmd = [cc, "-S", "-emit-llvm", *(options or []), "-o", out, *files]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as e:
            raise CompilerError(f"create_llvm: cannot run {cc!r}: {e}") from None
        if proc.returncode != 0:
            raise CompilerError(f"create_llvm: clang failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
        with open(out, encoding="utf-8") as f:
            return f.read()


def _is_source_path(code) -> bool:
    """Whether ``code`` names a source file rather than holding source text."""
    if isinstance(code, os.PathLike):
        return True
    return "\n" not in code and code.endswith(_SOURCE_SUFFIXES) and os.path.isfile(code)
