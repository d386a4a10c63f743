"""Layout planning: convolutions in channel blocks, blocks flowing between layers, transforms only
where a tensor enters or leaves the blocked region or its block changes. Blocks are planned for a
given vector width, so these tests do not depend on the host's."""

from __future__ import annotations

import numpy as np
import pytest
from graph_models import conv, residual_cnn, weights
from helpers import poisoned

from compiler.graph import GraphBuilder, GraphError, build_graph, evaluate, fuse, optimize
from compiler.graph.layout import (
    DIRECT,
    MAX_WINOGRAD_WEIGHT_BYTES,
    algorithm_name,
    algorithm_options,
    block_diagonal,
    input_block,
    merged_groups,
    output_block,
    plan_layouts,
    winograd_tile_size,
    winograd_tile_sizes,
)
from compiler.graph.memory import Place, plan_memory


def _ops(graph):
    return [n.op for n in graph.nodes]


def test_block_sizes():
    assert output_block(64, 16) == 32 and output_block(48, 16) == 16 and output_block(24, 16) == 8
    assert output_block(20, 16) is None and output_block(6, 4) is None
    assert input_block(3, 16) == 1 and input_block(64, 16) == 16 and input_block(24, 16) is None


def test_a_network_stays_blocked_between_its_layers(rng):
    graph = optimize(residual_cnn(rng, channels=8))
    # blocks of 8 channels; the image's 3 channels in blocks of 1; every convolution direct
    planned = plan_layouts(graph, lanes=4, winograd=False)
    ops = _ops(planned)
    assert ops.count("nn.conv2d_nchwc") == 5 and "nn.conv2d" not in ops
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW8c", "NCHW")]  # out before the reshape only
    image = planned.nodes[0]  # NCHW1c is NCHW's bytes: the image goes in through a reshape
    assert image.op == "reshape" and image.inputs[0] is planned.inputs[0]
    assert image.output.shape == (1, 3, 12, 12, 1)
    assert "nn.max_pool2d" not in ops and "nn.global_avg_pool2d" not in ops
    assert "nn.pool2d_nchwc" in ops and "mean" in ops  # pooled in blocks
    weight = planned.nodes[1].inputs[1]
    assert weight.is_constant and weight.shape == (1, 3, 3, 3, 1, 8)
    data = [rng.uniform(-1, 1, (1, 3, 12, 12)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-7)


def test_winograd_tile_sizes():
    # ResNet's stride-1 3x3 layers on 16 lanes: F(4x4) while tiles are many and its kernel within
    # 4 MiB, F(2x2) on 14x14 from 256 channels and on 7x7, none once even F(2x2)'s kernel is too large
    assert winograd_tile_size(64, 64, 56, 56, 4, 16) == 4
    assert winograd_tile_size(128, 128, 28, 28, 4, 16) == 4
    assert winograd_tile_size(256, 256, 14, 14, 4, 16) == 2  # F(4x4)'s kernel: 9 MiB
    assert winograd_tile_size(512, 512, 14, 14, 4, 16) == 2
    assert winograd_tile_size(512, 512, 7, 7, 4, 16) == 2  # 2x2 tiles of 4x4 would be 4
    assert 36 * 256 * 256 * 4 > MAX_WINOGRAD_WEIGHT_BYTES[4] >= 36 * 128 * 128 * 4
    assert 16 * 1024 * 1024 * 4 > MAX_WINOGRAD_WEIGHT_BYTES[2]
    assert winograd_tile_size(1024, 1024, 7, 7, 4, 16) is None
    assert winograd_tile_size(8, 64, 56, 56, 4, 16) is None  # fewer input channels than a vector
    assert winograd_tile_size(64, 64, 4, 4, 4, 16) is None  # too few tiles


def test_stride_one_3x3_layers_run_by_winograd_and_compute_the_same(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 16, 18))
    a = b.op("nn.relu", conv(b, rng, x, 8))  # 3x3 stride 1: Winograd, F(4x4, 3x3) (4x5 tiles)
    c = conv(b, rng, a, 8, stride=2)  # strided: direct
    d = conv(b, rng, c, 8, k=1, pad=0)  # 1x1: direct
    graph = b.finish(b.op("add", conv(b, rng, d, 8), c))  # with a residual: Winograd, F(2x2) on 8x9
    planned = plan_layouts(graph, lanes=4)
    ops = _ops(planned)
    assert ops.count("nn.conv2d_winograd_nchwc") == 2 and ops.count("nn.conv2d_nchwc") == 2
    first, last = (n for n in planned.nodes if n.op == "nn.conv2d_winograd_nchwc")
    assert first.attrs == {"padding": (1, 1, 1, 1), "tile_size": 4, "block": 8}
    assert first.inputs[1].is_constant and first.inputs[1].shape == (36, 1, 8, 8)  # transformed at build time
    assert last.attrs["tile_size"] == 2 and last.inputs[1].shape == (16, 1, 8, 8)
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW8c", "NCHW")]  # blocks flow through both kinds
    data = [rng.uniform(-1, 1, (1, 8, 16, 18)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-4, atol=1e-5)
    direct = _ops(plan_layouts(graph, lanes=4, winograd=False))
    assert "nn.conv2d_winograd_nchwc" not in direct and direct.count("nn.conv2d_nchwc") == 4


def test_dilated_3x3_layers_run_by_winograd_on_their_phases_and_compute_the_same(rng):
    # 16x16 dilated by 2: four phases of 8x8, F(4x4) in 2x2 tiles each; by 3: nine phases of
    # 6x6 (rows of 16 leave phases of 6 and 5), F(2x2) in 3x3 tiles each (F(4x4)'s 2x2 tiles of
    # each phase would hold 49% of outputs); by 6, phases of 3x3 would hold 36% in F(2x2)'s tiles
    assert winograd_tile_sizes(8, 16, 16, 4, dilation=2) == [4, 2]
    assert winograd_tile_sizes(8, 16, 16, 4, dilation=3) == [2]
    assert winograd_tile_sizes(8, 16, 16, 4, dilation=6) == []
    assert winograd_tile_size(512, 512, 14, 14, 4, 16, dilation=2) == 2  # DeepLabV3's, as its 7x7 layers
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 16))  # channels for 8 or 16 lanes too
    a = b.op("nn.relu", conv(b, rng, x, 16, pad=2, dilation=2, name="d2"))
    c = conv(b, rng, a, 16, pad=3, dilation=3, name="d3")
    graph = optimize(b.finish(b.op("add", conv(b, rng, c, 16, pad=6, dilation=6, name="d6"), c)))
    assert algorithm_options(graph, lanes=4) == {"d2": (4, [4, 2, DIRECT]), "d3": (2, [2, DIRECT])}
    planned = plan_layouts(graph, lanes=4)
    by_name = {n.name: n for n in planned.nodes}
    assert by_name["d2"].attrs == {"padding": (2, 2, 2, 2), "tile_size": 4, "block": 8, "dilation": 2}
    assert by_name["d3"].attrs["dilation"] == 3 and by_name["d3"].attrs["tile_size"] == 2
    assert by_name["d6"].op == "nn.conv2d_nchwc" and by_name["d6"].attrs["dilation"] == (6, 6)
    data = [rng.uniform(-1, 1, (1, 16, 16, 16)).astype("float32")]
    want = evaluate(graph, data)[0]
    np.testing.assert_allclose(evaluate(planned, data)[0], want, rtol=1e-4, atol=1e-5)
    module = build_graph(graph, target="llvm")  # this host's lanes: its own blocks, as above
    kernels = [k["name"] for k in module.attrs["model"]["kernels"]]
    assert sum("winograd" in k for k in kernels) == 2, kernels
    out = poisoned(want.shape, "float32")
    module(*data, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_each_3x3_layer_can_be_told_how_to_run_and_computes_the_same(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 16, 16))
    a = b.op("nn.relu", conv(b, rng, x, 8, name="a"))  # the rule: F(4x4) (16 tiles)
    c = conv(b, rng, a, 8, stride=2, name="strided")  # direct only
    graph = optimize(b.finish(b.op("add", conv(b, rng, c, 8, name="b"), c)))  # 8x8: F(2x2) only
    assert winograd_tile_sizes(8, 16, 16, 4) == [4, 2] and winograd_tile_sizes(8, 8, 8, 4) == [2]
    assert algorithm_options(graph, lanes=4) == {"a": (4, [4, 2, DIRECT]), "b": (2, [2, DIRECT])}
    assert algorithm_options(graph, lanes=4, winograd=False) == {"a": (DIRECT, [4, 2, DIRECT]),
                                                                 "b": (DIRECT, [2, DIRECT])}
    data = [rng.uniform(-1, 1, (1, 8, 16, 16)).astype("float32")]
    want = evaluate(graph, data)[0]
    plans = (({"a": 2}, 2, 2), ({"a": DIRECT, "b": DIRECT}, None, None), ({"b": DIRECT}, 4, None))
    for plan, a_runs, b_runs in plans:
        planned = plan_layouts(graph, lanes=4, algorithms=plan)
        by_name = {n.name: n for n in planned.nodes}
        for name, m in (("a", a_runs), ("b", b_runs)):
            node = by_name[name]
            assert node.op == ("nn.conv2d_nchwc" if m is None else "nn.conv2d_winograd_nchwc")
            assert m is None or node.attrs["tile_size"] == m
        assert by_name["strided"].op == "nn.conv2d_nchwc"
        np.testing.assert_allclose(evaluate(planned, data)[0], want, rtol=1e-4, atol=1e-5)
    assert algorithm_name(DIRECT) == "direct" and algorithm_name(2) == "F(2x2,3x3)"


def test_a_layer_told_to_run_a_way_it_cannot_is_an_error_naming_it(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 8))
    graph = optimize(b.finish(conv(b, rng, conv(b, rng, x, 8, name="a"), 8, stride=2, name="strided")))
    choices = r"its choices: F\(2x2,3x3\), direct$"
    with pytest.raises(GraphError, match=r"'a' cannot run by F\(4x4,3x3\); " + choices):
        plan_layouts(graph, lanes=4, algorithms={"a": 4})
    with pytest.raises(GraphError, match=r"'strided' cannot run by F\(2x2,3x3\); its choices: direct$"):
        plan_layouts(graph, lanes=4, algorithms={"strided": 2})
    with pytest.raises(GraphError, match="no 3x3 convolution that can run by Winograd is named 'nope'"):
        plan_layouts(graph, lanes=4, algorithms={"nope": DIRECT})
    with pytest.raises(GraphError, match=r"algorithms\['a'\] is 'direct': give a Winograd tile size"):
        plan_layouts(graph, lanes=4, algorithms={"a": "direct"})
    not_a_map = "algorithms must map 3x3 convolutions' names to tile sizes, got list"
    with pytest.raises(GraphError, match=not_a_map):
        plan_layouts(graph, lanes=4, algorithms=[("a", 2)])


def test_a_strided_1x1_convolution_reads_its_pixels_first_then_runs_with_stride_one(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 10))
    h = b.op("nn.relu", conv(b, rng, x, 8))
    down = conv(b, rng, h, 16, k=1, stride=2, pad=0)  # a ResNet downsample: every other pixel
    graph = b.finish(b.op("add", down, conv(b, rng, h, 16, stride=2)))
    planned = plan_layouts(graph, lanes=4, winograd=False)
    convs = [n for n in planned.nodes if n.op == "nn.conv2d_nchwc"]
    pointwise = next(n for n in convs if n.inputs[1].shape[2:4] == (1, 1))
    picked = pointwise.inputs[0]
    assert pointwise.attrs["strides"] == (1, 1) and picked.shape == (1, 1, 5, 5, 8)
    subsample = next(n for n in planned.nodes if picked in n.outputs)
    assert subsample.op == "strided_slice" and subsample.attrs["strides"] == (1, 1, 2, 2, 1)
    strided = next(n for n in convs if n.inputs[1].shape[2:4] == (3, 3) and n is not convs[0])
    assert strided.attrs["strides"] == (2, 2)  # a 3x3 one keeps its stride
    assert subsample.inputs[0] is strided.inputs[0]  # both read the blocked relu, as it is
    data = [rng.uniform(-1, 1, (1, 8, 9, 10)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)
    module = build_graph(graph, "llvm -mcpu=haswell")
    out = poisoned((1, 16, 5, 5), "float32")
    module(data[0], out)
    np.testing.assert_allclose(out, evaluate(graph, data)[0], rtol=1e-4, atol=1e-5)


def test_a_block_change_is_one_transform_read_by_both_readers(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 6, 6))
    a = conv(b, rng, x, 8)  # blocks of 8 (lanes 4: two vectors)
    c = conv(b, rng, a, 12)  # 12 filters: blocks of 4
    d = b.op("add", conv(b, rng, c, 12), c)  # the residual is already in blocks of 4
    graph = b.finish(b.op("add", conv(b, rng, a, 12), d))
    planned = plan_layouts(graph, lanes=4)
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW4c", "NCHW")]
    data = [rng.uniform(-1, 1, (1, 8, 6, 6)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)


def test_depthwise_layers_stay_blocked_and_a_reshape_gets_plain_data(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 4, 5, 5))
    h = b.op("nn.relu", conv(b, rng, x, 8))
    dw = b.op("nn.conv2d", h, b.const("dw", weights(rng, 8, 1, 3, 3)), strides=(1, 1), padding=(1, 1, 1, 1),
              dilation=(1, 1), groups=8)
    graph = b.finish(b.op("reshape", b.op("tanh", b.op("add", dw, h)), newshape=(8, 25)))
    planned = plan_layouts(graph, lanes=4)
    ops = _ops(planned)
    assert "nn.depthwise_conv2d_nchwc" in ops and "nn.conv2d" not in ops
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW8c", "NCHW")]
    assert ops[-2:] == ["layout_transform", "reshape"]
    data = [rng.uniform(-1, 1, (1, 4, 5, 5)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)


def _grouped(b, rng, x, filters, groups, stride=1):
    w = b.const(f"g_{len(b.nodes)}", weights(rng, filters, x.shape[1] // groups, 3, 3))
    return b.op("nn.conv2d", x, w, strides=(stride, stride), padding=(1, 1, 1, 1), dilation=(1, 1),
                groups=groups)


def test_merged_groups_and_their_block_diagonal_weight(rng):
    # groups of 4 filters on 16 lanes: two make a block of 8 (half a vector); groups of 16: none
    # merged; groups of 1 filter on 16 lanes would need 8 (more than MAX_MERGED_GROUPS)
    assert merged_groups(32, 4, 16) == 2 and merged_groups(8, 16, 16) == 1
    assert merged_groups(64, 1, 16) is None
    assert merged_groups(6, 3, 4) is None  # 2 groups make 6 filters: no block of 4 divides them
    w = weights(rng, 8, 3, 3, 3)  # 4 groups of 2 filters over 3 channels each
    merged = block_diagonal(w, 4, 2)
    assert merged.shape == (8, 6, 3, 3)
    for f in range(8):
        own = f // 2 % 2 * 3
        np.testing.assert_array_equal(merged[f, own:own + 3], w[f])
        assert not merged[f, 3 - own:6 - own].any()
    x = rng.uniform(-1, 1, (1, 12, 5, 5)).astype("float32")
    b = GraphBuilder()
    conv_attrs = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1))
    plain = b.finish(b.op("nn.conv2d", b.input("x", x.shape), b.const("w", w), groups=4, **conv_attrs))
    b = GraphBuilder()
    joined = b.finish(b.op("nn.conv2d", b.input("x", x.shape), b.const("w", merged), groups=2, **conv_attrs))
    np.testing.assert_allclose(evaluate(joined, [x])[0], evaluate(plain, [x])[0], rtol=1e-5, atol=1e-6)


def test_a_grouped_convolution_stays_blocked_by_its_groups(rng):
    b = GraphBuilder()
    x = b.input("x", (1, 4, 7, 7))
    h = b.op("nn.relu", conv(b, rng, x, 16))  # blocks of 8 (lanes 4: two vectors)
    g = b.op("nn.relu", _grouped(b, rng, h, 16, groups=2))  # 2 groups of 8: blocked as they come
    narrow = _grouped(b, rng, g, 16, groups=4, stride=2)  # 4 groups of 4, two in each block of 8
    tiny = _grouped(b, rng, narrow, 16, groups=8)  # 8 groups of 2: two by two, blocks of 4
    graph = b.finish(b.op("add", tiny, narrow))
    planned = plan_layouts(graph, lanes=4, winograd=False)
    convs = [n for n in planned.nodes if n.op == "nn.conv2d_nchwc"]
    assert "nn.conv2d" not in _ops(planned) and len(convs) == 4
    assert [n.attrs.get("groups", 1) for n in convs] == [1, 2, 4, 4]
    assert [n.inputs[1].shape for n in convs[1:]] == [(2, 1, 3, 3, 8, 8), (4, 1, 3, 3, 4, 4),
                                                      (4, 1, 3, 3, 4, 4)]
    assert convs[2].attrs["strides"] == (2, 2) and convs[2].inputs[0].shape == (1, 2, 7, 7, 8)  # as it is
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW4c", "NCHW")]
    data = [rng.uniform(-1, 1, (1, 4, 7, 7)).astype("float32")]
    expected = evaluate(graph, data)[0]
    np.testing.assert_allclose(evaluate(planned, data)[0], expected, rtol=1e-5, atol=1e-6)
    fused = fuse(optimize(plan_layouts(optimize(graph), lanes=4, winograd=False)))
    anchors = [k for k in fused.nodes if k.attrs["kind"] == "anchor"]
    assert len(anchors) == 4 and anchors[-1].attrs["epilogue"] == ("add",)
    module = build_graph(fused, "llvm -mcpu=haswell")
    out = poisoned(expected.shape, "float32")
    module(data[0], out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_few_filters_that_no_block_divides_make_one_block_on_blocked_data(rng):
    # a segmentation head: 5 classes from blocked features; the same head on plain data stays plain
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6))
    features = b.op("nn.relu", conv(b, rng, x, 8))  # blocks of 8 (lanes 4: two vectors)
    graph = b.finish(conv(b, rng, features, 5, k=1, pad=0), conv(b, rng, x, 5, k=1, pad=0))
    planned = plan_layouts(graph, lanes=4, winograd=False)
    head = [n for n in planned.nodes if n.op == "nn.conv2d_nchwc"][-1]
    assert head.inputs[0].shape == (1, 1, 6, 6, 8) and head.output.shape == (1, 1, 6, 6, 5)
    assert _ops(planned).count("nn.conv2d") == 1  # the head on the image's plain data
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW5c", "NCHW")]  # the head's output on its way out, nothing in
    data = [rng.uniform(-1, 1, (1, 3, 6, 6)).astype("float32")]
    for got, want in zip(evaluate(planned, data), evaluate(graph, data)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    module = build_graph(graph, "llvm -mcpu=haswell")
    outs = [poisoned((1, 5, 6, 6), "float32") for _ in range(2)]
    module(data[0], *outs)
    for got, want in zip(outs, evaluate(graph, data)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_feature_pyramid_step_stays_blocked_through_its_resize_and_concatenation(rng):
    """Downsample, upsample (nearest, then bilinear) and join the lateral features: the resizes
    and the channel concatenation of whole blocks work on blocks, so the only transforms are the
    image's way in and the output's way out."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 10))
    lateral = conv(b, rng, x, 8)
    small = conv(b, rng, lateral, 16, stride=2)
    near = b.op("image.resize2d", small, size=(8, 10), method="nearest_neighbor",
                coordinate_transformation_mode="asymmetric", rounding_method="floor")
    smooth = b.op("image.resize2d", small, size=(8, 10), method="linear")
    joined = b.op("concatenate", lateral, b.op("add", near, smooth), axis=1)
    graph = b.finish(conv(b, rng, joined, 8, k=1, pad=0))
    planned = plan_layouts(graph, lanes=4, winograd=False)
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW8c", "NCHW")]  # in by one vector, out by two
    resizes = [n for n in planned.nodes if n.op == "image.resize2d"]
    assert [n.attrs["layout"] for n in resizes] == ["NCHW8c", "NCHW8c"]
    (concat,) = [n for n in planned.nodes if n.op == "concatenate"]
    assert concat.output.shape == (1, 3, 8, 10, 8)
    data = [rng.uniform(-1, 1, (1, 8, 8, 10)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)
    module = build_graph(fuse(optimize(planned)))
    out = poisoned((1, 8, 8, 10), "float32")
    module(data[0], out)
    np.testing.assert_allclose(out, evaluate(graph, data)[0], rtol=1e-4, atol=1e-5)


def test_a_squeeze_and_excitation_block_stays_blocked(rng):
    """EfficientNet's gate: the mean over height and width (``ReduceMean``, as exported), two
    1x1 convolutions, and the product of the features with the gate, per image and channel:
    all on blocks, so the only transforms are the image's way in and the output's way out."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 6, 6))
    features = b.op("nn.silu", conv(b, rng, x, 8))
    squeezed = b.op("mean", features, axis=(2, 3), keepdims=True)
    hidden = b.op("nn.relu", conv(b, rng, squeezed, 4, k=1, pad=0))
    gate = b.op("sigmoid", conv(b, rng, hidden, 8, k=1, pad=0))
    graph = b.finish(conv(b, rng, b.op("multiply", features, gate), 8, k=1, pad=0))
    planned = plan_layouts(graph, lanes=4, winograd=False)
    transforms = [(n.attrs["src_layout"], n.attrs["dst_layout"])
                  for n in planned.nodes if n.op == "layout_transform"]
    assert transforms == [("NCHW", "NCHW4c"), ("NCHW8c", "NCHW")]
    (mean,) = [n for n in planned.nodes if n.op == "mean"]
    assert mean.inputs[0].shape == (1, 1, 6, 6, 8) and mean.output.shape == (1, 1, 1, 1, 8)
    (product,) = [n for n in planned.nodes if n.op == "multiply"]
    assert [v.shape for v in product.inputs] == [(1, 1, 6, 6, 8), (1, 1, 1, 1, 8)]
    data = [rng.uniform(-1, 1, (1, 8, 6, 6)).astype("float32")]
    np.testing.assert_allclose(evaluate(planned, data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)
    module = build_graph(graph)
    out = poisoned((1, 8, 6, 6), "float32")
    module(data[0], out)
    np.testing.assert_allclose(out, evaluate(graph, data)[0], rtol=1e-4, atol=1e-5)


def test_a_blocked_network_compiles_and_matches(rng):
    graph = residual_cnn(rng, channels=8)
    fused = fuse(optimize(plan_layouts(optimize(graph), lanes=4)))
    anchors = [k.attrs["epilogue"] for k in fused.nodes if k.attrs["kind"] == "anchor"]
    assert anchors[:3] == [("bias", "relu"), ("bias", "relu"), ("bias", "add", "relu")]
    plan = plan_memory(fused)
    image = fused.nodes[0]  # the image in blocks of one channel: the input's own memory, no copy
    assert image.inputs[0] is fused.inputs[0] and plan.place(image.output) == Place("input", 0)
    module = build_graph(fused)
    x = rng.uniform(-1, 1, (1, 3, 12, 12)).astype("float32")
    out = poisoned((1, 10), "float32")
    module(x, out)
    np.testing.assert_allclose(out, evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)
