"""TVM's ``tuple_inputs`` tutorial (v0.8-v0.12), section by section, with TVM's names mapped to ours:

    tvm.te, tvm.lower, tvm.build      -> compiler.te, compiler.lower, compiler.build
    tvm.tir.Select, tvm.tir.const     -> compiler.tir.Select, compiler.tir.const
    tvm.te.min_value                  -> compiler.te.min_value

The tutorial only prints the lowered code of each section; here each is also built for the CPU
and checked against numpy, every output poisoned first (NaN, or the integer sentinel for the
argmax). Nothing of the tutorial is left out.
"""

from __future__ import annotations

import numpy as np
from helpers import assert_written, poisoned, random_array

import compiler as tvm
from compiler import te

ROWS, COLS = 7, 13


def test_batchwise_computation(rng):
    n = te.var("n")
    m = te.var("m")
    A0 = te.placeholder((m, n), name="A0")
    A1 = te.placeholder((m, n), name="A1")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    s = te.create_schedule(B0.op)
    print(tvm.lower(s, [A0, A1, B0, B1], simple_mode=True))
    assert B0.op is B1.op  # one operation, two outputs

    f = tvm.build(s, [A0, A1, B0, B1], "llvm")
    a0, a1 = (random_array(rng, (ROWS, COLS), "float32") for _ in range(2))
    b0, b1 = poisoned((ROWS, COLS), "float32"), poisoned((ROWS, COLS), "float32")
    f(a0, a1, b0, b1)
    assert_written(b0, a0 + 2)
    assert_written(b1, a1 * 3)


# x and y are the operands of the reduction, each a tuple of index and value.
def fcombine(x, y):
    lhs = tvm.tir.Select((x[1] >= y[1]), x[0], y[0])
    rhs = tvm.tir.Select((x[1] >= y[1]), x[1], y[1])
    return lhs, rhs


# The identity element is a tuple as well.
def fidentity(t0, t1):
    return tvm.tir.const(-1, t0), tvm.te.min_value(t1)


def test_argmax_with_a_tuple_reduction(rng):
    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m = te.var("m")
    n = te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    print(tvm.lower(s, [idx, val, T0, T1], simple_mode=True))

    f = tvm.build(s, [idx, val, T0, T1], "llvm")
    idx_np = np.tile(np.arange(COLS, dtype="int32"), (ROWS, 1))
    val_np = random_array(rng, (ROWS, COLS), "int32")  # small values: ties, which keep the first index
    t0, t1 = poisoned(ROWS, "int32"), poisoned(ROWS, "int32")
    f(idx_np, val_np, t0, t1)
    assert_written(t0, np.argmax(val_np, axis=1).astype("int32"))
    assert_written(t1, np.max(val_np, axis=1))


def test_schedule_operation_with_tuple_inputs(rng):
    n = te.var("n")
    m = te.var("m")
    A0 = te.placeholder((m, n), name="A0")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = te.placeholder((m, n), name="A1")
    C = te.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")

    s = te.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    assert s[B0] is s[B1]  # scheduled by operation, not by tensor
    text = str(tvm.lower(s, [A0, A1, C], simple_mode=True))
    print(text)
    assert text.index("B.v1[") < text.index("C[")  # both outputs computed inside C's row loop

    f = tvm.build(s, [A0, A1, C], "llvm")
    a0, a1 = (random_array(rng, (ROWS, COLS), "float32") for _ in range(2))
    c = poisoned((ROWS, COLS), "float32")
    f(a0, a1, c)
    assert_written(c, a1 + (a0 + 2))
