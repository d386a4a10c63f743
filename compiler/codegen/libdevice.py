"""CUDA device math by name: CUDA's fast-math intrinsics as PTX instructions, the rest from libdevice.

``call_extern``/``call_pure_extern`` in a CUDA kernel names a CUDA math function:

* the fast-math forms (``__expf``, ``__logf``, ``__sinf``, ``__powf``, ``__fdividef``...)
  become the special function unit's approximate instructions (``ex2.approx``,
  ``lg2.approx``, ``sin.approx``, ``div.approx``), which is what CUDA compiles them to;
* every other name is a function of libdevice, CUDA's math library in LLVM bitcode:
  ``expf`` and ``__nv_expf`` both call ``__nv_expf``, ``__fmaf_rn`` calls ``__nv_fmaf_rn``.
  The bitcode is linked into the kernels' module (only the functions they call stay).

libdevice is found through the environment variable ``COMPILER_LIBDEVICE`` (the
``libdevice.10.bc`` file, or the directory holding it), else under ``$CUDA_HOME``,
``$CUDA_PATH`` and ``/usr/local/cuda*`` (``nvvm/libdevice/``). A kernel that needs it
when none is found is a :class:`~compiler.errors.CodegenError` saying where it looked.
"""

from __future__ import annotations

import functools
import glob
import os
from pathlib import Path

import llvmlite.binding as llvm

from ..errors import CodegenError

__all__ = ["ENV_VAR", "FAST_MATH", "find_libdevice", "libdevice_name", "libdevice_functions",
           "link_libdevice"]

ENV_VAR = "COMPILER_LIBDEVICE"
_FILE = "libdevice.10.bc"
# CUDA's fast-math intrinsics: name -> number of float32 arguments.
FAST_MATH = {"__expf": 1, "__exp10f": 1, "__logf": 1, "__log2f": 1, "__log10f": 1, "__sinf": 1,
             "__cosf": 1, "__tanf": 1, "__powf": 2, "__fdividef": 2}


def _candidates() -> list[Path]:
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env)
        return [path / _FILE if path.is_dir() else path]
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    return [Path(r) / "nvvm" / "libdevice" / _FILE for r in roots if r]


def find_libdevice() -> Path:
    """The path of ``libdevice.10.bc``; CodegenError naming where it looked if there is none."""
    candidates = _candidates()
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates) or "nowhere"
    raise CodegenError(f"CUDA's libdevice ({_FILE}) was not found (looked at {looked}); set {ENV_VAR} "
                       "to the file or its directory, or call only the fast-math forms "
                       f"({', '.join(sorted(FAST_MATH))}), which need no library")


@functools.lru_cache(maxsize=4)
def _bitcode(path: Path) -> bytes:
    return path.read_bytes()


@functools.lru_cache(maxsize=4)
def _function_types(path: Path) -> dict[str, str]:
    return {f.name: str(f.global_value_type) for f in _parse(path).functions if f.name.startswith("__nv_")}


def _parse(path: Path):
    try:
        return llvm.parse_bitcode(_bitcode(path))
    except RuntimeError as err:
        raise CodegenError(f"{path} is not LLVM bitcode that this LLVM reads: {err}") from None


def libdevice_name(name: str) -> str:
    """The libdevice function a CUDA kernel's call of ``name`` resolves to (``expf`` ->
    ``__nv_expf``); fast-math forms are not looked up there (see :data:`FAST_MATH`)."""
    if name.startswith("__nv_"):
        return name
    return "__nv_" + (name[2:] if name.startswith("__") else name)


def libdevice_functions() -> dict[str, str]:
    """Every libdevice function and its LLVM type (``{"__nv_expf": "float (float)"}``)."""
    return dict(_function_types(find_libdevice()))


def link_libdevice(module, kernels: list[str]) -> None:
    """Link libdevice into ``module`` (an llvmlite ModuleRef) when it calls ``__nv_*`` functions.

    The declarations are checked against libdevice's definitions first (an unknown name or a
    wrong signature is a CodegenError naming the call); afterwards everything but the
    ``kernels`` is internal, so the optimiser keeps only what they call.
    """
    wanted = {f.name: str(f.global_value_type) for f in module.functions
              if f.is_declaration and f.name.startswith("__nv_")}
    if not wanted:
        return
    path = find_libdevice()
    known = _function_types(path)
    for name, ftype in sorted(wanted.items()):
        if name not in known:
            raise CodegenError(f"no CUDA device function {name!r}: libdevice ({path}) has no such function")
        if known[name] != ftype:
            raise CodegenError(f"CUDA device function {name!r} has type {known[name]}, but the kernel "
                               f"calls it as {ftype}; give call_extern the dtype and arguments it takes")
    lib = _parse(path)
    lib.triple, lib.data_layout = module.triple, module.data_layout
    module.link_in(lib)
    keep = set(kernels)
    for f in module.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = llvm.Linkage.internal
    for g in module.global_variables:
        if not g.is_declaration:
            g.linkage = llvm.Linkage.internal
