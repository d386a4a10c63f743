"""``te.scan``: recurrences over a time axis, on the CPU and (plan, PTX, simulator) for CUDA."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import build_ptx, gpu_function
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.errors import CompilerError, LoweringError, ScheduleError
from compiler.runtime.cuda import program_steps
from compiler.tir.gpu_interpreter import run_gpu_function


def cumsum_scan(m=None, n=None, dtype="float32"):
    """``scan[t] = scan[t - 1] + X[t]`` from ``scan[0] = X[0]``."""
    m = te.var("m") if m is None else m
    n = te.var("n") if n is None else n
    X = te.placeholder((m, n), name="X", dtype=dtype)
    state = te.placeholder((m, n), name="state", dtype=dtype)
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, state, init, update, te.scan(init, update, state, inputs=[X])


def two_stage_scan():
    """``scan[t] = 2 * scan[t - 1] + X[t]`` through an intermediate stage ``s1``."""
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = te.compute((m, n), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    return X, s1, s2, te.scan(init, s2, state, inputs=[X])


def two_stage_reference(x):
    out = np.empty_like(x)
    out[0] = x[0]
    for t in range(1, len(x)):
        out[t] = out[t - 1] * 2 + x[t]
    return out


def test_cumsum_with_symbolic_sizes(rng):
    X, _, _, _, scan = cumsum_scan()
    assert scan.shape[0] is X.shape[0] and scan.op.scan_axis.dom.min.value == 1
    f = compiler.build(te.create_schedule(scan.op), [X, scan])
    for m, n in [(7, 13), (1, 5), (2, 1)]:
        x = random_array(rng, (m, n), "float32")
        out = poisoned((m, n), "float32")
        f(x, out)
        assert_written(out, np.cumsum(x, axis=0, dtype="float32"), rtol=1e-5, atol=1e-5)


def test_update_split_vectorized_and_parallel(rng):
    X, _, init, update, scan = cumsum_scan(12, 70, "int32")
    s = te.create_schedule(scan.op)
    xo, xi = s[update].split(update.op.axis[1], factor=8)
    s[update].vectorize(xi)
    s[update].parallel(xo)
    io, ii = s[init].split(init.op.axis[1], factor=16)
    s[init].parallel(io)
    text = str(compiler.lower(s, [X, scan], simple_mode=True))
    assert "scan.idx in range(1, 12)" in text
    f = compiler.build(s, [X, scan])
    x = random_array(rng, (12, 70), "int32")
    out = poisoned((12, 70), "int32")
    f(x, out)
    assert_written(out, np.cumsum(x, axis=0, dtype="int32"))


@pytest.mark.parametrize("attach", ["default", "compute_at", "inline"])
def test_multi_stage_body(rng, attach):
    X, s1, s2, scan = two_stage_scan()
    s = te.create_schedule(scan.op)
    xo, _ = s[s2].split(s2.op.axis[1], factor=8)
    if attach == "compute_at":
        s[s1].compute_at(s[s2], xo)
    elif attach == "inline":
        s[s1].compute_inline()
    text = str(compiler.lower(s, [X, scan], simple_mode=True))
    if attach != "inline":  # s1 holds one step only, allocated inside the time loop
        assert text.index("allocate s1") > text.index("for scan.idx"), text
        assert "m" not in text.split("allocate s1")[1].split("\n")[0]  # not the whole time axis
    if attach == "compute_at":
        assert "allocate s1[float32 * 8]" in text
    f = compiler.build(s, [X, scan])
    x = random_array(rng, (9, 21), "float32")
    out = poisoned((9, 21), "float32")
    f(x, out)
    assert_written(out, two_stage_reference(x), rtol=1e-5, atol=1e-4)


def test_body_stage_stays_inside_the_scan():
    X, s1, s2, scan = two_stage_scan()
    after = te.compute(scan.shape, lambda t, i: scan[t, i] + s1[t, i], name="after")
    s = te.create_schedule(after.op)
    with pytest.raises(ScheduleError, match="every step of scan 'scan'"):
        s[s1].compute_at(s[after], after.op.axis[0])
    s[s1].compute_root()  # back to the time loop, not to the top level
    assert s[s1].attach_stage is s[scan]


def test_two_states_of_different_shapes(rng):
    m, n, l = te.var("m"), te.var("n"), te.var("l")
    X = te.placeholder((m, n), name="X")
    st1, st2 = te.placeholder((m, n), name="st1"), te.placeholder((m, l), name="st2")
    init1 = te.compute((1, n), lambda _, i: X[0, i], name="init1")
    init2 = te.compute((1, l), lambda _, i: 0.5, name="init2")
    upd1 = te.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="upd1")
    upd2 = te.compute((m, l), lambda t, i: st2[t - 1, i] * 0.5 + st1[t - 1, 0], name="upd2")
    out1, out2 = te.scan([init1, init2], [upd1, upd2], [st1, st2], inputs=[X])
    assert out1.shape[1] is n and out2.shape[1] is l
    f = compiler.build(te.create_schedule(out1.op), [X, out1, out2])
    x = random_array(rng, (6, 4), "float32")
    got1, got2 = poisoned((6, 4), "float32"), poisoned((6, 3), "float32")
    f(x, got1, got2)
    want1 = np.cumsum(x, axis=0, dtype="float32")
    want2 = np.full((6, 3), 0.5, "float32")
    for t in range(1, 6):
        want2[t] = want2[t - 1] * 0.5 + want1[t - 1, 0]
    assert_written(got1, want1, rtol=1e-5, atol=1e-5)
    assert_written(got2, want2, rtol=1e-5, atol=1e-5)


def test_several_initial_steps_and_a_consumer(rng):
    """Fibonacci-like: two initial steps, reads of t - 1 and t - 2, the scan read by a later
    stage (so its buffer is allocated inside the function)."""
    m = te.var("m")
    X = te.placeholder((m, 3), name="X", dtype="int64")
    state = te.placeholder((m, 3), name="state", dtype="int64")
    init = te.compute((2, 3), lambda t, i: X[t, i], name="init")
    update = te.compute((m, 3), lambda t, i: state[t - 1, i] + state[t - 2, i], name="update")
    scan = te.scan(init, update, state)
    out = te.compute((m, 3), lambda t, i: scan[t, i] * 3, name="out")
    f = compiler.build(te.create_schedule(out.op), [X, out])
    x = random_array(rng, (10, 3), "int64")
    want = x.copy()
    for t in range(2, 10):
        want[t] = want[t - 1] + want[t - 2]
    got = poisoned((10, 3), "int64")
    f(x, got)
    assert_written(got, want * 3)


def test_bad_scans_are_refused():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    with pytest.raises(CompilerError, match="reads state 'state' at step t"):
        te.scan(init, te.compute((m, n), lambda t, i: state[t, i] + 1.0), state)
    with pytest.raises(CompilerError, match="must be a te.placeholder"):
        te.scan(init, update, init)
    with pytest.raises(CompilerError, match="must be te.compute tensors"):
        te.scan(X, update, state)
    with pytest.raises(CompilerError, match="differs from the state's"):
        te.scan(te.compute((1, m), lambda _, i: X[0, i]), update, state)
    with pytest.raises(CompilerError, match="one dtype"):
        te.scan(te.compute((1, n), lambda _, i: X[0, i].astype("float64")), update, state)
    with pytest.raises(CompilerError, match="as many init, update and state_placeholder"):
        te.scan([init], [update, update], [state])
    with pytest.raises(CompilerError, match="tensor or a list of tensors"):
        te.scan(init, update, "state")


def test_bad_schedules_are_refused():
    X, state, init, update, scan = cumsum_scan()
    s = te.create_schedule(scan.op)
    with pytest.raises(ScheduleError, match="cannot split a scan stage"):
        s[scan].split(scan.op.scan_axis, factor=2)
    with pytest.raises(ScheduleError, match="reads the stored result"):
        s[init].compute_inline()
    with pytest.raises(LoweringError, match="pass the scan's output"):
        compiler.lower(s, [X, update, scan])


# ---------------------------------------------------------------------------- CUDA


def cuda_cumsum(num_thread=64):
    X, _, init, update, scan = cumsum_scan()
    s = te.create_schedule(scan.op)
    for stage in (init, update):
        xo, xi = s[stage].split(stage.op.axis[1], factor=num_thread)
        s[stage].bind(xo, te.thread_axis("blockIdx.x"))
        s[stage].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [X, scan]


def test_cuda_scan_launches_one_kernel_per_step(rng):
    s, args = cuda_cumsum()
    gf = gpu_function(s, args)
    assert [launch.kernel for launch in gf.launches] == ["main_kernel0", "main_kernel1"]
    loop = gf.program[1]
    assert gf.program[0] == 0 and loop["body"] == [1] and loop["extent"] == "m - 1"
    assert ["scalar", loop["loop"]] in gf.launches[1].args
    steps = [(i, scope.get(loop["loop"])) for i, scope in program_steps(gf.to_json(), {"m": 4, "n": 8})]
    assert steps == [(0, None), (1, 0), (1, 1), (1, 2)]
    x = random_array(rng, (5, 100), "float32")
    out = poisoned((5, 100), "float32")
    run_gpu_function(gf, [x, out])
    assert_written(out, np.cumsum(x, axis=0, dtype="float32"), rtol=1e-5, atol=1e-5)


def test_cuda_scan_builds_to_ptx():
    s, args = cuda_cumsum()
    mod = build_ptx(s, args, name="myscan")
    assert mod.launch_plan()["program"][1]["body"] == [1]


def test_cuda_scan_body_must_be_bound():
    X, _, init, update, scan = cumsum_scan()
    s = te.create_schedule(scan.op)
    xo, xi = s[init].split(init.op.axis[1], factor=32)
    s[init].bind(xo, te.thread_axis("blockIdx.x"))
    s[init].bind(xi, te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="not bound to GPU threads"):
        gpu_function(s, [X, scan])


def rnn_scan(hidden=16):
    """``h[t] = tanh(h[t - 1] @ W + X[t])``: a reduction in the scan's body."""
    m = te.var("m")
    X = te.placeholder((m, hidden), name="X")
    W = te.placeholder((hidden, hidden), name="W")
    state = te.placeholder((m, hidden), name="state")
    init = te.compute((1, hidden), lambda _, i: X[0, i], name="init")
    k = te.reduce_axis((0, hidden), name="k")
    mm = te.compute((m, hidden), lambda t, i: te.sum(state[t - 1, k] * W[k, i], axis=k), name="mm")
    upd = te.compute((m, hidden), lambda t, i: te.tanh(mm[t, i] + X[t, i]), name="upd")
    return X, W, init, mm, upd, te.scan(init, upd, state, inputs=[X])


def rnn_reference(x, w):
    out = x.copy()
    for t in range(1, len(x)):
        out[t] = np.tanh(out[t - 1] @ w + x[t])
    return out


def test_rnn_cell_on_cpu_and_cuda(rng):
    x = random_array(rng, (7, 16), "float32")
    w = random_array(rng, (16, 16), "float32") / 16
    want = rnn_reference(x, w)
    X, W, init, mm, upd, h = rnn_scan()
    out = poisoned((7, 16), "float32")
    compiler.build(te.create_schedule(h.op), [X, W, h])(x, w, out)
    assert_written(out, want, rtol=1e-5, atol=1e-5)

    s = te.create_schedule(h.op)  # one block; a thread per hidden unit, its dot product local
    for stage in (init, upd):
        s[stage].bind(stage.op.axis[0], te.thread_axis("blockIdx.x"))
        s[stage].bind(stage.op.axis[1], te.thread_axis("threadIdx.x"))
    s[mm].compute_at(s[upd], upd.op.axis[1])
    out = poisoned((7, 16), "float32")
    run_gpu_function(gpu_function(s, [X, W, h]), [x, w, out])
    assert_written(out, want, rtol=1e-5, atol=1e-5)
    build_ptx(s, [X, W, h])
