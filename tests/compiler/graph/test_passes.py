"""The graph passes: each one's rewrite is checked on the graph's structure and on its numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graph_models import batch_norm, conv, residual_cnn, weights

from compiler.graph import GraphBuilder, build_graph, evaluate, fuse, optimize
from compiler.graph.memory import aliases
from compiler.graph.passes import (
    constant_takes_as_slices,
    decompose_batch_norm,
    fold_batch_norm,
    fold_constants,
    lower_conv2d_transpose,
    recognize_gelu,
    recognize_layer_norm,
    recognize_silu,
    trim_dead_taps,
)
from tests.helpers import assert_written, poisoned


def _same(graph_a, graph_b, inputs, rtol=1e-5, atol=1e-6):
    for a, b in zip(evaluate(graph_a, inputs), evaluate(graph_b, inputs)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def test_constant_subgraphs_are_computed_once(rng):
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    w = b.op("transpose", b.const("w", weights(rng, 6, 4)), axes=(1, 0))  # on constants only
    w = b.op("multiply", w, b.const("two", np.float32(2.0)))
    y = b.op("add", x, b.op("reshape", w, newshape=(4, 6)))
    graph = b.finish(y)
    folded = fold_constants(graph)
    assert [n.op for n in folded.nodes] == ["add"]
    assert folded.nodes[0].inputs[1].is_constant
    _same(graph, folded, [rng.uniform(-1, 1, (4, 6)).astype("float32")])


def test_batch_norm_after_a_convolution_scales_its_weights(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 3, 8, 8))
    c = conv(b, rng, x, 4)
    biased = b.op("nn.bias_add", c, b.const("cb", weights(rng, 4)), axis=1)
    graph = b.finish(b.op("nn.relu", batch_norm(b, rng, biased)))
    folded = fold_batch_norm(graph)
    assert [n.op for n in folded.nodes] == ["nn.conv2d", "nn.bias_add", "nn.relu"]
    assert folded.nodes[0].inputs[1].data is not graph.nodes[0].inputs[1].data
    _same(graph, folded, [rng.uniform(-1, 1, (1, 3, 8, 8)).astype("float32")])


def test_a_batch_norm_that_cannot_fold_becomes_a_multiply_and_an_add(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 3, 8, 8))
    c = conv(b, rng, x, 4)
    normed = batch_norm(b, rng, c)
    graph = b.finish(b.op("add", normed, c))  # the convolution's output has another reader
    optimized = optimize(graph)
    assert "nn.batch_norm" not in optimized.op_counts()
    assert optimized.op_counts()["multiply"] == 1
    assert optimized.nodes[0].inputs[1].data is graph.nodes[0].inputs[1].data  # weights untouched
    _same(graph, optimized, [rng.uniform(-1, 1, (1, 3, 8, 8)).astype("float32")])
    assert decompose_batch_norm(fold_batch_norm(graph)).op_counts() == optimized.op_counts()


def _gelu_graph(x_half_first: bool):
    b = GraphBuilder()
    x = b.input("x", (3, 16))
    scaled = b.op("divide", x, b.const("sqrt2", np.float32(math.sqrt(2))))
    one_plus = b.op("add", b.op("erf", scaled), b.const("one", np.float32(1.0)))
    half = b.const("half", np.float32(0.5))
    if x_half_first:
        y = b.op("multiply", b.op("multiply", x, half), one_plus)
    else:
        y = b.op("multiply", b.op("multiply", x, one_plus), half)
    return b.finish(y)


def test_the_erf_form_of_gelu_becomes_one_node(rng):
    for x_half_first in (False, True):
        graph = _gelu_graph(x_half_first)
        gelu = recognize_gelu(graph)
        assert [n.op for n in gelu.nodes] == ["nn.gelu"], x_half_first
        _same(graph, gelu, [rng.uniform(-3, 3, (3, 16)).astype("float32")])


def test_a_near_gelu_is_left_alone(rng):
    b = GraphBuilder()
    x = b.input("x", (3, 16))
    scaled = b.op("divide", x, b.const("c", np.float32(1.3)))  # not sqrt(2)
    one_plus = b.op("add", b.op("erf", scaled), b.const("one", np.float32(1.0)))
    graph = b.finish(b.op("multiply", b.op("multiply", x, one_plus), b.const("half", np.float32(0.5))))
    assert "nn.gelu" not in recognize_gelu(graph).op_counts()


def _tanh_gelu_graph(cube: str, coefficient: float = 0.044715):
    b = GraphBuilder()
    x = b.input("x", (3, 16))
    if cube == "power":  # as GPT-2's own code writes it: x + 0.044715 * x^3, then * sqrt(2 / pi)
        cubed = b.op("power", x, b.const("three", np.float32(3.0)))
        inner = b.op("add", x, b.op("multiply", b.const("c", np.float32(coefficient)), cubed))
        scaled = b.op("multiply", inner, b.const("k", np.float32(math.sqrt(2 / math.pi))))
    else:  # as torch exports F.gelu(approximate="tanh"): x * (x * x), the constants first
        cubed = b.op("multiply", x, b.op("multiply", x, x))
        inner = b.op("add", x, b.op("multiply", b.const("c", np.float32(coefficient)), cubed))
        scaled = b.op("multiply", b.const("k", np.float32(0.7978846)), inner)
    one_plus = b.op("add", b.const("one", np.float32(1.0)), b.op("tanh", scaled))
    half_x = b.op("multiply", b.const("half", np.float32(0.5)), x)
    return b.finish(b.op("multiply", half_x, one_plus) if cube == "power"
                    else b.op("multiply", b.const("half", np.float32(0.5)), b.op("multiply", x, one_plus)))


@pytest.mark.parametrize("cube", ["power", "products"])
def test_the_tanh_form_of_gelu_becomes_one_node(rng, cube):
    graph = _tanh_gelu_graph(cube)
    gelu = recognize_gelu(graph)
    assert [(n.op, n.attrs) for n in gelu.nodes] == [("nn.gelu", {"approximate": "tanh"})]
    _same(graph, gelu, [rng.uniform(-4, 4, (3, 16)).astype("float32")])
    assert "nn.gelu" not in recognize_gelu(_tanh_gelu_graph(cube, coefficient=0.05)).op_counts()


def test_x_times_its_sigmoid_becomes_one_silu_node(rng):
    for gate_first in (False, True):
        b = GraphBuilder()
        x = b.input("x", (3, 16))
        h = b.op("tanh", x)
        gate = b.op("sigmoid", h)
        graph = b.finish(b.op("multiply", *((gate, h) if gate_first else (h, gate))))
        silu = recognize_silu(graph)
        assert [n.op for n in silu.nodes] == ["tanh", "nn.silu"], gate_first
        assert silu.nodes[1].inputs[0] is silu.nodes[0].output
        _same(graph, silu, [rng.uniform(-6, 6, (3, 16)).astype("float32")])


def test_a_sigmoid_read_elsewhere_or_of_another_value_is_left_alone(rng):
    b = GraphBuilder()
    x, y = b.input("x", (3, 16)), b.input("y", (3, 16))
    gate = b.op("sigmoid", x)
    read_twice = b.finish(b.op("multiply", x, gate), gate)  # the sigmoid is an output too
    assert "nn.silu" not in recognize_silu(read_twice).op_counts()
    b = GraphBuilder()
    x, y = b.input("x", (3, 16)), b.input("y", (3, 16))
    gated = b.finish(b.op("multiply", y, b.op("sigmoid", x)))  # a gate of another value (a GLU)
    assert "nn.silu" not in recognize_silu(gated).op_counts()


def _written_out_layer_norm(b, x, axes, eps=1e-5, square="power", gamma=None, beta=None):
    mean = b.op("mean", x, axis=axes, keepdims=True)
    d = b.op("subtract", x, mean)
    squared = (b.op("power", d, b.const("two", np.float32(2.0))) if square == "power"
               else b.op("multiply", d, d))
    variance = b.op("mean", squared, axis=axes, keepdims=True)
    y = b.op("divide", d, b.op("sqrt", b.op("add", variance, b.const("eps", np.float32(eps)))))
    if gamma is not None:
        y = b.op("multiply", y, b.const("gamma", gamma))
    if beta is not None:
        y = b.op("add", b.const("beta", beta), y)
    return y


@pytest.mark.parametrize("axes, square, params", [
    ((2,), "power", "both"),       # as torch exports nn.LayerNorm before opset 17
    ((-1,), "multiply", "gamma"),  # the square as a product, no shift
    ((1, 2), "power", "none"),     # over the last two axes, no scale or shift
    ((2,), "power", "(1, 1, D)"),  # the scale and shift with leading axes of one
])
def test_a_written_out_layer_norm_is_one_operator(rng, axes, square, params):
    b = GraphBuilder()
    x = b.input("x", (2, 5, 8))
    shape = {"both": (8,), "gamma": (8,), "none": None, "(1, 1, D)": (1, 1, 8)}[params]
    gamma = weights(rng, *shape) if shape else None
    beta = weights(rng, *shape) if shape and params != "gamma" else None
    graph = b.finish(b.op("tanh", _written_out_layer_norm(b, x, axes, 1e-3, square, gamma, beta)))
    found = recognize_layer_norm(graph)
    assert found.op_counts() == {"nn.layer_norm": 1, "tanh": 1}
    (norm,) = [n for n in found.nodes if n.op == "nn.layer_norm"]
    assert norm.attrs == {"axis": min(a % 3 for a in axes), "epsilon": pytest.approx(1e-3)}
    data = [rng.uniform(-1, 1, (2, 5, 8)).astype("float32")]
    _same(graph, found, data, rtol=1e-5, atol=1e-5)
    assert len(fuse(optimize(graph)).nodes) == 1  # the norm and the tanh after it: one kernel
    out = poisoned((2, 5, 8), "float32")
    build_graph(graph)(data[0], out)
    assert_written(out, evaluate(graph, data)[0], rtol=1e-5, atol=1e-5)


def test_what_only_looks_like_a_layer_norm_stays_as_written(rng):
    b = GraphBuilder()
    x = b.input("x", (2, 5, 8))
    over_a_middle_axis = _written_out_layer_norm(b, x, (1,))
    per_row_scale = _written_out_layer_norm(b, x, (2,), gamma=weights(rng, 5, 1))  # not per element
    graph = b.finish(over_a_middle_axis, per_row_scale)
    found = recognize_layer_norm(graph)
    # the first stays; the second's normalisation is found, its scale stays a multiply
    assert found.op_counts()["mean"] == 2 and found.op_counts()["nn.layer_norm"] == 1
    assert found.op_counts()["multiply"] == 1
    _same(graph, found, [rng.uniform(-1, 1, (2, 5, 8)).astype("float32")], rtol=1e-5, atol=1e-5)
    # the centred value read a third time: computed as written
    b = GraphBuilder()
    x = b.input("x", (2, 8))
    mean = b.op("mean", x, axis=(1,), keepdims=True)
    d = b.op("subtract", x, mean)
    variance = b.op("mean", b.op("multiply", d, d), axis=(1,), keepdims=True)
    y = b.op("divide", d, b.op("sqrt", b.op("add", variance, b.const("eps", np.float32(1e-5)))))
    graph = b.finish(b.op("add", y, b.op("exp", d)))
    assert "nn.layer_norm" not in recognize_layer_norm(graph).op_counts()


def test_optimize_keeps_a_network_s_numbers(rng):
    graph = residual_cnn(rng)
    optimized = optimize(graph)
    assert "nn.batch_norm" not in optimized.op_counts()
    assert optimized.op_counts()["nn.bias_add"] == 5
    _same(graph, optimized, [rng.uniform(-1, 1, (1, 3, 12, 12)).astype("float32")], rtol=1e-4, atol=1e-6)


def test_reshapes_sink_below_a_dense_layer_s_bias_activation_and_residual(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8))
    h = b.op("nn.dense", b.op("reshape", x, newshape=(6, 8)), b.const("w", weights(rng, 8, 8)))
    h = b.op("add", b.op("reshape", h, newshape=(1, 6, 8)), b.const("bias", weights(rng, 8)))
    h = b.op("multiply", b.op("nn.relu", h), b.const("half", np.float32(0.5)))
    graph = b.finish(b.op("add", h, x))
    sunk = optimize(graph)
    assert [n.op for n in sunk.nodes] == ["reshape", "nn.dense", "add", "nn.relu", "multiply", "add",
                                          "reshape"]
    assert sunk.nodes[-2].inputs[1] is sunk.nodes[0].outputs[0]  # the residual is x as (6, 8)
    _same(graph, sunk, [rng.uniform(-1, 1, (1, 6, 8)).astype("float32")])
    fused = fuse(sunk)
    assert [k.attrs.get("epilogue") for k in fused.nodes if k.attrs["kind"] == "anchor"] == [("bias", "relu")]


def test_a_residual_from_elsewhere_does_not_keep_the_next_layer_s_reshapes_from_sinking(rng):
    # a transformer block as exported for 3-D activations: each dense layer reads and writes
    # through reshapes, and the residual comes from an elementwise kernel of its own. Its
    # reshape once sank back below the add, the dense layer's sank again, and so on until the
    # pass gave up, before the second layer's bias and activation had moved.
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8))
    residual = b.op("exp", x)
    h = b.op("nn.dense", b.op("reshape", residual, newshape=(6, 8)), b.const("w1", weights(rng, 8, 8)))
    h = b.op("add", b.op("reshape", h, newshape=(1, 6, 8)), b.const("b1", weights(rng, 8)))
    h = b.op("add", residual, h)
    h = b.op("nn.dense", b.op("reshape", h, newshape=(6, 8)), b.const("w2", weights(rng, 16, 8)))
    graph = b.finish(b.op("nn.gelu", b.op("add", b.op("reshape", h, newshape=(1, 6, 16)),
                                          b.const("b2", weights(rng, 16)))))
    sunk = optimize(graph)
    assert sunk.op_counts() == {"exp": 1, "reshape": 2, "nn.dense": 2, "add": 3, "nn.gelu": 1}
    _same(graph, sunk, [rng.uniform(-1, 1, (1, 6, 8)).astype("float32")])
    fused = fuse(sunk)
    assert [k.attrs.get("epilogue") for k in fused.nodes if k.attrs["kind"] == "anchor"] == [
        ("bias", "add"), ("bias", "gelu")]
    data = rng.uniform(-1, 1, (1, 6, 8)).astype("float32")
    out = poisoned((1, 6, 16), "float32")
    build_graph(graph)(data, out)
    assert_written(out, evaluate(graph, [data])[0], rtol=1e-5, atol=1e-5)


def test_reshapes_that_meet_fold_into_one(rng):
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    y = b.op("reshape", b.op("reshape", x, newshape=(6, 4)), newshape=(24,))
    z = b.op("reshape", b.op("reshape", y, newshape=(4, 6)), newshape=(2, 3, 4))
    graph = b.finish(b.op("tanh", z), b.op("exp", y))
    folded = optimize(graph)
    assert folded.op_counts() == {"reshape": 1, "tanh": 1, "exp": 1}
    _same(graph, folded, [rng.uniform(-1, 1, (2, 3, 4)).astype("float32")])


def test_a_transpose_that_only_moves_axes_of_length_one_is_a_reshape(rng):
    # a batch-first attention layer of batch 1, as exported: (1, S, D) to (S, 1, D) and back
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8))
    h = b.op("reshape", b.op("transpose", x, axes=(1, 0, 2)), newshape=(6, 8))
    h = b.op("nn.dense", h, b.const("w", weights(rng, 8, 8)))
    h = b.op("transpose", b.op("reshape", h, newshape=(6, 1, 8)), axes=(1, 0, 2))
    swapped = b.op("transpose", b.op("reshape", x, newshape=(1, 2, 3, 8)), axes=(0, 2, 1, 3))
    graph = b.finish(b.op("add", h, x), b.op("tanh", swapped))
    optimized = optimize(graph)
    _same(graph, optimized, [rng.uniform(-1, 1, (1, 6, 8)).astype("float32")])
    # the transposes of x and of the dense output became reshapes, and the residual add joined the
    # dense layer's output stage (x as (6, 8) read by both); the one swapping axes of 2 and 3 stays
    assert optimized.op_counts() == {"reshape": 3, "nn.dense": 1, "add": 1, "transpose": 1, "tanh": 1}
    fused = fuse(optimized)
    assert [k.attrs.get("epilogue") for k in fused.nodes if k.attrs["kind"] == "anchor"] == [("add",)]
    # the reshapes run nothing (x as (6, 8); the dense layer writes the model's output): two
    # kernels run, where without the pass x's copy and the add run as kernels of their own
    assert len(_running(fused)) == 2
    assert len(_running(fuse(graph))) == 4


def _running(fused):
    in_place = aliases(fused)
    return [k for k in fused.nodes if k.output.uid not in in_place]


def test_a_batched_matmul_reads_its_transposed_operands_through_transposes(rng):
    b = GraphBuilder()
    x = b.input("x", (3, 4, 6))
    w = b.const("w", rng.uniform(-1, 1, (3, 5, 4)).astype("float32"))
    graph = b.finish(b.op("nn.batch_matmul", b.op("exp", x), w, transpose_a=True, transpose_b=True))
    optimized = optimize(graph)
    _same(graph, optimized, [rng.uniform(-1, 1, (3, 4, 6)).astype("float32")])
    # the constant's transpose folded; the input's is a node, fused with the exp into one kernel
    assert optimized.op_counts() == {"exp": 1, "transpose": 1, "nn.batch_matmul": 1}
    (product,) = [n for n in optimized.nodes if n.op == "nn.batch_matmul"]
    assert not product.attrs["transpose_a"] and not product.attrs["transpose_b"]
    assert product.inputs[1].is_constant and product.inputs[1].shape == (3, 4, 5)
    assert [k.attrs["kind"] for k in fuse(optimized).nodes] == ["injective", "anchor"]


@pytest.mark.parametrize("index, axis, ops", [
    (np.array(1), 0, ["strided_slice", "reshape"]),  # one index: a slice, its axis then dropped
    (np.array(-1), 1, ["strided_slice", "reshape"]),  # counted from the end
    (np.array([0, 2, 4]), 1, ["strided_slice"]),  # a run stepping by 2
    (np.array([9]), 1, ["strided_slice"]),  # out of range: clipped to the last, as take does
    (np.array([2, 0]), 1, ["take"]),  # backwards: stays a take
    (np.array([1, 2, 4]), 1, ["take"]),  # uneven steps
    (np.array([[0, 1]]), 2, ["take"]),  # indices of two axes
])
def test_a_take_of_constant_evenly_stepping_indices_before_a_transpose_is_a_slice(rng, index, axis, ops):
    b = GraphBuilder()
    x = b.input("x", (3, 6, 4))
    taken = b.op("take", x, b.const("i", index.astype("int64")), axis=axis)
    graph = b.finish(b.op("tanh", b.op("transpose", taken)))  # the contiguous axis moves
    sliced = constant_takes_as_slices(graph)
    assert [n.op for n in sliced.nodes] == [*ops, "transpose", "tanh"]
    _same(graph, sliced, [rng.uniform(-1, 1, (3, 6, 4)).astype("float32")])
    # with no such transpose after it (a recurrent layer's step, its index the only difference
    # between the steps' kernels), it stays a take
    b = GraphBuilder()
    x = b.input("x", (3, 6, 4))
    kept = b.op("transpose", b.op("take", x, b.const("i", np.array(1, "int64")), axis=0), axes=(0, 1))
    graph = b.finish(b.op("tanh", kept))
    assert [n.op for n in constant_takes_as_slices(graph).nodes] == ["take", "transpose", "tanh"]


def _heads(rng):
    """A dense layer's output as three heads (as attention takes its query, key and value from one
    projection), each read by its own elementwise operator; the second's moves are also read by a
    transpose that two more operators read (a chain of moves starting where another ends)."""
    b = GraphBuilder()
    h = b.op("nn.dense", b.input("x", (4, 12)), b.const("w", weights(rng, 24, 12)))
    heads = b.op("transpose", b.op("reshape", h, newshape=(4, 3, 8)), axes=(1, 0, 2))
    picked = [b.op("take", heads, b.const(f"i{k}", np.array(k, "int64")), axis=0) for k in range(3)]
    flipped = b.op("transpose", picked[1], axes=(1, 0))
    return b.finish(b.op("tanh", picked[0]), b.op("exp", picked[1]), b.op("negative", picked[2]),
                    b.op("sigmoid", flipped), b.op("abs", flipped))


def test_moves_read_by_several_operators_are_copied_into_each_of_their_kernels(rng):
    graph = _heads(rng)
    optimized = optimize(graph)
    _same(graph, optimized, [rng.uniform(-1, 1, (4, 12)).astype("float32")])
    kernels = fuse(optimized).nodes
    # the dense layer, then one kernel per elementwise operator, each reading the dense output
    # through its own moves: no kernel only moves data
    assert len(kernels) == 6
    bodies = [[n.op for n in k.attrs["body"].nodes] for k in kernels]
    assert bodies[0] == ["nn.dense"]
    assert all(body[-1] in ("tanh", "exp", "negative", "sigmoid", "abs") for body in bodies[1:])
    assert not any(set(body) <= {"reshape", "transpose", "take"} for body in bodies)
    # without the copies, the moves are a kernel of their own that writes the heads out
    assert len(fuse(graph).nodes) > len(kernels)


@pytest.mark.parametrize("wshape, attrs", [
    ((4, 6, 2, 2), dict(strides=(2, 2))),  # the kernel as large as the stride: a 1x1 convolution
    ((4, 3, 3, 3), dict(strides=(2, 2), padding=(1, 1, 1, 1), output_padding=(1, 1))),
    # padding beyond the window's reach: cropped
    ((4, 3, 2, 3), dict(strides=(3, 1), padding=(2, 0, 2, 2), dilation=(1, 2))),
    ((4, 2, 3, 3), dict(strides=(1, 2), padding=(0, 1, 1, 0), groups=2)),
    ((4, 2, 4, 4), dict(strides=(2, 2), padding=(1, 1, 1, 1), output_padding=(1, 1), groups=2)),
    ((4, 3, 5, 2), dict(strides=(3, 2), padding=(0, 3, 1, 0), output_padding=(2, 0))),
])
def test_transposed_convolutions_become_convolutions(rng, wshape, attrs):
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 6))
    graph = b.finish(b.op("nn.conv2d_transpose", x, b.const("w", weights(rng, *wshape)), **attrs))
    lowered = lower_conv2d_transpose(graph)
    ops = [n.op for n in lowered.nodes]
    assert "nn.conv2d_transpose" not in ops and ops.count("nn.conv2d") == 1
    # undilated: the output phases as channels, then rearranged; dilated: the input spread out
    assert ("transpose" in ops) == (attrs.get("dilation", (1, 1)) == (1, 1))
    _same(graph, lowered, [rng.uniform(-1, 1, (2, 4, 5, 6)).astype("float32")], atol=1e-5)
    # a kernel computed from the model's inputs stays a transposed convolution
    c = GraphBuilder()
    y, k = c.input("y", (1, 4, 3, 3)), c.input("k", (4, 2, 2, 2))
    computed = c.finish(c.op("nn.conv2d_transpose", y, k, strides=(2, 2)))
    assert [n.op for n in lower_conv2d_transpose(computed).nodes] == ["nn.conv2d_transpose"]


@pytest.mark.parametrize("shape, wshape, attrs, kept", [
    # DeepLab's pyramid at rate 18 on a 14x14 map: every outer tap past the image, a 1x1 layer
    ((1, 4, 14, 14), (6, 4, 3, 3), dict(padding=(18, 18, 18, 18), dilation=(18, 18)), (1, 1)),
    # rows of one pixel (a 1-D signal as a 2-D one): the kernel's outer rows read only padding
    ((1, 4, 1, 9), (6, 4, 3, 3), dict(padding=(1, 1, 1, 1)), (1, 3)),
    # strided, uneven padding, grouped: the last two columns of taps are past the image
    ((1, 4, 5, 2), (6, 2, 3, 4), dict(strides=(2, 3), padding=(1, 0, 1, 2), groups=2), (3, 2)),
    # rate 6 on 14x14: every tap reads the image somewhere; kept whole
    ((1, 4, 14, 14), (6, 4, 3, 3), dict(padding=(6, 6, 6, 6), dilation=(6, 6)), (3, 3)),
])
def test_kernel_taps_that_read_only_padding_are_dropped(rng, shape, wshape, attrs, kept):
    b = GraphBuilder()
    x = b.input("x", shape)
    graph = b.finish(b.op("nn.conv2d", x, b.const("w", weights(rng, *wshape)), **attrs))
    trimmed = trim_dead_taps(graph)
    (conv,) = trimmed.nodes
    assert conv.inputs[1].shape[2:] == kept
    if kept == (1, 1):
        assert conv.attrs["padding"] == (0, 0, 0, 0) and conv.attrs["dilation"] == (1, 1)
    data = rng.uniform(-1, 1, shape).astype("float32")
    for a, b_ in zip(evaluate(graph, [data]), evaluate(trimmed, [data])):
        np.testing.assert_allclose(b_, a, rtol=1e-5, atol=1e-6)
