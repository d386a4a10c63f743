"""autotvm.task.task: compute_flop by AutoTVM's counting rules and its errors, args_to_workload, and the
module's create/template, written as AutoTVM's own tests are."""

from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from autotune import autotvm
from autotune.autotvm.task.task import (
    FlopCalculationError,
    args_to_workload,
    compute_flop,
    deserialize_args,
    serialize_args,
)
from compiler import te
from search_spaces import count_flops, unregister_template


def test_conv():
    N, H, W, CO, CI, KH, KW = 1, 10, 10, 4, 3, 3, 3
    data = te.placeholder((N, CI, H, W), name="data")
    kernel = te.placeholder((CO, CI, KH, KW), name="kernel")
    rc, ry, rx = te.reduce_axis((0, CI), "rc"), te.reduce_axis((0, KH), "ry"), te.reduce_axis((0, KW), "rx")
    OH, OW = H - KH + 1, W - KW + 1
    D = te.compute((N, CO, OH, OW), lambda n, f, y, x: te.sum(
        data[n, rc, y + ry, x + rx] * kernel[f, rc, ry, rx], axis=[rc, ry, rx]), name="D")
    s = te.create_schedule([D.op])
    assert compute_flop(s) == 2 * N * CO * OH * OW * CI * KH * KW


def test_pack_gemm():
    n, m, l, bn = 16, 8, 12, 4
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    A_pack = te.compute((n // bn, l, bn), lambda i, j, kk: A[i * bn + kk, j])
    B_pack = te.compute((m // bn, l, bn), lambda i, j, kk: B[i * bn + kk, j])
    C_pack = te.compute((n // bn, m // bn, bn, bn), lambda i, j, ii, jj: te.sum(
        A_pack[i, k, ii].astype("float32") * B_pack[j, k, jj].astype("float32"), axis=[k]))
    idxd, idxm = tvm.tir.indexdiv, tvm.tir.indexmod
    C = te.compute((n, m), lambda i, j: C_pack[idxd(i, bn), idxd(j, bn), idxm(i, bn), idxm(j, bn)])
    s = te.create_schedule([C.op])
    assert compute_flop(s) == 2 * n * l * m  # index arithmetic inside reads is not counted


def test_outer_dot_and_pools():
    m, n = 7, 9
    A, B = te.placeholder((m,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((m, n), lambda i, j: A[i] * B[j])
    assert compute_flop(te.create_schedule([C.op])) == m * n

    N, CO, H, W, K = 1, 2, 6, 6, 3
    data = te.placeholder((N, CO, H, W), name="data")
    kh, kw = te.reduce_axis((0, K), "kh"), te.reduce_axis((0, K), "kw")
    OH, OW = H - K + 1, W - K + 1
    mx = te.compute((N, CO, OH, OW), lambda b, c, h, w: te.max(data[b, c, h + kh, w + kw], axis=[kh, kw]))
    assert compute_flop(te.create_schedule([mx.op])) == N * CO * OH * OW * K * K
    kh, kw = te.reduce_axis((0, K), "kh"), te.reduce_axis((0, K), "kw")
    avg = te.compute((N, CO, OH, OW), lambda b, c, h, w: te.sum(
        data[b, c, h + kh, w + kw] / float(K * K), axis=[kh, kw]))
    assert compute_flop(te.create_schedule([avg.op])) == 2 * N * CO * OH * OW * K * K


def test_autotvm_rules_differ_from_the_tuners_count():
    n = 32
    A = te.placeholder((n,), name="A")
    # AutoTVM counts index arithmetic outside reads (i + 1: one) and not the call itself
    B = te.compute((n,), lambda i: te.exp(A[i]) + (i + 1).astype("float32"), name="B")
    assert compute_flop(te.create_schedule([B.op])) == 2 * n
    C = te.compute((n,), lambda i: te.if_then_else(i < 4, A[i] * 2.0, A[i]), name="C")
    assert compute_flop(te.create_schedule([C.op])) == 2 * n  # condition + the costlier side


def test_move_has_no_flop():
    A = te.placeholder((64,), name="A")
    C = te.compute((64,), lambda i: A[i])
    with pytest.raises(RuntimeError, match="Cannot find float number operation.*cfg.add_flop"):
        compute_flop(te.create_schedule([C.op]))


def test_uncountable_computes_raise_flop_calculation_error():
    A = te.placeholder((16,), name="A")
    ext = te.extern((16,), [A], lambda ins, outs: tvm.tir.call_extern(
        "int32", "copy", ins[0].access_ptr("r"), outs[0].access_ptr("w")), name="ext")
    with pytest.raises(FlopCalculationError, match="only te.compute is supported, not ExternOp 'ext'"):
        compute_flop(te.create_schedule([ext.op]))
    two = te.compute((16,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="two")
    with pytest.raises(FlopCalculationError, match="multiple outputs in the compute 'two'"):
        compute_flop(te.create_schedule([two[0].op]))
    n = te.var("n")
    V = te.placeholder((n,), name="V")
    W = te.compute((n,), lambda i: V[i] * 2.0, name="W")
    with pytest.raises(FlopCalculationError, match="extent n is not a constant"):
        compute_flop(te.create_schedule([W.op]))
    assert issubclass(FlopCalculationError, RuntimeError)


def test_args_to_workload():
    A = te.placeholder((4, 8), name="A", dtype="float16")
    assert args_to_workload([A, (1, 2), "NCHW", 3.0, None], "conv") == \
        ("conv", ("TENSOR", (4, 8), "float16"), (1, 2), "NCHW", 3.0, None)
    assert args_to_workload((tvm.tir.const(3), te.var("m"))) == (3, "m")
    with pytest.raises(TypeError, match="cannot serialize"):
        args_to_workload([te.var("m") + 1])
    tensor, layout = deserialize_args(serialize_args([A, "NCHW"]))
    assert isinstance(tensor, te.Tensor) and tuple(tensor.shape) == (4, 8) and tensor.dtype == "float16"
    assert layout == "NCHW"


def test_task_module_creates_tasks_of_templates():
    @autotvm.task.task.template("test_task_module/scale")
    def scale(n):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
        s = te.create_schedule(B.op)
        cfg = autotvm.get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg["tile"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    try:
        task = autotvm.task.task.create("test_task_module/scale", args=(32,), target="llvm")
        assert isinstance(task, autotvm.task.task.Task) and task.workload == ("test_task_module/scale", 32)
        with tvm.target.Target("llvm"):
            s, args = task.instantiate(task.config_space.get(1))
        assert compute_flop(s) == 32 == task.flop
        f = tvm.build(s, args, "llvm")
        a = np.random.rand(32).astype("float32")
        b = tvm.nd.array(np.full(32, np.nan, dtype="float32"))
        f(tvm.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a * 3.0, rtol=1e-6)
    finally:
        unregister_template("test_task_module/scale")


def test_a_producer_counts_once_per_consumer_path():
    # AutoTVM walks from each output through every input tensor: B, read by C and by D, counts
    # twice in E's total; a tensor one consumer reads twice counts once there.
    n = 10
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((n,), lambda i: B[i] * 3.0, name="D")
    E = te.compute((n,), lambda i: C[i] + D[i], name="E")
    assert compute_flop(te.create_schedule([E.op])) == n * (1 + (1 + 1) + (1 + 1))
    F = te.compute((n,), lambda i: B[i] * B[i], name="F")
    assert compute_flop(te.create_schedule([F.op])) == n * (1 + 1)
    assert compute_flop(te.create_schedule([C.op, D.op])) == n * ((1 + 1) + (1 + 1))
    # The tuner's own count (task.flop) still counts each operation once.
    assert count_flops([E]) == 4 * n

    # A long chain of diamonds is counted without walking every path (2**40 of them here).
    def diamond(t, k):
        left = te.compute((n,), lambda i: t[i] + 1.0, name=f"L{k}")
        right = te.compute((n,), lambda i: t[i] * 2.0, name=f"R{k}")
        return te.compute((n,), lambda i: left[i] - right[i], name=f"J{k}")

    t = A
    for k in range(40):
        t = diamond(t, k)
    flop = compute_flop(te.create_schedule([t.op]))
    expected = 0
    for _ in range(40):
        expected = 3 * n + 2 * expected  # the join, each branch, and the rest below each branch
    assert flop == expected
