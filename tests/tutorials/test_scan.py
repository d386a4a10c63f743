"""TVM's ``scan`` tutorial (v0.8-v0.12), step by step, with TVM's names mapped to ours:

    tvm.te, tvm.te.scan         -> compiler.te, compiler.te.scan
    tvm.lower, tvm.build        -> compiler.lower, compiler.build
    tvm.cuda, tvm.nd.array      -> compiler.cuda, compiler.nd.array
    tvm.testing.assert_allclose -> numpy.testing.assert_allclose

The cumulative sum is built for CUDA as the tutorial does (its update's axes bound to
blockIdx/threadIdx); the PTX goes through ptxas, the tutorial's numeric check runs on the
GPU simulator (the host launching one kernel per step, as the launch plan says) and on a
GPU in the test marked ``cuda``. The multi-stage and multiple-state sections only print
their lowered code in the tutorial; here they are also built for the CPU and checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import assert_written, poisoned

import compiler
from compiler import te


def cumsum_on_cuda():
    """The tutorial's first section, up to its build: returns the schedule and arguments."""
    m = te.var("m")
    n = te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = compiler.te.scan(s_init, s_update, s_state, inputs=[X])

    s = te.create_schedule(s_scan.op)
    num_thread = 256
    block_x = te.thread_axis("blockIdx.x")
    thread_x = te.thread_axis("threadIdx.x")
    xo, xi = s[s_init].split(s_init.op.axis[1], factor=num_thread)
    s[s_init].bind(xo, block_x)
    s[s_init].bind(xi, thread_x)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=num_thread)
    s[s_update].bind(xo, block_x)
    s[s_update].bind(xi, thread_x)
    print(compiler.lower(s, [X, s_scan], simple_mode=True))
    return s, [X, s_scan]


def test_cumsum_builds_for_cuda():
    s, args = cumsum_on_cuda()
    fscan = compiler.build(s, args, "cuda", name="myscan")
    assemble(fscan.get_source("ptx"))
    plan = fscan.launch_plan()
    assert len(plan["launches"]) == 2 and plan["program"][1]["body"] == [1]  # one launch per step


def test_cumsum_check_on_the_simulator():
    s, args = cumsum_on_cuda()
    n = 1024
    m = 10
    a_np = np.random.uniform(size=(m, n)).astype(args[1].dtype)
    b = poisoned((m, n), args[1].dtype)  # the tutorial's zeros, poisoned
    simulate(s, args, [a_np, b])  # every launch of the plan, one per step of the scan
    np.testing.assert_allclose(b, np.cumsum(a_np, axis=0), rtol=1e-5)
    assert_written(b, np.cumsum(a_np, axis=0, dtype=a_np.dtype), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_cumsum_runs_on_a_gpu():
    s, args = cumsum_on_cuda()
    fscan = compiler.build(s, args, "cuda", name="myscan")
    dev = compiler.cuda(0)
    n = 1024
    m = 10
    a_np = np.random.uniform(size=(m, n)).astype(args[1].dtype)
    a = compiler.nd.array(a_np, dev)
    b = compiler.nd.array(np.zeros((m, n), dtype=args[1].dtype), dev)
    fscan(a, b)
    np.testing.assert_allclose(b.numpy(), np.cumsum(a_np, axis=0), rtol=1e-5)


def test_multi_stage_scan_cell(rng):
    m = te.var("m")
    n = te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update_s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s_update_s2 = te.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
    s_scan = compiler.te.scan(s_init, s_update_s2, s_state, inputs=[X])

    s = te.create_schedule(s_scan.op)
    xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
    s[s_update_s1].compute_at(s[s_update_s2], xo)
    print(compiler.lower(s, [X, s_scan], simple_mode=True))

    f = compiler.build(s, [X, s_scan], "llvm")
    x = rng.uniform(size=(6, 70)).astype("float32")
    out = poisoned((6, 70), "float32")
    f(x, out)
    want = x.copy()
    for t in range(1, 6):
        want[t] = want[t - 1] * 2 + x[t]
    assert_written(out, want, rtol=1e-5, atol=1e-5)


def test_multiple_states(rng):
    m = te.var("m")
    n = te.var("n")
    l = te.var("l")  # noqa: E741  (the tutorial's name)
    X = te.placeholder((m, n), name="X")
    s_state1 = te.placeholder((m, n))
    s_state2 = te.placeholder((m, l))
    s_init1 = te.compute((1, n), lambda _, i: X[0, i])
    s_init2 = te.compute((1, l), lambda _, i: 0.0)
    s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
    s_update2 = te.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
    s_scan1, s_scan2 = compiler.te.scan(
        [s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X]
    )
    s = te.create_schedule(s_scan1.op)
    print(compiler.lower(s, [X, s_scan1, s_scan2], simple_mode=True))

    f = compiler.build(s, [X, s_scan1, s_scan2], "llvm")
    x = rng.uniform(size=(5, 4)).astype("float32")
    out1, out2 = poisoned((5, 4), "float32"), poisoned((5, 3), "float32")
    f(x, out1, out2)
    want1 = np.cumsum(x, axis=0, dtype="float32")
    want2 = np.zeros((5, 3), "float32")
    for t in range(1, 5):
        want2[t] = want2[t - 1] + want1[t - 1, 0]
    assert_written(out1, want1, rtol=1e-5, atol=1e-5)
    assert_written(out2, want2, rtol=1e-5, atol=1e-5)
