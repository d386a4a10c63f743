"""Vector memory accesses for the LLVM backend: contiguous, masked, gathered and scattered.

A vector ``BufferLoad``/``BufferStore`` (see :mod:`compiler.transform.vectorize`)
becomes, by the shape of its index and whether it has a predicate:

=====================  ================================  ==============================
index                  no predicate                      predicate
=====================  ================================  ==============================
``Ramp(b, 1, n)``      ``load/store <n x T>``            ``llvm.masked.load/store``
anything else          ``llvm.masked.gather/scatter``    the same, with the predicate
=====================  ================================  ==============================

Alignment: a buffer pointer that an allocation of the function aligns to 64 bytes
(:data:`ALIGNED_BYTES`) is registered with :meth:`VectorMemory._note_aligned`; a
contiguous access at element offset ``b`` then carries the largest power of two
that provably divides ``b * sizeof(T)``, capped at 64 -- ``align 64`` for a
16-lane float32 access at a multiple of 16. Where such a pointer is loaded from a
parallel loop's closure the load gets ``!align`` metadata
(:meth:`VectorMemory._mark_aligned_load`), which unlike a parameter's ``align``
attribute survives inlining. Arguments are aligned to their element only (see
:func:`compiler.codegen.llvm.argument_align`).

Masked intrinsics are emitted in their classic form, with an ``i32`` alignment
operand; LLVM 22 and later upgrade that to an ``align`` attribute on reading.
"""

from __future__ import annotations

from llvmlite import ir

from .. import dtypes
from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.functor import Functor
from .llvm_types import I1, I32, I64, memory_type, shuffle_mask, type_suffix

__all__ = ["VectorMemory", "ALIGNED_BYTES", "pow2_factor"]

ALIGNED_BYTES = 64
# Masked loads are emitted in pieces of at most this many bits. LLVM 22's X86 backend, splitting a
# wider one for AVX2, read a half whose mask was constant-false without the mask (a 16 x f32 load
# of a padded row returned the row's neighbours where the zeros belonged); 256-bit pieces are loads
# every x86 vector unit takes whole.
MASKED_LOAD_BITS = 256
_FACTOR_CAP = 1 << 12


def pow2_factor(e: E.PrimExpr) -> int:
    """The largest power of two (up to 4096) that certainly divides integer ``e``."""
    return _POW2_FACTOR.visit(e)


class _Pow2Factor(Functor):
    def visit_IntImm(self, e):
        v = abs(e.value)
        return _FACTOR_CAP if v == 0 else min(_FACTOR_CAP, v & -v)

    def visit_Add(self, e):
        return min(self.visit(e.a), self.visit(e.b))

    visit_Sub = visit_Add

    def visit_Mul(self, e):
        return min(_FACTOR_CAP, self.visit(e.a) * self.visit(e.b))

    def visit_Cast(self, e):
        return 1 if dtypes.is_float(e.value.dtype) else self.visit(e.value)

    def generic_visit(self, e):
        return 1


_POW2_FACTOR = _Pow2Factor()


def _elem_bytes(buf: Buffer) -> int:
    return max(1, dtypes.bits(buf.dtype) // 8)


class VectorMemory:
    """The part of :class:`~compiler.codegen.llvm.CodeGenLLVM` that emits vector memory access.

    Relies on the host class for ``b`` (the builder), ``expr``, ``_vector`` (broadcast),
    ``_declare`` and ``module``.
    """

    _aligned: dict  # buffer data Var -> bytes its pointer is known to be aligned to

    # -------------------------------------------------------------- alignment facts

    def _note_aligned(self, data: E.Var, align: int) -> None:
        self._aligned[data] = min(align, ALIGNED_BYTES)

    def _access_align(self, buf: Buffer, offset: E.PrimExpr) -> int:
        """Alignment in bytes of the element at ``offset`` of ``buf``."""
        esize = _elem_bytes(buf)
        known = self._aligned.get(buf.data, esize)
        return max(esize, min(known, pow2_factor(offset) * esize))

    def _mark_aligned_load(self, load: ir.Instruction, align: int) -> None:
        """State that the pointer ``load`` reads is ``align``-byte aligned (``!align``).

        A fact about the loaded value outlives inlining (the kernel's ``align`` parameter
        attribute does not), and LLVM's known-bits analysis reads it, so loops that LLVM
        vectorizes itself get aligned accesses too. ``!noundef`` makes it binding.
        """
        load.set_metadata("align", self.module.add_metadata([ir.Constant(I64, align)]))
        load.set_metadata("noundef", self.module.add_metadata([]))

    # -------------------------------------------------------------- loads

    def _vector_load(self, buf: Buffer, ptr: ir.Value, index: E.PrimExpr, lanes: int,
                     mask: ir.Value | None) -> ir.Value:
        vec_t = ir.VectorType(memory_type(buf.dtype), lanes)
        base = _ramp_base(index)
        if base is not None:
            addr = self.b.bitcast(self.b.gep(ptr, [self.expr(base)], inbounds=True), vec_t.as_pointer())
            align = self._access_align(buf, base)
            if mask is None:
                return self.b.load(addr, align=align)
            return self._masked_load(addr, vec_t, align, mask, _elem_bytes(buf))
        ptrs = self._vector_gep(ptr, self._vector(self.expr(index), lanes))
        mask = mask if mask is not None else _all_true(lanes)
        fn = self._declare(f"llvm.masked.gather.{type_suffix(vec_t)}.v{lanes}p0", vec_t,
                           [ptrs.type, I32, mask.type, vec_t])
        return self.b.call(fn, [ptrs, ir.Constant(I32, _elem_bytes(buf)), mask, ir.Constant(vec_t, None)])

    def _masked_load(self, addr: ir.Value, vec_t: ir.VectorType, align: int, mask: ir.Value,
                     elem_bytes: int) -> ir.Value:
        """``llvm.masked.load`` of ``vec_t`` at ``addr`` (zeros where ``mask`` is false), in
        pieces of :data:`MASKED_LOAD_BITS` joined by shuffles when it is wider."""
        lanes = vec_t.count
        piece = max(1, MASKED_LOAD_BITS // (8 * elem_bytes))
        count = lanes // piece
        if lanes <= piece or lanes % piece or count & (count - 1):
            return self._masked_load_call(addr, vec_t, align, mask)
        piece_t = ir.VectorType(vec_t.element, piece)
        first = self.b.bitcast(addr, vec_t.element.as_pointer())
        parts = []
        for k in range(count):
            lanes_k = list(range(k * piece, (k + 1) * piece))
            part_mask = self.b.shuffle_vector(mask, ir.Constant(mask.type, None), shuffle_mask(lanes_k))
            at = self.b.gep(first, [ir.Constant(I64, k * piece)]) if k else first
            part_align = align if k == 0 else min(align, piece * elem_bytes)
            parts.append(self._masked_load_call(self.b.bitcast(at, piece_t.as_pointer()), piece_t,
                                                part_align, part_mask))
        while len(parts) > 1:  # join neighbours: each round doubles the width
            width = parts[0].type.count
            parts = [self.b.shuffle_vector(a, b, shuffle_mask(range(2 * width)))
                     for a, b in zip(parts[::2], parts[1::2])]
        return parts[0]

    def _masked_load_call(self, addr: ir.Value, vec_t: ir.VectorType, align: int, mask: ir.Value) -> ir.Value:
        fn = self._declare(f"llvm.masked.load.{type_suffix(vec_t)}.p0", vec_t,
                           [addr.type, I32, mask.type, vec_t])
        return self.b.call(fn, [addr, ir.Constant(I32, align), mask, ir.Constant(vec_t, None)])

    # -------------------------------------------------------------- stores

    def _vector_store(self, buf: Buffer, ptr: ir.Value, index: E.PrimExpr, value: ir.Value,
                      mask: ir.Value | None) -> None:
        lanes = value.type.count
        base = _ramp_base(index)
        if base is not None:
            addr = self.b.bitcast(self.b.gep(ptr, [self.expr(base)], inbounds=True), value.type.as_pointer())
            align = self._access_align(buf, base)
            if mask is None:
                self.b.store(value, addr, align=align)
                return
            fn = self._declare(f"llvm.masked.store.{type_suffix(value.type)}.p0", ir.VoidType(),
                               [value.type, addr.type, I32, mask.type])
            self.b.call(fn, [value, addr, ir.Constant(I32, align), mask])
            return
        ptrs = self._vector_gep(ptr, self._vector(self.expr(index), lanes))
        mask = mask if mask is not None else _all_true(lanes)
        # Lanes that hit the same address are written in lane order, as a serial loop would.
        fn = self._declare(f"llvm.masked.scatter.{type_suffix(value.type)}.v{lanes}p0", ir.VoidType(),
                           [value.type, ptrs.type, I32, mask.type])
        self.b.call(fn, [value, ptrs, ir.Constant(I32, _elem_bytes(buf)), mask])

    # -------------------------------------------------------------- addresses

    def _vector_gep(self, ptr: ir.Value, indices: ir.Value) -> ir.Value:
        """``getelementptr inbounds T, ptr %p, <n x iK> %indices``: a vector of addresses.

        llvmlite cannot type a GEP with a vector index, so the instruction is built
        with the scalar result type and then given its vector type.
        """
        gep = ir.instructions.GEPInstr(self.b.block, ptr, [indices], inbounds=True, name="",
                                       source_etype=ptr.type.pointee)
        gep.type = ir.VectorType(ptr.type, indices.type.count)
        self.b._insert(gep)
        return gep


def _all_true(lanes: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(I1, lanes), [ir.Constant(I1, 1)] * lanes)


def _ramp_base(index: E.PrimExpr) -> E.PrimExpr | None:
    """The base of a unit-stride Ramp index (a contiguous vector access), else None."""
    if isinstance(index, E.Ramp) and E.is_const_int(index.stride, 1):
        return index.base
    return None
