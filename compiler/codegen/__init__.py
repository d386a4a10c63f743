"""Code generators: from an IRModule that a backend's pipeline prepared to machine code.

CPUs: :mod:`.llvm` builds the LLVM IR, :mod:`.llvm_machine` optimises it, :mod:`.llvm_jit`
runs it. NVIDIA GPUs: :mod:`.cuda` builds the host module, :mod:`.nvptx` emits PTX. The
backends of :mod:`compiler.backends` call them; they call no pass pipeline themselves.
"""

from __future__ import annotations

from ..runtime.arguments import FunctionInfo
from ..tir.analysis import stored_buffers
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc

__all__ = ["function_info"]


def function_info(func: PrimFunc, align_of=None, stored=None) -> FunctionInfo:
    """How to call ``func`` and which of its buffer arguments it writes; ``align_of(buffer)``
    is the alignment its code assumes of a buffer argument (default: the runtime's);
    ``stored`` is what :func:`~compiler.tir.analysis.stored_buffers` finds stored where the
    function's writes happen (default: in its own body)."""
    stored = stored_buffers(func.body) if stored is None else stored
    written = [i for i, p in enumerate(func.params) if isinstance(p, Buffer) and p.data in stored]
    return FunctionInfo(func.signature(align_of), written)
