"""TVM's ``intrin_math`` tutorial (v0.8-v0.12), step by step, with TVM's names mapped to ours:

    tvm.build                              -> compiler.build
    tvm.te                                 -> compiler.te
    tvm.tir.call_pure_extern / call_intrin -> compiler.tir.call_pure_extern / call_intrin
    tvm.tir.Call, tvm.tir.CallEffectKind   -> compiler.tir.Call, compiler.tir.CallEffectKind
    tvm.ir.register_op_attr                -> compiler.tir.register_op_attr
    tvm.ir.register_intrin_lowering        -> compiler.tir.register_intrin_lowering
    tvm.target.register_intrin_rule (v0.8) -> compiler.tir.register_intrin_rule

The tutorial only prints sources; here each step also checks what its text says (the
direct ``__expf`` call, the unified ``te.exp``, the ``expf`` rule replacing the built-in
lowering, the new ``mylog`` intrinsic). CUDA kernels go through ``build`` and ptxas; the
ones whose math is the compiler's own also run on the GPU simulator against numpy, and a
test marked ``cuda`` runs them all on a GPU. The tutorial's OpenCL build is left out:
there is no OpenCL target here.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.backends.cuda import lower_cuda
from compiler.errors import LoweringError
from compiler.tir import register_intrin_lowering, register_intrin_rule, register_op_attr

NUM_THREAD = 64


@pytest.fixture(autouse=True)
def _registry():
    """The tutorial registers rules and an operator; they are forgotten after each test."""
    with compiler.tir.isolated_registry():
        yield


def _gpu_schedule(fcompute, dtype="float32"):
    """The tutorial's kernel: ``B[i] = fcompute(A[i])`` over a symbolic ``n``, 64 threads a block."""
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: fcompute(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=NUM_THREAD)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def _build(s, args, name):
    f = compiler.build(s, args, "cuda", name=name)
    print(f.imported_modules[0].get_source())  # as the tutorial does (PTX here)
    assemble(f.get_source("ptx"), f.imported_modules[0].arch)
    return f


def _extern_calls(s, args) -> list[str]:
    """The external functions the lowered CUDA kernels call, by name."""
    names = []

    def visit(node):
        if isinstance(node, compiler.tir.Call) and node.op in compiler.tir.EXTERN_OPS:
            names.append(node.args[0].value)

    for k in lower_cuda(compiler.lower(s, args))[0].kernels:
        compiler.tir.post_order_visit(k.body, visit)
    return names


def my_cuda_math_rule(op):
    """The tutorial's rule: ``tir.exp`` of float32 becomes the C function ``expf``."""
    assert isinstance(op, compiler.tir.Call)
    name = op.op.name
    assert name.startswith("tir.")
    dispatch_name = name[4:]
    if op.dtype == "float32":
        return compiler.tir.call_pure_extern("float32", f"{dispatch_name}f", op.args[0])
    if op.dtype == "float64":
        return compiler.tir.call_pure_extern("float64", dispatch_name, op.args[0])
    return op


def mylog(x):
    """The tutorial's own intrinsic."""
    return compiler.tir.call_intrin(x.dtype, "tir.mylog", x)


def my_cuda_mylog_rule(op):
    if op.dtype == "float32":
        return compiler.tir.call_pure_extern("float32", "logf", op.args[0])
    if op.dtype == "float64":
        return compiler.tir.call_pure_extern("float64", "log", op.args[0])
    return op


def test_direct_extern_call():
    s, args = _gpu_schedule(lambda x: compiler.tir.call_pure_extern("float32", "__expf", x))
    f = _build(s, args, "myexp")
    assert "__expf(" in f.get_source("cuda")
    assert "ex2.approx.f32" in f.get_source("ptx")  # what CUDA compiles __expf to


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # "te.exp can also be used for float64"
def test_unified_intrinsic(rng, dtype):
    s, args = _gpu_schedule(te.exp, dtype)
    _build(s, args, "myexp")
    assert _extern_calls(s, args) == []  # the built-in lowering: no library call
    a = random_array(rng, 150, dtype)
    b = poisoned(150, dtype)
    simulate(s, args, [a, b])
    assert_written(b, np.exp(a), rtol=1e-6 if dtype == "float32" else 1e-14)


def test_intrinsic_lowering_rule():
    s, args = _gpu_schedule(te.exp)
    register_intrin_lowering("tir.exp", target="cuda", f=my_cuda_math_rule, level=99)
    f = _build(s, args, "myexp")
    assert _extern_calls(s, args) == ["expf"]
    assert "expf(" in f.get_source("cuda") and "__expf" not in f.get_source("cuda")


def test_add_your_own_intrinsic():
    register_op_attr("tir.mylog", "TCallEffectKind", compiler.tir.CallEffectKind.Pure)
    register_intrin_lowering("tir.mylog", target="cuda", f=my_cuda_mylog_rule, level=99)
    s, args = _gpu_schedule(mylog)
    _build(s, args, "mylog")
    assert _extern_calls(s, args) == ["logf"]
    with pytest.raises(LoweringError, match="tir.mylog"):  # no rule for the CPU was registered
        compiler.build(s, args, "llvm", name="mylog")


def test_tvm_0_8_register_intrin_rule():
    """v0.8 registered rules with ``tvm.target.register_intrin_rule(..., override=True)``."""
    s, args = _gpu_schedule(te.exp)
    register_intrin_rule("cuda", "exp", my_cuda_math_rule, override=True)
    _build(s, args, "myexp")
    assert _extern_calls(s, args) == ["expf"]
    register_op_attr("tir.mylog", "TCallEffectKind", compiler.tir.CallEffectKind.Pure)
    register_intrin_rule("cuda", "mylog", my_cuda_mylog_rule, override=True)
    s, args = _gpu_schedule(mylog)
    _build(s, args, "mylog")
    assert _extern_calls(s, args) == ["logf"]


@pytest.mark.cuda
def test_tutorial_kernels_on_the_gpu(rng):
    register_op_attr("tir.mylog", "TCallEffectKind", compiler.tir.CallEffectKind.Pure)
    register_intrin_lowering("tir.mylog", target="cuda", f=my_cuda_mylog_rule, level=99)
    a = np.abs(random_array(rng, 1000, "float32"))
    for fcompute, want, rtol in ((lambda x: compiler.tir.call_pure_extern("float32", "__expf", x),
                                  np.exp(a), 1e-5), (te.exp, np.exp(a), 1e-6), (mylog, np.log(a), 1e-6)):
        s, args = _gpu_schedule(fcompute)
        f = compiler.build(s, args, "cuda")
        b = poisoned(1000, "float32")
        f(a, b)
        assert_written(b, want, rtol=rtol)
