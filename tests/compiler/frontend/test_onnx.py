"""The ONNX importer: each operator and pattern imported and run by the graph interpreter, checked
against ONNX Runtime on the same inputs; the errors it raises; models exported from torch."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import (  # noqa: E402
    GraphError,
    InputShapeError,
    UnsupportedOperatorError,
    optimize,
    prepare,  # noqa: E402
)
from compiler.graph.fuse import fused_kernels  # noqa: E402
from tests.onnx_helpers import (  # noqa: E402
    BOOL,
    F32,
    I64,
    RNG,
    check_single,
    make_model,
    rand,
    reduction_node,
    run_both,
    single,
)

# ---------------------------------------------------------------------------- convolution


@pytest.mark.parametrize("xshape, wshape, attrs", [
    ((1, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 10, 11), (6, 4, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ((1, 4, 8, 8), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 3, 32, 32), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),  # the 7x7 stem
    ((1, 3, 12, 12), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 3, 7, 8), (4, 3, 4, 3), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 7, 8), (4, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 3, 7, 8), (4, 3, 4, 3), {"auto_pad": "VALID", "strides": [1, 2]}),
    ((1, 3, 20), (5, 3, 3), {"pads": [1, 2], "strides": [2]}),  # 1-D
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(xshape, wshape, attrs, bias):
    consts = {"w": rand(*wshape)}
    if bias:
        consts["b"] = rand(wshape[0])
    graph = check_single("Conv", ["x", "w"] + (["b"] if bias else []), {"x": rand(*xshape)}, consts, **attrs)
    ops = graph.op_counts()
    assert ops["nn.conv2d"] == 1 and ops.get("nn.bias_add", 0) == bias


@pytest.mark.parametrize("xshape, wshape, attrs", [
    ((1, 3, 6, 9, 9), (4, 3, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    ((2, 4, 7, 8, 6), (6, 4, 3, 1, 3), {"strides": [2, 1, 2], "pads": [1, 0, 0, 2, 0, 1]}),
    ((1, 4, 5, 6, 6), (6, 2, 2, 3, 3), {"group": 2, "dilations": [2, 1, 2], "pads": [1, 1, 2, 0, 1, 2]}),
    ((1, 3, 4, 7, 7), (8, 3, 1, 7, 7), {"strides": [1, 2, 2], "pads": [0, 3, 3, 0, 3, 3]}),  # a video stem
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2, 1]}),
    ((3, 4, 6, 3, 3), (4, 4, 3, 3, 3), {"strides": [2, 2, 2]}),  # one output column per image
])
def test_conv_3d(xshape, wshape, attrs):
    """A volume's convolution: one 2-D convolution of the depth slices (the batch) whose channels
    are the input's at each depth tap; a bias on the cases of odd depth."""
    consts = {"w": rand(*wshape)}
    bias = xshape[2] % 2 == 1
    if bias:
        consts["b"] = rand(wshape[0])
    graph = check_single("Conv", ["x", "w"] + (["b"] if bias else []), {"x": rand(*xshape)}, consts, **attrs)
    assert graph.op_counts()["nn.conv2d"] == 1


@pytest.mark.parametrize("opset", [13, 17])
def test_batch_norm(opset):
    c = 5
    consts = {"g": rand(c), "b": rand(c), "m": rand(c) * 0.1, "v": rand(c, low=0.5)}
    graph = check_single("BatchNormalization", ["x", "g", "b", "m", "v"], {"x": rand(2, c, 4, 3)}, consts,
                         opset=opset, epsilon=1e-3)
    assert graph.op_counts() == {"nn.batch_norm": 1}


# ---------------------------------------------------------------------------- elementwise


@pytest.mark.parametrize("op, low", [("Relu", None), ("Sigmoid", None), ("Tanh", None), ("Exp", None),
                                     ("Neg", None), ("Reciprocal", 0.5), ("Sqrt", 0.1), ("Erf", None),
                                     ("Abs", None), ("Log", 0.1)])
def test_unary(op, low):
    check_single(op, ["x"], {"x": rand(2, 3, 4, low=low)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset_20(approximate):
    check_single("Gelu", ["x"], {"x": rand(3, 8)}, opset=20, approximate=approximate)


@pytest.mark.parametrize("op, opset, attrs", [
    ("LeakyRelu", 17, {}), ("LeakyRelu", 17, {"alpha": 0.2}), ("Elu", 17, {}), ("Elu", 17, {"alpha": 0.5}),
    ("Selu", 17, {}), ("Selu", 17, {"alpha": 1.5, "gamma": 2.0}), ("Celu", 17, {"alpha": 2.0}),
    ("ThresholdedRelu", 17, {"alpha": 0.3}), ("HardSigmoid", 17, {}),
    ("HardSigmoid", 17, {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", 14, {}), ("Softplus", 17, {}), ("Softsign", 17, {}), ("Mish", 18, {}),
])
def test_activations(op, opset, attrs):
    # both sides of zero, the clipped ranges of the hard ones and Softplus's large arguments
    x = np.concatenate([rand(2, 3, 40) * 4, np.full((2, 3, 1), 95.0, "float32")], axis=-1)
    graph = check_single(op, ["x"], {"x": x}, opset=opset, **attrs)
    # written out in elementwise operators, which compile to one kernel
    assert len(fused_kernels(prepare(graph, "llvm"))) == 1


def test_prelu_slope_broadcasts_over_channels():
    slope = rand(4, 1, 1)
    slope[0] = -abs(slope[0])  # outside [0, 1] whatever the generator's state
    graph = check_single("PRelu", ["x", "slope"], {"x": rand(2, 4, 5, 5) * 3}, {"slope": slope})
    assert graph.op_counts() == {"less": 1, "multiply": 1, "where": 1}
    # slopes in [0, 1]: the larger of x and its scaled self, which blocked layouts carry through
    slope = RNG.uniform(0, 1, (4, 1, 1)).astype("float32")
    graph = check_single("PRelu", ["x", "slope"], {"x": rand(2, 4, 5, 5) * 3}, {"slope": slope})
    assert graph.op_counts() == {"multiply": 1, "maximum": 1}
    check_single("PRelu", ["x", "slope"], {"x": rand(3, 6), "slope": rand(6)})


def test_a_convolution_then_an_activation_builds():
    consts = {"w": rand(4, 3, 3, 3), "b": rand(4)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["c"], ["h"], alpha=0.1),
             helper.make_node("HardSwish", ["h"], ["y"])]
    run_both(make_model(nodes, {"x": rand(1, 3, 8, 8)}, consts), {"x": rand(1, 3, 8, 8)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_broadcast(op):
    check_single(op, ["x", "y_in"], {"x": rand(2, 3, 4), "y_in": rand(3, 1)})
    check_single(op, ["c", "x"], {"x": rand(2, 3, 4)}, {"c": rand(4)})  # the constant first


def test_pow():
    check_single("Pow", ["x", "e"], {"x": rand(3, 4, low=0.5)}, {"e": np.array(2.0, "float32")})
    check_single("Pow", ["x", "e"], {"x": rand(3, 4, low=0.5)}, {"e": np.array(3, "int64")}, opset=13)
    check_single("Pow", ["x", "e"], {"x": rand(3, 4, low=0.5), "e": rand(4)})


@pytest.mark.parametrize("dtype, fmod, element", [
    ("int32", 0, TensorProto.INT32), ("int64", 1, TensorProto.INT64), ("int8", 0, TensorProto.INT8),
    ("float32", 1, F32),
])
def test_mod_of_model_inputs(dtype, fmod, element):
    """The remainder takes the divisor's sign with fmod=0 (numpy's mod), the dividend's with fmod=1."""
    if dtype == "float32":
        a = rand(2, 3, 4) * np.float32(9)
        b = rand(3, 1, low=0.5) * RNG.choice([-1, 1], (3, 1)).astype("float32")
    else:
        a = RNG.integers(-100, 100, (2, 3, 4)).astype(dtype)
        b = (RNG.integers(1, 9, (3, 1)) * RNG.choice([-1, 1], (3, 1))).astype(dtype)
    graph = check_single("Mod", ["a", "b"], {"a": a, "b": b}, outputs=[("y", element)], fmod=fmod)
    assert graph.op_counts() == {"fmod" if fmod else "mod": 1}


@pytest.mark.parametrize("op, attrs, dtype", [
    ("BitwiseAnd", {}, "int32"), ("BitwiseOr", {}, "uint8"), ("BitwiseXor", {}, "int64"),
    ("BitwiseNot", {}, "int8"),
    ("BitShift", {"direction": "LEFT"}, "uint32"), ("BitShift", {"direction": "RIGHT"}, "uint8"),
])
def test_bitwise(op, attrs, dtype):
    """Opset 18's bitwise operators and BitShift (unsigned; the counts within the width, where
    ONNX Runtime's shift is defined)."""
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, int(info.max) + 1, (3, 4), dtype=np.int64).astype(dtype)
    high = info.bits if op == "BitShift" else int(info.max) + 1
    feeds = {"a": a} if op == "BitwiseNot" else {"a": a, "b": RNG.integers(0, high, (1, 4)).astype(dtype)}
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = check_single(op, list(feeds), feeds, outputs=[("y", element)], opset=18, **attrs)
    assert len(graph.nodes) == 1


def test_mod_of_floats_needs_fmod():
    model = single("Mod", ["a", "b"], {"a": rand(3), "b": rand(3)})
    with pytest.raises(GraphError, match="fmod=0 on floating-point inputs"):
        from_onnx(model)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op):
    check_single(op, ["a", "b", "c"], {"a": rand(2, 3), "b": rand(3), "c": rand(2, 1)})


def test_clip_opset_13_takes_bounds_as_inputs():
    lo, hi = np.array(-0.5, "float32"), np.array(0.7, "float32")
    graph = check_single("Clip", ["x", "lo", "hi"], {"x": rand(4, 5)}, {"lo": lo, "hi": hi}, opset=13)
    (node,) = graph.nodes
    assert node.attrs == {"a_min": -0.5, "a_max": pytest.approx(0.7)}
    check_single("Clip", ["x", "", "hi"], {"x": rand(4, 5)}, {"hi": hi}, opset=13)
    check_single("Clip", ["x", "lo"], {"x": rand(4, 5)}, {"lo": lo}, opset=17)


def test_clip_before_opset_11_takes_attributes():
    graph = check_single("Clip", ["x"], {"x": rand(4, 5) * 8}, opset=6, min=0.0, max=6.0)  # ReLU6
    assert graph.nodes[0].attrs == {"a_min": 0.0, "a_max": 6.0}


def test_cast_and_comparisons():
    x = rand(3, 4) * 3
    check_single("Cast", ["x"], {"x": x}, outputs=[("y", TensorProto.INT32)], to=TensorProto.INT32)
    graph = check_single("Cast", ["x"], {"x": x}, to=TensorProto.FLOAT)
    assert graph.nodes == []  # a cast to the same type is the input itself
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Equal", ["x", "x"], ["same"]),
             helper.make_node("Not", ["pos"], ["neg"]),
             helper.make_node("And", ["neg", "same"], ["both"]),
             helper.make_node("Where", ["both", "x", "other"], ["y"])]
    feeds = {"x": x, "other": rand(4)}
    run_both(make_model(nodes, feeds, {"zero": np.array(0.0, "float32")}), feeds)


def test_where_dropout_identity_expand():
    nodes = [helper.make_node("Dropout", ["x", "ratio"], ["d", "mask"]),
             helper.make_node("Identity", ["d"], ["i"]),
             helper.make_node("Expand", ["i", "shape"], ["e"]),
             helper.make_node("Where", ["mask", "e", "e"], ["y"])]
    feeds = {"x": rand(3, 1)}
    consts = {"ratio": np.array(0.3, "float32"), "shape": np.array([2, 3, 4], "int64")}
    graph = run_both(make_model(nodes, feeds, consts, opset=13), feeds)
    assert "expand" in graph.op_counts()


# ---------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 1], "pads": [0, 1, 1, 0]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
])
def test_pools(op, attrs):
    check_single(op, ["x"], {"x": rand(2, 3, 9, 11)}, **attrs)


@pytest.mark.parametrize("op, count_include_pad", [("MaxPool", 0), ("AveragePool", 0), ("AveragePool", 1)])
@pytest.mark.parametrize("size, pads", [((9, 11), [0, 0, 0, 0]), ((4, 5), [0, 0, 1, 1]),
                                        ((5, 4), [0, 0, 0, 1])])
def test_pool_ceil_mode_drops_a_last_window_in_the_padding(op, count_include_pad, size, pads):
    attrs = {"count_include_pad": count_include_pad} if op == "AveragePool" else {}
    model = single(op, ["x"], {"x": rand(1, 2, *size)}, kernel_shape=[2, 2], strides=[2, 2], pads=pads,
                   ceil_mode=1, **attrs)
    model.graph.output[0].type.tensor_type.ClearField("shape")  # onnx infers the kept window too
    if count_include_pad and size == (5, 4):  # one axis keeps a partial window, the other drops one
        with pytest.raises(UnsupportedOperatorError, match="ceil_mode=1 with count_include_pad=1"):
            from_onnx(model)
        return
    run_both(model, {"x": rand(1, 2, *size)})


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [1, 3, 2], "dilations": [1, 2, 1], "strides": [1, 2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3, 3], "pads": [1, 0, 1, 0, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "auto_pad": "SAME_LOWER"}),
])
def test_pools_3d(op, attrs):
    """A volume's pool: height and width pooled on each depth slice, then the depth (a box and
    the count an average divides by are products of their axes')."""
    check_single(op, ["x"], {"x": rand(2, 3, 5, 7, 6)}, **attrs)


@pytest.mark.parametrize("attrs, size", [
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, (6, 8)),  # SegNet's
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (7, 6)),  # windows overlap
    ({"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [1, 2], "ceil_mode": 1, "storage_order": 1},
     (7, 7)),
    ({"kernel_shape": [3], "strides": [2]}, (9,)),
])
def test_max_pool_indices_and_unpooling(attrs, size):
    """MaxPool's Indices (the first of equal maxima in the window's order; columns first with
    storage_order 1) and MaxUnpool putting each value back there, zeros elsewhere."""
    x = {"x": RNG.integers(-3, 3, (2, 3, *size)).astype("float32")}  # ties in most windows
    index = ("i", TensorProto.INT64)
    run_both(make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], x, outputs=["y", index],
                        opset=12, check=False), x)
    if "dilations" in attrs:
        return
    unpool = {k: v for k, v in attrs.items() if k in ("kernel_shape", "strides", "pads")}
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], **attrs),
             helper.make_node("MaxUnpool", ["p", "i", "s"], ["y"], **unpool)]
    graph = run_both(make_model(nodes, x, {"s": np.array([2, 3, *size], "int64")}, opset=12, check=False), x)
    assert "scatter_nd" not in graph.op_counts()


def test_pool_1d():
    check_single("MaxPool", ["x"], {"x": rand(2, 3, 11)}, kernel_shape=[3], strides=[2], pads=[1, 1])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op):
    graph = check_single(op, ["x"], {"x": rand(2, 3, 5, 7)})
    assert graph.op_counts() == ({"nn.global_avg_pool2d": 1} if op == "GlobalAveragePool" else {"max": 1})
    check_single(op, ["x"], {"x": rand(2, 3, 4, 5, 3)})  # a volume


# ---------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    check_single("Flatten", ["x"], {"x": rand(2, 3, 4)}, axis=axis)


@pytest.mark.parametrize("target, allowzero", [([0, -1], 0), ([-1, 4], 0), ([2, 0, 2, 2], 0),
                                               ([3, 2, 4], 1)])
def test_reshape(target, allowzero):
    graph = check_single("Reshape", ["x", "s"], {"x": rand(2, 3, 4)}, {"s": np.array(target, "int64")},
                         allowzero=allowzero)
    assert graph.op_counts() == {"reshape": 1}


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check_single("Transpose", ["x"], {"x": rand(2, 3, 4)}, **attrs)


def test_shape_arithmetic_folds_to_one_reshape():
    # torch's x.view(x.size(0), -1): Shape, Gather, Unsqueeze, Concat feed a Reshape
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    feeds = {"x": rand(2, 3, 4, 5)}
    consts = {"zero": np.array(0, "int64"), "axes": np.array([0], "int64"), "minus1": np.array([-1], "int64")}
    graph = run_both(make_model(nodes, feeds, consts, [("y", F32, (2, 60))], opset=13), feeds)
    assert [n.op for n in graph.nodes] == ["reshape", "nn.relu"]
    assert graph.nodes[0].attrs["newshape"] == (2, 60)


def test_shape_start_end_and_constant_of_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(
                 np.array([0.5], "float32"))),
             helper.make_node("Constant", [], ["k"], value_float=2.0),
             helper.make_node("Mul", ["c", "k"], ["ck"]),
             helper.make_node("Add", ["x", "ck"], ["y"])]
    feeds = {"x": rand(2, 3, 4)}
    graph = run_both(make_model(nodes, feeds, opset=15), feeds)
    assert graph.op_counts() == {"add": 1}


def test_unsqueeze_and_squeeze_across_opsets():
    feeds = {"x": rand(3, 1, 4)}
    check_single("Unsqueeze", ["x"], feeds, opset=11, axes=[0, -1])
    check_single("Unsqueeze", ["x", "a"], feeds, {"a": np.array([0, 4], "int64")}, opset=13)
    check_single("Squeeze", ["x"], feeds, opset=11, axes=[1])
    check_single("Squeeze", ["x", "a"], feeds, {"a": np.array([-2], "int64")}, opset=13)
    check_single("Squeeze", ["x"], feeds, opset=13)


def test_concat():
    check_single("Concat", ["x", "c", "z"], {"x": rand(2, 3), "z": rand(2, 1)}, {"c": rand(2, 2)}, axis=-1)


@pytest.mark.parametrize("indices, axis", [(np.array([2, -1, 0], "int64"), 1), (np.array(-2, "int64"), 0),
                                           (np.array([[0, 1], [1, 0]], "int64"), 2)])
def test_gather_constant_indices(indices, axis):
    check_single("Gather", ["x", "i"], {"x": rand(3, 4, 2)}, {"i": indices}, axis=axis)


def test_gather_runtime_indices():
    # an embedding lookup: constant table, indices from the model input
    feeds = {"ids": np.array([[1, 4, 0], [3, 3, 2]], "int64")}
    graph = check_single("Gather", ["table", "ids"], feeds, {"table": rand(5, 6)})
    assert graph.op_counts() == {"take": 1}


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("constant", [True, False])
def test_gather_elements(axis, constant):
    x = rand(3, 4, 5)
    shape = [3, 4, 5]
    shape[axis] = 6  # more picks than the axis holds; off the axis, fewer than the data
    shape[(axis + 1) % 3] -= 1
    n = x.shape[axis]
    indices = np.random.default_rng(axis + 5).integers(-n, n, shape).astype("int64")
    feeds, consts = {"x": x}, {}
    (consts if constant else feeds)["i"] = indices
    graph = check_single("GatherElements", ["x", "i"], feeds, consts, axis=axis)
    assert graph.op_counts() == {"gather": 1}


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [0], None),
    ([0, -3], [10**10, -1], [0, 2], [2, 1]),
    ([-1], [-(2**63)], [1], [-1]),  # reversed
    ([3, 0], [0, 4], [2, 1], [-2, 3]),
])
def test_slice(starts, ends, axes, steps):
    consts = {"s": np.array(starts, "int64"), "e": np.array(ends, "int64"), "a": np.array(axes, "int64")}
    inputs = ["x", "s", "e", "a"]
    if steps is not None:
        consts["t"] = np.array(steps, "int64")
        inputs.append("t")
    check_single("Slice", inputs, {"x": rand(5, 6, 7)}, consts, opset=13)


def test_slice_before_opset_10_takes_attributes():
    check_single("Slice", ["x"], {"x": rand(5, 6)}, opset=9, starts=[1, -4], ends=[4, 100], axes=[0, 1])


@pytest.mark.parametrize("tail, outputs", [
    ([helper.make_node("Identity", ["z"], ["y"])], ["y"]),  # the model's output holds nothing
    ([helper.make_node("Concat", ["x", "z", "x"], ["y"], axis=0)], ["y"]),
    ([helper.make_node("Concat", ["z", "x"], ["y"], axis=0)], ["y"]),  # the input, copied out
    ([helper.make_node("Relu", ["z"], ["y"])], ["y"]),
    ([helper.make_node("MatMul", ["z", "w"], ["y"])], ["y"]),
    ([helper.make_node("ReduceSum", ["z", "r"], ["y"], keepdims=0)], ["y"]),
    ([helper.make_node("Relu", ["x"], ["y0"]), helper.make_node("Sigmoid", ["z"], ["y1"])], ["y0", "y1"]),
])
def test_a_slice_that_selects_nothing_feeds_its_readers(tail, outputs):
    """A slice whose step walks away from its end selects nothing (a [0, 3] tensor): no kernel
    reads or writes it, and what reads it computes what ONNX Runtime does."""
    consts = {"s": np.array([-3], "int64"), "e": np.array([2**62], "int64"), "a": np.array([0], "int64"),
              "t": np.array([-1], "int64"), "w": rand(3, 4), "r": np.array([0], "int64")}
    empty = helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["z"])
    used = {name for node in tail for name in node.input}
    model = make_model([empty, *tail], {"x": rand(2, 3)},
                       {k: v for k, v in consts.items() if k in used or k in "seat"}, outputs)
    prepared = prepare(run_both(model, {"x": rand(2, 3)}), "llvm")
    assert all(v.type.size for node in prepared.nodes for v in (*node.inputs, *node.outputs)), prepared


@pytest.mark.parametrize("opset, split", [(11, [2, 3, 1]), (13, [1, 5]), (13, None), (18, None)])
def test_split(opset, split):
    consts, inputs, attrs = {}, ["x"], {}
    n = 2 if split is None else len(split)
    if split is not None and opset >= 13:
        consts["sp"] = np.array(split, "int64")
        inputs.append("sp")
    elif split is not None:
        attrs["split"] = split
    if opset >= 18:
        n = 3
        attrs["num_outputs"] = 3  # 6 into 3 parts; with 7 the last is smaller, see below
    outputs = [f"y{k}" for k in range(n)]
    check_single("Split", inputs, {"x": rand(4, 6)}, consts, opset=opset, outputs=outputs, axis=1, **attrs)


def test_split_opset_18_uneven():
    check_single("Split", ["x"], {"x": rand(7, 2)}, opset=18, outputs=["a", "b", "c"], num_outputs=3)


def test_pad():
    check_single("Pad", ["x", "p", "v"], {"x": rand(2, 3, 4)},
                 {"p": np.array([0, 1, 2, 0, 2, 1], "int64"), "v": np.array(0.5, "float32")}, opset=13)


@pytest.mark.parametrize("mode, shape, pads, axes, opset, kernels", [
    ("constant", (4, 5), [-1, 2, 1, -2], None, 13, 1),  # negative pads crop
    # a crop past the other side's padding: the output is all padding, a constant (no kernel)
    ("constant", (1, 3, 1), [3, -2, 3, -2, -1, 1], None, 13, 0),
    ("reflect", (2, 3, 6, 5), [0, 0, 2, 1, 0, 0, 3, 4], None, 13, 1),  # ReflectionPad2d's form
    ("reflect", (3, 4), [-1, 2, 1, -1], None, 13, 1),
    ("edge", (2, 4, 3), [1, 0, 2, 0, 3, 1], None, 13, 1),
    ("edge", (3, 5), [2, -2], [-1], 18, 1),  # on the axes given
    ("wrap", (4, 3), [2, 1, 3, 2], None, 19, 1),
    ("wrap", (5, 4, 2), [2, -1, 1, 1, 0, 1], None, 19, 1),  # cropped first, then wrapped round
])
def test_pad_by_mode_and_negative_pads(mode, shape, pads, axes, opset, kernels):
    inputs, consts = ["x", "p"], {"p": np.array(pads, "int64")}
    if axes is not None:
        inputs = ["x", "p", "v", "a"]
        consts.update(v=np.array(0.0, "float32"), a=np.array(axes, "int64"))
    graph = check_single("Pad", inputs, {"x": rand(*shape)}, consts, opset=opset, mode=mode)
    assert len(fused_kernels(prepare(graph, "llvm"))) == kernels  # one, however many axes are padded


# ---------------------------------------------------------------------------- instance and group norms


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 9)])
def test_instance_normalization(shape):
    x = rand(*shape) * 3 + 1
    graph = check_single("InstanceNormalization", ["x", "s", "b"], {"x": x},
                         {"s": rand(shape[1]), "b": rand(shape[1])}, epsilon=1e-3)
    assert graph.op_counts()["nn.layer_norm"] == 1


@pytest.mark.parametrize("opset, groups, per", [(18, 2, "group"), (18, 3, "group"), (21, 3, "channel"),
                                                (21, 6, "channel")])
def test_group_normalization(opset, groups, per):
    x = rand(2, 6, 4, 5) * 2 - 1
    n = groups if per == "group" else 6
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-4)
    # onnx's checker calls opset 18's form deprecated; exporters still write it, and it runs
    model = make_model([node], {"x": x}, {"s": rand(n), "b": rand(n)}, [("y", F32, x.shape)], opset,
                       check=opset > 18)
    run_both(model, {"x": x})


@pytest.mark.parametrize("shape, target, axes", [
    ((3, 8, 7), [5, 10], [1, 2]),  # cut by an odd 3 (the extra at the end), padded by an odd 3
    ((2, 6, 6), [6, 2, 9], None),  # every axis: kept, cut, padded
    ((4, 5), [8], [-2]),
])
def test_center_crop_pad(shape, target, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_single("CenterCropPad", ["x", "t"], {"x": rand(*shape)}, {"t": np.array(target, "int64")}, opset=18,
                 **attrs)


@pytest.mark.parametrize("image, block, attrs", [
    ((6, 7), (3, 3), {"pads": [1, 1, 1, 1]}),  # torch's F.fold of 3x3 blocks, overlapping
    # a last row no block reaches
    ((9, 8), (2, 3), {"strides": [2, 3], "dilations": [2, 1], "pads": [1, 0, 0, 1]}),
])
def test_col2im(image, block, attrs):
    """Columns summed back into the image: a transposed convolution whose constant kernel puts
    each column row at its tap."""
    strides, dilations = attrs.get("strides", (1, 1)), attrs.get("dilations", (1, 1))
    pads = attrs.get("pads", (0, 0, 0, 0))
    counts = [(size + pads[k] + pads[k + 2] - d * (b - 1) - 1) // s + 1
              for k, (size, b, s, d) in enumerate(zip(image, block, strides, dilations))]
    x = rand(2, 3 * block[0] * block[1], counts[0] * counts[1])
    shapes = {"i": np.array(image, "int64"), "b": np.array(block, "int64")}
    graph = check_single("Col2Im", ["x", "i", "b"], {"x": x}, shapes, opset=18, **attrs)
    assert graph.op_counts()["nn.conv2d_transpose"] == 1


@pytest.mark.parametrize("size, align_corners", [((2, 3, 4, 5), 0), ((1, 1, 3, 1), 0), ((2, 2, 2, 3, 4), 1)])
def test_affine_grid(size, align_corners):
    """(With align_corners, an axis of one position is where the three disagree: torch puts it at
    0, as the importer does, ONNX Runtime at 1 and the reference at -1.)"""
    theta = rand(size[0], len(size) - 2, len(size) - 1)
    check_single("AffineGrid", ["t", "s"], {"t": theta}, {"s": np.array(size, "int64")}, opset=20,
                 align_corners=align_corners)


# ---------------------------------------------------------------------------- ConvTranspose


@pytest.mark.parametrize("xshape, wshape, attrs", [
    ((1, 4, 5, 6), (4, 3, 2, 2), {"strides": [2, 2]}),  # a U-Net's up-step
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ((2, 4, 4, 3), (4, 2, 3, 2), {"strides": [2, 1], "dilations": [1, 2], "group": 2, "pads": [0, 1, 2, 0]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 9]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 4, 4), {"strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 7), (3, 4, 3), {"strides": [2], "pads": [1, 0]}),  # 1-D
    ((1, 4, 3, 4, 5), (4, 3, 2, 2, 2), {"strides": [2, 2, 2]}),  # a 3-D U-Net's up-step
    ((2, 4, 3, 3, 4), (4, 2, 3, 3, 2), {"strides": [2, 1, 2], "dilations": [2, 1, 1], "group": 2,
                                        "pads": [1, 0, 1, 2, 1, 0], "output_padding": [1, 0, 1]}),
    ((1, 2, 3, 4, 3), (2, 3, 3, 3, 3), {"strides": [2, 2, 1], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 4, 3), (2, 3, 3, 2, 3), {"strides": [3, 2, 2], "output_shape": [8, 8, 6]}),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(xshape, wshape, attrs, bias):
    """A 3-D one is one 2-D transposed convolution of the depth slices of the input spread by the
    depth stride, their channels the input's at each depth tap."""
    consts = {"w": rand(*wshape)}
    if bias:
        consts["b"] = rand(wshape[1] * attrs.get("group", 1))
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    graph = check_single("ConvTranspose", inputs, {"x": rand(*xshape)}, consts, **attrs)
    assert graph.op_counts()["nn.conv2d_transpose"] == 1


@pytest.mark.parametrize("kernel, stride, pads", [(2, 2, [0, 0, 0, 0]), (4, 2, [1, 1, 1, 1]),
                                                  (3, 2, [1, 1, 0, 0])])
def test_a_decoder_step_runs_as_a_tuned_convolution(kernel, stride, pads):
    """A transposed convolution is one convolution computing each of the stride's output phases as
    channels (a U-Net's 2x2 stride-2 step: a 1x1 one), then one kernel that rearranges its pixels
    (and crops the padding) with the bias and ReLU."""
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["u"], strides=[stride] * 2, pads=pads),
             helper.make_node("Relu", ["u"], ["y"])]
    feeds = {"x": rand(1, 8, 5, 5)}
    graph = run_both(make_model(nodes, feeds, {"w": rand(8, 8, kernel, kernel), "b": rand(8)}), feeds)
    kernels = fused_kernels(prepare(graph, "llvm -mcpu=haswell"))  # blocks of 8 on any host
    bodies = [(k.attrs["kind"], [n.op for n in k.attrs["body"].nodes]) for k in kernels]
    taps = -(-kernel // stride)
    (anchor,) = [k for k in kernels if k.attrs["kind"] == "anchor"]
    assert anchor.attrs["body"].nodes[0].op == "nn.conv2d_nchwc"
    assert anchor.attrs["body"].nodes[0].inputs[1].shape[2:4] == (taps, taps)  # each phase's taps
    cropped = ["strided_slice"] if any(pads) else []
    assert bodies[-1] == ("injective", ["layout_transform", "reshape", "transpose", "reshape", *cropped,
                                        "nn.bias_add", "nn.relu"])


# ---------------------------------------------------------------------------- Resize

_COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                "half_pixel_symmetric"]
# (input, scales, sizes): up by 2 and by an odd 1.5 x 2.75 (the scale the coordinates divide by is
# then not size / input), down to a size, and to one pixel
_RESIZES = [((1, 3, 4, 5), [1, 1, 2, 2], None), ((2, 2, 5, 4), [1, 1, 1.5, 2.75], None),
            ((1, 2, 7, 9), None, [1, 2, 3, 4]), ((1, 1, 3, 3), None, [1, 1, 1, 1])]


def check_resize(shape, scales, sizes, **attrs):
    """One Resize node given ``scales`` or ``sizes``, checked against ONNX Runtime."""
    if sizes is None:
        inputs, consts = ["x", "", "s"], {"s": np.array(scales, "float32")}
    else:
        inputs, consts = ["x", "", "", "z"], {"z": np.array(sizes, "int64")}
    graph = check_single("Resize", inputs, {"x": rand(*shape)}, consts, **attrs)
    assert graph.op_counts()["image.resize2d"] == 1


@pytest.mark.parametrize("coordinates", _COORDINATES)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest(coordinates, nearest_mode):
    for shape, scales, sizes in _RESIZES:
        check_resize(shape, scales, sizes, mode="nearest", coordinate_transformation_mode=coordinates,
                     nearest_mode=nearest_mode)


@pytest.mark.parametrize("coordinates", _COORDINATES[:4])
def test_resize_linear(coordinates):
    for shape, scales, sizes in _RESIZES:
        check_resize(shape, scales, sizes, mode="linear", coordinate_transformation_mode=coordinates)


@pytest.mark.parametrize("coordinates, alpha, exclude", [
    ("half_pixel", None, 0), ("pytorch_half_pixel", -0.5, 0), ("align_corners", None, 1),
    ("asymmetric", -0.75, 1)])
def test_resize_cubic(coordinates, alpha, exclude):
    attrs = {} if alpha is None else {"cubic_coeff_a": alpha}
    for shape, scales, sizes in _RESIZES:
        check_resize(shape, scales, sizes, mode="cubic", coordinate_transformation_mode=coordinates,
                     exclude_outside=exclude, **attrs)


def test_resize_at_opset_11_with_its_empty_inputs_and_with_axes_at_18():
    x = rand(1, 2, 3, 4)
    empty = np.zeros(0, "float32")
    consts = {"roi": empty, "s": empty, "z": np.array([1, 2, 6, 8], "int64")}
    check_single("Resize", ["x", "roi", "s", "z"], {"x": x}, consts, opset=11, mode="linear")
    graph = check_single("Resize", ["x", "", "s"], {"x": x}, {"s": np.array([3.0, 2.0], "float32")},
                         opset=18, mode="nearest", axes=[2, 3])
    assert graph.outputs[0].shape == (1, 2, 9, 8)
    same = check_single("Resize", ["x", "", "s"], {"x": x}, {"s": np.ones(4, "float32")}, mode="linear")
    assert same.op_counts().get("image.resize2d", 0) == 0  # scale 1: the input itself


@pytest.mark.parametrize("op, opset", [("Upsample", 7), ("Upsample", 9), ("Resize", 10)])
@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 2, 3]), ("nearest", [1, 1, 0.5, 0.75]),
                                          ("linear", [1, 1, 2, 1.5]), ("linear", [1, 1, 0.6, 0.5])])
def test_resize_before_opset_11(op, opset, mode, scales):
    """Upsample and Resize-10: asymmetric coordinates; nearest rounds down when enlarging and up
    when shrinking, as ONNX Runtime does. Upsample only enlarges."""
    x = {"x": rand(1, 2, 6, 8)}
    scales = np.array(scales, "float32")
    if op == "Upsample" and (scales < 1).any():
        node = helper.make_node(op, ["x", "s"], ["y"], mode=mode)
        with pytest.raises(GraphError, match="scales must be at least 1"):
            from_onnx(make_model([node], x, {"s": scales}, opset=9, check=False))
        return
    if opset < 9:
        node = helper.make_node(op, ["x"], ["y"], mode=mode, scales=scales.tolist())
        model = make_model([node], x, {}, opset=opset, check=False)
    else:
        model = make_model([helper.make_node(op, ["x", "s"], ["y"], mode=mode)], x, {"s": scales},
                           opset=opset, check=False)
    run_both(model, x)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coordinates", ["half_pixel", "align_corners", "half_pixel_symmetric"])
def test_resize_antialias(mode, coordinates):
    """Opset 18's antialiasing (torchvision's antialiased resize exports it): down by odd factors
    and by scales, to one pixel, up, the pixels past the edge repeated or left out."""
    cases = [((1, 2, 13, 9), None, [5, 3], 0), ((1, 3, 8, 12), [0.45, 0.3], None, 1),
             ((1, 1, 5, 6), None, [1, 1], 1), ((1, 2, 4, 5), [1.5, 2.0], None, 0)]
    for shape, scales, sizes, exclude in cases:
        if sizes is None:
            inputs, consts = ["x", "", "s"], {"s": np.array(scales, "float32")}
        else:
            inputs, consts = ["x", "", "", "z"], {"z": np.array(sizes, "int64")}
        check_single("Resize", inputs, {"x": rand(*shape)}, consts, opset=18, mode=mode, antialias=1,
                     axes=[2, 3], coordinate_transformation_mode=coordinates, exclude_outside=exclude)


def test_resize_to_a_size_keeping_the_aspect_ratio():
    """Opset 18's keep_aspect_ratio_policy: one scale for both axes, the smaller (no side past its
    size) or the larger (none short of it)."""
    x = {"x": rand(1, 2, 6, 9)}
    for policy, want in (("not_larger", (1, 2, 4, 6)), ("not_smaller", (1, 2, 8, 12))):
        for mode in ("nearest", "linear"):
            graph = check_single("Resize", ["x", "", "", "z"], x, {"z": np.array([4, 12], "int64")}, opset=18,
                                 mode=mode, axes=[2, 3], keep_aspect_ratio_policy=policy)
            assert graph.outputs[0].shape == want
    node = helper.make_node("Resize", ["x", "", "", "z"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="fit")
    with pytest.raises(GraphError, match="keep_aspect_ratio_policy must be one of stretch, not_larger"):
        from_onnx(make_model([node], x, {"z": np.array([4, 12], "int64")}, opset=18, check=False))


@pytest.mark.parametrize("mode, attrs, scales, resizes", [
    ("nearest", {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     [1, 1, 2, 2, 2], 2),
    ("nearest", {"coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": "ceil"},
     [1, 1, 2, 1, 1], 1),
    ("linear", {"coordinate_transformation_mode": "align_corners"}, [1, 1, 1, 0.5, 1.5], 1),
    ("linear", {}, [1, 1, 2, 2, 2], 2),
])
def test_resize_a_volume(mode, attrs, scales, resizes):
    """A 3-D U-Net's upsampling: height and width, then depth, each as an image is resized;
    depth alone, height and width alone, and all three."""
    graph = check_single("Resize", ["x", "", "s"], {"x": rand(1, 2, 3, 4, 5)},
                         {"s": np.array(scales, "float32")}, mode=mode, **attrs)
    assert graph.op_counts()["image.resize2d"] == resizes


def test_tf_half_pixel_for_nn_keeps_an_axis_not_resized():
    """Half a pixel on, then divided by the scale: at scale 1, the pixels themselves (ONNX
    Runtime's rule, and TensorFlow's)."""
    for mode in ("nearest", "linear", "cubic"):
        check_resize((1, 2, 4, 5), [1, 1, 2, 1], None, mode=mode,
                     coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="ceil")


def test_resize_to_no_pixel_is_an_empty_image():
    x = {"x": rand(1, 2, 4, 5)}
    scales = {"s": np.array([1, 1, 0.1, 1], "float32")}
    graph = check_single("Resize", ["x", "", "s"], x, scales, mode="linear")
    assert graph.outputs[0].shape == (1, 2, 0, 5)
    with pytest.raises(GraphError, match="every size and scale must be positive"):
        from_onnx(single("Resize", ["x", "", "s"], x, {"s": np.array([1, 1, -2, 1], "float32")}))


@pytest.mark.parametrize("attrs, scales, match", [
    ({"mode": "nearest", "antialias": 1}, [1, 1, 0.5, 0.5], "antialias takes mode 'linear' or 'cubic'"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, [1, 1, 2, 2], "tf_crop_and_resize"),
    ({}, [1, 2, 2, 2], "resizing the batch or channel axis"),
])
def test_resize_forms_not_covered_are_named(attrs, scales, match):
    model = single("Resize", ["x", "", "s"], {"x": rand(1, 2, 3, 4)}, {"s": np.array(scales, "float32")},
                   opset=18, **attrs)  # antialias came in 18
    with pytest.raises(GraphError, match=match):
        from_onnx(model)


# ---------------------------------------------------------------------------- products


@pytest.mark.parametrize("attrs, bshape, cshape", [
    ({"transB": 1}, (5, 4), (5,)),
    ({}, (4, 5), (1, 5)),
    ({"transA": 1, "alpha": 0.5, "beta": 2.0}, (4, 5), (3, 5)),
    ({"beta": 0.5}, (4, 5), ()),
    ({}, (4, 5), None),
])
@pytest.mark.parametrize("constant_b", [True, False])
def test_gemm(attrs, bshape, cshape, constant_b):
    a = rand(4, 3) if attrs.get("transA") else rand(3, 4)
    feeds, consts = {"a": a}, {}
    (consts if constant_b else feeds)["b"] = rand(*bshape)
    inputs = ["a", "b"]
    if cshape is not None:
        consts["c"] = rand(*cshape)
        inputs.append("c")
    graph = check_single("Gemm", inputs, feeds, consts, **attrs)
    assert graph.op_counts()["nn.dense"] == 1
    if constant_b and cshape in ((5,), (1, 5)):
        assert graph.op_counts() == {"nn.dense": 1, "nn.bias_add": 1}


@pytest.mark.parametrize("ashape, bshape, constant_b, ops", [
    ((3, 4), (4, 5), True, {"nn.dense"}),
    ((2, 3, 4), (4, 5), True, {"reshape", "nn.dense"}),  # a linear layer on a batch of tokens
    ((2, 3, 7, 4), (4, 5), True, {"reshape", "nn.dense"}),
    ((4,), (4, 5), True, {"reshape", "nn.dense"}),
    ((2, 3, 4), (2, 4, 5), False, {"nn.batch_matmul"}),
    ((2, 3, 6, 4), (2, 3, 4, 5), False, {"reshape", "nn.batch_matmul"}),  # attention scores
    ((2, 3, 4), (1, 4, 5), False, {"nn.batch_matmul"}),  # a batch of one broadcasts
    ((2, 1, 3, 4), (1, 3, 4, 5), False, {"reshape", "expand", "nn.batch_matmul"}),
    ((3, 4), (2, 4, 5), False, {"reshape", "nn.batch_matmul"}),
    ((2, 3, 4), (4,), False, {"reshape", "nn.batch_matmul"}),
    ((2, 3, 4), (2, 4, 5), True, {"nn.batch_matmul"}),
])
def test_matmul(ashape, bshape, constant_b, ops):
    feeds, consts = {"a": rand(*ashape)}, {}
    (consts if constant_b else feeds)["b"] = rand(*bshape)
    graph = check_single("MatMul", ["a", "b"], feeds, consts)
    assert set(graph.op_counts()) == ops


# ---------------------------------------------------------------------------- reductions and normalisations


@pytest.mark.parametrize("opset, axis", [(13, None), (13, 1), (13, 0), (11, 1), (11, 2), (11, None)])
def test_softmax_axis_semantics(opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    check_single("Softmax", ["x"], {"x": rand(2, 3, 4)}, opset=opset, **attrs)
    check_single("LogSoftmax", ["x"], {"x": rand(2, 3, 4)}, opset=opset, **attrs)


@pytest.mark.parametrize("axis, bias", [(-1, True), (1, True), (-1, False)])
def test_layer_norm(axis, bias):
    x = rand(2, 3, 4)
    norm = x.shape[axis % 3:]
    consts = {"g": rand(*norm)}
    if bias:
        consts["b"] = rand(*norm)
    graph = check_single("LayerNormalization", ["x", "g"] + (["b"] if bias else []), {"x": x}, consts,
                         axis=axis, epsilon=1e-3)
    assert graph.op_counts() == {"nn.layer_norm": 1}


def test_decomposed_layer_norm_imports_op_by_op():
    # what torch exports for nn.LayerNorm before opset 17
    nodes = [helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
             helper.make_node("Sub", ["x", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    feeds = {"x": rand(2, 5, 8)}
    consts = {"two": np.array(2.0, "float32"), "eps": np.array(1e-5, "float32"), "g": rand(8), "b": rand(8)}
    graph = run_both(make_model(nodes, feeds, consts, opset=13), feeds)
    assert graph.op_counts() == {"mean": 2, "subtract": 1, "power": 1, "add": 2, "sqrt": 1, "divide": 1,
                                 "multiply": 1}
    # and compiles as one layer norm (the built model above ran it)
    assert optimize(graph).op_counts() == {"nn.layer_norm": 1}


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1)])
def test_reductions_axes_attribute_or_input(op, opset, axes, keepdims):
    as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    inputs, consts, attrs = reduction_node(axes, keepdims, as_input)
    check_single(op, inputs, {"x": rand(2, 3, 4)}, consts, opset=opset, **attrs)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": -1, "keepdims": 0}, {"axis": 1, "select_last_index": 1}])
def test_arg_extremes(op, attrs):
    x = np.round(rand(3, 7, 5) * 2)  # whole numbers: ties, which the first (or last) index wins
    graph = check_single(op, ["x"], {"x": x}, outputs=[("y", I64)], **attrs)
    assert graph.op_counts()[op.lower()] == 1


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1)])
def test_composed_reductions(op, opset, axes, keepdims):
    inputs, consts, attrs = reduction_node(axes, keepdims, opset >= 18)
    x = rand(2, 3, 4) * (30 if op == "ReduceLogSumExp" else 1)  # exp of the raw values would overflow
    check_single(op, inputs, {"x": x}, consts, opset=opset, **attrs)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
def test_composed_reductions_with_empty_axes_reduce_nothing(op):
    check_single(op, ["x"], {"x": rand(2, 3)}, opset=18, noop_with_empty_axes=1)


def test_reduce_noop_with_empty_axes():
    graph = check_single("ReduceSum", ["x"], {"x": rand(2, 3)}, opset=13, noop_with_empty_axes=1)
    assert graph.nodes == []


@pytest.mark.parametrize("op", ["Sin", "Cos", "Floor", "Ceil", "Round", "Sign"])
def test_more_unary(op):
    x = rand(3, 7) * 4
    x[0, :4] = [2.5, -2.5, 0.5, 0.0]  # halves round to even; sign of zero
    check_single(op, ["x"], {"x": x})


@pytest.mark.parametrize("op, low", [("Tan", -1.4), ("Asin", -0.9), ("Acos", -0.9), ("Atan", -5.0),
                                     ("Sinh", -4.0), ("Cosh", -4.0), ("Asinh", -5.0), ("Acosh", 1.0),
                                     ("Atanh", -0.9)])
def test_trigonometric_and_hyperbolic(op, low):
    x = rand(2, 9, low=low)
    x[0, 0] = 1.0 if op == "Acosh" else 0.0  # the edge of the domain, or the odd functions' zero
    check_single(op, ["x"], {"x": x})


@pytest.mark.parametrize("op, attrs", [("IsNaN", {}), ("IsInf", {}), ("IsInf", {"detect_negative": 0}),
                                       ("IsInf", {"detect_positive": 0}),
                                       ("IsInf", {"detect_positive": 0, "detect_negative": 0})])
def test_special_value_tests(op, attrs):
    x = rand(2, 6)
    x[0, :4] = [np.inf, -np.inf, np.nan, 0.0]
    check_single(op, ["x"], {"x": x}, outputs=[("y", BOOL)], **attrs)


@pytest.mark.parametrize("attrs", [{}, {"lambd": 0.3, "bias": 0.2}])
def test_shrink(attrs):
    x = rand(3, 8)
    x[0, :2] = [0.5, -0.5]  # on the thresholds: kept out
    check_single("Shrink", ["x"], {"x": x}, **attrs)


@pytest.mark.parametrize("alpha", [1.0, 0.7])
def test_swish_at_opset_24(alpha):
    graph = check_single("Swish", ["x"], {"x": rand(2, 3, 4)}, opset=24, alpha=alpha)
    expected = ["nn.silu"] if alpha == 1.0 else ["multiply", "sigmoid", "multiply"]
    assert [n.op for n in graph.nodes] == expected


def test_sign_of_integers():
    check_single("Sign", ["x"], {"x": np.array([[-3, 0, 7], [2, -1, 0]], "int64")}, outputs=[("y", I64)])


@pytest.mark.parametrize("op, mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"),
                                      ("SpaceToDepth", None)])
def test_depth_and_space(op, mode):
    x = rand(2, 8, 3, 5) if op == "DepthToSpace" else rand(2, 3, 4, 6)
    attrs = {"blocksize": 2, **({"mode": mode} if mode else {})}
    check_single(op, ["x"], {"x": x}, **attrs)


@pytest.mark.parametrize("reps", [[2, 1, 3], [1, 1, 1], [1, 4, 1]])
def test_tile(reps):
    check_single("Tile", ["x", "r"], {"x": rand(2, 3, 4)}, {"r": np.array(reps, "int64")})


# ---------------------------------------------------------------------------- shapes bound at import


def _dynamic_batch_model():
    node = helper.make_node("Relu", ["x"], ["y"])
    x = helper.make_tensor_value_info("x", F32, ["batch", 3])
    y = helper.make_tensor_value_info("y", F32, ["batch", 3])
    model = helper.make_model(helper.make_graph([node], "dyn", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_symbolic_dimension_needs_shape():
    pattern = r"input\(s\) 'x' \(batch, 3\): pass shape=\{'x': \(\.\.\.\)\}"
    with pytest.raises(InputShapeError, match=pattern) as e:
        from_onnx(_dynamic_batch_model())
    assert e.value.unbound == {"x": ("batch", 3)}


def test_every_input_that_needs_a_shape_is_named_at_once():
    nodes = [helper.make_node("Add", ["x", "z"], ["s"]), helper.make_node("Add", ["s", "w"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", F32, ["batch", 3]),
              helper.make_tensor_value_info("z", F32, None), helper.make_tensor_value_info("w", F32, [2, 3])]
    output = helper.make_tensor_value_info("y", F32, None)
    model = helper.make_model(helper.make_graph(nodes, "three", inputs, [output]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    with pytest.raises(InputShapeError) as e:
        from_onnx(model)
    assert e.value.unbound == {"x": ("batch", 3), "z": None}
    assert "'x' (batch, 3); 'z' (no shape)" in str(e.value)
    with pytest.raises(InputShapeError) as e:  # one bound: the other is still named
        from_onnx(model, shape={"x": (2, 3)})
    assert e.value.unbound == {"z": None}
    graph = from_onnx(model, shape={"x": (2, 3), "z": (2, 3)})
    assert [v.shape for v in graph.inputs] == [(2, 3), (2, 3), (2, 3)]


def test_shape_binds_a_dynamic_batch():
    feeds = {"x": rand(4, 3)}
    graph = run_both(_dynamic_batch_model(), feeds, shape={"x": (4, 3)})
    assert graph.inputs[0].shape == (4, 3)
    assert from_onnx(_dynamic_batch_model(), shape=(2, 3)).inputs[0].shape == (2, 3)  # a bare tuple


@pytest.mark.parametrize("shape, message", [
    ({"z": (1, 3)}, r"shape= names \['z'\].*inputs are \['x'\]"),
    ({"x": (1, 3, 1)}, r"rank 3.*declares rank 2"),
    ({"x": (1, 4)}, r"dimension 1 = 4.*fixes it to 3"),
    ({"x": (1, -3)}, r"non-negative ints"),
])
def test_bad_shape_arguments(shape, message):
    with pytest.raises(GraphError, match=message):
        from_onnx(_dynamic_batch_model(), shape=shape)


def test_initializers_listed_as_inputs_are_constants():
    feeds = {"x": rand(2, 3)}
    model = single("Add", ["x", "c"], feeds, {"c": rand(3)})
    model.graph.input.append(helper.make_tensor_value_info("c", F32, [3]))
    graph = run_both(model, feeds)
    assert [v.name for v in graph.inputs] == ["x"]
    assert graph.nodes[0].inputs[1].is_constant


def test_loads_paths_and_bytes(tmp_path):
    feeds = {"x": rand(2, 3)}
    model = single("Relu", ["x"], feeds)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for source in (path, str(path), model.SerializeToString()):
        graph = from_onnx(source, name="relu")
        assert graph.name == "relu" and graph.op_counts() == {"nn.relu": 1}


# ---------------------------------------------------------------------------- errors


def test_unsupported_operator_names_the_node_and_opset():
    model = single("NonZero", ["x"], {"x": rand(2, 3)}, outputs=[("y", I64)])
    model.graph.node[0].name = "Foo_3"
    with pytest.raises(UnsupportedOperatorError, match=r"node 'Foo_3': operator NonZero \(opset 17\) is not "
                                                       r"supported; supported: .*Conv"):
        from_onnx(model)


def test_unsupported_domain():
    model = single("Relu", ["x"], {"x": rand(2, 3)})
    model.graph.node[0].domain = "com.microsoft"
    with pytest.raises(UnsupportedOperatorError, match="com.microsoft"):
        from_onnx(model)


@pytest.mark.parametrize("op, inputs, feeds, consts, outputs, attrs, message", [
    ("Conv", ["x", "w"], {"x": rand(1, 2, 3, 4, 5, 2)}, {"w": rand(2, 2, 1, 1, 1, 1)}, ["y"], {},
     "4-D convolution"),
    ("ConvTranspose", ["x", "w"], {"x": rand(1, 2, 3, 4, 5, 2)}, {"w": rand(2, 2, 1, 1, 1, 1)}, ["y"], {},
     "4-D transposed convolution"),
    ("Conv", ["x", "w"], {"x": rand(1, 2, 4, 5)}, {"w": rand(2, 2, 1, 1)}, ["y"], {"auto_pad": "SAME_MIDDLE"},
     "auto_pad='SAME_MIDDLE'"),
    ("MaxPool", ["x"], {"x": rand(1, 2, 4, 4, 4)}, {}, ["y", "idx"], {"kernel_shape": [2, 2, 2]},
     "Indices output of a 3-D MaxPool"),
    ("BatchNormalization", ["x", "g", "b", "m", "v"], {"x": rand(1, 2, 3)},
     {k: rand(2, low=0.5) for k in "gbmv"}, ["y"], {"training_mode": 1}, "training_mode=1"),
    ("Pad", ["x", "p"], {"x": rand(2, 3)}, {"p": np.array([1, 1, 1, 1], "int64")}, ["y"], {"mode": "mirror"},
     "mode='mirror'"),
    ("Reshape", ["x", "s"], {"x": rand(2, 3), "s": np.array([3, 2], "int64")}, {}, ["y"], {},
     "input shape computed from the model inputs"),
])
def test_unsupported_attribute_values_name_the_node(op, inputs, feeds, consts, outputs, attrs, message):
    node = helper.make_node(op, inputs, outputs, name="the_node", **attrs)
    model = make_model([node], feeds, consts, outputs, check=False)
    with pytest.raises(UnsupportedOperatorError, match=rf"node 'the_node'.*{message}"):
        from_onnx(model)


def test_malformed_node_names_it():
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="Reshape_0")
    model = make_model([node], {"x": rand(2, 3)}, {"s": np.array([4, -1], "int64")}, check=False)
    with pytest.raises(GraphError, match=r"node 'Reshape_0'.*cannot reshape"):
        from_onnx(model)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.onnx"
    with pytest.raises(FileNotFoundError, match="nowhere.onnx"):
        from_onnx(path)


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("these are not the protobufs you are looking for\n" * 3)
    with pytest.raises(GraphError, match="notes.onnx"):
        from_onnx(path)
    with pytest.raises(GraphError, match="not an ONNX model"):
        from_onnx(b"\x00\x01garbage")


# ---------------------------------------------------------------------------- models exported from torch


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("opset", [13, 17])
def test_small_cnn_from_torch(torch, tmp_path, opset):
    import model_zoo  # scripts/benchmarks, on the path through pyproject.toml's pytest pythonpath
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.block = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(),
                                       nn.Conv2d(8, 8, 3, 1, 1, groups=8))
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            x = self.pool(self.stem(x))
            x = torch.relu(x + self.block(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(0)
    net = model_zoo._randomise_norms(Net(), torch.Generator().manual_seed(0))
    path = model_zoo.export_onnx(net, tmp_path / "cnn.onnx", (2, 3, 32, 32), opset=opset)
    graph = run_both(onnx.load(path), {"input": rand(2, 3, 32, 32)}, rtol=1e-4, atol=1e-5)
    assert graph.op_counts()["nn.batch_norm"] == 2
    assert {"nn.conv2d", "nn.max_pool2d", "nn.global_avg_pool2d", "nn.dense", "add"} <= set(graph.op_counts())


@pytest.mark.parametrize("opset", [14, 18])
def test_torch_activations(torch, tmp_path, opset):
    import model_zoo
    nn = torch.nn
    layers = [nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.SiLU(), nn.Conv2d(8, 8, 3, 1, 1),
              nn.Hardswish(), nn.Conv2d(8, 8, 1), nn.LeakyReLU(0.1), nn.Hardsigmoid(), nn.PReLU(8), nn.ELU(),
              nn.SELU(), nn.CELU(0.5), nn.Softplus(), nn.Softsign(), nn.Mish(), nn.Conv2d(8, 4, 1)]
    torch.manual_seed(0)
    net = model_zoo._randomise_norms(nn.Sequential(*layers), torch.Generator().manual_seed(0))
    path = model_zoo.export_onnx(net, tmp_path / "act.onnx", (1, 3, 12, 12), opset=opset)
    graph = run_both(onnx.load(path), {"input": rand(1, 3, 12, 12) * 2}, rtol=1e-4, atol=1e-5)
    kernels = prepare(graph, "llvm -mcpu=haswell").nodes  # the kernels as on any AVX2 host
    epilogues = [k.attrs.get("epilogue") for k in kernels if k.attrs["kind"] == "anchor"]
    # SiLU as one operator, in the first convolution's output stage
    assert epilogues[:3] == [("bias", "silu"), ("bias", "hardswish"), ("bias", "leaky_relu(0.1)")]


def _upsampling_net(torch):
    """A feature-pyramid step in plain torch: a strided convolution, its output upsampled by
    nearest neighbour (YOLO's neck) and bilinearly, each joined with the full-size features."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.down, self.merge = nn.Conv2d(3, 6, 3, 2, 1), nn.Conv2d(15, 4, 1)

        def forward(self, x):
            small = self.down(x)
            near = nn.Upsample(scale_factor=2, mode="nearest")(small)
            smooth = F.interpolate(small, size=x.shape[2:], mode="bilinear", align_corners=False)
            corners = F.interpolate(small, scale_factor=2, mode="bilinear", align_corners=True)
            return self.merge(torch.cat([x, near + corners, smooth], dim=1))

    return Net().eval()


def _yolo_like(torch):
    """A small detector in the YOLOv5 manner, in plain torch: conv-BN-SiLU blocks, a CSP block
    (split in two, one half through a bottleneck, concatenated), SPPF (three chained max pools,
    concatenated), a nearest-neighbour upsampling joined with the earlier features, and a head
    of sigmoid box outputs reshaped to (batch, anchors, cells, 5)."""
    nn = torch.nn

    def block(cin, cout, k=3, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class CSP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = block(c, c // 2, 1), block(c, c // 2, 1)
            self.m = nn.Sequential(block(c // 2, c // 2, 1), block(c // 2, c // 2))
            self.out = block(c, c, 1)

        def forward(self, x):
            a = self.a(x)
            return self.out(torch.cat([a + self.m(a), self.b(x)], dim=1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = block(c, c // 2, 1), block(c * 2, c, 1)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], dim=1))

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.down = block(3, 8, 3, 2), block(8, 16, 3, 2)
            self.csp, self.sppf = CSP(16), SPPF(16)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.lateral = block(24, 8, 1)
            self.head = nn.Conv2d(8, 2 * 5, 1)

        def forward(self, x):
            shallow = self.stem(x)
            deep = self.sppf(self.csp(self.down(shallow)))
            p = self.lateral(torch.cat([self.up(deep), shallow], dim=1))
            n, _, h, w = p.shape
            boxes = self.head(p).view(n, 2, 5, h * w).permute(0, 1, 3, 2)
            return torch.sigmoid(boxes)

    return Detector().eval()


def test_a_yolo_like_detector_from_torch(torch, tmp_path):
    import model_zoo
    torch.manual_seed(0)
    net = model_zoo._randomise_norms(_yolo_like(torch), torch.Generator().manual_seed(0))
    path = model_zoo.export_onnx(net, tmp_path / "yolo.onnx", (1, 3, 32, 32), opset=17)
    graph = run_both(onnx.load(path), {"input": rand(1, 3, 32, 32)}, rtol=1e-4, atol=1e-5)
    from compiler.graph import optimize

    ops = optimize(graph).op_counts()  # the sigmoid products recognised as SiLU
    assert ops["image.resize2d"] == 1 and ops["nn.silu"] == 10 and ops["nn.max_pool2d"] == 3
    assert ops["nn.conv2d"] == 11 and "nn.batch_norm" not in ops  # BatchNorm folded into each


@pytest.mark.parametrize("opset", [13, 18])
def test_torch_upsampling(torch, tmp_path, opset):
    import model_zoo
    torch.manual_seed(0)
    path = model_zoo.export_onnx(_upsampling_net(torch), tmp_path / "up.onnx", (1, 3, 10, 12),
                                 opset=opset)
    graph = run_both(onnx.load(path), {"input": rand(1, 3, 10, 12)}, rtol=1e-4, atol=1e-5)
    assert graph.op_counts()["image.resize2d"] == 3


@pytest.mark.parametrize("opset, activation", [(13, "relu"), (17, "gelu"), (18, "relu")])
def test_tiny_transformer_encoder_layer_from_torch(torch, tmp_path, opset, activation):
    import model_zoo
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, activation=activation, batch_first=True)
    layer = model_zoo._randomise_norms(layer, torch.Generator().manual_seed(0))
    path = model_zoo.export_onnx(layer, tmp_path / "enc.onnx", (2, 8, 32), opset=opset)
    graph = run_both(onnx.load(path), {"input": rand(2, 8, 32)}, rtol=1e-4, atol=1e-5)
    ops = graph.op_counts()
    assert ops["nn.batch_matmul"] == 2 and ops["nn.softmax"] == 1
    assert ops.get("nn.layer_norm", 0) == (2 if opset >= 17 else 0)
    assert all(not v.is_constant for n in graph.nodes for v in n.outputs)
