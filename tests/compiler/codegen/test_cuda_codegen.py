"""PTX through LLVM's NVPTX backend: every test kernel is generated here and, where ptxas
exists, assembled; the runtime's artifacts round-trip; tests marked ``cuda`` run the
kernels on a GPU against numpy (skipped without one, with the reason in the header)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from cuda_helpers import PTXAS, assemble, build_ptx, matmul_schedule, vector_add_schedule
from helpers import assert_written, poisoned

import compiler
from compiler import te, topi
from compiler.errors import CodegenError
from compiler.runtime.cuda import load_artifact


def _softmax_schedule(N=4, M=64):
    A = te.placeholder((N, M), name="A")
    k = te.reduce_axis((0, M), name="k")
    mx = te.compute((N,), lambda i: te.max(A[i, k], axis=k), name="mx")
    e = te.compute((N, M), lambda i, j: te.exp(A[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, M), name="k2")
    sm = te.compute((N,), lambda i: te.sum(e[i, k2], axis=k2), name="sm")
    out = te.compute((N, M), lambda i, j: e[i, j] / sm[i], name="out")
    s = te.create_schedule(out.op)
    for T in (mx, sm):
        s[T].bind(T.op.axis[0], te.thread_axis("threadIdx.x"))
    for T in (e, out):
        s[T].bind(T.op.axis[0], te.thread_axis("blockIdx.x"))
        s[T].bind(T.op.axis[1], te.thread_axis("threadIdx.x"))
    return s, [A, out]


def _conv2d_schedule(N=1, C=4, H=8, W=8, F=8, K=3):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((F, C, K, K), name="W")
    P = te.compute((N, C, H + 2, W + 2), lambda n, c, y, x: te.if_then_else(
        te.all(y >= 1, y <= H, x >= 1, x <= W), X[n, c, y - 1, x - 1], 0.0), name="pad")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    Y = te.compute((N, F, H, W), lambda n, f, y, x: te.sum(P[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx],
                                                            axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    n, f, y, x = Y.op.axis
    s[Y].bind(f, te.thread_axis("blockIdx.y"))
    s[Y].bind(y, te.thread_axis("blockIdx.x"))
    s[Y].bind(x, te.thread_axis("threadIdx.x"))
    return s, [X, Wt, Y]


def test_vector_add_ptx():
    s, args = vector_add_schedule()
    mod = build_ptx(s, args, name="vadd")
    ptx = mod.get_source("ptx")
    assert ".entry vadd_kernel0" in ptx and ".target sm_80" in ptx
    assert "%ctaid.x" in ptx and "%tid.x" in ptx and ".maxntid 64, 1, 1" in ptx
    assert "ld.global.nc" in ptx  # inputs through the read-only cache
    assert "bar.sync" not in ptx
    assert mod.imported_modules[0].get_source("ptx") == ptx
    assert "__global__" in mod.get_source("cuda")


def test_matmul_ptx_shared_memory_and_barriers():
    s, args = matmul_schedule(N=64, K=64, M=64, bn=32, vt=2, nt=8, kf=8)
    mod = build_ptx(s, args, name="mm")
    ptx = mod.get_source("ptx")
    assert ptx.count(".shared .align 16 .b8") == 2
    assert ptx.count("bar.sync") == 2
    cuda = mod.get_source("cuda")
    assert cuda.count("__syncthreads();") == 2 and cuda.count("__shared__") == 2
    assert "ld.local" not in ptx and "st.local" not in ptx  # register tiles stay in registers


def test_softmax_and_conv2d_ptx():
    s, args = _softmax_schedule()
    mod = build_ptx(s, args, name="softmax")
    assert len(mod.imported_modules[0].kernel_names) == 4
    assert len(mod.launch_plan()["workspaces"]) == 3
    s, args = _conv2d_schedule()
    build_ptx(s, args, name="conv")


def test_fast_math_exp_uses_the_special_function_unit():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.exp(A[i]) + te.log(A[i]), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    exact = compiler.build(s, [A, B], target="cuda -arch=sm_80").get_source("ptx")
    fast = compiler.build(s, [A, B], target="cuda -arch=sm_80 -fast-math").get_source("ptx")
    assert "ex2.approx" not in exact and "ex2.approx" in fast and "lg2.approx" in fast
    assemble(fast)


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_architectures(arch):
    s, args = vector_add_schedule()
    mod = build_ptx(s, args, arch=arch)
    assert f".target {arch}" in mod.get_source("ptx")


def test_unsupported_math_is_a_codegen_error_not_a_crash():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.erf(A[i]) if hasattr(te, "erf") else te.sin(A[i]), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(CodegenError, match="no GPU lowering"):
        compiler.build(s, [A, B], target="cuda -arch=sm_80")


def test_artifact_round_trip():
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda -arch=sm_80", name="vadd")
    again = load_artifact(mod.save_artifact())
    assert again.get_source("ptx") == mod.get_source("ptx")
    assert again.launch_plan() == mod.launch_plan()
    assert again.function_info("vadd").to_json() == mod.function_info("vadd").to_json()


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed")
def test_cuda_arrays_without_pycuda_say_what_is_missing():
    with pytest.raises(RuntimeError, match="pycuda is not installed"):
        compiler.nd.array(np.zeros(4, "float32"), compiler.cuda(0))
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda -arch=sm_80")
    with pytest.raises(RuntimeError, match="pycuda"):
        mod(np.zeros(4, "float32"), np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_ptxas_is_used_where_present():
    if PTXAS is None:
        pytest.skip("ptxas is not on this machine")
    with pytest.raises(AssertionError, match="ptxas failed"):
        assemble(".version 8.0\n.target sm_80\n.address_size 64\nnonsense")


# ---------------------------------------------------------------------------- on a GPU


def _run(s, args, inputs, out_shape, **kw):
    mod = compiler.build(s, args, target="cuda", **kw)
    dev = compiler.cuda(0)
    arrays = [compiler.nd.array(x, dev) for x in inputs]
    out = compiler.nd.array(poisoned(out_shape, "float32"), dev)
    mod(*arrays, out)
    return out.numpy(), mod, arrays + [out]


@pytest.mark.cuda
def test_gpu_vector_add(rng):
    s, args = vector_add_schedule()
    a, b = rng.standard_normal(1000).astype("float32"), rng.standard_normal(1000).astype("float32")
    got, mod, arrays = _run(s, args, [a, b], (1000,))
    assert_written(got, a + b)
    c = poisoned(1000, "float32")
    mod(a, b, c)  # numpy arrays work too
    assert_written(c, a + b)
    t = mod.time_evaluator(mod.entry_name, compiler.cuda(0), number=5)(*arrays)
    assert t.median > 0


@pytest.mark.cuda
def test_gpu_matmul_shared_and_registers(rng):
    s, args = matmul_schedule(N=128, K=64, M=128, bn=32, vt=2, nt=8, kf=8)
    a, b = rng.standard_normal((128, 64)).astype("float32"), rng.standard_normal((64, 128)).astype("float32")
    got, _, _ = _run(s, args, [a, b], (128, 128))
    assert_written(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_gpu_reduction_and_softmax(rng):
    s, args = _softmax_schedule(N=8, M=128)
    a = rng.standard_normal((8, 128)).astype("float32")
    got, _, _ = _run(s, args, [a], (8, 128))
    e = np.exp(a - a.max(axis=1, keepdims=True))
    assert_written(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.cuda
def test_gpu_conv2d(rng):
    s, args = _conv2d_schedule()
    x = rng.standard_normal((1, 4, 8, 8)).astype("float32")
    w = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    got, _, _ = _run(s, args, [x, w], (1, 8, 8, 8))
    assert_written(got, topi.testing.conv2d_nchw_python(x, w, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason="runs the PTX of an artifact; the simulator runs the loop IR of "
                                  "modules built in its process")
def test_gpu_artifact_runs_in_a_fresh_module(rng):
    s, args = vector_add_schedule()
    mod = load_artifact(compiler.build(s, args, target="cuda").save_artifact())
    a, b = (rng.standard_normal(300).astype("float32") for _ in range(2))
    c = poisoned(300, "float32")
    mod(a, b, c)
    assert_written(c, a + b)
