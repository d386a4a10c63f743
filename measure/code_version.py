"""The version of the code that builds and times kernels, as tuning records name it."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import llvmlite

import compiler
import search_spaces

__all__ = ["code_version"]

# The packages whose code decides what a config's kernel is and how it is timed (this one too).
_PACKAGES = {"compiler": Path(compiler.__file__).parent, "search_spaces": Path(search_spaces.__file__).parent,
             "measure": Path(__file__).parent}


@functools.cache
def code_version() -> str:
    """``"0.1.0+1a2b3c4d5e6f"``: the release, then a digest of the Python sources of the code that
    generates and times kernels (the packages ``compiler``, ``search_spaces`` and ``measure``)
    and of llvmlite's version.

    Two processes share it exactly when their kernels come from the same code, so a tuning log
    tells a figure measured with today's code from one measured before a change of the
    compiler or of a template (:mod:`db.stats` ranks a config by its latest version's costs).
    Computed once per process (reading the sources takes milliseconds).
    """
    digest = hashlib.sha256(f"llvmlite {llvmlite.__version__}\n".encode())
    for name, root in _PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return f"{compiler.__version__}+{digest.hexdigest()[:12]}"
