"""Standard models in plain torch (torchvision is not needed), with random weights, and their
export to ONNX.

``MODELS`` maps a name to ``(factory, input shape)``: ResNet-18 and -50, MobileNetV2 (NCHW
images of 224x224) and one BERT-base-sized ``torch.nn.TransformerEncoderLayer`` (batch first,
128 tokens of 768), with torch's default activation (ReLU) and with BERT's (GELU);
``EXTRA_MODELS``, by name only: EfficientNet-B0, ViT-S/16, ResNeXt-50 32x4d, DeepLabV3 (on a
ResNet-50, 21 classes at 224x224) and ShuffleNetV2 x1.0. BatchNorm and LayerNorm layers get
random affine parameters and running statistics, so a compiler's normalisation folding has
something to fold.

    python scripts/benchmarks/model_zoo.py resnet18 resnet18.onnx --opset 13
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn

__all__ = ["MODELS", "EXTRA_MODELS", "resnet18", "resnet50", "mobilenet_v2", "encoder_layer",
           "efficientnet_b0", "vit_s16", "resnext50", "deeplabv3", "shufflenet_v2", "export_onnx"]


# ---------------------------------------------------------------------------- random statistics


def _randomise_norms(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Random affine parameters and running statistics for every BatchNorm and LayerNorm layer:
    mean ~ N(0, 0.1), var ~ U(0.5, 1.5), weight ~ U(0.5, 1.5), bias ~ N(0, 0.1)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=generator) + 0.5)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) + 0.5)
    return model.eval()


def _with_random_weights(make: Callable[[], nn.Module], seed: int) -> nn.Module:
    """``make()``, its weights drawn from torch's generator seeded with ``seed`` and its norms
    randomised (:func:`_randomise_norms`) from a generator of the same seed, in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    return _randomise_norms(make(), generator)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             dilation: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2 * dilation, dilation, groups, bias=False),
            nn.BatchNorm2d(cout)]


# ---------------------------------------------------------------------------- ResNet


class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, width, 3, stride)
        self.conv2, self.bn2 = _conv_bn(width, width, 3)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(cin, width * self.expansion, stride)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int, groups: int = 1, group_width: int = 64,
                 dilation: int = 1):
        super().__init__()
        inner = width * group_width // 64 * groups  # ResNeXt's grouped 3x3 layers are wider
        self.conv1, self.bn1 = _conv_bn(cin, inner, 1)
        # the stride on the 3x3 layer, as torchvision's
        self.conv2, self.bn2 = _conv_bn(inner, inner, 3, stride, groups, dilation)
        self.conv3, self.bn3 = _conv_bn(inner, width * self.expansion, 1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(cin, width * self.expansion, stride)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _downsample(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(*_conv_bn(cin, cout, 1, stride))


class ResNet(nn.Module):
    """torchvision's ResNet: a 7x7 stem, four stages of blocks, global pooling, a classifier;
    ``block_args`` go to each block (ResNeXt's ``groups`` and ``group_width``). With
    ``dilate_last`` the last stage keeps its input's size, its 3x3 layers dilated by 2 but the
    first block's (torchvision's ``replace_stride_with_dilation=[False, False, True]``)."""

    def __init__(self, block: type, layers: Sequence[int], num_classes: int = 1000, dilate_last: bool = False,
                 **block_args):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, stages = 64, []
        for k, (width, count) in enumerate(zip((64, 128, 256, 512), layers)):
            blocks = []
            for j in range(count):
                dilated = dilate_last and k == 3
                stride = 2 if j == 0 and k > 0 and not dilated else 1
                extra = {"dilation": 2} if dilated and j > 0 else {}
                blocks.append(block(cin, width, stride, **block_args, **extra))
                cin = width * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, num_classes)

    def features(self, x):
        """The last stage's feature map."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward(self, x):
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)
        return self.fc(x)


def resnet18(seed: int = 0) -> nn.Module:
    """ResNet-18 with random weights, in eval mode."""
    return _with_random_weights(lambda: ResNet(_BasicBlock, (2, 2, 2, 2)), seed)


def resnet50(seed: int = 0) -> nn.Module:
    """ResNet-50 with random weights, in eval mode."""
    return _with_random_weights(lambda: ResNet(_Bottleneck, (3, 4, 6, 3)), seed)


def resnext50(seed: int = 0, layers: Sequence[int] = (3, 4, 6, 3), num_classes: int = 1000) -> nn.Module:
    """ResNeXt-50 32x4d (each 3x3 layer in 32 groups, 4 channels a group in the first stage)
    with random weights, in eval mode; ``layers``: blocks per stage (fewer for a quick check)."""
    return _with_random_weights(
        lambda: ResNet(_Bottleneck, layers, num_classes, groups=32, group_width=4), seed)


class _ASPP(nn.Module):
    """DeepLabV3's atrous spatial pyramid pooling: a 1x1 layer, 3x3 layers at ``rates``, and the
    image's mean through a 1x1 layer spread back over it, concatenated and projected."""

    def __init__(self, cin: int, rates: Sequence[int], cout: int = 256):
        super().__init__()
        self.branches = nn.ModuleList([nn.Sequential(*_conv_bn(cin, cout, 1), nn.ReLU())] + [
            nn.Sequential(*_conv_bn(cin, cout, 3, dilation=r), nn.ReLU()) for r in rates])
        self.pooled = nn.Sequential(nn.AdaptiveAvgPool2d(1), *_conv_bn(cin, cout, 1), nn.ReLU())
        self.project = nn.Sequential(*_conv_bn((len(rates) + 2) * cout, cout, 1), nn.ReLU())

    def forward(self, x):
        pooled = nn.functional.interpolate(self.pooled(x), size=x.shape[-2:], mode="bilinear",
                                           align_corners=False)
        return self.project(torch.cat([b(x) for b in self.branches] + [pooled], 1))


class DeepLabV3(nn.Module):
    """torchvision's DeepLabV3 (its head: ASPP, a 3x3 layer, the classes' 1x1 layer; the logits
    upsampled bilinearly to the input's size) on a ResNet-50 at output stride 16, its last stage
    dilated, and the pyramid's rates (6, 12, 18) as the paper sets them there; ``layers``: blocks
    per stage of the ResNet (fewer for a quick check)."""

    def __init__(self, num_classes: int = 21, rates: Sequence[int] = (6, 12, 18),
                 layers: Sequence[int] = (3, 4, 6, 3)):
        super().__init__()
        self.backbone = ResNet(_Bottleneck, layers, dilate_last=True)
        self.head = nn.Sequential(_ASPP(2048, rates), *_conv_bn(256, 256, 3), nn.ReLU(),
                                  nn.Conv2d(256, num_classes, 1))

    def forward(self, x):
        logits = self.head(self.backbone.features(x))
        return nn.functional.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


def deeplabv3(seed: int = 0) -> nn.Module:
    """DeepLabV3 with a ResNet-50 (output stride 16), 21 classes, random weights, in eval mode."""
    return _with_random_weights(DeepLabV3, seed)


# ---------------------------------------------------------------------------- MobileNetV2


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [*_conv_bn(cin, hidden, 1), nn.ReLU6(inplace=True)]
        layers += [*_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(inplace=True),
                   *_conv_bn(hidden, cout, 1)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class _PooledClassifier(nn.Module):
    """``features``, averaged over the image, then ``classifier``."""

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class MobileNetV2(_PooledClassifier):
    """torchvision's MobileNetV2 (width 1.0): inverted residuals with depthwise 3x3 convolutions."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))  # expansion, channels, repeats, first stride

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [nn.Sequential(*_conv_bn(3, 32, 3, 2), nn.ReLU6(inplace=True))]
        cin = 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for j in range(repeats):
                layers.append(_InvertedResidual(cin, cout, stride if j == 0 else 1, expand))
                cin = cout
        layers.append(nn.Sequential(*_conv_bn(cin, 1280, 1), nn.ReLU6(inplace=True)))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))


def mobilenet_v2(seed: int = 0) -> nn.Module:
    """MobileNetV2 with random weights, in eval mode."""
    return _with_random_weights(MobileNetV2, seed)


# ---------------------------------------------------------------------------- transformer


def encoder_layer(seed: int = 0, activation: str = "relu") -> nn.Module:
    """``torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True, dropout=0)`` (BERT-base
    sized) with random weights, in eval mode; ``activation`` is ``"relu"`` or ``"gelu"``."""
    def make():
        return nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation=activation, batch_first=True)

    return _with_random_weights(make, seed)


# ---------------------------------------------------------------------------- EfficientNet-B0


class _SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(self.pool(x)))))


class _MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [*_conv_bn(cin, hidden, 1), nn.SiLU()]
        layers += [*_conv_bn(hidden, hidden, kernel, stride, groups=hidden), nn.SiLU(),
                   _SqueezeExcitation(hidden, max(1, cin // 4)), *_conv_bn(hidden, cout, 1)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class EfficientNetB0(_PooledClassifier):
    """torchvision's EfficientNet-B0: inverted residuals with 3x3 and 5x5 depthwise convolutions,
    squeeze-and-excitation and SiLU."""

    SETTINGS = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))  # expansion, kernel, first stride, channels, repeats

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [nn.Sequential(*_conv_bn(3, 32, 3, 2), nn.SiLU())]
        cin = 32
        for expand, kernel, stride, cout, repeats in self.SETTINGS:
            for j in range(repeats):
                layers.append(_MBConv(cin, cout, kernel, stride if j == 0 else 1, expand))
                cin = cout
        layers.append(nn.Sequential(*_conv_bn(cin, 1280, 1), nn.SiLU()))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))


def efficientnet_b0(seed: int = 0) -> nn.Module:
    """EfficientNet-B0 with random weights, in eval mode."""
    return _with_random_weights(EfficientNetB0, seed)


# ---------------------------------------------------------------------------- ViT


class _ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.softmax((q @ k.transpose(-2, -1)) * (D // self.heads) ** -0.5, -1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(B, N, D))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class VisionTransformer(nn.Module):
    """A ViT (timm's layout: pre-norm blocks, LayerNorm eps 1e-6, erf GELU): 16x16 patches, a
    class token, learned positions, the class token's features classified."""

    def __init__(self, dim: int = 384, depth: int = 12, heads: int = 6, image: int = 224, patch: int = 16,
                 num_classes: int = 1000):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*(_ViTBlock(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def vit_s16(seed: int = 0) -> nn.Module:
    """ViT-S/16 (384 wide, 12 blocks of 6 heads, 197 tokens) with random weights, in eval mode."""
    return _with_random_weights(VisionTransformer, seed)


# ---------------------------------------------------------------------------- ShuffleNetV2


def _channel_shuffle(x, groups: int):
    """Channels interleaved from ``groups`` equal parts: part 0's first, part 1's first, ..."""
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class _ShuffleUnit(nn.Module):
    """ShuffleNetV2's unit: with stride 1, half the channels pass through and half go through a
    1x1, depthwise 3x3, 1x1 branch; with stride 2, two branches each read all of them. The halves
    are joined and their channels interleaved."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride > 1:
            self.branch1 = nn.Sequential(*_conv_bn(cin, cin, 3, stride, groups=cin),
                                         *_conv_bn(cin, half, 1), nn.ReLU(inplace=True))
        self.branch2 = nn.Sequential(*_conv_bn(cin if stride > 1 else half, half, 1), nn.ReLU(inplace=True),
                                     *_conv_bn(half, half, 3, stride, groups=half),
                                     *_conv_bn(half, half, 1), nn.ReLU(inplace=True))

    def forward(self, x):
        if self.stride == 1:
            kept, rest = x.chunk(2, dim=1)
            out = torch.cat([kept, self.branch2(rest)], 1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], 1)
        return _channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """torchvision's ShuffleNetV2 (width 1.0 by default): a 3x3 stem and a max pool, three stages of
    shuffle units (the first of each of stride 2), a 1x1 layer to 1024 channels, the average."""

    def __init__(self, repeats: Sequence[int] = (4, 8, 4),
                 channels: Sequence[int] = (24, 116, 232, 464, 1024), num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, channels[0], 3, 2), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        units: list[nn.Module] = []
        cin = channels[0]
        for n, cout in zip(repeats, channels[1:-1]):
            units += [_ShuffleUnit(cin if j == 0 else cout, cout, 2 if j == 0 else 1) for j in range(n)]
            cin = cout
        self.units = nn.Sequential(*units)
        self.last = nn.Sequential(*_conv_bn(cin, channels[-1], 1), nn.ReLU(inplace=True))
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        return self.fc(self.last(self.units(self.stem(x))).mean((2, 3)))


def shufflenet_v2(seed: int = 0) -> nn.Module:
    """ShuffleNetV2 x1.0 (116, 232 and 464 channels: halves that no vector of channels divides)
    with random weights, in eval mode."""
    return _with_random_weights(ShuffleNetV2, seed)


#: name -> (factory, input shape)
MODELS: dict[str, tuple[Callable[..., nn.Module], tuple[int, ...]]] = {
    "resnet18": (resnet18, (1, 3, 224, 224)),
    "resnet50": (resnet50, (1, 3, 224, 224)),
    "mobilenet_v2": (mobilenet_v2, (1, 3, 224, 224)),
    "encoder_layer": (encoder_layer, (1, 128, 768)),
    # BERT's own activation: its erf form is one more elementwise cost in the 3072-wide layer
    "encoder_layer_gelu": (functools.partial(encoder_layer, activation="gelu"), (1, 128, 768)),
}

#: More architectures, by name as in ``MODELS``: exported and benchmarked alike when asked for
#: by name (``bench_model.py --models efficientnet_b0``), not in a default run.
EXTRA_MODELS: dict[str, tuple[Callable[..., nn.Module], tuple[int, ...]]] = {
    "efficientnet_b0": (efficientnet_b0, (1, 3, 224, 224)),
    "vit_s16": (vit_s16, (1, 3, 224, 224)),
    "resnext50": (resnext50, (1, 3, 224, 224)),
    "deeplabv3": (deeplabv3, (1, 3, 224, 224)),
    "shufflenet_v2": (shufflenet_v2, (1, 3, 224, 224)),
}


# ---------------------------------------------------------------------------- export


class _OneInput(nn.Module):
    """``module`` called with one tensor: the TorchScript exporter would otherwise trace the
    defaults of further ``forward`` arguments (TransformerEncoderLayer's ``is_causal``) as inputs."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def _attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention spelt out (MatMul, Softmax, MatMul): the exporter has no
    symbolic for it before opset 14."""
    if dropout_p or is_causal or enable_gqa:
        raise NotImplementedError("attention with dropout, a causal mask or grouped queries")
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if attn_mask is not None:
        scores = scores + attn_mask if attn_mask.dtype != torch.bool else \
            scores.masked_fill(~attn_mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), v)


@contextlib.contextmanager
def _explicit_attention(opset: int) -> Iterator[None]:
    original = nn.functional.scaled_dot_product_attention
    if opset < 14:
        nn.functional.scaled_dot_product_attention = _attention
    try:
        yield
    finally:
        nn.functional.scaled_dot_product_attention = original


def export_onnx(name_or_module: str | nn.Module, path: str | os.PathLike,
                input_shape: Sequence[int] | None = None, opset: int = 17,
                keep_batchnorm: bool = True) -> str | os.PathLike:
    """Export a model of ``MODELS`` (by name) or a module to the ONNX file ``path``; returns ``path``.

    The TorchScript exporter (``dynamo=False``) is used: it writes exactly the requested opset
    (13 to 18 are what the importer is checked on). ``keep_batchnorm`` keeps BatchNormalization
    nodes (the exporter folds them into the convolutions otherwise). The input is named
    ``input`` and the output ``output``.
    """
    if isinstance(name_or_module, str):
        known = {**MODELS, **EXTRA_MODELS}
        if name_or_module not in known:
            raise KeyError(f"no model {name_or_module!r}; known: {sorted(known)}")
        factory, default_shape = known[name_or_module]
        module = factory()
        input_shape = default_shape if input_shape is None else input_shape
    else:
        module = name_or_module
        if input_shape is None:
            raise ValueError("export_onnx needs input_shape for a module")
    module.eval()
    traced = _OneInput(module).eval() if len(inspect.signature(module.forward).parameters) > 1 else module
    example = torch.randn(tuple(input_shape), generator=torch.Generator().manual_seed(0))
    kwargs = {"opset_version": opset, "input_names": ["input"], "output_names": ["output"],
              "training": torch.onnx.TrainingMode.PRESERVE if keep_batchnorm
              else torch.onnx.TrainingMode.EVAL}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    with warnings.catch_warnings(), _explicit_attention(opset):
        warnings.simplefilter("ignore")
        torch.onnx.export(traced, (example,), os.fspath(path), **kwargs)
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=sorted({**MODELS, **EXTRA_MODELS}))
    parser.add_argument("path")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args(argv)
    print(export_onnx(args.model, args.path, opset=args.opset))


if __name__ == "__main__":
    main()
