"""The ONNX importer's TopK, ReverseSequence, GridSample and RoiAlign: each imported, run by the graph
interpreter and compiled, against ONNX Runtime, with the data, grids and regions as model inputs;
then the errors the converters raise."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnxruntime as ort  # noqa: E402
from onnx import helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, UnsupportedOperatorError, build_graph, evaluate, prepare  # noqa: E402
from compiler.graph.fuse import fused_kernels  # noqa: E402
from tests.helpers import poisoned  # noqa: E402
from tests.onnx_helpers import F32, I64, RNG, check_single, make_model, rand, run_both, single  # noqa: E402


def _ties(*shape) -> np.ndarray:
    """Random non-zero halves: many ties in every row."""
    a = np.round(RNG.uniform(-3, 3, shape) * 2) / 2
    return np.where(a == 0, 0.5, a).astype("float32")


def _k(k: int) -> dict:
    return {"k": np.array([k], "int64")}


# ---------------------------------------------------------------------------- TopK


@pytest.mark.parametrize("opset, shape, axis, k, largest", [
    (1, (3, 5), -1, 2, 1),  # k an attribute
    (10, (2, 7, 3), 1, 3, 1),  # k an input
    (11, (4, 6), 0, 3, 0),  # the smallest
    (11, (3, 16), 1, 16, 1),  # the whole axis, a row of whole vectors
])
def test_topk(opset, shape, axis, k, largest):
    x = _ties(*shape)
    attrs = {"axis": axis} if opset < 11 else {"axis": axis, "largest": largest}
    inputs, consts = (["x"], {}) if opset < 10 else (["x", "k"], _k(k))
    if opset < 10:
        attrs["k"] = k
    graph = check_single("TopK", inputs, {"x": x}, consts, opset=opset, outputs=[("v", F32), ("i", I64)],
                         **attrs)
    assert graph.op_counts() == {"topk": 1, "gather": 1}


@pytest.mark.parametrize("read, ops", [("v", {"topk": 1, "gather": 1}), ("i", {"topk": 1})])
def test_topk_of_one_output_read(read, ops):
    x = _ties(3, 8)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    graph = run_both(make_model([node], {"x": x}, _k(4), [read if read == "v" else (read, I64)], opset=11),
                     {"x": x})
    assert graph.op_counts() == ops


def test_topk_unsorted_selects_what_onnx_runtime_does():
    # sorted=0 leaves the order open: the same elements, in any order (ours are sorted)
    x = _ties(3, 9)
    model = single("TopK", ["x", "k"], {"x": x}, _k(4), opset=11, outputs=["v", ("i", I64)], axis=1,
                   sorted=0, largest=0)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})
    graph = from_onnx(model)
    compiled = [poisoned(e.shape, e.dtype) for e in expected]
    build_graph(graph)(x, *compiled)
    for got in (evaluate(graph, {"x": x}), compiled):
        order, want = np.argsort(got[1], axis=1), np.argsort(expected[1], axis=1)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(np.take_along_axis(g, order, 1), np.take_along_axis(e, want, 1))


def test_topk_of_zero_elements_is_empty():
    x = rand(2, 3)
    graph = check_single("TopK", ["x", "k"], {"x": x}, _k(0), opset=11, outputs=["v", ("i", I64)])
    assert not graph.nodes and graph.outputs[0].shape == (2, 0)


# ---------------------------------------------------------------------------- ReverseSequence


@pytest.mark.parametrize("batch_axis, time_axis, constant", [(1, 0, True), (0, 1, False)])
def test_reverse_sequence(batch_axis, time_axis, constant):
    T, B = 5, 3
    shape = (T, B, 2) if time_axis == 0 else (B, T, 2)
    feeds = {"x": rand(*shape)}
    lens = np.array([5, 1, 3], "int64")
    if constant:
        graph = check_single("ReverseSequence", ["x", "l"], feeds, {"l": lens}, batch_axis=batch_axis,
                             time_axis=time_axis)
        assert graph.op_counts() == {"reshape": 2, "take": 1}  # the indices folded
    else:
        feeds["l"] = lens
        check_single("ReverseSequence", ["x", "l"], feeds, batch_axis=batch_axis, time_axis=time_axis)


# ---------------------------------------------------------------------------- GridSample


def _grid(n, h, w, spread=1.4) -> np.ndarray:
    """Random points of a grid, some beyond the image on every side."""
    return RNG.uniform(-spread, spread, (n, h, w, 2)).astype("float32")


@pytest.mark.parametrize("opset, mode, padding, align", [
    (16, "bilinear", "zeros", 0),
    (16, "bilinear", "border", 1),
    (16, "nearest", "reflection", 0),
    (16, "bicubic", "zeros", 1),
    (20, "linear", "reflection", 1),
    (20, "nearest", "border", 0),
    (20, "cubic", "reflection", 0),
])
def test_grid_sample(opset, mode, padding, align):
    feeds = {"x": rand(2, 2, 4, 5), "g": _grid(2, 3, 4, spread=3.0 if padding == "reflection" else 1.4)}
    graph = check_single("GridSample", ["x", "g"], feeds, opset=opset, mode=mode, padding_mode=padding,
                         align_corners=align)
    # the grid's transpose fuses into the sampling kernel
    assert [k.attrs["kind"] for k in fused_kernels(prepare(graph))] == ["injective"]


# ---------------------------------------------------------------------------- RoiAlign


def _rois(n: int, extent: float) -> np.ndarray:
    """``n`` regions ``[x1, y1, x2, y2]`` of an image of about ``extent``: some reaching outside it,
    one inverted."""
    start = RNG.uniform(-2.0, extent, (n, 2))
    size = RNG.uniform(0.3, extent / 2, (n, 2))
    size[0, 1] = -0.8
    return np.concatenate([start, start + size], axis=1).astype("float32")


@pytest.mark.parametrize("opset, mode, ratio, coordinates", [
    (10, "avg", 2, None),
    (16, "max", 2, "output_half_pixel"),
    (16, "avg", 3, "half_pixel"),
])
def test_roi_align_of_runtime_regions(opset, mode, ratio, coordinates):
    feeds = {"x": rand(2, 3, 6, 7), "r": _rois(4, 9.0), "b": np.array([1, 0, 1, 1], "int64")}
    attrs = dict(mode=mode, output_height=3, output_width=2, sampling_ratio=ratio, spatial_scale=0.75)
    if coordinates:
        attrs["coordinate_transformation_mode"] = coordinates
    graph = check_single("RoiAlign", ["x", "r", "b"], feeds, opset=opset, **attrs)
    assert graph.op_counts() == {"cast": 1, "reshape": 1, "concatenate": 1, "vision.roi_align": 1}


@pytest.mark.parametrize("mode, coordinates", [("avg", "half_pixel"), ("max", "output_half_pixel")])
def test_roi_align_adaptive_of_constant_regions(mode, coordinates):
    consts = {"r": _rois(3, 8.0), "b": np.array([0, 1, 1], "int64")}
    graph = check_single("RoiAlign", ["x", "r", "b"], {"x": rand(2, 2, 5, 6)}, consts, opset=16, mode=mode,
                         output_height=2, output_width=2, sampling_ratio=0, spatial_scale=0.9,
                         coordinate_transformation_mode=coordinates)
    (node,) = graph.nodes
    assert node.op == "vision.roi_align" and node.attrs["max_samples"] is not None


# ---------------------------------------------------------------------------- errors


def _model(op, inputs, feeds, consts=None, opset=17, outputs=("y",), **attrs):
    node = helper.make_node(op, inputs, [o if isinstance(o, str) else o[0] for o in outputs], name=f"{op}_0",
                            **attrs)
    return make_model([node], feeds, consts, outputs, opset=opset, check=False)


_ROI_FEEDS = {"x": rand(1, 2, 4, 4), "r": _rois(2, 4.0)}


@pytest.mark.parametrize("op, inputs, feeds, consts, attrs, error, message", [
    ("TopK", ["x", "k"], {"x": rand(2, 3)}, _k(4), {}, GraphError, r"k=4 must be an integer in \[0, 3\]"),
    ("TopK", ["x", "k"], {"x": rand(2, 3), "k": np.array([2], "int64")}, {}, {}, UnsupportedOperatorError,
     "input K computed from the model inputs"),
    ("ReverseSequence", ["x", "l"], {"x": rand(3, 2)}, {"l": np.array([1, 4], "int64")}, {}, GraphError,
     r"sequence_lens \[1, 4\] must lie in \[0, 3\]"),
    ("ReverseSequence", ["x", "l"], {"x": rand(3, 2, 2)}, {"l": np.array([1, 2], "int64")},
     {"batch_axis": 2}, GraphError, "must be 0 and 1"),
    ("GridSample", ["x", "g"], {"x": rand(1, 1, 2, 2, 2), "g": rand(1, 2, 2, 2, 3)}, {}, {"mode": "nearest"},
     UnsupportedOperatorError, "a 5-D input"),
    ("GridSample", ["x", "g"], {"x": rand(1, 1, 2, 2), "g": rand(1, 2, 2, 2)}, {}, {"mode": "linear"},
     GraphError, "mode='linear' must be one of bilinear"),
    ("RoiAlign", ["x", "r", "b"], _ROI_FEEDS, {"b": np.array([0, 1], "int64")}, {"sampling_ratio": 2},
     GraphError, r"batch_indices \[0, 1\] must lie in \[0, 1\)"),
    ("RoiAlign", ["x", "r", "b"], _ROI_FEEDS, {"b": np.array([0, 0], "int64")}, {}, UnsupportedOperatorError,
     "sampling_ratio=0 .* with rois computed from the model inputs"),
], ids=["topk-k", "topk-runtime-k", "reverse-lens", "reverse-axes", "gridsample-5d", "gridsample-mode",
        "roialign-batch", "roialign-adaptive"])
def test_errors(op, inputs, feeds, consts, attrs, error, message):
    with pytest.raises(error, match=message):
        from_onnx(_model(op, inputs, feeds, consts, opset=16, **attrs))
