"""Squeeze-and-excitation gates folded into the weights of the convolution after them."""

from __future__ import annotations

import numpy as np
from graph_models import conv

from compiler.graph import GraphBuilder, build_graph, evaluate, fuse, prepare
from compiler.graph.gates import gates_into_weights
from compiler.graph.layout import plan_layouts
from compiler.graph.passes import optimize
from tests.helpers import assert_written, poisoned


def _se_block(rng, size=6, batch=1, second_reader=False):
    """Features, their mean over the image, two 1x1 convolutions to a sigmoid gate, the features
    times the gate, and a 1x1 convolution of the product (with a second reader of it, if asked)."""
    b = GraphBuilder()
    x = b.input("x", (batch, 8, size, size))
    features = b.op("nn.relu", conv(b, rng, x, 8))
    squeezed = b.op("mean", features, axis=(2, 3), keepdims=True)
    hidden = b.op("nn.relu", conv(b, rng, squeezed, 4, k=1, pad=0))
    gate = b.op("sigmoid", conv(b, rng, hidden, 8, k=1, pad=0))
    gated = b.op("multiply", features, gate)
    out = conv(b, rng, gated, 8, k=1, pad=0)
    return b.finish(out, b.op("tanh", gated)) if second_reader else b.finish(out)


def _planned(graph):
    return gates_into_weights(plan_layouts(optimize(graph), lanes=4, winograd=False))


def test_a_gate_scales_the_next_convolution_s_weights_not_the_features(rng):
    graph = _se_block(rng)
    planned = _planned(graph)
    products = [n for n in planned.nodes if n.op == "multiply"]
    # one product, of the blocked weights (8 x 8, in one block of two vectors) by the gate's lanes,
    # not of the 8 x 6 x 6 features
    assert len(products) == 1 and products[0].output.shape == (1, 1, 1, 1, 8, 8)
    project = [n for n in planned.nodes if n.op == "nn.conv2d_nchwc"][-1]
    assert project.inputs[1] is products[0].output
    assert project.inputs[0].shape == (1, 1, 6, 6, 8)  # the features, as their layer wrote them
    data = [rng.uniform(-1, 1, (1, 8, 6, 6)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)
    # as every model is compiled: the gate's product is a kernel of 6-D weights
    products = [k.output.shape for k in prepare(graph, "llvm -mcpu=haswell").nodes
                if "multiply" in [n.op for n in k.attrs["body"].nodes]]
    assert [len(shape) for shape in products] == [6]
    out = poisoned((1, 8, 6, 6), "float32")
    build_graph(graph)(data[0], out)
    assert_written(out, evaluate(graph, data)[0], rtol=1e-4, atol=1e-5)


def test_a_gate_stays_on_the_features_where_that_is_the_smaller_pass(rng):
    # 1x1 features and 8 x 8 weights; a product that something else reads too; a batch of two
    # images, whose gates differ
    for graph in (_se_block(rng, size=1), _se_block(rng, second_reader=True), _se_block(rng, batch=2)):
        planned = _planned(graph)
        products = [n for n in planned.nodes if n.op == "multiply"]
        # the features' product (5-D, blocked), not the weights' (6-D)
        assert [len(n.output.shape) for n in products] == [5]
        assert products[0].output.shape[0] == graph.inputs[0].shape[0]
        data = [rng.uniform(-1, 1, graph.inputs[0].shape).astype("float32")]
        for got, want in zip(evaluate(fuse(planned), data), evaluate(graph, data)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
