"""Parallel loops for the LLVM backend: outlining a loop body and running it with libgomp.

A ``For`` of kind PARALLEL becomes three pieces:

* ``<f>__parallelK_body(lo, hi, free values...)`` -- the serial loop over ``[lo, hi)``;
  its pointer parameters are ``noalias`` (distinct buffers), which survives inlining;
* ``<f>__parallelK(void *closure)`` -- run by every thread: unpacks the closure (a
  stack struct of ``begin``, ``extent`` and the free values), takes its static,
  contiguous chunk using ``omp_get_thread_num``/``omp_get_num_threads`` and calls
  the body;
* at the loop's place: fill the closure, ``GOMP_parallel(worker, &closure, n, 0)``,
  with ``n`` read from the module's thread-count global.

Parallel loops nested inside one run serially.
"""

from __future__ import annotations

from llvmlite import ir

from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import free_vars
from .llvm_types import I8PTR, I32, I64, VOID, scalar_type

__all__ = ["ParallelLoops", "pointer_attrs"]


def pointer_attrs(arg: ir.Argument, align: int | None) -> None:
    """Mark a buffer pointer parameter: no other pointer reaches its memory, and it does not escape."""
    arg.add_attribute("noalias")
    arg.add_attribute("captures(none)")
    if align:
        arg.attributes.align = align


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


class ParallelLoops:
    """The part of :class:`~compiler.codegen.llvm.CodeGenLLVM` that emits parallel loops."""

    def _parallel_for(self, s: S.For) -> None:
        """Run ``s`` on libgomp's threads, each taking one contiguous chunk of the iterations.

        Emits ``body(lo, hi, free values...)`` (the serial loop over ``[lo, hi)``, with
        ``noalias`` pointers) and ``worker(closure)`` (unpacks a stack struct of
        ``begin``, ``extent`` and the free values, computes its thread's chunk, calls
        ``body``), then ``GOMP_parallel(worker, &closure, nthreads, 0)`` here.
        """
        free = [v for v in free_vars(s.body) if v is not s.loop_var]
        values = [self._lookup(v) for v in free]
        begin = self._cast(self.expr(s.min), s.min.dtype, "int64")
        extent = self._cast(self.expr(s.extent), s.extent.dtype, "int64")
        self._outlined += 1
        prefix = f"{self._func_name}__parallel{self._outlined}"
        body_fn, body_allocates = self._parallel_body(prefix, s, free, values)
        aligns = [self._aligned.get(v) for v in free]
        worker = self._parallel_worker(prefix, body_fn, [v.type for v in values], aligns)

        closure_t = ir.LiteralStructType([I64, I64, *(v.type for v in values)])
        closure = self._scope.allocas.alloca(closure_t, name=f"{prefix}.closure")
        for k, v in enumerate([begin, extent, *values]):
            self.b.store(v, self.b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True))
        worker_t = ir.FunctionType(VOID, [I8PTR]).as_pointer()
        gomp = self._declare("GOMP_parallel", VOID, [worker_t, I8PTR, I32, I32])
        nthreads = self.b.load(self._num_threads)
        self.b.call(gomp, [worker, self.b.bitcast(closure, I8PTR), nthreads, ir.Constant(I32, 0)])
        if body_allocates:
            self._return_if_allocation_failed()

    def _parallel_body(self, prefix: str, s: S.For, free: list[E.Var],
                       values: list[ir.Value]) -> tuple[ir.Function, bool]:
        """The outlined body, and whether it allocates on the heap."""
        loop_t = scalar_type(s.loop_var.dtype)
        fn = ir.Function(self.module, ir.FunctionType(VOID, [loop_t, loop_t, *(v.type for v in values)]),
                         f"{prefix}_body")
        fn.linkage = "internal"
        fn.args[0].name, fn.args[1].name = "lo", "hi"
        distinct = len({id(v) for v in values}) == len(values)  # LLVM values: the same one twice?
        for var, arg in zip(free, fn.args[2:], strict=True):
            arg.name = var.name
            if isinstance(arg.type, ir.PointerType) and distinct:
                pointer_attrs(arg, None)
        with self._function(fn, dict(zip(free, fn.args[2:], strict=True)),
                            in_parallel=True) as scope:
            self._loop(s.loop_var, fn.args[0], fn.args[1], lambda: self.emit(s.body))
        return fn, scope.allocates

    def _parallel_worker(self, prefix: str, body_fn: ir.Function, value_types: list[ir.Type],
                         aligns: list) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(VOID, [I8PTR]), prefix)
        fn.linkage = "internal"
        closure_t = ir.LiteralStructType([I64, I64, *value_types])
        with self._function(fn, {}) as scope:
            b = scope.builder
            closure = b.bitcast(fn.args[0], closure_t.as_pointer())
            fields = [b.load(b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True))
                      for k in range(len(value_types) + 2)]
            for field, align in zip(fields[2:], aligns, strict=True):
                if align:  # an aligned buffer pointer: keep that known across the closure
                    self._mark_aligned_load(field, align)
            begin, extent = fields[0], fields[1]
            tid = b.sext(b.call(self._declare("omp_get_thread_num", I32, []), []), I64)
            nth = b.sext(b.call(self._declare("omp_get_num_threads", I32, []), []), I64)
            chunk = b.sdiv(b.add(extent, b.sub(nth, ir.Constant(I64, 1))), nth)
            lo = _smin(b, b.mul(tid, chunk), extent)
            hi = _smin(b, b.add(lo, chunk), extent)
            loop_t = body_fn.args[0].type
            lo, hi = b.add(begin, lo), b.add(begin, hi)
            if loop_t != I64:
                lo, hi = b.trunc(lo, loop_t), b.trunc(hi, loop_t)
            b.call(body_fn, [lo, hi, *fields[2:]])
        return fn
