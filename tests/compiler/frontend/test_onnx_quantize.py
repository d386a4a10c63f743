"""The ONNX importer's quantized operators against ONNX Runtime: QuantizeLinear and DequantizeLinear
(per tensor and per channel, int8, uint8, int16, uint16), QLinearConv, QLinearMatMul, ConvInteger
and MatMulInteger, each run by the graph interpreter and compiled (``run_both``); then a model
quantized by ``onnxruntime.quantization.quantize_static`` in the QDQ format, and the forms the
importer refuses.

Integer outputs must equal ONNX Runtime's exactly. Where int8 weights meet uint8 activations the
weights hold 7 bits ([-64, 63], what ``reduce_range`` gives): on x86 CPUs without VNNI, ONNX
Runtime's u8s8 kernels add pairs of products in int16 (``vpmaddubsw``), which saturates with full
8-bit weights, and their results then differ from ONNX's by up to thousands in an int32
accumulator (measured with ONNX Runtime 1.32 on an AVX2 machine). The importer computes ONNX's
exact result; the test data stays where ONNX Runtime's agrees with it. No case differed in the
last bit of a requantization: both compute ``(x_scale * w_scale) / y_scale`` in float32 and round
half to even.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import UnsupportedOperatorError, build_graph, evaluate  # noqa: E402
from tests.helpers import assert_written, poisoned  # noqa: E402
from tests.onnx_helpers import F32, RNG, make_model, rand, run_both, single  # noqa: E402

I8, U8, I16, U16, I32, F16 = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                              TensorProto.INT32, TensorProto.FLOAT16)
ONNX_TYPE = {"int8": I8, "uint8": U8, "int16": I16, "uint16": U16, "int32": I32}


def _ints(shape, dtype: str, low: int | None = None, high: int | None = None) -> np.ndarray:
    """Random integers of ``dtype`` in ``[low, high]`` (the whole range by default)."""
    info = np.iinfo(dtype)
    low, high = info.min if low is None else low, info.max if high is None else high
    return RNG.integers(low, high + 1, shape).astype(dtype)


def _zero_point(dtype: str, shape=()) -> np.ndarray:
    """A non-zero zero point away from the range's ends."""
    info = np.iinfo(dtype)
    span = (int(info.max) - int(info.min)) // 8
    mid = (int(info.max) + int(info.min)) // 2
    z = RNG.integers(mid - span, mid + span, shape)
    return np.where(z == 0, 1, z).astype(dtype)


def _scales(*shape, low=0.005, high=0.05) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype("float32")


def _exact(model, feeds):
    return run_both(model, feeds, rtol=0, atol=0)


# ---------------------------------------------------------------------------- QuantizeLinear


@pytest.mark.parametrize("dtype,opset", [("int8", 10), ("uint8", 13), ("int16", 21), ("uint16", 21)])
def test_quantize_linear_per_tensor_saturates(dtype, opset):
    scale = 0.037 if dtype.endswith("int8") else 1.5e-4  # some values beyond the range
    x = rand(2, 3, 4, 6) * 3  # enough elements for the compiled kernel's vector loop
    consts = {"s": np.array(scale, "float32"), "z": _zero_point(dtype)}
    model = single("QuantizeLinear", ["x", "s", "z"], {"x": x}, consts, opset, [("y", ONNX_TYPE[dtype])])
    _exact(model, {"x": x})


def test_quantize_linear_rounds_halves_to_even():
    x = (RNG.integers(-60, 60, (4, 40)) * 0.125).astype("float32")  # x / 0.25: every other one a half
    x = np.where(x == 0, 0.375, x).astype("float32")
    consts = {"s": np.array(0.25, "float32"), "z": np.array(-3, "int8")}
    _exact(single("QuantizeLinear", ["x", "s", "z"], {"x": x}, consts, 13, [("y", I8)]), {"x": x})


@pytest.mark.parametrize("dtype,axis", [("int8", 1), ("uint8", -1)])
def test_quantize_linear_per_channel(dtype, axis):
    x = rand(4, 3, 12) * 2
    channels = x.shape[axis]
    consts = {"s": _scales(channels), "z": _zero_point(dtype, (channels,))}
    model = single("QuantizeLinear", ["x", "s", "z"], {"x": x}, consts, 13, [("y", ONNX_TYPE[dtype])],
                   axis=axis)
    _exact(model, {"x": x})


def test_quantize_linear_without_zero_point_gives_uint8():
    x = rand(3, 5) * 2
    model = single("QuantizeLinear", ["x", "s"], {"x": x}, {"s": np.array(0.02, "float32")}, 13, [("y", U8)])
    graph = _exact(model, {"x": x})
    assert graph.outputs[0].dtype == "uint8"


def test_quantize_linear_output_dtype_attribute():
    x = rand(3, 5) * 2
    model = single("QuantizeLinear", ["x", "s"], {"x": x}, {"s": np.array(0.02, "float32")}, 21, [("y", I8)],
                   output_dtype=I8)
    assert _exact(model, {"x": x}).outputs[0].dtype == "int8"


def test_quantize_linear_scale_from_the_model_inputs():
    x, scale, zero = rand(2, 3, 4) * 2, _scales(3), _zero_point("int8", (3,))
    feeds = {"x": x, "s": scale, "z": zero}
    _exact(single("QuantizeLinear", ["x", "s", "z"], feeds, None, 13, [("y", I8)], axis=1), feeds)
    q = _ints((2, 3, 4), "uint8")
    feeds = {"q": q, "s": np.array(0.02, "float32"), "z": np.array(131, "uint8")}
    _exact(single("DequantizeLinear", ["q", "s", "z"], feeds, None, 13), feeds)


def test_quantize_linear_float16_scale():
    x = (rand(2, 6) * 2).astype("float16")
    consts = {"s": np.array(0.037, "float16"), "z": np.array(5, "int8")}
    _exact(single("QuantizeLinear", ["x", "s", "z"], {"x": x}, consts, 19, [("y", I8)]), {"x": x})


# ---------------------------------------------------------------------------- DequantizeLinear


@pytest.mark.parametrize("dtype,opset", [("int8", 10), ("uint8", 13), ("int16", 21), ("uint16", 21)])
def test_dequantize_linear_per_tensor(dtype, opset):
    q = _ints((2, 3, 4), dtype)
    consts = {"s": np.array(0.0123, "float32"), "z": _zero_point(dtype)}
    _exact(single("DequantizeLinear", ["q", "s", "z"], {"q": q}, consts, opset), {"q": q})


@pytest.mark.parametrize("dtype,axis", [("uint8", 1), ("int8", 0), ("int32", 2)])
def test_dequantize_linear_per_channel(dtype, axis):
    q = _ints((3, 4, 5), dtype, -10**6 if dtype == "int32" else None, 10**6 if dtype == "int32" else None)
    channels = q.shape[axis]
    consts = {"s": _scales(channels)}
    inputs = ["q", "s"]
    if dtype != "int32":  # an int32 one (a bias) has no zero point
        consts["z"] = _zero_point(dtype, (channels,))
        inputs.append("z")
    _exact(single("DequantizeLinear", inputs, {"q": q}, consts, 13, axis=axis), {"q": q})


def test_dequantize_linear_float16_output():
    q = _ints((2, 6), "uint8")
    consts = {"s": np.array(0.037, "float16"), "z": np.array(130, "uint8")}
    _exact(single("DequantizeLinear", ["q", "s", "z"], {"q": q}, consts, 19, [("y", F16)]), {"q": q})


def test_dequantized_constant_weight_folds_at_import():
    x = rand(1, 3, 5, 5)
    w = _ints((4, 3, 3, 3), "int8")
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("Conv", ["x", "wf"], ["y"], pads=[1, 1, 1, 1])]
    consts = {"w": w, "ws": _scales(4), "wz": np.zeros(4, "int8")}
    graph = run_both(make_model(nodes, {"x": x}, consts, opset=13), {"x": x}, rtol=1e-5, atol=1e-5)
    assert [n.op for n in graph.nodes] == ["nn.conv2d"]


# ---------------------------------------------------------------------------- QLinearConv, ConvInteger


def _qlinear_conv(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray, w_zero: np.ndarray, y_dtype: str,
                  bias: np.ndarray | None = None, **attrs):
    consts = {"xs": np.array(0.02, "float32"), "xz": _zero_point(x.dtype.name), "w": w, "ws": w_scale,
              "wz": w_zero, "ys": np.array(0.25, "float32"), "yz": _zero_point(y_dtype)}
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        consts["b"] = bias
        inputs.append("b")
    return single("QLinearConv", inputs, {"x": x}, consts, 13, [("y", ONNX_TYPE[y_dtype])], **attrs)


def test_qlinear_conv_uint8_per_channel_with_bias():
    x, w = _ints((1, 3, 6, 6), "uint8"), _ints((4, 3, 3, 3), "int8", -64, 63)
    model = _qlinear_conv(x, w, _scales(4), np.zeros(4, "int8"), "uint8", _ints((4,), "int32", -3000, 3000),
                          pads=[1, 1, 1, 1])
    _exact(model, {"x": x})


def test_qlinear_conv_int8_grouped_strided():
    x, w = _ints((1, 4, 7, 6), "int8"), _ints((6, 2, 3, 2), "int8")
    model = _qlinear_conv(x, w, np.array(0.01, "float32"), np.array(3, "int8"), "int8", group=2,
                          strides=[2, 1], dilations=[1, 2], pads=[0, 1, 1, 0])
    _exact(model, {"x": x})


def test_qlinear_conv_uint8_weights_depthwise_same_padding():
    x, w = _ints((1, 3, 5, 5), "uint8"), _ints((3, 1, 3, 3), "uint8")
    model = _qlinear_conv(x, w, _scales(3), np.full(3, 131, "uint8"), "uint8", group=3, auto_pad="SAME_UPPER")
    _exact(model, {"x": x})


def test_qlinear_conv_1d():
    x, w = _ints((2, 3, 7), "int8"), _ints((4, 3, 3), "int8")
    _exact(_qlinear_conv(x, w, _scales(4), np.full(4, -2, "int8"), "int8", pads=[1, 0]), {"x": x})


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_a_max_pool_of_quantized_values_between_quantized_convolutions(dtype):
    """ONNX Runtime's QOperator format leaves MaxPool on the integers (its padding the dtype's
    least value): one pool between two QLinearConvs, on the default schedule."""
    x = _ints((1, 3, 9, 9), dtype)
    conv = {"w": _ints((8, 3, 3, 3), "int8", -64, 63), "ws": _scales(8), "wz": np.zeros(8, "int8"),
            "w2": _ints((4, 8, 3, 3), "int8", -64, 63), "w2s": _scales(4), "w2z": np.zeros(4, "int8")}
    scales = {"xs": np.array(0.02, "float32"), "xz": _zero_point(dtype), "ps": np.array(0.25, "float32"),
              "pz": _zero_point(dtype), "ys": np.array(0.5, "float32"), "yz": _zero_point(dtype)}
    same = {"pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ps", "pz"], ["a"], **same),
             helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[3, 3], strides=[2, 2], **same),
             helper.make_node("QLinearConv", ["p", "ps", "pz", "w2", "w2s", "w2z", "ys", "yz"], ["y"])]
    model = make_model(nodes, {"x": x}, {**conv, **scales}, [("y", ONNX_TYPE[dtype])], opset=13)
    graph = _exact(model, {"x": x})
    assert graph.op_counts()["nn.max_pool2d"] == 1


@pytest.mark.parametrize("x_dtype,w_dtype", [("uint8", "uint8"), ("uint8", "int8")])
def test_conv_integer(x_dtype, w_dtype):
    x = _ints((1, 3, 6, 5), x_dtype)
    w = _ints((4, 3, 3, 2), w_dtype, -64 if w_dtype == "int8" else None, 63 if w_dtype == "int8" else None)
    consts = {"w": w, "xz": _zero_point(x_dtype), "wz": _zero_point(w_dtype)}
    model = single("ConvInteger", ["x", "w", "xz", "wz"], {"x": x}, consts, 13, [("y", I32)],
                   pads=[1, 0, 1, 1], strides=[1, 2])
    _exact(model, {"x": x})


# ---------------------------------------------------------------------------- QLinearMatMul, MatMulInteger


def _qlinear_matmul(a_dtype: str, b_dtype: str, b_scale: np.ndarray, b_zero: np.ndarray, feeds, b=None):
    consts = {"as": np.array(0.03, "float32"), "az": _zero_point(a_dtype), "bs": b_scale, "bz": b_zero,
              "ys": np.array(0.2, "float32"), "yz": _zero_point(a_dtype)}
    if b is not None:
        consts["b"] = b
    return single("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], feeds, consts, 13,
                  [("y", ONNX_TYPE[a_dtype])])


def test_qlinear_matmul_int8_per_column_batched_a():
    a, b = _ints((2, 3, 8), "int8"), _ints((8, 5), "int8")
    model = _qlinear_matmul("int8", "int8", _scales(1, 5), np.full((1, 5), 2, "int8"), {"a": a}, b)
    graph = _exact(model, {"a": a})
    assert "qnn.requantize" in graph.op_counts() and "nn.dense" in graph.op_counts()


def test_qlinear_matmul_uint8_int8_per_tensor():
    a, b = _ints((4, 16), "uint8"), _ints((16, 3), "int8", -64, 63)
    model = _qlinear_matmul("uint8", "int8", np.array(0.01, "float32"), np.array(0, "int8"), {"a": a}, b)
    _exact(model, {"a": a})


def test_qlinear_matmul_of_two_inputs():
    a, b = _ints((2, 3, 4), "uint8"), _ints((2, 4, 5), "uint8")
    model = _qlinear_matmul("uint8", "uint8", np.array(0.01, "float32"), np.array(140, "uint8"),
                            {"a": a, "b": b})
    assert "nn.batch_matmul" in _exact(model, {"a": a, "b": b}).op_counts()


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_matmul_integer_per_column_zero_points(dtype):
    a, b = _ints((2, 3, 6), dtype), _ints((6, 4), dtype)
    consts = {"b": b, "az": _zero_point(dtype), "bz": _zero_point(dtype, (4,))}
    _exact(single("MatMulInteger", ["a", "b", "az", "bz"], {"a": a}, consts, 13, [("y", I32)]), {"a": a})


def test_matmul_integer_without_zero_points():
    a, b = _ints((3, 6), "int8"), _ints((6, 4), "int8")
    _exact(single("MatMulInteger", ["a", "b"], {"a": a, "b": b}, None, 13, [("y", I32)]), {"a": a, "b": b})


def test_matmul_integer_per_row_zero_point():
    # ONNX allows an a_zero_point per row; ONNX Runtime does not, so numpy says what ONNX means
    a, b = _ints((3, 6), "uint8"), _ints((6, 4), "uint8")
    az, bz = _zero_point("uint8", (3,)), _zero_point("uint8", (4,))
    model = single("MatMulInteger", ["a", "b", "az", "bz"], {"a": a}, {"b": b, "az": az, "bz": bz}, 13,
                   [("y", I32)])
    expected = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz)
    graph = from_onnx(model)
    np.testing.assert_array_equal(evaluate(graph, {"a": a})[0], expected)
    out = poisoned(expected.shape, "int32")
    build_graph(graph)(a, out)
    assert_written(out, expected.astype("int32"))


# ---------------------------------------------------------------------------- a QDQ model


def test_model_quantized_by_onnxruntime_in_qdq_format(tmp_path):
    """Conv + Relu + MatMul quantized by ``quantize_static`` (QDQ, weights per channel).

    ONNX Runtime fuses each DequantizeLinear -> Conv/MatMul -> QuantizeLinear group into an
    integer kernel (QLinearConv, QLinearMatMul): it accumulates the integers exactly and requantizes
    once, where the graph as written (and the import) computes the float convolution of the
    dequantized values and quantizes that. The two agree except where a value lies within float32
    rounding of a rounding boundary, where the quantized output moves by one step: the tolerance is
    one step of the output's scale. ``reduce_range`` keeps the weights in 7 bits, where ONNX
    Runtime's u8s8 kernels do not saturate (see the module's docstring)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    C, F, H, W, K = 3, 4, 5, 5, 6
    inits = {"w1": rand(F, C, 3, 3) * 0.3, "b1": rand(F) * 0.1, "w2": rand(F * H * W, K) * 0.1,
             "shape": np.array([1, -1], "int64")}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "w2"], ["y"])]
    float_model = make_model(nodes, {"x": rand(1, C, H, W)}, inits, opset=17)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rand(1, C, H, W)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    src, dst = os.fspath(tmp_path / "float.onnx"), os.fspath(tmp_path / "qdq.onnx")
    onnx.save(float_model, src)
    quantization.quantize_static(src, dst, Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=True, reduce_range=True,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    model = onnx.load(dst)
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv", "MatMul"} <= ops
    (last,) = [n for n in model.graph.node if n.output[0] == "y"]
    assert last.op_type == "DequantizeLinear"
    (step,) = [numpy_helper.to_array(i).item() for i in model.graph.initializer if i.name == last.input[1]]
    x = rand(1, C, H, W)
    graph = run_both(model, {"x": x}, rtol=0, atol=step * 1.001)
    counts = graph.op_counts()
    assert counts["qnn.quantize"] >= 2 and counts["qnn.dequantize"] >= 2
    assert counts["nn.conv2d"] == 1 and counts["nn.dense"] == 1  # the weights folded to float32


# ---------------------------------------------------------------------------- refused


def _refused(model, match: str):
    with pytest.raises(UnsupportedOperatorError, match=match):
        from_onnx(model)


def test_blocked_quantization_is_refused():
    x = rand(4, 6)
    consts = {"s": _scales(4, 3), "z": np.zeros((4, 3), "int8")}
    model = single("QuantizeLinear", ["x", "s", "z"], {"x": x}, consts, 21, [("y", I8)], axis=1, block_size=2)
    _refused(model, "block_size=2")


def test_float8_is_refused():
    x = rand(2, 3)
    model = single("QuantizeLinear", ["x", "s"], {"x": x}, {"s": np.array(0.1, "float32")}, 21,
                   [("y", TensorProto.FLOAT8E4M3FN)], output_dtype=TensorProto.FLOAT8E4M3FN)
    _refused(model, "output_dtype FLOAT8E4M3FN")
    zero = helper.make_tensor("z", TensorProto.FLOAT8E4M3FN, [], [0.0])  # numpy has no float8
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    graph = helper.make_graph([node], "f8", [helper.make_tensor_value_info("x", F32, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, x.shape)],
                              initializer=[numpy_helper.from_array(np.array(0.1, "float32"), "s"), zero])
    _refused(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), "FLOAT8E4M3FN")


def test_division_precision_other_than_float32_is_refused():
    x = rand(2, 3)
    model = single("QuantizeLinear", ["x", "s"], {"x": x}, {"s": np.array(0.1, "float32")}, 25, [("y", U8)],
                   precision=TensorProto.FLOAT16)
    _refused(model, "precision FLOAT16")


def test_activation_scale_per_channel_is_refused():
    x, w = _ints((1, 3, 4, 4), "uint8"), _ints((2, 3, 1, 1), "uint8")
    consts = {"xs": _scales(3), "xz": np.array(1, "uint8"), "w": w, "ws": np.array(0.1, "float32"),
              "wz": np.array(1, "uint8"), "ys": np.array(0.2, "float32"), "yz": np.array(1, "uint8")}
    model = single("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], {"x": x}, consts, 13,
                   [("y", U8)])
    _refused(model, "per-channel x_scale")
    a = _ints((3, 4), "uint8")
    consts = {"as": _scales(3), "az": np.array(1, "uint8"), "b": _ints((4, 2), "uint8"),
              "bs": np.array(0.1, "float32"), "bz": np.array(1, "uint8"), "ys": np.array(0.2, "float32"),
              "yz": np.array(1, "uint8")}
    model = single("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], {"a": a}, consts, 13,
                   [("y", U8)])
    _refused(model, "per-row a_scale")
