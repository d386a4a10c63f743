"""Blocks of today's architectures, written in plain torch and exported as users export them:
each must match ONNX Runtime, and compile into the kernels a tuned model is made of (a dense
layer or convolution with its bias, activation and residual in its output stage; one kernel per
layer norm; no layout transform inside a convolutional block)."""

from __future__ import annotations

import math

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from compiler.graph import prepare  # noqa: E402
from tests.onnx_helpers import rand, run_both  # noqa: E402

nn, F = torch.nn, torch.nn.functional
TARGET = "llvm -mcpu=haswell"  # AVX2's 8 lanes, on any host


def _exported(module, shape, tmp_path, opset):
    import model_zoo  # scripts/benchmarks, on the path through pyproject.toml's pytest pythonpath

    torch.manual_seed(0)
    module = model_zoo._randomise_norms(module, torch.Generator().manual_seed(0))
    return onnx.load(model_zoo.export_onnx(module, tmp_path / "block.onnx", shape, opset=opset))


def _anchors(graph):
    kernels = prepare(graph, TARGET).nodes
    return kernels, [k.attrs.get("epilogue") for k in kernels if k.attrs["kind"] == "anchor"]


class _ViTBlock(nn.Module):
    """Patches, a class token, pre-norm attention and an MLP with erf GELU: 1 + 9 tokens, whose
    rows of 10 no vector tiles."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.m1, self.m2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = torch.cat([self.cls, self.patch(x).flatten(2).transpose(1, 2)], 1)
        B, N, D = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) / math.sqrt(D // self.heads)).softmax(-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(B, N, D))
        return x + self.m2(F.gelu(self.m1(self.n2(x))))


@pytest.mark.parametrize("opset", [13, 17])  # layer norm written out before opset 17, one node after
def test_a_vit_block(tmp_path, opset):
    model = _exported(_ViTBlock(), (1, 3, 12, 12), tmp_path, opset)
    graph = run_both(model, {"input": rand(1, 3, 12, 12)}, rtol=1e-4, atol=1e-5)
    kernels, anchors = _anchors(graph)
    # the three dense layers after attention keep their bias, GELU and residuals
    assert anchors[-3:] == [("bias", "add"), ("bias", "gelu"), ("bias", "add")]
    assert ["nn.layer_norm" in [n.op for n in k.attrs["body"].nodes] for k in kernels].count(True) == 2
    assert not any(n.op == "mean" for k in kernels for n in k.attrs["body"].nodes)


class _GPTBlock(nn.Module):
    """A causal self-attention block with GELU's tanh form, as GPT-2 has it."""

    def __init__(self, d=16, heads=2, n=8):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.att(self.n1(x)).split(C, dim=2))
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        a = a.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.n2(x)), approximate="tanh"))


def test_a_gpt2_block(tmp_path):
    model = _exported(_GPTBlock(), (1, 8, 16), tmp_path, 17)
    graph = run_both(model, {"input": rand(1, 8, 16)}, rtol=1e-4, atol=1e-5)
    _, anchors = _anchors(graph)
    assert anchors[-3:] == [("bias", "add"), ("bias", "gelu_tanh"), ("bias", "add")]


class _SEBlock(nn.Module):
    """EfficientNet's inverted residual: expansion, depthwise, squeeze-and-excitation, all SiLU."""

    def __init__(self, c=8, m=32):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, m, 1, bias=False), nn.BatchNorm2d(m), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(m, m, 3, 1, 1, groups=m, bias=False), nn.BatchNorm2d(m), nn.SiLU())
        self.squeeze, self.excite = nn.Conv2d(m, m // 4, 1), nn.Conv2d(m // 4, m, 1)
        self.project = nn.Sequential(nn.Conv2d(m, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = self.dw(self.expand(x))
        gate = torch.sigmoid(self.excite(F.silu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        return x + self.project(y * gate)


def test_an_efficientnet_block(tmp_path):
    model = _exported(_SEBlock(), (1, 8, 6, 6), tmp_path, 17)
    graph = run_both(model, {"input": rand(1, 8, 6, 6)}, rtol=1e-4, atol=1e-5)
    kernels, anchors = _anchors(graph)
    assert ("bias", "silu") in anchors and ("bias", "sigmoid") in anchors
    transforms = [k for k in kernels if k.attrs["body"].nodes[0].op == "layout_transform"]
    assert len(transforms) == 2  # the input's way in, the output's way out: the gate on blocks


@pytest.mark.parametrize("name", ["efficientnet_b0", "vit_s16", "resnext50", "deeplabv3", "shufflenet_v2"])
def test_the_benchmark_s_extra_models_at_a_small_size(tmp_path, name):
    """``model_zoo.EXTRA_MODELS``' architectures (EfficientNet-B0 whole on a 32x32 image, ViT-S/16's
    layout two blocks deep on 32x32 in 8x8 patches, ResNeXt-50 and DeepLabV3's ResNet one block a
    stage, ShuffleNetV2 two units a stage): what ``bench_model.py`` times, checked."""
    import model_zoo

    module = {"efficientnet_b0": lambda: model_zoo.EfficientNetB0(num_classes=10),
              "vit_s16": lambda: model_zoo.VisionTransformer(dim=32, depth=2, heads=2, image=32, patch=8,
                                                             num_classes=10),
              "resnext50": lambda: model_zoo.resnext50(layers=(1, 1, 1, 1), num_classes=10),
              "deeplabv3": lambda: model_zoo.DeepLabV3(rates=(1, 2, 3), layers=(1, 1, 2, 2)),
              "shufflenet_v2": lambda: model_zoo.ShuffleNetV2(repeats=(2, 2, 2), num_classes=10)}[name]()
    size = 64 if name == "deeplabv3" else 32  # its last stage at 4x4, where rate 3 reads the image
    model = _exported(module, (1, 3, size, size), tmp_path, 17)
    graph = run_both(model, {"input": rand(1, 3, size, size)}, rtol=1e-4, atol=1e-5)
    kernels, anchors = _anchors(graph)
    if name == "efficientnet_b0":
        assert ("bias", "silu") in anchors
        # no feature map leaves its blocks (only the squeezed vectors of the gates whose few
        # channels block by nothing, and the pooled features on the way to the classifier)
        moved = [k.inputs[0].shape for k in kernels if k.attrs["body"].nodes[0].op == "layout_transform"]
        assert moved and all(shape[2:4] == (1, 1) for shape in moved), moved
    elif name == "vit_s16":
        assert anchors.count(("bias", "gelu")) == 2
    elif name == "deeplabv3":  # the dilated layers blocked: the last stage's second block, the pyramid's
        convs = [k.attrs["body"].nodes[0] for k in kernels if k.attrs["kind"] == "anchor"]
        dilated = sorted(c.attrs["dilation"] for c in convs if c.op == "nn.conv2d_nchwc"
                         and tuple(c.attrs.get("dilation", (1, 1))) != (1, 1))
        assert [tuple(d) for d in dilated] == [(2, 2), (2, 2), (3, 3)], dilated
        resizes = [n for k in kernels for n in k.attrs["body"].nodes if n.op == "image.resize2d"]
        assert len(resizes) == 2  # the pooled branch spread over the map, the logits to the input's size
    elif name == "shufflenet_v2":
        # a channel shuffle is never copied whole: each is read by the split after it, and a
        # unit of stride 1 joins its halves and shuffles them into the next unit's split at once
        ops = [{n.op for n in k.attrs["body"].nodes} for k in kernels]
        assert all("strided_slice" in o for o in ops if "transpose" in o), [k.name for k in kernels]
        assert sum({"transpose", "concatenate"} <= o for o in ops) == 3, [k.name for k in kernels]
    else:  # every convolution blocked (17: the stem, 3 a block, 4 downsamples), the grouped ones too
        convs = [k.attrs["body"].nodes[0] for k in kernels if k.attrs["kind"] == "anchor"]
        assert [c.op for c in convs].count("nn.conv2d_nchwc") == 17, [c.op for c in convs]
        assert [c.attrs.get("groups", 1) for c in convs].count(32) == 4
        assert anchors.count(("bias", "relu")) == 9 and anchors.count(("bias", "add", "relu")) == 4
