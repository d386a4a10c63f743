"""Linking object files into shared libraries (TVM's ``tvm.contrib.cc``).

It uses the C compiler that :meth:`compiler.runtime.Module.export_library` links with
(``$CC``, else ``cc``, ``gcc`` or ``clang``).
"""

from __future__ import annotations

import os

from ..runtime.library import c_compiler, run_linker

__all__ = ["create_shared"]


def create_shared(output, objects, options=None, cc: str | None = None) -> None:
    """Link ``objects`` (paths of object files, or one path) into the shared library ``output``.

    Objects written by :meth:`Module.save` give a library that
    :func:`compiler.runtime.load_module` reads back. ``options`` are extra command-line
    arguments for the compiler; ``cc`` names another compiler. A failed link raises
    :class:`~compiler.errors.CompilerError` with the compiler's messages.
    """
    if isinstance(objects, (str, os.PathLike)):
        objects = [objects]
    objects = [os.fspath(o) for o in objects]
    if not objects:
        raise ValueError("create_shared needs at least one object file")
    missing = [o for o in objects if not os.path.isfile(o)]
    if missing:
        raise FileNotFoundError(f"create_shared: no such object file: {', '.join(missing)}")
    output = os.fspath(output)
    cmd = [cc or c_compiler(), "-shared", "-fPIC", "-o", output, *objects, *(options or []), "-lgomp", "-lm"]
    run_linker(cmd, output)
