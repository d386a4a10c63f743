"""Bound inference for GPU memory scopes, and scope inference, as in TVM.

A ``shared`` stage computed under thread-bound loops holds what the whole block needs
(relaxed over ``threadIdx`` and ``vthread``, fixed over ``blockIdx``); a ``local`` one
what its own thread needs. A stage whose scope was never set is ``local`` under a
``threadIdx`` loop and ``shared`` under ``blockIdx`` loops only. Each kernel is run on
the CPU simulator (which flags data races) against numpy with NaN-poisoned outputs,
and assembled with ptxas where it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import (
    bind_cross_thread_rfactor,
    bind_thread_tiles,
    bind_virtual_threads,
    build_ptx,
    gpu_function,
    simulate,
    square_matmul,
)
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.errors import LoweringError
from compiler.tir import stmt as S
from compiler.tir.analysis import collect


def _allocs(kernel) -> dict:
    """``{buffer name: (scope, size)}`` of a kernel's allocations."""
    return {a.buffer.name: (a.buffer.scope, a.buffer.shape[0].value)
            for a in collect(kernel.body, lambda n: isinstance(n, S.Allocate))}


def _check(s, args, inputs, want, rtol=1e-5, atol=1e-5):
    """Simulate with a poisoned output, compare with ``want``; assemble the PTX."""
    out = poisoned(want.shape, want.dtype)
    simulate(s, args, [*inputs, out])
    assert_written(out, want, rtol=rtol, atol=atol)
    build_ptx(s, args)


def shared_gemm(N=16, K=16, tile=8, bind_loads=True):
    """The shared-memory GEMM idiom: one output element per thread, ``tile`` x ``tile``
    threads per block, tiles of A and B in shared memory loaded at each step of k,
    cooperatively (one element per thread) when ``bind_loads``."""
    A, B, C = square_matmul(N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    AS = s.cache_read(A, "shared", [CL])
    BS = s.cache_read(B, "shared", [CL])
    by, ty = s[C].split(C.op.axis[0], factor=tile)
    bx, tx = s[C].split(C.op.axis[1], factor=tile)
    s[C].reorder(by, bx, ty, tx)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], tx)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=tile)
    s[AS].compute_at(s[CL], ko)
    s[BS].compute_at(s[CL], ko)
    if bind_loads:
        for T in (AS, BS):
            s[T].bind(s[T].op.axis[0], te.thread_axis("threadIdx.y"))
            s[T].bind(s[T].op.axis[1], te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def _gemm_data(rng, N, K):
    return random_array(rng, (N, K), "float32"), random_array(rng, (K, N), "float32")


def test_shared_tiles_hold_the_block_footprint_and_load_cooperatively(rng):
    s, args = shared_gemm(N=16, K=16, tile=8)
    (kernel,) = gpu_function(s, args).kernels
    assert kernel.attrs["block"] == [8, 8, 1]
    allocs = _allocs(kernel)
    # 8 rows of A x 8 of k, 8 of k x 8 columns of B: every thread's share of the block's tile
    assert allocs["A.shared"] == ("shared", 64) and allocs["B.shared"] == ("shared", 64)
    assert allocs["C.local"] == ("local", 1)
    a, b = _gemm_data(rng, 16, 16)
    _check(s, args, [a, b], a @ b)


def test_shared_tiles_loaded_by_every_thread_are_still_the_block_tile(rng):
    """Without binding the load, every thread copies the whole tile: wasteful, but the
    tile is the block's, and all threads store the same values."""
    s, args = shared_gemm(N=16, K=8, tile=8, bind_loads=False)
    (kernel,) = gpu_function(s, args).kernels
    allocs = _allocs(kernel)
    assert allocs["A.shared"] == ("shared", 64) and allocs["B.shared"] == ("shared", 64)
    a, b = _gemm_data(rng, 16, 8)
    _check(s, args, [a, b], a @ b)


def test_a_per_thread_tile_fixed_outside_the_attach_point(rng):
    """Each thread computes a 2 x 2 tile of C whose loops stay outside ``ko``: the shared
    tile of A, relaxed over threadIdx.y, starts at the row of the current ``i.c`` (rows
    ``by*8 + i.c_offset + 2*ty``: 7 rows), and every thread loads it (same values)."""
    N, K = 16, 8
    A, B, C = square_matmul(N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    AS = s.cache_read(A, "shared", [CL])
    tx = bind_thread_tiles(s[C], block=8, threads=4)[3]  # 2 x 2 outputs a thread
    s[CL].compute_at(s[C], tx)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=4)  # CL's loops: i.c, j.c, ko, ki
    s[AS].compute_at(s[CL], ko)
    (kernel,) = gpu_function(s, [A, B, C]).kernels
    allocs = _allocs(kernel)
    assert allocs["A.shared"] == ("shared", 7 * 4)
    assert allocs["C.local"] == ("local", 4)
    a, b = _gemm_data(rng, N, K)
    _check(s, [A, B, C], [a, b], a @ b)


def conv_hwcn(in_size=2, in_channel=4, out_channel=8, batch=8, tile=4, num_thread=2, step=2, vthread=2):
    """TVM's "optimize convolution on GPU" schedule (HWCN layout, shared tiles relaxed over
    virtual and real threads, local register tiles), scaled down."""
    kernel, pad = 3, 1
    A = te.placeholder((in_size, in_size, in_channel, batch), name="A")
    W = te.placeholder((kernel, kernel, in_channel, out_channel), name="W")
    out_size = in_size - kernel + 2 * pad + 1
    Apad = te.compute(
        (in_size + 2 * pad, in_size + 2 * pad, in_channel, batch),
        lambda yy, xx, cc, nn: te.if_then_else(
            te.all(yy >= pad, yy - pad < in_size, xx >= pad, xx - pad < in_size),
            A[yy - pad, xx - pad, cc, nn], te.const(0.0, "float32")),
        name="Apad")
    rc = te.reduce_axis((0, in_channel), name="rc")
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")
    B = te.compute((out_size, out_size, out_channel, batch),
                   lambda yy, xx, ff, nn: te.sum(Apad[yy + ry, xx + rx, rc, nn] * W[ry, rx, rc, ff],
                                                 axis=[ry, rx, rc]),
                   name="B")
    s = te.create_schedule(B.op)
    s[Apad].compute_inline()
    AA = s.cache_read(Apad, "shared", [B])
    WW = s.cache_read(W, "shared", [B])
    AL = s.cache_read(AA, "local", [B])
    WL = s.cache_read(WW, "local", [B])
    BL = s.cache_write(B, "local")
    block_factor = tile * num_thread
    thread_x = te.thread_axis((0, num_thread), "threadIdx.x")
    thread_y = te.thread_axis((0, num_thread), "threadIdx.y")
    hi, wi, fi, ni = s[B].op.axis
    bz = s[B].fuse(hi, wi)
    by, fi = s[B].split(fi, factor=block_factor)
    bx, ni = s[B].split(ni, factor=block_factor)
    s[B].reorder(bz, by, bx, fi, ni)
    s[B].bind(bz, te.thread_axis("blockIdx.z"))
    s[B].bind(by, te.thread_axis("blockIdx.y"))
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    tx = bind_virtual_threads(s[B], fi, ni, vthread, num_thread, thread_y, thread_x)[3]
    s[BL].compute_at(s[B], tx)
    yi, xi, fi, ni = s[BL].op.axis
    ry, rx, rc = s[BL].op.reduce_axis
    rco, rci = s[BL].split(rc, factor=step)
    s[BL].reorder(rco, ry, rx, rci, fi, ni)
    s[AA].compute_at(s[BL], rx)
    s[WW].compute_at(s[BL], rx)
    s[AL].compute_at(s[BL], rci)
    s[WL].compute_at(s[BL], rci)
    for T in (AA, WW):
        yi, xi, ci, last = s[T].op.axis
        t_y, ci = s[T].split(ci, nparts=num_thread)
        t_x, last = s[T].split(last, nparts=num_thread)
        _, last = s[T].split(last, factor=4)
        s[T].reorder(t_y, t_x, yi, xi, ci, last)
        s[T].bind(t_y, thread_y)
        s[T].bind(t_x, thread_x)
        s[T].vectorize(last)
    return s, [A, W, B]


def _conv_ref(a, w):
    size, _, _, batch = a.shape
    ap = np.pad(a, ((1, 1), (1, 1), (0, 0), (0, 0)))
    out = np.empty((size, size, w.shape[3], batch), dtype=a.dtype)
    for y in range(size):
        for x in range(size):
            out[y, x] = np.einsum("abcn,abcf->fn", ap[y:y + 3, x:x + 3], w)
    return out


def test_conv_shared_tiles_are_relaxed_over_virtual_and_real_threads(rng):
    s, args = conv_hwcn()
    (kernel,) = gpu_function(s, args).kernels
    assert kernel.attrs["block"] == [2, 2, 1]
    allocs = _allocs(kernel)
    # step (2) channels x block_factor (8) of batch / output channels, for the whole block
    assert allocs["Apad.shared"] == ("shared", 16) and allocs["W.shared"] == ("shared", 16)
    # per thread: 2 elements for each of the 2 virtual threads
    assert allocs["Apad.shared.local"] == ("local", 4) and allocs["W.shared.local"] == ("local", 4)
    assert allocs["B.local"] == ("local", 16)  # 2 x 2 per virtual thread, 2 x 2 virtual threads
    a = random_array(rng, (2, 2, 4, 8), "float32")
    w = random_array(rng, (3, 3, 4, 8), "float32")
    _check(s, args, [a, w], _conv_ref(a, w))


def cross_thread_rfactor(n=40, m=64):
    """The GPU part of TVM's reduction tutorial: rfactor, then reduce across threadIdx.x."""
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BF, _ = bind_cross_thread_rfactor(s, B)
    return s, [A, B], BF


def test_stage_computed_at_a_thread_axis_is_local(rng):
    s, args, BF = cross_thread_rfactor()
    assert s[BF].scope == ""  # nothing was set: lowering infers it
    (kernel,) = gpu_function(s, args).kernels
    assert _allocs(kernel)["B.rf"] == ("local", 1)
    a = random_array(rng, (40, 64), "float32")
    _check(s, args, [a], a.sum(axis=1))


def test_stage_computed_at_a_block_axis_is_shared(rng):
    """B, computed per block and read across the block's threads, is a shared row that the
    threads fill cooperatively; a barrier orders the fill and the reads."""
    rows, block = 4, 16
    A = te.placeholder((rows, block), name="A")
    B = te.compute((rows, block), lambda r, t: A[r, t] * 2.0, name="B")
    C = te.compute((rows, block), lambda r, t: B[r, t] + B[r, block - 1 - t], name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].bind(s[B].op.axis[1], te.thread_axis("threadIdx.x"))
    (kernel,) = gpu_function(s, [A, C]).kernels
    assert _allocs(kernel)["B"] == ("shared", block)
    a = random_array(rng, (rows, block), "float32")
    _check(s, [A, C], [a], 2 * a + 2 * a[:, ::-1])


def test_stage_computed_at_the_root_stays_global():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((64,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    for T in (B, C):
        o, i = s[T].split(T.op.axis[0], factor=32)
        s[T].bind(o, te.thread_axis("blockIdx.x"))
        s[T].bind(i, te.thread_axis("threadIdx.x"))
    gf = gpu_function(s, [A, C])
    assert [w["name"] for w in gf.workspaces] == ["B"]


def test_cpu_schedules_keep_global_buffers():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((64,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    func = compiler.lower(s, [A, C])["main"]
    (alloc,) = collect(func.body, lambda n: isinstance(n, S.Allocate))
    assert alloc.buffer.scope == "global" and alloc.buffer.shape[0].value == 8


def test_a_scope_that_was_set_wins(rng):
    """B.rf set to shared at the threadIdx.x axis holds one element per (threadIdx.x,
    threadIdx.y) of the block, not one per thread; its axes bound to those threads, each
    computes its own."""
    s, args, BF = cross_thread_rfactor()
    s[BF].set_scope("shared")
    s[BF].bind(s[BF].op.axis[0], te.thread_axis("threadIdx.x"))
    s[BF].bind(s[BF].op.axis[1], te.thread_axis("threadIdx.y"))
    (kernel,) = gpu_function(s, args).kernels
    assert _allocs(kernel)["B.rf"] == ("shared", 16 * 32)
    a = random_array(rng, (40, 64), "float32")
    _check(s, args, [a], a.sum(axis=1))


def test_explicit_global_scope_inside_a_kernel_is_still_an_error():
    s, args, BF = cross_thread_rfactor()
    s[BF].set_scope("global")
    with pytest.raises(LoweringError, match="'B.rf' is a global buffer allocated inside a kernel"):
        gpu_function(s, args)
