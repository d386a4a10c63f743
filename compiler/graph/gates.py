"""Squeeze-and-excitation gates folded into the convolution after them.

A squeeze-and-excitation block (EfficientNet's, MobileNetV3's, RegNetY's) multiplies its
features by a gate, one value per image and channel, and a convolution reads the product. The
gate is constant over the image, so it can scale the convolution's weights along their input
channels instead: ``conv(x * g, W) = conv(x, W * g)``. Where the weights are smaller than the
features, that is a pass over fewer elements: EfficientNet-B0's first gated layer reads
32 x 112 x 112 features and 16 x 32 weights. The scaled weights are computed each run (the gate
is), in the blocked layout the convolution reads; the product of the features is not computed
at all.
"""

from __future__ import annotations

from .ir import Graph, Node, Value
from .op import apply_op
from .rewrite import Rewriter, rewrite

__all__ = ["gates_into_weights"]


def _features_and_gate(product: Node) -> tuple[Value, Value] | None:
    """``(x, g)`` where ``product`` multiplies blocked features ``x`` (one image,
    ``(1, C/b, H, W, b)``) by a computed gate ``g`` of one value per channel, ``(1, C/b, 1, 1, b)``."""
    if product.op != "multiply" or len(product.inputs) != 2:
        return None
    for x, g in (product.inputs, product.inputs[::-1]):
        if (not x.is_constant and not g.is_constant and len(x.shape) == 5 and x.shape[0] == 1
                and x.shape == product.output.shape and g.shape == (1, x.shape[1], 1, 1, x.shape[4])):
            return x, g
    return None


def _folded_gate(conv: Node, producer, readers, outputs: set[int]) -> tuple[Value, Value] | None:
    """``(x, g)`` where ``conv`` is a blocked convolution of constant weights, fewer than the
    elements of the features ``x``, whose input is ``x`` times a gate ``g`` and read by nothing
    else; None otherwise."""
    if conv.op != "nn.conv2d_nchwc" or not conv.inputs[1].is_constant or conv.attrs.get("groups", 1) != 1:
        return None
    gated, weight = conv.inputs[0], conv.inputs[1]
    product = producer.get(gated.uid)
    if product is None or gated.uid in outputs or len(readers.get(gated.uid, [])) != 1:
        return None
    found = _features_and_gate(product)
    if found is None or weight.type.size >= found[0].type.size:
        return None
    _, chunks, _, _, block = found[0].shape
    return found if weight.shape[1] == chunks and weight.shape[4] == block else None


def gates_into_weights(graph: Graph) -> Graph:
    """``graph`` (layouts planned) with each blocked convolution (``nn.conv2d_nchwc``, constant
    weights) whose input is gated features, read by nothing else, reading the features as they
    are, its weights scaled by the gate (see the module's docstring), where the weights have
    fewer elements than the features."""
    producer = graph.producers()
    readers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}

    def visit(rw: Rewriter, node: Node) -> None:
        found = _folded_gate(node, producer, readers, outputs)
        if found is None:
            rw.emit(node)
            return
        x, gate = found
        _, chunks, _, _, block = x.shape
        lanes = rw.emit(apply_op("reshape", [gate], {"newshape": (1, chunks, 1, 1, block, 1)},
                                 f"{node.name}_gate", f"{node.name}_gate_out"))
        scaled = rw.emit(apply_op("multiply", [node.inputs[1], lanes.output], {}, f"{node.name}_gated_weight",
                                  f"{node.name}_gated_weight_out"))
        # the features' product, read by nothing now, goes with the other dead nodes
        rw.emit(Node(node.op, [x, scaled.output, *node.inputs[2:]], node.outputs, dict(node.attrs),
                     node.name))

    return rewrite(graph, visit)
