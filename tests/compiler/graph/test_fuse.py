"""Fusion: which nodes share a kernel, what output stage an anchor takes, and that a fused graph
computes what the graph did."""

from __future__ import annotations

import numpy as np
from graph_models import conv, residual_cnn, weights

from compiler.graph import GraphBuilder, build_graph, evaluate, fuse, optimize
from tests.helpers import assert_written, poisoned


def _kernels(graph):
    return [([n.op for n in k.attrs["body"].nodes], k.attrs["kind"], k.attrs.get("epilogue"))
            for k in graph.nodes]


def test_a_residual_block_is_two_kernels_with_their_output_stages(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    y = b.op("nn.relu", b.op("nn.bias_add", conv(b, rng, x, 4), b.const("b1", weights(rng, 4)), axis=1))
    y = b.op("add", conv(b, rng, y, 4), b.const("b2", weights(rng, 4, 1, 1)))  # a bias written as an add
    out = b.op("clip", b.op("add", y, x), a_min=0.0, a_max=6.0)
    graph = b.finish(out)
    fused = fuse(graph)
    assert _kernels(fused) == [
        (["nn.conv2d", "nn.bias_add", "nn.relu"], "anchor", ("bias", "relu")),
        (["nn.conv2d", "nn.bias_add", "add", "clip"], "anchor", ("bias", "add", "relu6")),
    ]
    second = fused.nodes[1]
    assert second.inputs[2].shape == (4,)  # the (4, 1, 1) constant, as the template's bias vector
    assert second.inputs[3] is x  # the residual
    data = [rng.uniform(-1, 1, (1, 4, 8, 8)).astype("float32")]
    np.testing.assert_allclose(evaluate(fused, data)[0], evaluate(graph, data)[0], rtol=1e-6, atol=1e-6)


def test_a_convolution_takes_silu_into_its_output_stage(rng):
    # an EfficientNet or YOLO block: convolution, folded batch norm, x * sigmoid(x)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    y = b.op("nn.bias_add", conv(b, rng, x, 8), b.const("b", weights(rng, 8)), axis=1)
    graph = b.finish(b.op("multiply", y, b.op("sigmoid", y)))
    fused = fuse(optimize(graph))
    assert _kernels(fused) == [(["nn.conv2d", "nn.bias_add", "nn.silu"], "anchor", ("bias", "silu"))]
    data = rng.uniform(-2, 2, (1, 4, 8, 8)).astype("float32")
    out = poisoned((1, 8, 8, 8), "float32")
    build_graph(graph)(data, out)
    assert_written(out, evaluate(graph, [data])[0], rtol=1e-5, atol=1e-5)


def test_a_dense_layer_takes_either_gelu_into_its_output_stage(rng):
    for approximate, entry in (("none", "gelu"), ("tanh", "gelu_tanh")):
        b = GraphBuilder()
        x = b.input("x", (6, 8))
        d = b.op("nn.dense", x, b.const("w", weights(rng, 16, 8)))
        biased = b.op("add", d, b.const("b", weights(rng, 16)))
        graph = b.finish(b.op("nn.gelu", biased, approximate=approximate))
        assert _kernels(fuse(graph)) == [(["nn.dense", "nn.bias_add", "nn.gelu"], "anchor", ("bias", entry))]
        data = rng.uniform(-2, 2, (6, 8)).astype("float32")
        out = poisoned((6, 16), "float32")
        build_graph(graph)(data, out)
        assert_written(out, evaluate(graph, [data])[0], rtol=1e-5, atol=1e-5)


def test_a_value_with_two_readers_ends_its_kernel(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    c = conv(b, rng, x, 4)
    graph = b.finish(b.op("add", b.op("nn.relu", c), b.op("sigmoid", c)))
    # the convolution's output is read twice: its kernel ends there, and the two branches and
    # the add that joins them are one kernel
    assert [k[0] for k in _kernels(fuse(graph))] == [["nn.conv2d"], ["nn.relu", "sigmoid", "add"]]


def test_the_branches_of_an_elementwise_diamond_are_one_kernel(rng):
    b = GraphBuilder()
    x = b.input("x", (3, 8))
    scale = b.const("scale", np.float32(0.1))
    negative = b.op("multiply", b.op("exp", x), scale)
    below = b.op("less", b.op("tanh", x), b.const("zero", np.float32(0.0)))
    out = b.op("multiply", b.op("where", below, negative, x), b.op("sigmoid", b.op("sqrt", b.op("abs", x))))
    graph = b.finish(out)
    fused = fuse(graph)
    body = ["exp", "multiply", "tanh", "less", "where", "abs", "sqrt", "sigmoid", "multiply"]
    assert _kernels(fused) == [(body, "injective", None)]
    assert [v for v in fused.nodes[0].inputs if not v.is_constant] == [x]  # read from outside: x alone
    data = [rng.uniform(-2, 2, (3, 8)).astype("float32")]
    expected = evaluate(graph, data)[0]
    np.testing.assert_allclose(evaluate(fused, data)[0], expected, rtol=1e-6)
    module = build_graph(graph)
    out = poisoned((3, 8), "float32")
    module(data[0], out)
    assert_written(out, expected, rtol=1e-5, atol=1e-6)


def test_a_branch_read_twice_stays_a_kernel_of_its_own(rng):
    b = GraphBuilder()
    x = b.input("x", (3, 8))
    shared = b.op("exp", x)  # read by both branches: computed once, in a kernel of its own
    out = b.op("add", b.op("tanh", shared), b.op("sigmoid", shared))
    assert [k[0] for k in _kernels(fuse(b.finish(out)))] == [["exp"], ["tanh", "sigmoid", "add"]]


def test_an_operation_outside_the_output_stage_starts_a_kernel(rng):
    b = GraphBuilder()
    x = b.input("x", (6, 8))
    d = b.op("nn.dense", x, b.const("w", weights(rng, 5, 8)))
    graph = b.finish(b.op("tanh", b.op("nn.relu", d)))
    assert _kernels(fuse(graph)) == [(["nn.dense", "nn.relu"], "anchor", ("relu",)),
                                     (["tanh"], "injective", None)]


def test_an_add_of_a_layer_s_output_and_a_reshaped_residual_joins_the_layer(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8))
    shared = b.op("exp", x)  # read twice: the reshape of it is an injective kernel of its own
    residual = b.op("reshape", shared, newshape=(6, 8))  # the add's first operand
    d = b.op("nn.dense", b.op("reshape", shared, newshape=(6, 8)), b.const("w", weights(rng, 8, 8)))
    graph = b.finish(b.op("add", residual, d))
    fused = fuse(graph)
    assert _kernels(fused)[-1] == (["nn.dense", "add"], "anchor", ("add",))
    data = [rng.uniform(-1, 1, (1, 6, 8)).astype("float32")]
    np.testing.assert_allclose(evaluate(fused, data)[0], evaluate(graph, data)[0], rtol=1e-6)


def test_injective_chains_and_a_reduction_after_them_are_one_kernel(rng):
    b = GraphBuilder()
    q = b.input("q", (2, 4, 8))
    t = b.op("transpose", q, axes=(0, 2, 1))
    r = b.op("reshape", t, newshape=(2, 8, 4))
    s = b.op("divide", r, b.const("scale", np.float32(2.0)))
    graph = b.finish(b.op("multiply", b.op("nn.softmax", s, axis=2), b.const("k", np.float32(3.0))))
    fused = fuse(graph)
    assert _kernels(fused) == [(["transpose", "reshape", "divide", "nn.softmax", "multiply"], "reduce", None)]
    data = [rng.uniform(-1, 1, (2, 4, 8)).astype("float32")]
    np.testing.assert_allclose(evaluate(fused, data)[0], evaluate(graph, data)[0], rtol=1e-6)


def test_a_graph_output_is_never_fused_away(rng):
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    d = b.op("nn.dense", x, b.const("w", weights(rng, 8, 8)))
    graph = b.finish(b.op("nn.relu", d), d)
    assert [k[0] for k in _kernels(fuse(graph))] == [["nn.dense"], ["nn.relu"]]


def test_a_network_fuses_into_its_layers(rng):
    graph = optimize(residual_cnn(rng))
    fused = fuse(graph)
    kinds = [k[1] for k in _kernels(fused)]
    assert kinds == ["anchor"] * 5 + ["reduce", "reduce", "injective", "anchor", "reduce"]
    assert [k[2] for k in _kernels(fused)][:5] == [("bias", "relu"), ("bias", "relu"),
                                                  ("bias", "add", "relu"), ("bias", "relu"),
                                                  ("bias", "add", "relu")]
    data = [rng.uniform(-1, 1, (1, 3, 12, 12)).astype("float32")]
    np.testing.assert_allclose(evaluate(fused, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-7)
