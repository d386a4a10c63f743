"""Code generators: from an IRModule of lowered PrimFuncs to a runtime Module.

CPUs: :mod:`.llvm` builds the IR, :mod:`.llvm_jit` optimises and JIT-compiles it.
NVIDIA GPUs: :mod:`.cuda` lowers for the GPU, :mod:`.nvptx` emits PTX. Which one builds a
module is chosen in :func:`compiler.passes.build_module`.
"""

from __future__ import annotations

from ..runtime.arguments import FunctionInfo
from ..tir.analysis import stored_buffers
from ..tir.function import PrimFunc

__all__ = ["function_info"]


def function_info(func: PrimFunc, align_of=None) -> FunctionInfo:
    """How to call ``func`` and which of its buffer arguments it writes; ``align_of(buffer)``
    is the alignment its code assumes of a buffer argument (default: the runtime's)."""
    stored = stored_buffers(func.body)
    written = [i for i, p in enumerate(func.params) if not _is_var(p) and id(p.data) in stored]
    return FunctionInfo(func.signature(align_of), written)


def _is_var(p) -> bool:
    return not hasattr(p, "data")
