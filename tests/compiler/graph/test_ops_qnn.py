"""compiler.graph.ops.qnn: ``qnn.quantize``, ``qnn.dequantize`` and ``qnn.requantize`` agree with
themselves as test_ops.py checks the rest of the catalog: ``infer`` gives the type of ``evaluate``'s
result, and ``compute`` (through ``compiler.topi.qnn``) built with a plain schedule and run on
poisoned outputs matches ``evaluate`` (exactly: the outputs are integers, or float32 products of
the same two float32 factors). The data holds exact halves (which round to even) and values past
the output range (which saturate). Then the references are checked by hand, and ``infer`` refuses
bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import get_op, registered_ops
from tests.compiler.graph.test_ops import Case, case_id, check_case, check_refused

F32, I32 = "float32", "int32"
_RNG = np.random.default_rng(4321)


def _halves(*shape, step=0.125, span=300) -> np.ndarray:
    """float32 multiples of ``step``: with a scale of ``2 * step`` every other one is an exact half."""
    return (_RNG.integers(-span, span, shape) * step).astype(F32)


def _floats(*shape, scale=4.0) -> np.ndarray:
    return (_RNG.standard_normal(shape) * scale).astype(F32)


def _scales(*shape, low=0.01, high=0.1) -> np.ndarray:
    return _RNG.uniform(low, high, shape).astype(F32)


def _ints(shape, dtype, low=None, high=None) -> np.ndarray:
    info = np.iinfo(dtype)
    return _RNG.integers(info.min if low is None else low, (info.max if high is None else high) + 1,
                         shape).astype(dtype)


def _scalar(value, dtype) -> np.ndarray:
    return np.array(value, dtype)


CASES = [
    Case("qnn.quantize", [_halves(2, 3, 8), _scalar(0.25, F32), _scalar(3, "int8")], dict(out_dtype="int8"),
         "int8-halves-saturating"),
    Case("qnn.quantize", [(np.arange(-20, 20, dtype=F32) + np.float32(0.5)) * np.float32(0.1),
                          _scalar(0.1, F32), _scalar(0, "int8")], {}, "float32-halves"),
    Case("qnn.quantize", [_floats(2, 4, 3), _scales(4), _ints((4,), "uint8")],
         dict(axis=1, out_dtype="uint8"), "uint8-per-channel"),
    Case("qnn.quantize", [_floats(3, 5, scale=400.0), _scales(1), _ints((1,), "int16", -100, 100)],
         dict(axis=0, out_dtype="int16"), "int16-one-element"),
    Case("qnn.quantize", [_floats(5, 3, scale=3000.0), _scales(3, low=0.01, high=0.03),
                          _ints((3,), "uint16")], dict(axis=-1, out_dtype="uint16"), "uint16-last-axis"),
    Case("qnn.dequantize", [_ints((2, 3, 4), "int8"), _scalar(0.037, F32), _scalar(-5, "int8")], {}, "int8"),
    Case("qnn.dequantize", [_ints((3, 4, 2), "uint8"), _scales(4), _ints((4,), "uint8")], dict(axis=1),
         "uint8-per-channel"),
    Case("qnn.dequantize", [_ints((6,), I32, -10**6, 10**6), _scales(6, low=1e-4, high=1e-3),
                            _scalar(0, I32)], dict(axis=0), "int32-bias"),
    Case("qnn.dequantize", [_ints((4, 3), "int16"), _scales(1), _ints((1,), "int16", -50, 50)], {}, "int16"),
    Case("qnn.requantize", [_ints((1, 4, 3, 3), I32, -5000, 5000), _scales(4, low=1e-4, high=1e-3),
                            _scalar(0, I32), _scalar(0.02, F32), _scalar(-7, "int8")],
         dict(axis=1, out_dtype="int8"), "int8-per-channel"),
    Case("qnn.requantize", [_ints((3, 5), I32, -3000, 3000), _scalar(0.0015, F32), _scalar(12, I32),
                            _scalar(0.031, F32), _scalar(128, "uint8")], dict(out_dtype="uint8"),
         "uint8-input-zero-point"),
    Case("qnn.requantize", [_ints((2, 5), "int8"), _scales(5, low=0.5, high=2.0), _ints((5,), "int8", -3, 3),
                            _scales(1, low=0.01, high=0.02), _ints((1,), "int16", -9, 9)],
         dict(axis=1, out_dtype="int16"), "int8-to-int16"),
]
QNN_OPS = {"qnn.quantize", "qnn.dequantize", "qnn.requantize"}


def test_every_op_of_the_module_has_a_case():
    module = {n for n in registered_ops() if get_op(n).infer.__module__ == "compiler.graph.ops.qnn"}
    assert module == QNN_OPS
    assert module <= {c.op for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_infer_evaluate_compute_agree(case: Case):
    check_case(case)


def test_quantize_rounds_halves_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000.0, -1000.0, 0.74], F32)
    (q,) = get_op("qnn.quantize").evaluate([x, _scalar(0.5, F32), _scalar(0, "int8")], {"out_dtype": "int8"})
    np.testing.assert_array_equal(q, [1, 3, 5, -1, -3, -5, 127, -128, 1])
    (q,) = get_op("qnn.quantize").evaluate([x, _scalar(1.0, F32), _scalar(10, "uint8")],
                                           {"out_dtype": "uint8"})
    np.testing.assert_array_equal(q, [10, 12, 12, 10, 8, 8, 255, 0, 11])


def test_quantize_divides_in_float32():
    # float32 0.35 / 0.1 is 3.4999999 in float64 but 3.5 (a half, to even: 4) in float32, as ONNX
    # Runtime computes it
    x, scale = np.array([0.35], F32), _scalar(0.1, F32)
    assert np.rint(np.float64(x[0]) / np.float64(scale)) == 3
    (q,) = get_op("qnn.quantize").evaluate([x, scale, _scalar(0, "int8")], {})
    assert q[0] == 4


def test_per_channel_parameters_follow_the_axis():
    x = np.arange(6, dtype="int8").reshape(2, 3)
    scale, zero = np.array([1.0, 10.0, 100.0], F32), np.array([0, 1, 2], "int8")
    (y,) = get_op("qnn.dequantize").evaluate([x, scale, zero], {"axis": 1})
    np.testing.assert_array_equal(y, [[0, 0, 0], [3, 30, 300]])
    (q,) = get_op("qnn.requantize").evaluate(
        [np.array([[10, -10]], I32), _scalar(1.0, F32), _scalar(0, I32), np.array([2.0, 4.0], F32),
         _scalar(0, "uint8")], {"axis": -1, "out_dtype": "uint8"})
    np.testing.assert_array_equal(q, [[5, 0]])  # -2.5 rounds to -2, saturates at 0


BAD = [  # op, input types, attrs, what the message says
    ("qnn.quantize", [((2, 3), I32), ((), F32), ((), "int8")], {}, "data must be float32"),
    ("qnn.quantize", [((2, 3), F32), ((), "float64"), ((), "int8")], {}, "output_scale must be float32"),
    ("qnn.quantize", [((2, 3), F32), ((), F32), ((), F32)], {}, "output_zero_point must be an integer"),
    ("qnn.quantize", [((2, 3), F32), ((2,), F32), ((), "int8")], dict(axis=1), r"\(3,\) \(per channel"),
    ("qnn.quantize", [((2, 3), F32), ((3,), F32), ((), "int8")], dict(axis=2), "out of range"),
    ("qnn.quantize", [((2, 3), F32), ((), F32), ((), I32)], dict(out_dtype=I32), "out_dtype"),
    ("qnn.quantize", [((2, 3), F32), ((), F32)], {}, "takes 3 inputs"),
    ("qnn.dequantize", [((2, 3), F32), ((), F32), ((), "int8")], {}, "data must be one of"),
    ("qnn.dequantize", [((2, 3), "uint8"), ((3,), F32), ((2, 1), "uint8")], {}, "input_zero_point must have"),
    ("qnn.requantize", [((2, 3), I32), ((), F32), ((), I32), ((), "float16"), ((), "int8")], {},
     "output_scale must be float32"),
    ("qnn.requantize", [((2, 3), I32), ((), F32), ((), I32), ((), F32)], {}, "takes 5 inputs"),
]


@pytest.mark.parametrize("op,types,attrs,message", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_infer_refuses_bad_inputs(op, types, attrs, message):
    check_refused(op, types, attrs, message)
