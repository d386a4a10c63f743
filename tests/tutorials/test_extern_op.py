"""TVM's ``extern_op`` tutorial (v0.8-v0.12), step by step, with TVM's names mapped to ours:

    tvm.te, tvm.build, tvm.cpu, tvm.nd -> compiler.te, compiler.build, compiler.cpu, compiler.nd
    tvm.tir.call_packed                -> compiler.tir.call_packed
    tvm.register_func                  -> compiler.register_func
    tvm.get_global_func                -> compiler.get_global_func
    tvm.contrib.cblas                  -> compiler.contrib.cblas
    tvm.testing.assert_allclose        -> numpy.testing.assert_allclose

The packed function names stay TVM's ("tvm.contrib.cblas.matmul" is registered under that
name too), so the strings in the tutorial need no change. Outputs start poisoned (NaN)
rather than zero, so that an element nobody wrote fails the tutorial's check.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import poisoned

import compiler
from compiler import te
from compiler.contrib import cblas

n = 1024
l = 128  # noqa: E741  (the tutorial's name)
m = 235


@pytest.fixture
def _my_addone():
    """The tutorial registers a Python function; it is forgotten after the test."""
    yield
    compiler.runtime.packed.remove_global_func("tvm.contrib.my_tvm_addone")


def _check_matmul_plus_bias(A, B, D, bias):
    s = te.create_schedule(D.op)
    dev = compiler.cpu(0)
    f = compiler.build(s, [A, B, D, bias], "llvm")
    a = compiler.nd.array(np.random.uniform(size=(n, l)).astype(A.dtype), dev)
    b = compiler.nd.array(np.random.uniform(size=(l, m)).astype(B.dtype), dev)
    d = compiler.nd.array(poisoned((n, m), D.dtype), dev)
    bb = 10.0
    f(a, b, d, bb)
    np.testing.assert_allclose(d.numpy(), np.dot(a.numpy(), b.numpy()) + 10, rtol=1e-5)


def test_use_extern_tensor_function():
    if not compiler.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True):
        raise Exception("Not compiled with cblas support; can't build this tutorial")
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    C = te.extern(
        (n, m),
        [A, B],
        lambda ins, outs: compiler.tir.call_packed(
            "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False
        ),
        name="C",
    )
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    _check_matmul_plus_bias(A, B, D, bias)


def test_extern_contrib_wrappers():
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    C = cblas.matmul(A, B)
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    _check_matmul_plus_bias(A, B, D, bias)  # the tutorial stops at the schedule; build and check it


def test_hook_python_function_as_extern(_my_addone, capsys):
    @compiler.register_func("tvm.contrib.my_tvm_addone")
    def my_tvm_addone(x, y):
        print("my_tvm_addone signatures: %s, %s" % (type(x), type(y)))  # noqa: UP031
        compiler.nd.array(x.numpy() + 1).copyto(y)

    A = te.placeholder((n,), name="A")
    B = te.extern(
        A.shape,
        [A],
        lambda ins, outs: compiler.tir.call_packed("tvm.contrib.my_tvm_addone", ins[0], outs[0]),
        name="C",
    )
    s = te.create_schedule(B.op)
    dev = compiler.cpu(0)
    f = compiler.build(s, [A, B], "llvm")
    a = compiler.nd.array(np.random.uniform(size=(n,)).astype(A.dtype), dev)
    b = compiler.nd.array(poisoned((n,), B.dtype), dev)
    f(a, b)
    np.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-5)
    assert "my_tvm_addone signatures: <class 'compiler.runtime.ndarray.NDArray'>" in capsys.readouterr().out
