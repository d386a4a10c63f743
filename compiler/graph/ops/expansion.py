"""``nn.conv2d_depthwise_nchwc``: a pointwise convolution of channel-blocked data, its
elementwise tail, and the depthwise convolution that reads its output, as one operator (an
inverted residual block's expansion and depthwise layers; :func:`compiler.graph.fuse_expansions`
forms it).

Inputs: data ``(N, C/ib, H, W, ib)``, the pointwise weight ``(F/b, C/ib, 1, 1, ib, b)``, one
``(F,)`` bias per ``"bias"`` of attr ``mid_epilogue``, the depthwise weight ``(F/b, KH, KW, b)``.
Attrs: ``strides``, ``padding`` and ``dilation`` of the depthwise convolution (the pointwise one
is 1 x 1, stride 1, unpadded), and ``mid_epilogue``: what is applied to the pointwise output, in
order, of ``"bias"``, ``"relu"``, ``"relu6"``, ``"sigmoid"``, ``"gelu"``, ``"silu"`` and
``"hardswish"``. Output
``(N, F/b, Ho, Wo, b)``.
"""

from __future__ import annotations

from ..op import OpDef, get_op, register_op
from ._common import fail
from .layout import window_attrs

__all__ = ["OP", "MID_EPILOGUE_NODES"]

#: The operator's name.
OP = "nn.conv2d_depthwise_nchwc"
#: Each ``mid_epilogue`` entry as the node it stands for: ``(op, attrs)`` (a bias's block added).
MID_EPILOGUE_NODES = {
    "bias": ("nn.bias_add", {"axis": 1}),
    "relu": ("nn.relu", {}),
    "relu6": ("clip", {"a_min": 0.0, "a_max": 6.0}),
    "sigmoid": ("sigmoid", {}),
    "gelu": ("nn.gelu", {"approximate": "none"}),
    "silu": ("nn.silu", {}),
    "hardswish": ("nn.hardswish", {}),
}
_POINTWISE = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1)}


def _parts(items: list, attrs) -> tuple:
    """``(data, pointwise weight, biases, depthwise weight, mid_epilogue)`` of the inputs."""
    mid = tuple(attrs.get("mid_epilogue", ()))
    unknown = [e for e in mid if e not in MID_EPILOGUE_NODES]
    if unknown:
        raise fail(OP, f"mid_epilogue entries must be of {', '.join(MID_EPILOGUE_NODES)}, got {unknown[0]!r}")
    biases = mid.count("bias")
    if len(items) != 3 + biases:
        raise fail(OP, f"takes data, the pointwise weight, {biases} biases and the depthwise weight, "
                       f"got {len(items)} inputs")
    return items[0], items[1], items[2:2 + biases], items[-1], mid


def _pointwise_tail(value, biases, mid, block: int, run):
    """``value`` through ``mid``; ``run(op, inputs, attrs)`` applies one operator."""
    biases = iter(biases)
    for entry in mid:
        op, attrs = MID_EPILOGUE_NODES[entry]
        inputs = [value, next(biases)] if entry == "bias" else [value]
        value = run(op, inputs, {**attrs, "block": block} if entry == "bias" else attrs)
    return value


def _infer(types, attrs):
    data, w1, biases, w2, mid = _parts(types, attrs)
    if len(w1.shape) != 6 or w1.shape[2:4] != (1, 1):
        raise fail(OP, f"the pointwise weight must be 6-D (F/b, C/ib, 1, 1, ib, b), got {w1.shape}")
    mid_type = get_op("nn.conv2d_nchwc").infer([data, w1], _POINTWISE)[0]
    channels = mid_type.shape[1] * mid_type.shape[4]
    for b in biases:
        if b.shape != (channels,) or b.dtype != mid_type.dtype:
            raise fail(OP, f"a bias must be ({channels},) {mid_type.dtype}, got {b}")
    return get_op("nn.depthwise_conv2d_nchwc").infer([mid_type, w2], window_attrs(attrs))


def _evaluate(arrays, attrs):
    x, w1, biases, w2, mid = _parts(arrays, attrs)
    value = get_op("nn.conv2d_nchwc").evaluate([x, w1], _POINTWISE)[0]
    value = _pointwise_tail(value, biases, mid, w1.shape[5],
                            lambda op, ins, a: get_op(op).evaluate(ins, a)[0])
    return get_op("nn.depthwise_conv2d_nchwc").evaluate([value, w2], window_attrs(attrs))


def _compute(tensors, attrs):
    x, w1, biases, w2, mid = _parts(tensors, attrs)
    value = get_op("nn.conv2d_nchwc").compute([x, w1], _POINTWISE)[0]
    value = _pointwise_tail(value, biases, mid, int(w1.shape[5]),
                            lambda op, ins, a: get_op(op).compute(ins, a)[0])
    return get_op("nn.depthwise_conv2d_nchwc").compute([value, w2], window_attrs(attrs))


register_op(OpDef(OP, "out_elemwise_fusable", _infer, _evaluate, _compute,
                  "a 1x1 convolution of channel-blocked data, its elementwise tail (attr mid_epilogue) "
                  "and the depthwise convolution of its output (attrs as nn.conv2d's), as one operator"))
