"""TVM's ``opt_gemm`` tutorial ("How to optimize GEMM on CPU", v0.8-v0.12), run to the end with
TVM's names mapped to ours:

    tvm.te, tvm.lower, tvm.build, tvm.device, tvm.nd -> compiler.te, compiler.lower, compiler.build, ...
    tvm.testing.assert_allclose                       -> compiler.testing.assert_allclose
    tvm.tir.indexmod                                  -> compiler.tir.indexmod

Changes to the tutorial's code: the matrices are 128x128 instead of 1024x1024 (the same
schedules: 32x32 blocks, the reduction split by 4, ``B`` packed as ``(N / bn, K, bn)`` with its
float shape entry), and every output it fills with ``numpy.zeros`` starts poisoned (NaN), so an
element a schedule never writes fails the tutorial's own check. Its timings are printed, as in
the tutorial, never asserted. Nothing of it is left out.
"""

from __future__ import annotations

import numpy
from helpers import poisoned

import compiler as tvm
import compiler.testing
from compiler import te

M = K = N = 128  # 1024 in the tutorial
dtype = "float32"
target = "llvm"
bn = 32
kfactor = 4


def _check(s, A, B, C, a, b, answer, dev, label, number=10):
    """The tutorial's build, run, check and timing, repeated after every step."""
    func = tvm.build(s, [A, B, C], target=target, name="mmult")
    assert func
    c = tvm.nd.array(poisoned((M, N), dtype), dev)
    func(a, b, c)
    compiler.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)
    evaluator = func.time_evaluator(func.entry_name, dev, number=number)
    print(f"{label}: {evaluator(a, b, c).mean:f}")
    print(tvm.lower(s, [A, B, C], simple_mode=True))


def test_opt_gemm_runs_to_the_end():
    dev = tvm.device(target, 0)
    a = tvm.nd.array(numpy.random.rand(M, K).astype(dtype), dev)
    b = tvm.nd.array(numpy.random.rand(K, N).astype(dtype), dev)
    answer = numpy.dot(a.numpy(), b.numpy())

    # Algorithm and the default schedule (the baseline)
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * B[k, n], axis=k), name="C")
    s = te.create_schedule(C.op)
    _check(s, A, B, C, a, b, answer, dev, "Baseline", number=1)

    # Blocking
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    s[C].reorder(mo, no, ko, ki, mi, ni)
    _check(s, A, B, C, a, b, answer, dev, "Opt1")

    # Vectorization
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    s[C].reorder(mo, no, ko, ki, mi, ni)
    s[C].vectorize(ni)
    _check(s, A, B, C, a, b, answer, dev, "Opt2")

    # Loop permutation
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    s[C].reorder(mo, no, ko, mi, ki, ni)
    s[C].vectorize(ni)
    _check(s, A, B, C, a, b, answer, dev, "Opt3")

    # Array packing
    packedB = te.compute(
        (N / bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN], name="packedB"
    )
    C = te.compute(
        (M, N),
        lambda m, n: te.sum(A[m, k] * packedB[n // bn, k, tvm.tir.indexmod(n, bn)], axis=k),
        name="C",
    )
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    s[C].reorder(mo, no, ko, mi, ki, ni)
    s[C].vectorize(ni)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    _check(s, A, B, C, a, b, answer, dev, "Opt4")

    # Write cache for blocks
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=kfactor)
    s[CC].reorder(ko, mc, ki, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    _check(s, A, B, C, a, b, answer, dev, "Opt5")

    # Parallel
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=kfactor)
    s[CC].reorder(ko, mc, ki, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    s[C].parallel(mo)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    _check(s, A, B, C, a, b, answer, dev, "Opt6", number=50)
