"""lower(): the loop IR it produces, as text and as structure."""

from __future__ import annotations

from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.tir.analysis import collect


def _vadd(n):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return A, B, C


def _loops(func):
    return collect(func.body, lambda x: isinstance(x, tir.For))


def test_print_is_readable_and_stable():
    A, B, C = _vadd(1024)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    text = str(compiler.lower(s, [A, B, C], name="vadd"))
    assert text.splitlines()[0] == "def vadd(A: float32[1024], B: float32[1024], C: float32[1024]):"
    assert "for i.outer in range(128) parallel:" in text
    # The vectorized loop is gone: its body works on 8 lanes at once.
    ramp = "ramp(i.outer * 8, 1, 8)"
    assert f"C[{ramp}] = A<x8>[{ramp}] + B<x8>[{ramp}]" in text
    simple = str(compiler.lower(s, [A, B, C], name="vadd", simple_mode=True))
    assert "for i.inner in range(8) vectorized:" in simple
    assert "C[i.outer * 8 + i.inner] = A[i.outer * 8 + i.inner] + B[i.outer * 8 + i.inner]" in simple
    assert "if " not in text  # 8 divides 1024: no guard
    A, B, C = _vadd(1024)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    assert str(compiler.lower(s, [A, B, C], name="vadd")) == text


def test_guarded_tail_is_partitioned():
    A, B, C = _vadd(100)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    simple = compiler.lower(s, [A, B, C], simple_mode=True)["main"]
    full = compiler.lower(s, [A, B, C])["main"]
    assert len(collect(simple.body, lambda x: isinstance(x, tir.IfThenElse))) == 1
    # After partitioning, the main loop (12 full tiles) has no guard; the tail keeps one.
    loops = _loops(full)
    assert any(tir.is_const_int(lp.extent, 12) for lp in loops)
    for lp in loops:
        if tir.is_const_int(lp.extent, 12):
            assert not collect(lp, lambda x: isinstance(x, tir.IfThenElse))


def test_unroll_expands_in_the_ir():
    A, B, C = _vadd(16)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].unroll(xi)
    func = compiler.lower(s, [A, B, C])["main"]
    stores = collect(func.body, lambda x: isinstance(x, tir.BufferStore))
    assert len(stores) == 4
    assert all(lp.kind is not tir.ForKind.UNROLLED for lp in _loops(func))
    simple = compiler.lower(s, [A, B, C], simple_mode=True)["main"]
    assert any(lp.kind is tir.ForKind.UNROLLED for lp in _loops(simple))


def test_bound_inference_sizes_cache_buffers():
    N = 64
    A = te.placeholder((N, N), name="A")
    B = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    s[CC].compute_at(s[C], jo)
    func = compiler.lower(s, [A, B, C])["main"]
    allocs = collect(func.body, lambda x: isinstance(x, tir.Allocate))
    assert len(allocs) == 1
    buf = allocs[0].buffer
    assert buf.scope == "local"
    assert tir.is_const_int(buf.shape[0], 8 * 16)


def test_compute_at_region_of_a_stencil(rng):
    # B is needed at i-1, i, i+1 for each tile of 4 outputs: a 6-element window.
    A = te.placeholder((34,), name="A")
    B = te.compute((34,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((32,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    func = compiler.lower(s, [A, C])["main"]
    (alloc,) = collect(func.body, lambda x: isinstance(x, tir.Allocate))
    assert tir.is_const_int(alloc.buffer.shape[0], 6)
    f = compiler.build(s, [A, C])
    a = random_array(rng, 34, "float32")
    c = poisoned(32, "float32")
    f(a, c)
    b = a * 2
    assert_written(c, b[:-2] + b[1:-1] + b[2:], rtol=1e-6)


def test_lower_accepts_primfunc_and_irmodule():
    A, B, C = _vadd(8)
    s = te.create_schedule(C.op)
    mod = compiler.lower(s, [A, B, C], name="f", simple_mode=True)
    again = compiler.lower(mod)
    assert "f" in again
    func = compiler.lower(mod["f"], name="g")
    assert "g" in func


def test_binds_with_strides(rng):
    n = te.var("n")
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    sa = te.var("sa")
    Ab = tir.decl_buffer((n, n), "float32", "A", strides=(sa, 1))
    f = compiler.build(s, [A, B], binds={A: Ab})
    big = random_array(rng, (6, 10), "float32")
    view = big[:, :6]  # rows 10 elements apart
    out = poisoned((6, 6), "float32")
    f(view, out)
    assert_written(out, view + 1.0)
