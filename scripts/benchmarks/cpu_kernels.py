"""Hand-written CPU schedules for ``scripts/benchmarks/bench_cpu.py``, importable by the tests.

Each builder returns ``(schedule or PrimFunc, args)`` ready for ``compiler.build``,
and each ``reference_*`` the numpy result it must match. The tests build them at
small sizes (``tests/test_cpu_kernels.py``); the benchmark at full size.
"""

from __future__ import annotations

import numpy as np

from compiler import te
from compiler.tir import (
    Allocate,
    BufferLoad,
    BufferStore,
    Call,
    For,
    ForKind,
    PrimFunc,
    SeqStmt,
    Var,
    const,
    decl_buffer,
)
from compiler.tir.expr import Broadcast, Ramp

__all__ = ["vector_add", "row_sum", "matmul", "softmax", "fma_peak", "empty_parallel", "core_exchange",
           "reference_softmax", "reference_core_exchange", "fma_flops_per_step", "FMA_CHAINS"]

# Independent accumulators per thread: enough to cover FMA latency x throughput (4-5 cycles x
# 2 units), few enough to stay in registers with the two operands (16 of them on AVX2).
FMA_CHAINS = 12


def fma_flops_per_step(lanes: int) -> int:
    """FLOPs one thread of :func:`fma_peak` does per step with ``lanes``-wide accumulators."""
    return 2 * lanes * FMA_CHAINS


def vector_add(n: int, block: int = 1 << 14, lanes: int = 16):
    """``C = A + B``: blocks of ``block`` elements in parallel, each a vectorized loop."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=block)
    _, vec = s[C].split(inner, factor=lanes)
    s[C].vectorize(vec)
    s[C].parallel(outer)
    return s, [A, B, C]


def row_sum(rows: int, cols: int, lanes: int = 16):
    """``B[i] = sum_k A[i, k]``, rows in parallel; each row summed in ``lanes`` partial sums.

    ``rfactor`` turns the reduction into a vectorizable one: ``lanes`` accumulators
    each sum every ``lanes``-th element of the row, then they are added up.
    """
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=lanes)
    BF = s.rfactor(B, ki)
    (i,) = s[B].op.axis
    s[B].parallel(i)
    s[BF].compute_at(s[B], i)
    lane_axis = s[BF].op.axis[0]
    (ko,) = s[BF].op.reduce_axis
    s[BF].reorder(ko, lane_axis)
    s[BF].vectorize(lane_axis)
    return s, [A, B]


def matmul(M: int, N: int, K: int, rows: int = 4, cols: int = 64):
    """``C = A @ B`` as the best CPU GEMMs do it.

    * B is packed into panels ``PB[N/cols][K][cols]`` (contiguous along k), in parallel;
    * each ``rows x cols`` tile of C is accumulated in a local register tile (cache_write):
      the k loop outside, the rows unrolled, the columns vectorized, so every k step
      loads ``cols`` floats of B once and broadcasts ``rows`` floats of A;
    * row blocks run in parallel.
    """
    if N % cols or M % rows:
        raise ValueError(f"matmul schedule needs M % {rows} == 0 and N % {cols} == 0, got M={M}, N={N}")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    PB = te.compute((N // cols, K, cols), lambda x, k, y: B[k, x * cols + y], name="PB")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * PB[j // cols, k, j % cols], axis=k), name="C")
    s = te.create_schedule(C.op)
    panel, _, lane = s[PB].op.axis
    s[PB].vectorize(lane)
    s[PB].parallel(panel)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, rows, cols)
    s[C].vectorize(ji)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    return s, [A, B, C]


def softmax(rows: int, cols: int, lanes: int = 16):
    """Softmax over each row, fused: max, exp and sum, then scale, one row at a time in parallel.

    Everything of a row is computed at the row (it stays in L1): the max and the sum as
    ``lanes`` vector accumulators (rfactor), the exp as vector code (the code generator's
    own vector exp, no libm calls), the division vectorized.
    """
    X = te.placeholder((rows, cols), name="X")
    k1 = te.reduce_axis((0, cols), name="k1")
    mx = te.compute((rows,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    E = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="E")
    k2 = te.reduce_axis((0, cols), name="k2")
    total = te.compute((rows,), lambda i: te.sum(E[i, k2], axis=k2), name="total")
    Y = te.compute((rows, cols), lambda i, j: E[i, j] / total[i], name="Y")
    s = te.create_schedule(Y.op)
    i, j = s[Y].op.axis
    s[Y].parallel(i)
    _, jv = s[Y].split(j, factor=lanes)
    s[Y].vectorize(jv)
    for stage, red in ((mx, k1), (total, k2)):
        _, ki = s[stage].split(red, factor=lanes)
        rf = s.rfactor(stage, ki)
        s[stage].compute_at(s[Y], i)
        s[rf].compute_at(s[Y], i)
        lane_axis = s[rf].op.axis[0]
        (ko,) = s[rf].op.reduce_axis
        s[rf].reorder(ko, lane_axis)
        s[rf].vectorize(lane_axis)
    s[E].compute_at(s[Y], i)
    _, ev = s[E].split(s[E].op.axis[1], factor=lanes)
    s[E].vectorize(ev)
    return s, [X, Y]


def reference_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def core_exchange(threads: int, floats: int, swap: bool, lanes: int = 16):
    """``Y[t] = sum(A[u] + 1)``: thread ``t`` writes ``X[t] = A[t] + 1`` (``floats`` values, a
    block that stays in its core's cache), then sums ``X[u]``, with ``u = t`` or, with ``swap``,
    ``u = (t + 1) % threads``: a block the next thread has just written, which comes from the
    other core's cache. The two versions' times differ by what moving data between cores
    costs, which depends on how far apart the cores are (another core complex or socket takes
    several times longer). One parallel iteration per thread."""
    A = te.placeholder((threads, floats), name="A")
    X = te.compute((threads, floats), lambda t, i: A[t, i] + 1.0, name="X")
    k = te.reduce_axis((0, floats), name="k")
    Y = te.compute((threads,), lambda t: te.sum(X[(t + 1) % threads if swap else t, k], axis=k), name="Y")
    s = te.create_schedule(Y.op)
    t, i = s[X].op.axis
    s[X].parallel(t)
    _, vi = s[X].split(i, factor=lanes)
    s[X].vectorize(vi)
    s[Y].parallel(s[Y].op.axis[0])
    return s, [A, Y]


def reference_core_exchange(a: np.ndarray, swap: bool) -> np.ndarray:
    """What :func:`core_exchange` computes for ``A = a``."""
    sums = (a.astype(np.float64) + 1.0).sum(axis=1)
    return np.roll(sums, -1) if swap else sums


def fma_peak(iterations: int, threads: int, lanes: int) -> PrimFunc:
    """A kernel that does nothing but FMAs: ``fma_peak(OUT, scale, shift)``.

    Each of ``threads`` parallel iterations keeps :data:`FMA_CHAINS` independent
    ``lanes``-wide accumulators and updates each ``acc = acc * scale + shift`` per step,
    i.e. :func:`fma_flops_per_step` flops per step. ``lanes`` must be the target's vector
    width (``compiler.simd.vector_lanes``): wider vectors take several registers each,
    spill, and measure the stack instead of the FMA units. Build it with ``-fast-math`` so
    that the multiply and add contract into one FMA. ``OUT[t, l]`` holds the sum
    over chains of lane ``l``'s final value (so nothing is dead code).
    """
    width = lanes * FMA_CHAINS
    OUT = decl_buffer((threads, lanes), "float32", "OUT")
    acc = decl_buffer((width,), "float32", "acc", scope="local")
    t, it, c = Var("t"), Var("it"), Var("c")
    # Scalars known only at run time: with constants, fast-math would fold steps together.
    scale, shift = Var("scale", "float32"), Var("shift", "float32")
    a = Broadcast(scale, lanes, f"float32x{lanes}")
    b = Broadcast(shift, lanes, f"float32x{lanes}")

    def vec(buf, base):
        return BufferLoad(buf, (Ramp(base, const(1), lanes, f"int32x{lanes}"),),
                          f"float32x{lanes}", lanes)

    def ramp(base):
        return (Ramp(base, const(1), lanes, f"int32x{lanes}"),)

    init = For(c, const(0), const(FMA_CHAINS), ForKind.UNROLLED,
               BufferStore(acc, Broadcast(Call("float32", "omp_thread_id", ()).astype("float32"),
                                          lanes, f"float32x{lanes}"), ramp(c * lanes)))
    step = For(c, const(0), const(FMA_CHAINS), ForKind.UNROLLED,
               BufferStore(acc, vec(acc, c * lanes) * a + b, ramp(c * lanes)))
    loop = For(it, const(0), const(iterations), ForKind.SERIAL, step)
    total = vec(acc, const(0))
    for k in range(1, FMA_CHAINS):
        total = total + vec(acc, const(k * lanes))
    out = BufferStore(OUT, total, ramp(t * lanes))
    body = For(t, const(0), const(threads), ForKind.PARALLEL, Allocate(acc, SeqStmt((init, loop, out))))
    return PrimFunc((OUT, scale, shift), body, "fma_peak")


def empty_parallel(parallel: bool = True) -> PrimFunc:
    """A parallel loop that does (almost) nothing: each iteration stores its OpenMP thread id.

    ``parallel=False`` gives the same loop run serially (to subtract the cost of a call).
    """
    n = Var("n")
    T = decl_buffer((n,), "int32", "T")
    i = Var("i")
    kind = ForKind.PARALLEL if parallel else ForKind.SERIAL
    body = For(i, const(0), n, kind, BufferStore(T, Call("int32", "omp_thread_id", ()), (i,)))
    return PrimFunc((T,), body, "empty_parallel")
