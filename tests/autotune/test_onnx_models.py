"""ONNX models built with their templates (autotune.build_model): each fusion pattern of the
model zoo's networks, compiled, run on poisoned outputs and checked against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

import autotune  # noqa: E402
import compiler  # noqa: E402
from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import model_info, prepare  # noqa: E402
from tests.helpers import assert_written, poisoned  # noqa: E402
from tests.onnx_helpers import make_model, rand  # noqa: E402


def _w(*shape, scale: float = 1.0) -> np.ndarray:
    """Random float32 weights, scaled."""
    return (rand(*shape) * scale).astype("float32")


def _check(model, feeds, rtol=1e-4, atol=1e-5, target="llvm"):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    graph = from_onnx(model)
    module = autotune.build_model(graph, target)
    outputs = [poisoned(e.shape, e.dtype) for e in expected]
    module(*[feeds[v.name] for v in graph.inputs], *outputs)
    for got, want in zip(outputs, expected):
        assert_written(got, want, rtol=rtol, atol=atol)
    return module


def _conv_bn(name, x, cin, cout, k=3, stride=1, groups=1, act="Relu", dilation=1):
    pad = k // 2 * dilation
    nodes = [helper.make_node("Conv", [x, f"{name}_w"], [f"{name}_c"], kernel_shape=[k, k], pads=[pad] * 4,
                              strides=[stride, stride], group=groups, dilations=[dilation] * 2, name=name),
             helper.make_node("BatchNormalization",
                              [f"{name}_c", f"{name}_g", f"{name}_b", f"{name}_m", f"{name}_v"],
                              [f"{name}_bn"], epsilon=1e-5, name=f"{name}_bn")]
    consts = {f"{name}_w": _w(cout, cin // groups, k, k, scale=1 / np.sqrt(cin // groups * k * k)),
              f"{name}_g": rand(cout, low=0.5), f"{name}_b": rand(cout), f"{name}_m": _w(cout, scale=0.1),
              f"{name}_v": rand(cout, low=0.5)}
    out = f"{name}_bn"
    if act == "Relu":
        nodes.append(helper.make_node("Relu", [out], [f"{name}_act"]))
        out = f"{name}_act"
    elif act == "Relu6":
        nodes.append(helper.make_node("Clip", [out, "zero", "six"], [f"{name}_act"]))
        out = f"{name}_act"
    elif act == "SiLU":  # as torch exports nn.SiLU: the sigmoid and the product
        nodes += [helper.make_node("Sigmoid", [out], [f"{name}_gate"]),
                  helper.make_node("Mul", [out, f"{name}_gate"], [f"{name}_act"])]
        out = f"{name}_act"
    elif act is not None:  # an ONNX activation of its own (HardSwish, LeakyRelu, ...)
        nodes.append(helper.make_node(act, [out], [f"{name}_act"]))
        out = f"{name}_act"
    return nodes, consts, out


def test_a_residual_block_with_a_strided_downsample():
    n1, c1, y1 = _conv_bn("a", "x", 16, 32, stride=2)
    n2, c2, y2 = _conv_bn("b", y1, 32, 32, act=None)
    n3, c3, y3 = _conv_bn("down", "x", 16, 32, k=1, stride=2, act=None)
    nodes = n1 + n2 + n3 + [helper.make_node("Add", [y2, y3], ["sum"]),
                            helper.make_node("Relu", ["sum"], ["r"]),
                            helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                            helper.make_node("Flatten", ["p"], ["f"]),
                            helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1)]
    consts = {**c1, **c2, **c3, "fc_w": _w(10, 32, scale=1 / 6), "fc_b": rand(10)}
    feeds = {"x": rand(1, 16, 10, 10)}
    module = _check(make_model(nodes, feeds, consts), feeds)
    kernels = model_info(module)["kernels"]
    assert any("add_add_relu" in k["name"] for k in kernels)  # the residual and its ReLU in the conv


def test_a_basic_block_runs_its_3x3_layers_by_winograd():
    # ResNet's basic block on 8 float lanes (pinned): 16 channels are two blocks of a vector, and
    # both 3x3 stride-1 layers are Winograd kernels, the second with the residual and its ReLU
    n1, c1, y1 = _conv_bn("a", "x", 16, 16)
    n2, c2, y2 = _conv_bn("b", y1, 16, 16, act=None)
    nodes = n1 + n2 + [helper.make_node("Add", [y2, "x"], ["sum"]), helper.make_node("Relu", ["sum"], ["y"])]
    feeds = {"x": rand(1, 16, 18, 17)}  # 17 columns: partial tiles at the right edge
    module = _check(make_model(nodes, feeds, {**c1, **c2}), feeds, target="llvm -mcpu=haswell")
    kernels = model_info(module)["kernels"]
    winograd = [k for k in kernels if k["schedule"].startswith("conv2d_nchwc_winograd:")]
    assert len(winograd) == 2, kernels
    assert any("add_add_relu" in k["name"] for k in winograd)


def test_a_dilated_block_runs_its_3x3_layers_by_winograd_on_the_image_s_phases():
    # DeepLab's dilated basic block on 8 float lanes (pinned): dilated by 2, each layer is four
    # undilated convolutions, one per phase of the image (rows of 18 and columns of 17 leave
    # phases of 9x9 and 9x8), run by Winograd in one kernel, the second with the residual
    n1, c1, y1 = _conv_bn("a", "x", 16, 16, dilation=2)
    n2, c2, y2 = _conv_bn("b", y1, 16, 16, act=None, dilation=2)
    nodes = n1 + n2 + [helper.make_node("Add", [y2, "x"], ["sum"]), helper.make_node("Relu", ["sum"], ["y"])]
    feeds = {"x": rand(1, 16, 18, 17)}
    model = make_model(nodes, feeds, {**c1, **c2})
    module = _check(model, feeds, target="llvm -mcpu=haswell")
    kernels = model_info(module)["kernels"]
    winograd = [k for k in kernels if k["schedule"].startswith("conv2d_nchwc_winograd:")]
    assert len(winograd) == 2, kernels
    tasks = autotune.extract_tasks(from_onnx(model), "llvm -mcpu=haswell").tasks
    assert [t.args[-1] for t in tasks if t.name == "conv2d_nchwc_winograd"] == [2, 2]  # the dilation


def test_an_inverted_residual_block():
    n1, c1, y1 = _conv_bn("expand", "x", 16, 96, k=1, act="Relu6")
    n2, c2, y2 = _conv_bn("dw", y1, 96, 96, groups=96, act="Relu6")
    n3, c3, y3 = _conv_bn("project", y2, 96, 16, k=1, act=None)
    nodes = n1 + n2 + n3 + [helper.make_node("Add", [y3, "x"], ["y"])]
    consts = {**c1, **c2, **c3, "zero": np.array(0, "float32"), "six": np.array(6, "float32")}
    feeds = {"x": rand(1, 16, 8, 8)}
    _check(make_model(nodes, feeds, consts), feeds)


def test_a_resnext_block_runs_its_grouped_layer_by_the_blocked_template():
    # ResNeXt's bottleneck on 8 float lanes (pinned): 64 channels in 8 groups of 8 (one vector),
    # then a strided 3x3 in 32 groups of 2 (two merged into one: blocks of 4, half a vector)
    n1, c1, y1 = _conv_bn("reduce", "x", 32, 64, k=1)
    n2, c2, y2 = _conv_bn("grouped", y1, 64, 64, groups=8)
    n3, c3, y3 = _conv_bn("narrow", y2, 64, 64, stride=2, groups=32)
    n4, c4, y4 = _conv_bn("expand", y3, 64, 32, k=1, act=None)
    nodes = n1 + n2 + n3 + n4 + [helper.make_node("Relu", [y4], ["y"])]
    feeds = {"x": rand(1, 32, 9, 9)}
    module = _check(make_model(nodes, feeds, {**c1, **c2, **c3, **c4}), feeds, target="llvm -mcpu=haswell")
    kernels = model_info(module)["kernels"]
    templated = [k for k in kernels if k["schedule"].startswith("conv2d_nchwc:")]
    assert len(templated) == 4, kernels
    assert not any("conv2d_bias" in k["name"] for k in kernels)  # no convolution left plain
    tasks = autotune.extract_tasks(from_onnx(make_model(nodes, feeds, {**c1, **c2, **c3, **c4})),
                                   "llvm -mcpu=haswell").tasks
    # the workloads' groups (a 1x1 layer's has none): 32 groups of 2 run as 16 groups of 4
    assert sorted(t.args[-1] for t in tasks if len(t.args) == 15) == [8, 16]


@pytest.mark.parametrize("stride", [2, 1])
def test_a_large_expansion_runs_in_one_kernel_with_its_depthwise_layer(stride):
    # MobileNetV2's second block: 96 channels at 112 x 112 (4.8 MB) are fused; the projection is not.
    n1, c1, y1 = _conv_bn("expand", "x", 8, 96, k=1, act="Relu6")
    n2, c2, y2 = _conv_bn("dw", y1, 96, 96, stride=stride, groups=96, act="Relu6")
    n3, c3, _ = _conv_bn("project", y2, 96, 16, k=1, act=None)
    nodes = n1 + n2 + n3
    nodes[-1].output[0] = "y"
    consts = {**c1, **c2, **c3, "zero": np.array(0, "float32"), "six": np.array(6, "float32")}
    feeds = {"x": rand(1, 8, 112, 112)}
    # AVX2's 8 lanes, on any host: the 8-channel input is then blocked too (its layout transform
    # is the first kernel, and the output's the last)
    module = _check(make_model(nodes, feeds, consts), feeds, target="llvm -mcpu=haswell")
    kernels = [k["name"].split("_", 1)[1] for k in model_info(module)["kernels"]]
    assert [k.rsplit("_", 1)[0] for k in kernels] == [
        "layout_transform", "conv2d_depthwise_nchwc_bias_add_clip", "conv2d_nchwc_bias_add",
        "layout_transform"]


def test_silu_hardswish_and_leaky_relu_are_a_layer_output_stage():
    n1, c1, y1 = _conv_bn("a", "x", 16, 16, act="SiLU")
    n2, c2, y2 = _conv_bn("b", y1, 16, 16, act="HardSwish")
    n3, c3, y3 = _conv_bn("c", y2, 16, 16, act="LeakyRelu")
    n4, c4, _ = _conv_bn("d", y3, 16, 16, act=None)
    nodes = n1 + n2 + n3 + n4
    nodes[-1].output[0] = "y"
    feeds = {"x": rand(1, 16, 10, 10) * 3}
    # AVX2 on any host: blocks of 16 channels
    model = make_model(nodes, feeds, {**c1, **c2, **c3, **c4})
    _check(model, feeds, target="llvm -mcpu=haswell")
    kernels = prepare(from_onnx(model), "llvm -mcpu=haswell").nodes
    # SiLU (one operator), HardSwish and LeakyRelu (its slope in the entry's name) in the
    # convolution's own output stage; layout transforms only on the way in and out
    assert [(k.attrs["kind"], k.attrs.get("epilogue")) for k in kernels] == [
        ("injective", None), ("anchor", ("bias", "silu")), ("anchor", ("bias", "hardswish")),
        ("anchor", ("bias", "leaky_relu(0.01)")), ("anchor", ("bias",)), ("injective", None)]
    assert [kernels[k].attrs["body"].nodes[0].op for k in (0, 5)] == ["layout_transform"] * 2


def test_a_transformer_feed_forward_with_erf_gelu_and_layer_norm():
    s2 = np.array(np.sqrt(2), "float32")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Div", ["hb", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["hb", "e1"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)]
    consts = {"w1": _w(32, 64, scale=1 / 6), "b1": rand(64), "w2": _w(64, 32, scale=1 / 8), "b2": rand(32),
              "s2": s2, "one": np.array(1, "float32"), "half": np.array(0.5, "float32"),
              "gamma": rand(32), "beta": rand(32)}
    feeds = {"x": rand(1, 12, 32)}
    module = _check(make_model(nodes, feeds, consts), feeds, rtol=1e-4, atol=1e-4)
    sources = {k["schedule"].split(":")[0] for k in model_info(module)["kernels"]}
    assert sources == {"dense_pack", "layer_norm"}  # gelu, biases and the residual in the dense kernels


@pytest.mark.parametrize("op, attrs, scale", [
    ("InstanceNormalization", {}, 3),
    ("GroupNormalization", {"num_groups": 3}, 3),  # opset 18's scale per group
])
def test_an_instance_or_group_norm_of_the_model_s_input(op, attrs, scale):
    """The norm over each channel's (or group's) positions is a layer norm whose affine is per
    channel, applied after: the layer norm template, which scales each element of a row, does
    not take it (reading the model's input, the norm's kernel is the layer norm alone)."""
    nodes = [helper.make_node(op, ["x", "s", "b"], ["n"], epsilon=1e-5, **attrs),
             helper.make_node("Conv", ["n", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    feeds = {"x": rand(1, 3, 6, 10)}
    model = make_model(nodes, feeds, {"w": _w(8, 3, 3, 3, scale=0.3), "s": rand(scale), "b": rand(scale)},
                       opset=18, check=op != "GroupNormalization")
    module = _check(model, feeds, rtol=1e-4, atol=1e-4)
    assert not any(k["schedule"].startswith("layer_norm") for k in model_info(module)["kernels"])


def test_attention_scores():
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "scale"], ["sd"]),
             helper.make_node("Softmax", ["sd"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    feeds = {"q": rand(1, 2, 6, 8), "k": rand(1, 2, 6, 8), "v": rand(1, 2, 6, 8)}
    _check(make_model(nodes, feeds, {"scale": np.array(np.sqrt(8), "float32")}), feeds)


def test_a_torch_network_exported_to_onnx(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, 2, 1, bias=False),
                                            torch.nn.BatchNorm2d(16), torch.nn.ReLU6())
            self.dw = torch.nn.Conv2d(16, 16, 3, 1, 1, groups=16)
            self.pool = torch.nn.MaxPool2d(2)
            self.fc = torch.nn.Linear(16, 5)

        def forward(self, x):
            x = self.stem(x)
            x = torch.relu(self.dw(x)) + x
            pooled = torch.nn.functional.adaptive_avg_pool2d(self.pool(x), 1)
            return torch.softmax(self.fc(torch.flatten(pooled, 1)), dim=1)

    torch.manual_seed(0)
    net = Net().eval()
    with torch.no_grad():
        net.stem[1].running_mean.uniform_(-0.2, 0.2)
        net.stem[1].running_var.uniform_(0.5, 1.5)
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, torch.randn(1, 3, 16, 16), str(path), opset_version=17, dynamo=False,
                      input_names=["image"], output_names=["probs"])
    feeds = {"image": rand(1, 3, 16, 16)}
    module = _check(onnx.load(str(path)), feeds)
    module.export_library(tmp_path / "net.so")
    loaded = compiler.runtime.load_module(tmp_path / "net.so")
    np.testing.assert_allclose(compiler.graph.run(loaded, feeds["image"])[0],
                               compiler.graph.run(module, feeds["image"])[0], rtol=0, atol=0)
