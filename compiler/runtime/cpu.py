"""Whether this machine's CPU runs code compiled for another: the x86 vector extensions a
library's code may use, against those the CPU reports.

A library compiled on (or for) a CPU with AVX-512 runs into an illegal instruction on one
without it, which kills the process. :func:`compiler.runtime.load_module` checks first, from
the extensions the library's metadata names and the CPU's flags in ``/proc/cpuinfo``, and
raises a :class:`~compiler.errors.CompilerError` instead. No LLVM is needed for it.
"""

from __future__ import annotations

import functools
import platform

from ..errors import CompilerError

__all__ = ["ON_X86", "VECTOR_EXTENSIONS", "missing_extensions", "check_cpu"]

#: Whether this process runs on an x86 CPU.
ON_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

#: LLVM's names of the x86 vector extensions checked, with the flag ``/proc/cpuinfo`` gives each:
#: those whose flags Linux has named for years (a kernel that does not know a newer extension's
#: flag would hide it, and a library built here would then be refused here).
_CPUINFO_FLAG = {
    "sse4.1": "sse4_1", "sse4.2": "sse4_2", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq",
}
VECTOR_EXTENSIONS = frozenset(_CPUINFO_FLAG)


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str] | None:
    """The flags of this machine's CPU (None where they cannot be read: not Linux on x86)."""
    if not ON_X86:
        return None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def missing_extensions(required) -> list[str]:
    """Those of the vector extensions ``required`` (LLVM's names) that this machine's CPU lacks
    (none where its flags cannot be read)."""
    flags = _cpu_flags()
    if flags is None:
        return []
    return [name for name in required if _CPUINFO_FLAG.get(name, name) not in flags]


def check_cpu(path: str, required) -> None:
    """Raise :class:`CompilerError` where the library at ``path``, whose code may use the vector
    extensions ``required``, would stop this process with an illegal instruction."""
    missing = missing_extensions(required)
    if missing:
        raise CompilerError(f"{path} was compiled for a CPU with {', '.join(missing)}, which this machine's "
                            f"CPU lacks (its code would stop the process with an illegal instruction): "
                            f"build it again on this machine, or for a CPU it is (target llvm -mcpu=...)")
