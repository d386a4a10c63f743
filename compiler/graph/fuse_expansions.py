"""Expansions fused into their depthwise layers: ``nn.conv2d_nchwc`` (1 x 1, stride 1, unpadded),
its elementwise tail, and the ``nn.depthwise_conv2d_nchwc`` reading it become one
``nn.conv2d_depthwise_nchwc`` (see :mod:`.ops.expansion`), whose kernel computes the depthwise
output in bands of rows, each from the pointwise rows it reads, computed into a buffer that
stays in the core's caches (:mod:`search_spaces.templates.cpu_conv2d_depthwise`).

Apart, the pointwise output goes to memory and back; fused, the rows where two bands' windows
overlap are computed twice (``KH - stride`` rows a band). So only pointwise outputs of at least
:data:`MIN_FUSED_BYTES` fuse: MobileNetV2's 96 channels at 112 x 112 (4.8 MB) ran 0.17 ms fused
against 0.27 ms apart inside the model on a 2-vCPU Xeon with 2 MiB of L2 per core, while its
144 channels at 56 x 56 (1.8 MB) ran as fast either way, with stride 2, and slower fused with
stride 1.
"""

from __future__ import annotations

from .fuse import epilogue_entry
from .ir import Graph, Node, Value
from .ops.expansion import MID_EPILOGUE_NODES, OP
from .ops.layout import window_attrs

__all__ = ["fuse_expansions", "MIN_FUSED_BYTES"]

#: The least bytes of a pointwise output that fuses with its depthwise layer.
MIN_FUSED_BYTES = 4 * 1024 * 1024


def _tail_entry(node: Node) -> tuple[str, Value, Value | None] | None:
    """The ``mid_epilogue`` entry ``node`` applies, the value it reads from the pointwise side,
    and the entry's bias; None where it is no such entry (a residual ``add`` is not one)."""
    upstream = [v for v in node.inputs if not v.is_constant]
    if len(upstream) != 1:
        return None
    entry = epilogue_entry(node, upstream[0], axis=1)
    if entry is None or entry[0] not in MID_EPILOGUE_NODES:
        return None
    return entry[0], upstream[0], entry[2]


def _is_pointwise(node: Node) -> bool:
    a = node.attrs
    return (node.op == "nn.conv2d_nchwc" and node.inputs[1].shape[2:4] == (1, 1)
            and tuple(a.get("strides", (1, 1))) == (1, 1) and not any(a.get("padding", (0, 0, 0, 0)))
            and tuple(a.get("dilation", (1, 1))) == (1, 1) and a.get("groups", 1) == 1)


def fuse_expansions(graph: Graph, min_bytes: int = MIN_FUSED_BYTES) -> Graph:
    """``graph`` (layouts planned) with each depthwise layer whose input is a pointwise layer's
    output of at least ``min_bytes`` (through its elementwise tail, read by nothing else) fused
    with that layer into one ``nn.conv2d_depthwise_nchwc``, named as the depthwise layer."""
    producer = graph.producers()
    readers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}
    replaced: dict[int, Node] = {}  # id of a depthwise node -> its fused node
    removed: set[int] = set()
    for node in graph.nodes:
        if node.op != "nn.depthwise_conv2d_nchwc":
            continue
        block = node.inputs[0].shape[4]
        chain: list[Node] = []
        tail: list[tuple[str, Value | None]] = []  # (entry, its bias), from the depthwise side
        v = node.inputs[0]
        while True:
            src = producer.get(v.uid)
            if src is None or v.uid in outputs or len(readers.get(v.uid, [])) != 1 or len(src.outputs) != 1:
                break
            chain.append(src)
            if _is_pointwise(src):
                break
            entry = _tail_entry(src)
            if entry is None:
                break
            name, v, bias = entry
            tail.append((name, bias))
        if not chain or not _is_pointwise(chain[-1]) or chain[-1].inputs[1].shape[5] != block:
            continue
        conv = chain[-1]
        if conv.output.type.nbytes < min_bytes:
            continue
        tail.reverse()
        attrs = {**window_attrs(node.attrs), "mid_epilogue": tuple(name for name, _ in tail)}
        inputs: list[Value] = [*conv.inputs, *(b for _, b in tail if b is not None), node.inputs[1]]
        replaced[id(node)] = Node(OP, inputs, node.outputs, attrs, node.name)
        removed.update(id(n) for n in chain)
    if not replaced:
        return graph
    return graph.rebuilt([replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed])
