"""fuse_expansions: a pointwise layer, its elementwise tail and the depthwise layer reading it
become one nn.conv2d_depthwise_nchwc where the pointwise output is large, and only where nothing
else reads it; the fused operator evaluates, and compiles by its default schedule, to what the
layers did apart."""

from __future__ import annotations

import numpy as np
import pytest
from graph_models import assert_computes_graph, batch_norm, conv, weights

from compiler.graph import GraphBuilder, GraphError, build_graph, evaluate, fuse, fuse_expansions, get_op
from compiler.graph.fuse_expansions import MIN_FUSED_BYTES
from compiler.graph.layout import plan_layouts
from compiler.graph.passes import optimize


def _depthwise(b, rng, x, stride=1):
    c = x.shape[1]
    w = b.const(f"dw_{len(b.nodes)}", weights(rng, c, 1, 3, 3))
    return b.op("nn.conv2d", x, w, strides=(stride, stride), padding=(1, 1, 1, 1), dilation=(1, 1), groups=c)


def _block(size=12, expanded=48, stride=2, act="relu6", extra_reader=False):
    """x -> 1x1 conv, batch norm, activation -> depthwise 3x3 (stride), batch norm, relu6."""
    rng = np.random.default_rng(7)
    b = GraphBuilder("inverted")
    x = b.input("x", (1, 8, size, size))
    h = batch_norm(b, rng, conv(b, rng, x, expanded, k=1, pad=0))
    h = b.op("clip", h, a_min=0.0, a_max=6.0) if act == "relu6" else b.op("sigmoid", h)
    y = b.op("clip", batch_norm(b, rng, _depthwise(b, rng, h, stride)), a_min=0.0, a_max=6.0)
    if extra_reader:  # the expansion's output also leaves the graph through a mean
        means = [b.op("mean", v, axis=(1, 2, 3), keepdims=True) for v in (y, h)]
        y = b.op("add", *means)
    return b.finish(y)


def _planned(graph):
    return plan_layouts(optimize(graph), lanes=16)


@pytest.mark.parametrize("stride, act", [(2, "relu6"), (1, "sigmoid")])
def test_the_expansion_and_its_tail_join_the_depthwise_layer(stride, act):
    graph = _planned(_block(stride=stride, act=act))
    fused = fuse_expansions(graph, min_bytes=0)
    ops = [n.op for n in fused.nodes]
    assert "nn.conv2d_nchwc" not in ops and "nn.depthwise_conv2d_nchwc" not in ops
    node = next(n for n in fused.nodes if n.op == "nn.conv2d_depthwise_nchwc")
    assert node.attrs["mid_epilogue"] == ("bias", "relu6" if act == "relu6" else "sigmoid")
    assert node.attrs["strides"] == (stride, stride)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 8, 12, 12)).astype("float32")
    np.testing.assert_allclose(evaluate(fused, [x])[0], evaluate(graph, [x])[0], rtol=1e-5, atol=1e-6)


def test_only_expansions_of_at_least_the_threshold_fuse():
    graph = _planned(_block(size=12, expanded=48))
    expanded_bytes = 12 * 12 * 48 * 4
    assert fuse_expansions(graph, min_bytes=expanded_bytes + 1) is graph
    assert fuse_expansions(graph) is graph  # MIN_FUSED_BYTES: far above 27 KB
    assert MIN_FUSED_BYTES > expanded_bytes
    assert fuse_expansions(graph, min_bytes=expanded_bytes) is not graph


def test_an_expansion_read_elsewhere_stays_apart():
    graph = _planned(_block(extra_reader=True))
    assert fuse_expansions(graph, min_bytes=0) is graph


def test_a_grouped_pointwise_layer_is_no_expansion():
    # ShuffleNet's grouped 1x1 layers: two groups of 16 blocked channels, then a depthwise layer
    rng = np.random.default_rng(3)
    b = GraphBuilder("grouped")
    x = b.input("x", (1, 32, 12, 12))
    w = b.const("w", weights(rng, 64, 16, 1, 1))
    h = b.op("nn.relu", b.op("nn.conv2d", x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                             groups=2))
    graph = _planned(b.finish(_depthwise(b, rng, h)))
    pointwise = next(n for n in graph.nodes if n.op == "nn.conv2d_nchwc")
    assert pointwise.attrs["groups"] == 2
    assert fuse_expansions(graph, min_bytes=0) is graph


def test_the_fused_operator_compiles_by_its_default_schedule():
    graph = _block(size=10, expanded=32, stride=2)
    prepared = fuse_expansions(_planned(graph), min_bytes=0)
    module = build_graph(fuse(prepared), target="llvm")
    assert_computes_graph(module, graph, seed=2)


def test_the_operator_checks_its_inputs():
    op = get_op("nn.conv2d_depthwise_nchwc")
    graph = fuse_expansions(_planned(_block()), min_bytes=0)
    node = next(n for n in graph.nodes if n.op == "nn.conv2d_depthwise_nchwc")
    types = [v.type for v in node.inputs]
    assert op.infer(types, node.attrs) == [node.output.type]
    with pytest.raises(GraphError, match="biases"):
        op.infer(types[:2] + types[3:], node.attrs)
    with pytest.raises(GraphError, match="mid_epilogue"):
        op.infer(types, {**node.attrs, "mid_epilogue": ("bias", "add")})
