"""``te.call_extern``: generated code calls a C function by name."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te


def test_call_extern_scalar_and_vectorised(rng):
    A = te.placeholder((64,), name="A")
    pid = te.call_extern("int32", "getpid").astype("float32")
    B = te.compute((64,), lambda i: te.call_extern("float32", "fabsf", A[i]) + pid * 0.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    assert "call_extern" in str(compiler.lower(s, [A, B]))
    f = compiler.build(s, [A, B])
    a = random_array(rng, 64, "float32")
    b = poisoned(64, "float32")
    f(a, b)
    assert_written(b, np.abs(a))


def test_call_extern_returns_the_c_value(rng):
    A = te.placeholder((4,), name="A", dtype="int32")
    B = te.compute((4,), lambda i: A[i] + te.call_extern("int32", "getpid"), name="B")
    f = compiler.build(te.create_schedule(B.op), [A, B])
    a = random_array(rng, 4, "int32")
    b = poisoned(4, "int32")
    f(a, b)
    assert_written(b, a + os.getpid())


def test_call_extern_checks_its_name():
    with pytest.raises(ValueError, match="C identifier"):
        te.call_extern("int32", "not a name")
