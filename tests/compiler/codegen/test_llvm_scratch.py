"""A kernel's scratch: its heap blocks of constant size outside its parallel loops get offsets in
one region; blocks inside parallel loops, and of symbolic size, stay on the heap."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned

from compiler.codegen.llvm import generate_llvm_ir
from compiler.codegen.llvm_scratch import HEAP_ALIGN, MAX_STACK_BYTES, scratch_layout
from compiler.driver import build
from compiler.lowering import lower
from compiler.tir import (
    Allocate,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IRModule,
    PrimFunc,
    SeqStmt,
    Var,
    const,
    decl_buffer,
)


def _loop(var, extent, body, kind=ForKind.SERIAL):
    return For(var, const(0, var.dtype), extent, kind, body)


def _kernel(n: int = 20000):
    """Out[i] = 2 * A[i] + 3 * A[i] through two top-level blocks (U, then V inside U's body), a
    block each parallel iteration takes (T) and one of the scalar ``m`` floats (S)."""
    A, Out = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "Out")
    U, V = decl_buffer((n,), "float32", "U"), decl_buffer((n + 5,), "float32", "V")
    T, m = decl_buffer((n,), "float32", "T"), Var("m", "int64")
    S = decl_buffer((m,), "float32", "S")
    i, j, r = Var("i"), Var("j"), Var("r")

    def ld(buf, index):
        return BufferLoad(buf, (index,), "float32")

    per_thread = Allocate(T, SeqStmt((
        BufferStore(T, ld(A, r) * 3.0, (r,)),
        BufferStore(Out, ld(V, r) + ld(T, r), (r,)),
    )))
    body = Allocate(U, Allocate(S, Allocate(V, SeqStmt((
        _loop(i, const(n), BufferStore(U, ld(A, i) * 2.0, (i,)), ForKind.PARALLEL),
        BufferStore(S, ld(U, const(0)), (const(0, "int64"),)),
        _loop(j, const(n), BufferStore(V, ld(U, j) + ld(S, const(0, "int64")) - ld(U, const(0)), (j,))),
        _loop(r, const(n), per_thread, ForKind.PARALLEL),
    )))))
    return PrimFunc((A, Out, m), body, "twice"), (U, V, T, S)


def test_blocks_outside_parallel_loops_of_constant_size_are_the_scratch():
    func, (U, V, T, S) = _kernel()
    assert 20000 * 4 > MAX_STACK_BYTES
    layout = scratch_layout(func)
    assert layout.offsets == {U.data: 0, V.data: -(-20000 * 4 // HEAP_ALIGN) * HEAP_ALIGN}
    assert layout.nbytes % HEAP_ALIGN == 0 and layout.nbytes >= layout.offsets[V.data] + 20005 * 4
    ir = generate_llvm_ir(lower(func))
    assert "define internal noalias i8* @\"__autotune_scratch_alloc\"" in ir
    assert ir.count('call i8* @"__autotune_scratch_alloc"') == 2
    assert ir.count('call i8* @"aligned_alloc"') == 3  # T, S and the helper's own


def test_a_kernel_called_alone_takes_its_scratch_from_the_heap():
    func, _ = _kernel()
    a = np.random.default_rng(0).uniform(-1, 1, 20000).astype("float32")
    out = poisoned((20000,), "float32")
    build(func)(a, out, 7)
    assert_written(out, a * 5, rtol=1e-5, atol=1e-6)  # V adds S[0] and takes U[0] back off


def test_a_function_without_heap_blocks_has_no_scratch():
    A, Out = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "Out")
    i = Var("i")
    func = PrimFunc((A, Out), _loop(i, const(8), BufferStore(Out, BufferLoad(A, (i,), "float32"), (i,))),
                    "copy")
    assert scratch_layout(func).nbytes == 0
    assert "__autotune_scratch" not in generate_llvm_ir(IRModule({"copy": func}))


def test_timed_as_inside_a_model_the_kernel_takes_its_scratch_from_a_region_evicted_with_it(
        tmp_path, monkeypatch):
    """With ``cache_flush="model"`` the timer gives the kernel its scratch in a region of its own,
    set through the module's exported setter and evicted before each call (a model's executor
    places it in a workspace that other kernels used since): the kernel writes its blocks there,
    as loaded from a library too; other timings and plain calls leave the scratch to the heap."""
    from compiler.runtime import load_module
    from compiler.runtime.timer import NativeTimer

    func, (U, _, _, _) = _kernel()
    layout = scratch_layout(func)
    seen = []
    real_time = NativeTimer.time

    def recording_time(self, *args, evicted=(), **options):
        result = real_time(self, *args, evicted=evicted, **options)
        seen.append([region.copy() for region in evicted])
        return result

    monkeypatch.setattr(NativeTimer, "time", recording_time)
    a = np.random.default_rng(1).uniform(-1, 1, 20000).astype("float32")
    built = build(func)
    built.export_library(tmp_path / "twice.so")
    for module in (built, load_module(tmp_path / "twice.so")):
        assert module.function_info("twice").scratch_bytes == layout.nbytes
        seen.clear()
        out = poisoned((20000,), "float32")
        module.time_evaluator("twice", number=1, repeat=2, cache_flush="model")(a, out, 7)
        ((region,),) = seen
        assert region.nbytes == layout.nbytes
        offset = layout.offsets[U.data]
        np.testing.assert_allclose(region[offset:offset + 20000 * 4].view("float32"), a * 2, rtol=1e-6)
        assert_written(out, a * 5, rtol=1e-5, atol=1e-6)
        module.time_evaluator("twice", number=1, repeat=2, cache_flush="weights")(a, out, 7)
        assert seen[-1] == []
        out = poisoned((20000,), "float32")
        module(a, out, 7)  # the setter was cleared: the call takes its blocks from the heap again
        assert_written(out, a * 5, rtol=1e-5, atol=1e-6)
        bad_warm = r"warm names positions among the 2 buffer arguments .*got \[2, 'x'\]"
        with pytest.raises(ValueError, match=bad_warm):
            module.time_evaluator("twice", cache_flush="model", warm=(1, 2, "x"))
