"""The ONNX importer's CumSum, Trilu, EyeLike, OneHot, GatherND, ScatterND, ScatterElements and Scatter:
each imported, run by the graph interpreter and compiled, against ONNX Runtime; indices both
constant and model inputs; then the errors the converters raise."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, UnsupportedOperatorError, prepare  # noqa: E402
from compiler.graph.fuse import fused_kernels  # noqa: E402
from tests.onnx_helpers import F32, I64, RNG, check_single, make_model, rand, run_both  # noqa: E402

I32 = TensorProto.INT32


def _indices(shape, n: int, unique_along: int | None = None) -> np.ndarray:
    """Random int64 indices in [-n, n) (negatives count from the end), or along axis
    ``unique_along`` a distinct permutation slice of range(n) in each row (ONNX leaves the winner
    of duplicate updates undefined without a reduction)."""
    if unique_along is None:
        return RNG.integers(-n, n, shape).astype("int64")
    moved = list(shape)
    k = moved.pop(unique_along)
    rows = [RNG.permutation(n)[:k] - RNG.integers(0, 2) * n for _ in range(int(np.prod(moved)))]
    return np.ascontiguousarray(np.moveaxis(np.array(rows).reshape(*moved, k), -1, unique_along), "int64")


def _ints(*shape, dtype="int32") -> np.ndarray:
    return (RNG.integers(1, 8, shape) * RNG.choice([-1, 1], shape)).astype(dtype)


# ---------------------------------------------------------------------------- CumSum, Trilu, EyeLike


@pytest.mark.parametrize("shape, axis, exclusive, reverse", [
    ((2, 3, 2), -2, 0, 1),
    ((3, 16), 1, 1, 1),  # a row of whole vectors: the default schedule accumulates it in lanes
])
def test_cumsum(shape, axis, exclusive, reverse):
    graph = check_single("CumSum", ["x", "axis"], {"x": rand(*shape)}, {"axis": np.array(axis, "int64")},
                         exclusive=exclusive, reverse=reverse)
    assert graph.op_counts() == {"cumsum": 1}


def test_cumsum_of_integers_along_an_int32_axis():
    x = _ints(3, 4)
    check_single("CumSum", ["x", "axis"], {"x": x}, {"axis": np.array([1], "int32")},
                 outputs=[("y", I32)], exclusive=1)


@pytest.mark.parametrize("shape, k, upper", [((3, 4), None, 1), ((2, 4, 3), -1, 0), ((3, 5), 2, 1)])
def test_trilu(shape, k, upper):
    inputs, consts = ["x"], {}
    if k is not None:
        inputs, consts = ["x", "k"], {"k": np.array(k, "int64")}
    graph = check_single("Trilu", inputs, {"x": rand(*shape)}, consts, opset=14, upper=upper)
    assert graph.op_counts() == {"trilu": 1}


@pytest.mark.parametrize("shape, attrs", [((3, 4), {"k": 1}), ((4, 2), {"k": -1, "dtype": I32})])
def test_eye_like_is_a_constant(shape, attrs):
    out = ("y", attrs.get("dtype", F32))
    graph = check_single("EyeLike", ["x"], {"x": rand(*shape)}, outputs=[out], **attrs)
    assert not graph.nodes


# ---------------------------------------------------------------------------- OneHot


def test_one_hot_of_runtime_indices():
    feeds = {"i": np.array([[0, -1, 3], [-4, 2, 1]], "int64")}
    consts = {"depth": np.array(4, "int64"), "values": np.array([-0.5, 2.5], "float32")}
    graph = check_single("OneHot", ["i", "depth", "values"], feeds, consts)
    assert graph.op_counts() == {"one_hot": 1}


def test_one_hot_of_float_indices_along_axis_0_with_runtime_values():
    feeds = {"i": np.array([1.0, -2.0, 4.0], "float32"), "values": np.array([0.25, -3.0], "float32")}
    check_single("OneHot", ["i", "depth", "values"], feeds, {"depth": np.array([5.0], "float32")}, axis=0)


def test_one_hot_of_constant_indices_folds():
    consts = {"i": np.array([2, 0, -1], "int64"), "depth": np.array(3, "int64"),
              "values": np.array([0, 7], "int64")}
    graph = check_single("OneHot", ["i", "depth", "values"], {"x": rand(1)}, consts, outputs=[("y", I64)],
                         axis=1)
    assert not graph.nodes


# ---------------------------------------------------------------------------- GatherND


@pytest.mark.parametrize("constant", [False, True])
def test_gather_nd(constant):
    x, i = rand(2, 3, 4), np.stack([_indices((3, 2), 2)[:, 0], _indices(3, 3)], axis=-1)
    feeds, consts = {"x": x}, {}
    (consts if constant else feeds)["i"] = i
    graph = check_single("GatherND", ["x", "i"], feeds, consts)
    assert graph.op_counts() == ({"gather_nd": 1} if constant else {"gather_nd": 1, "transpose": 1})


def test_gather_nd_with_batch_dims():
    i = _indices((2, 3, 1), 3)
    check_single("GatherND", ["x", "i"], {"x": rand(2, 3, 4), "i": i}, batch_dims=1)


def test_gather_nd_of_whole_tuples_at_opset_11():
    i = np.stack([_indices(4, 2), _indices(4, 3), _indices(4, 2)], axis=-1)
    check_single("GatherND", ["x", "i"], {"x": rand(2, 3, 2)}, {"i": i}, opset=11)


# ---------------------------------------------------------------------------- ScatterND


def test_scatter_nd_replaces_at_runtime_indices():
    feeds = {"x": rand(4, 3), "i": _indices((3, 1), 4, unique_along=0), "u": rand(3, 3)}
    graph = check_single("ScatterND", ["x", "i", "u"], feeds)
    assert graph.op_counts() == {"scatter_nd": 1, "transpose": 1}


@pytest.mark.parametrize("reduction, opset", [("add", 16), ("mul", 16), ("max", 18), ("min", 18)])
def test_scatter_nd_reductions(reduction, opset):
    # duplicate index tuples: each reduction combines all of them
    i = np.array([[0, 1], [2, -1], [0, 1], [-3, 3]], "int64")
    feeds = {"x": rand(3, 4), "u": rand(4)}
    check_single("ScatterND", ["x", "i", "u"], feeds, {"i": i}, opset=opset, reduction=reduction)


def test_scatter_nd_adds_many_slices():
    # 16 updates: the default schedule accumulates the reduction over them in vector lanes
    feeds = {"x": rand(4, 2), "i": _indices((16, 1), 4), "u": rand(16, 2)}
    check_single("ScatterND", ["x", "i", "u"], feeds, opset=16, reduction="add")


# ---------------------------------------------------------------------------- ScatterElements, Scatter


@pytest.mark.parametrize("axis, constant", [(-1, True), (0, False)])
def test_scatter_elements_replaces(axis, constant):
    x = rand(4, 5)
    shape = [3, 4]
    shape[axis] = 3
    feeds, consts = {"x": x, "u": rand(*shape)}, {}
    (consts if constant else feeds)["i"] = _indices(shape, x.shape[axis], unique_along=axis % 2)
    graph = check_single("ScatterElements", ["x", "i", "u"], feeds, consts, opset=11, axis=axis)
    assert graph.op_counts() == {"scatter_elements": 1}


@pytest.mark.parametrize("reduction, opset, length", [("add", 16, 5), ("mul", 16, 16), ("max", 18, 5),
                                                      ("min", 18, 5)])
def test_scatter_elements_reductions(reduction, opset, length):
    # duplicates along axis 1; 16 of them make a reduction of whole vectors
    feeds = {"x": rand(2, 3, 3), "i": _indices((2, length, 2), 3), "u": rand(2, length, 2)}
    check_single("ScatterElements", ["x", "i", "u"], feeds, opset=opset, axis=1, reduction=reduction)


def test_scatter_before_opset_11_is_scatter_elements():
    feeds = {"x": rand(3, 4), "u": rand(3, 2)}
    i = _indices((3, 2), 4, unique_along=1)
    graph = check_single("Scatter", ["x", "i", "u"], feeds, {"i": i}, opset=10, axis=1)
    assert graph.op_counts() == {"scatter_elements": 1}


# ---------------------------------------------------------------------------- in a model


def test_the_operators_among_their_neighbours():
    # gather_nd fuses with the elementwise operators around it; the scatter and the running sum
    # keep kernels of their own
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("GatherND", ["sq", "i"], ["g"]),
        helper.make_node("Sigmoid", ["g"], ["s"]),
        helper.make_node("ScatterElements", ["s", "j", "u"], ["sc"], axis=1, reduction="add"),
        helper.make_node("CumSum", ["sc", "axis"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    feeds = {"x": rand(3, 4, 5), "i": _indices((2, 1), 3), "j": _indices((2, 3, 5), 4), "u": rand(2, 3, 5)}
    model = make_model(nodes, {k: feeds[k] for k in ("x", "i", "j", "u")}, {"axis": np.array(0, "int64")},
                       opset=16)
    kernels = fused_kernels(prepare(run_both(model, feeds)))
    assert [k.attrs["kind"] for k in kernels] == ["injective", "opaque", "opaque", "injective"]


# ---------------------------------------------------------------------------- errors


def _model(op, inputs, feeds, consts=None, opset=17, **attrs):
    node = helper.make_node(op, inputs, ["y"], name=f"{op}_0", **attrs)
    return make_model([node], feeds, consts, opset=opset, check=False)


@pytest.mark.parametrize("op, inputs, feeds, consts, attrs, error, message", [
    ("GatherND", ["x", "i"], {"x": rand(2, 3)}, {"i": np.array([[1, 3]], "int64")}, {}, GraphError,
     r"an index 3 at position \(0, 1\) is out of range for an axis of 3"),
    ("GatherND", ["x", "i"], {"x": rand(2, 3)}, {"i": np.zeros((2, 3), "int64")}, {}, GraphError,
     "index tuples of 3 entries"),
    ("ScatterElements", ["x", "i", "u"], {"x": rand(2, 3), "u": rand(1, 2)},
     {"i": np.array([[0, -3]], "int64")}, {"axis": 0}, GraphError,
     "an index -3 .* out of range for an axis of 2"),
    ("ScatterElements", ["x", "i", "u"], {"x": rand(2, 3), "u": rand(1, 2)}, {"i": np.zeros((1, 2), "int64")},
     {"reduction": "max"}, GraphError, "reduction='max' needs opset 18"),
    ("ScatterND", ["x", "i", "u"], {"x": rand(2, 3), "u": rand(2)}, {"i": np.zeros((1, 1), "int64")},
     {}, GraphError, r"the updates \(2,\) must have shape \(1, 3\)"),
    ("Trilu", ["x", "k"], {"x": rand(3, 3), "k": np.array(1, "int64")}, {}, {}, UnsupportedOperatorError,
     "input k computed from the model inputs"),
    ("OneHot", ["i", "d", "v"], {"i": np.array([1], "int64"), "d": np.array(3, "int64")},
     {"v": np.array([0, 1], "float32")}, {}, UnsupportedOperatorError, "input depth computed from the model"),
    ("OneHot", ["i", "d", "v"], {"i": np.array([1], "int64")},
     {"d": np.array(0, "int64"), "v": np.array([0, 1], "float32")}, {}, GraphError,
     "depth must be a positive"),
    ("CumSum", ["x", "a"], {"x": rand(3)}, {"a": np.array(1, "int64")}, {}, GraphError,
     "axis 1 is out of range"),
    ("EyeLike", ["x"], {"x": rand(3)}, {}, {}, GraphError, "must be 2-D"),
], ids=["gathernd-range", "gathernd-tuple", "scatter-range", "scatter-opset", "scatternd-updates",
        "trilu-k", "onehot-depth", "onehot-depth-0", "cumsum-axis", "eyelike-rank"])
def test_errors(op, inputs, feeds, consts, attrs, error, message):
    with pytest.raises(error, match=message):
        from_onnx(_model(op, inputs, feeds, consts, **attrs))
