"""A CPU kernel's scratch: the heap intermediates its caller may place in memory of its own.

A kernel's larger intermediates (over :data:`MAX_STACK_BYTES`: a padded input, packed panels,
a Winograd convolution's transformed tiles) are allocated when it is called. Those allocated
outside its parallel loops, at constant sizes, are its *scratch*: :func:`scratch_layout` gives
each a fixed offset in one block of ``nbytes``. The kernel takes them through
``__autotune_scratch_alloc``: from ``__autotune_scratch + offset`` where that module global
(:data:`SCRATCH_GLOBAL`, hidden from other libraries) points somewhere, else with
``aligned_alloc`` (and frees them after), so a kernel called alone behaves as before. The kernel
reads the global once per block and frees by what it read, so a block is never freed to the
heap that did not come from it. The module exports a setter of the global
(:data:`~compiler.runtime.module.SCRATCH_SETTER_SYMBOL`), through which the runtime's timer
gives a kernel timed alone a region it evicts from the caches before each call, as the kernel
finds its scratch inside a model (``cache_flush="model"``).

A model's executor sets the global before each kernel that has scratch to a region of its
workspace that the memory planner gave it (live during that call only), and clears it after:
the model then allocates nothing between kernels but what threads take each for themselves,
its planned workspace counts every intermediate, and its speed no longer depends on how the
host process's malloc treats large blocks (glibc's dynamic thresholds return them to the
system after some calls, and every call then faults their pages in again: ResNet-18 ran 1.5x
slower so in a process that had not fixed them).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .. import dtypes
from ..runtime.module import SCRATCH_SETTER_SYMBOL
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.functor import IRVisitor
from .llvm_types import I8PTR, I64, VOID

__all__ = ["MAX_STACK_BYTES", "HEAP_ALIGN", "SCRATCH_GLOBAL", "ScratchLayout", "scratch_layout",
           "declare_scratch_global", "scratch_functions"]

MAX_STACK_BYTES = 64 * 1024  # larger (or symbolic) allocations go to the heap
HEAP_ALIGN = 64
SCRATCH_GLOBAL = "__autotune_scratch"
_ALLOC, _FREE = "__autotune_scratch_alloc", "__autotune_scratch_free"


@dataclass(frozen=True)
class ScratchLayout:
    """Each scratch allocation's byte offset, by its buffer's data variable, and the block's size."""

    offsets: dict
    nbytes: int


def _fixed_bytes(buf) -> int | None:
    """A buffer's size in bytes where its shape is constant, else None."""
    count = 1
    for extent in buf.shape:
        value = getattr(extent, "value", extent)
        if not isinstance(value, int):
            return None
        count *= value
    return count * max(1, dtypes.bits(buf.dtype) // 8)


class _Scratch(IRVisitor):
    def __init__(self):
        self.offsets: dict = {}
        self.end = 0

    def visit_For(self, s: S.For) -> None:
        if s.kind is not S.ForKind.PARALLEL:  # each thread takes its own blocks inside one
            self.generic_visit(s)

    def visit_Allocate(self, s: S.Allocate) -> None:
        nbytes = _fixed_bytes(s.buffer)
        # a block aligned past a cache line keeps to the heap: the region is aligned to one
        if nbytes is not None and nbytes > MAX_STACK_BYTES and s.buffer.align <= HEAP_ALIGN:
            offset = -(-self.end // HEAP_ALIGN) * HEAP_ALIGN
            self.offsets[s.buffer.data] = offset
            self.end = offset + nbytes
        self.generic_visit(s)


def scratch_layout(func: PrimFunc) -> ScratchLayout:
    """The scratch of ``func`` (see the module's docstring): every heap allocation of constant
    size outside its parallel loops, each at its own offset (none shares bytes with another, so
    nested and successive ones alike may live at once)."""
    walk = _Scratch()
    walk.visit(func.body)
    return ScratchLayout(walk.offsets, -(-walk.end // HEAP_ALIGN) * HEAP_ALIGN)


def declare_scratch_global(module: ir.Module, define: bool) -> ir.GlobalVariable:
    """:data:`SCRATCH_GLOBAL` in ``module``: defined (null) or declared, hidden either way, so
    that each library has its own."""
    gv = ir.GlobalVariable(module, I8PTR, SCRATCH_GLOBAL)
    if define:
        gv.initializer = ir.Constant(I8PTR, None)
    else:
        gv.linkage = "external"
    gv.storage_class = "hidden"  # printed where LLVM's syntax puts the visibility
    gv.align = 8
    return gv


def scratch_functions(module: ir.Module, aligned_alloc: ir.Function, free: ir.Function
                      ) -> tuple[ir.GlobalVariable, ir.Function, ir.Function]:
    """The module's scratch pointer, and its ``alloc(align, size, offset, base)`` and
    ``free(block, base)`` of scratch blocks (made on first use, with the pointer's exported
    setter), ``base`` the pointer as the kernel read it: the region's bytes at ``offset`` where
    it is set, else ``aligned_alloc``'s and ``free``'s. The allocator returns ``noalias`` memory,
    as ``aligned_alloc`` does (the planner gives the region to this call alone), and neither is
    inlined, so that the kernels keep that knowledge."""
    if _ALLOC in module.globals:
        return module.get_global(SCRATCH_GLOBAL), module.get_global(_ALLOC), module.get_global(_FREE)
    gv = declare_scratch_global(module, define=True)
    setter = ir.Function(module, ir.FunctionType(VOID, [I8PTR]), SCRATCH_SETTER_SYMBOL)
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(setter.args[0], gv, align=8)
    b.ret_void()
    alloc = ir.Function(module, ir.FunctionType(I8PTR, [I64, I64, I64, I8PTR]), _ALLOC)
    alloc.linkage = "internal"
    alloc.attributes.add("noinline")
    alloc.return_value.add_attribute("noalias")
    b = ir.IRBuilder(alloc.append_basic_block("entry"))
    base = alloc.args[3]
    with b.if_else(b.icmp_unsigned("==", base, ir.Constant(I8PTR, None))) as (heap, scratch):
        with heap:
            b.ret(b.call(aligned_alloc, alloc.args[:2]))
        with scratch:
            b.ret(b.gep(base, [alloc.args[2]], inbounds=True))
    b.unreachable()
    release = ir.Function(module, ir.FunctionType(VOID, [I8PTR, I8PTR]), _FREE)
    release.linkage = "internal"
    release.attributes.add("noinline")
    b = ir.IRBuilder(release.append_basic_block("entry"))
    with b.if_then(b.icmp_unsigned("==", release.args[1], ir.Constant(I8PTR, None))):
        b.call(free, [release.args[0]])
    b.ret_void()
    return gv, alloc, release
