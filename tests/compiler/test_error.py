"""TVM's error classes: code that catches ``tvm.error.TVMError`` or ``RuntimeError`` catches ours."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te
from compiler.errors import CodegenError, DTypeError, LoweringError, RuntimeArgumentError, ScheduleError
from search_spaces import InstantiationError


def _chain():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1, name="C")
    return A, B, C


def test_every_compiler_error_is_a_tvm_error_and_a_runtime_error():
    for cls in (ScheduleError, LoweringError, CodegenError, DTypeError, RuntimeArgumentError):
        assert issubclass(cls, tvm.error.TVMError)
        assert issubclass(cls, RuntimeError)
    assert tvm.TVMError is tvm.error.TVMError is tvm.CompilerError
    # the built-in parents stay, for code that catches those
    assert issubclass(DTypeError, TypeError) and issubclass(RuntimeArgumentError, ValueError)


def test_a_schedule_refusal_is_caught_as_tvm_error_and_names_stage_and_axis():
    _, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(tvm.error.TVMError) as info:
        s[C].split(B.op.axis[0], factor=4)
    assert "stage 'C'" in str(info.value) and "axis 'i'" in str(info.value)
    with pytest.raises(RuntimeError, match="stage 'C'.*fuse"):
        s[C].fuse(C.op.axis[1], C.op.axis[0])


def test_a_wrong_call_of_a_built_function_is_caught_as_runtime_error():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    f = tvm.build(s, [A, C], target="llvm")
    a = np.random.rand(16, 16).astype("float32")
    with pytest.raises(RuntimeError, match="argument 1 .*dimension 0 is 8, expected 16"):
        f(a, np.empty((8, 16), "float32"))
    c = np.full((16, 16), np.nan, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_operator_errors_keep_tvms_double_parentage():
    assert issubclass(tvm.error.OpNotImplemented, NotImplementedError)
    assert issubclass(tvm.error.OpAttributeInvalid, AttributeError)
    assert issubclass(tvm.error.OpAttributeRequired, tvm.error.OpError)
    assert issubclass(tvm.error.InternalError, tvm.error.TVMError)


def test_an_unsupported_onnx_operator_is_tvms_op_not_implemented():
    from compiler.graph.errors import UnsupportedOperatorError

    assert issubclass(UnsupportedOperatorError, tvm.error.OpNotImplemented)
    assert issubclass(UnsupportedOperatorError, ValueError)


def test_instantiation_error_is_a_value_error_as_in_autotvm():
    assert issubclass(InstantiationError, ValueError)
