"""Operator fusion: the graph's nodes grouped into kernels, each one ``fused`` node.

Groups form in one pass over the nodes, in order (TVM's ``FuseOps`` rules, simplified to
chains): a node joins the group that produced one of its inputs when that input has no other
reader and is not a graph output, and the patterns (:mod:`.op`) fit:

* a convolution, dense layer or batched matmul (``out_elemwise_fusable``) starts a group, its
  *anchor*. Its successors join only as its **output stage** (an *epilogue*): ``bias`` (a
  per-channel constant, from ``nn.bias_add`` or an ``add`` of one), ``add`` (a residual of the
  output's shape), ``relu``, ``relu6`` (a clip to [0, 6]), ``sigmoid``, ``gelu`` (and
  ``gelu_tanh``, its tanh form), ``silu``, ``hardswish`` and ``leaky_relu(alpha)``. These are
  what the templates write as they store their output tile, so the fused kernel is the tuned
  kernel (``attrs["epilogue"]`` lists them, in order);
* an injective operator (elementwise, broadcast, reshape, transpose, ...) joins an injective
  group, so chains of them become one kernel; an elementwise or broadcast one also joins a
  reduction's group, after it. One that joins an injective group takes with it every other
  injective group whose output only it reads: the branches of a diamond (``where(x < 0, a * x,
  x)``, ONNX's activations as the importer writes them out) become one kernel;
* a reduction (pooling, mean, softmax, layer norm) joins an injective group as its consumer;
* anything else starts a group of its own.

Each group becomes a node ``fused`` whose ``attrs["body"]`` is the group as a graph, placed
where its last member was. Its inputs are every value it reads from outside (constants
included): for an anchor group, the anchor's inputs and then the epilogue's, in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..topi.nn import leaky_relu_name
from .errors import GraphError
from .ir import Graph, Node, TensorType, Value
from .op import OpDef, get_op, register_op

__all__ = ["fuse", "FUSED", "EPILOGUE_ENTRIES", "fused_kernels", "channel_axis", "epilogue_entry"]

FUSED = "fused"
#: The output-stage entries an anchor's kernel can apply (the templates' ``epilogue``).
EPILOGUE_ENTRIES = ("bias", "add", "relu", "relu6", "sigmoid", "gelu", "gelu_tanh", "silu", "hardswish",
                    "leaky_relu(alpha)")
_INJECTIVE = ("elemwise", "broadcast", "injective")
# op -> its entry. SiLU's sigmoid costs a convolution's output stage about what it costs as a
# kernel of its own, less the pass over memory (two 1x1 layers of 64 channels at 56x56, the first
# with SiLU, default configs, on a Zen 4: 0.334 ms fused, 0.354 apart; with AVX2 code, 0.396 and
# 0.421).
_UNARY_ENTRIES = {"sigmoid": "sigmoid", "nn.silu": "silu", "nn.hardswish": "hardswish"}


def channel_axis(anchor: Node) -> int:
    """The output axis an anchor's per-channel bias runs along: NCHW's C, else the last."""
    blocked = ("nn.conv2d", "nn.conv2d_nchwc", "nn.conv2d_winograd_nchwc", "nn.depthwise_conv2d_nchwc",
               "nn.conv2d_depthwise_nchwc")
    return 1 if anchor.op in blocked else len(anchor.output.shape) - 1


@dataclass
class _Group:
    kind: str  # "anchor", "reduce", "injective" or "opaque"
    nodes: list[Node]
    epilogue: list[str] = field(default_factory=list)
    extra: list[Value] = field(default_factory=list)  # the epilogue's inputs, in order
    last: Node | None = None  # the graph's node the group ends at (where the kernel goes)

    @property
    def output(self) -> Value:
        return self.nodes[-1].output


def _bias_vector(v: Value, out: TensorType, axis: int) -> np.ndarray | None:
    """``v``'s data as a vector along ``axis`` of ``out``, if ``v`` is a constant that broadcasts
    as a per-channel bias (shape ``(C,)`` on the last axis, or ``C`` then ones); else None."""
    if not v.is_constant or v.dtype != out.dtype or len(v.shape) > len(out.shape):
        return None
    channels = out.shape[axis]
    full = (1,) * (len(out.shape) - len(v.shape)) + v.shape
    want = tuple(channels if k == axis else 1 for k in range(len(out.shape)))
    if full != want:
        return None
    return v.data.reshape(channels)


def epilogue_entry(node: Node, v: Value, axis: int) -> tuple[str, Node, Value | None] | None:
    """How ``node``, reading ``v`` (an anchor's output, whose channels run along ``axis``),
    applies as an output-stage entry: the entry, the node as the body keeps it, and the entry's
    extra input; None where it does not."""
    out = v.type
    if node.outputs[0].type != out or not out.dtype.startswith("float"):
        return None
    if node.op == "nn.relu":
        return "relu", node, None
    if node.op in _UNARY_ENTRIES:
        return _UNARY_ENTRIES[node.op], node, None
    if node.op == "nn.gelu":
        return ("gelu" if node.attrs.get("approximate", "none") == "none" else "gelu_tanh"), node, None
    if node.op == "nn.leaky_relu":
        return leaky_relu_name(node.attrs.get("alpha", 0.01)), node, None
    if node.op == "clip":
        lo, hi = node.attrs.get("a_min"), node.attrs.get("a_max")
        lo, hi = -math.inf if lo is None else float(lo), math.inf if hi is None else float(hi)
        if lo == 0.0 and hi == 6.0:
            return "relu6", node, None
        if lo == 0.0 and hi == math.inf:
            return "relu", node, None
        return None
    if (node.op == "nn.bias_add" and node.inputs[0] is v
            and node.attrs.get("axis", 1) % len(out.shape) == axis):
        bias, block = node.inputs[1], node.attrs.get("block")
        if block is None:
            channels = out.shape[axis]
        elif len(out.shape) == 5 and out.shape[4] == block:  # NCHW{block}c: C / block blocks of block
            channels = out.shape[axis] * block
        else:
            return None
        return ("bias", node, bias) if bias.shape == (channels,) else None
    if node.op == "add":
        other = node.inputs[1] if node.inputs[0] is v else node.inputs[0]
        if other is v:
            return None
        vector = _bias_vector(other, out, axis)
        if vector is not None:
            bias = Value.constant(other.name + "_vector", vector)
            body = Node("nn.bias_add", [v, bias], node.outputs, {"axis": axis}, node.name)
            return "bias", body, bias
        if other.type == out:
            return "add", node, other
    return None


def _group_inputs(group: _Group) -> list[Value]:
    """Every value the group reads from outside, in order: an anchor's own inputs first, then
    the epilogue's; otherwise in order of first use."""
    if group.kind == "anchor":
        return [*group.nodes[0].inputs, *group.extra]
    inside = {v.uid for n in group.nodes for v in n.outputs}
    seen: dict[int, Value] = {}
    for n in group.nodes:
        for v in n.inputs:
            if v.uid not in inside:
                seen.setdefault(v.uid, v)
    return list(seen.values())


def fuse(graph: Graph) -> Graph:
    """The graph of ``fused`` nodes, one per kernel (see the module's docstring)."""
    readers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}
    group_of: dict[int, _Group] = {}  # value uid -> the group whose output it is
    groups: list[_Group] = []
    position = {id(n): k for k, n in enumerate(graph.nodes)}  # injective groups hold the graph's own nodes

    def joinable(v: Value) -> _Group | None:
        g = group_of.get(v.uid)
        if g is None or v.uid in outputs or len(readers.get(v.uid, [])) != 1 or g.output is not v:
            return None
        return g

    for original in graph.nodes:
        node = original
        pattern = get_op(node.op).pattern
        target: _Group | None = None
        if len(node.outputs) == 1 and pattern in (*_INJECTIVE, "reduce"):
            # An anchor's output stage first: an add of a dense layer's output and of a residual
            # that an injective kernel reshapes joins the layer, not the reshape.
            joinable_inputs = [(v, g) for v in node.inputs if (g := joinable(v)) is not None]
            for v, g in sorted(joinable_inputs, key=lambda vg: vg[1].kind != "anchor"):
                if g.kind == "anchor" and pattern in ("elemwise", "broadcast"):
                    entry = epilogue_entry(node, v, channel_axis(g.nodes[0]))
                    if entry is not None:
                        name, node, extra = entry
                        g.epilogue.append(name)
                        if extra is not None:
                            g.extra.append(extra)
                        target = g
                        break
                elif g.kind == "injective" or (g.kind == "reduce" and pattern in ("elemwise", "broadcast")):
                    target = g
                    if pattern == "reduce":
                        g.kind = "reduce"
                    break
        if target is not None and target.kind == "injective" and pattern in _INJECTIVE:
            # Every other injective group whose output only this node reads joins too: the
            # branches of a diamond (``where(x < 0, a * x, x)``) become one kernel with it.
            for v in node.inputs:
                g = joinable(v)
                if g is not None and g is not target and g.kind == "injective":
                    target.nodes = sorted(target.nodes + g.nodes, key=lambda n: position[id(n)])
                    groups.remove(g)
                    for n in g.nodes:
                        for out in n.outputs:
                            group_of[out.uid] = target
        if target is None:
            kind = {"out_elemwise_fusable": "anchor", "reduce": "reduce",
                    "opaque": "opaque"}.get(pattern, "injective")
            target = _Group(kind, [])
            groups.append(target)
        target.nodes.append(node)
        target.last = original
        for v in node.outputs:
            group_of[v.uid] = target

    ends = {id(g.last): g for g in groups}
    fused: list[Node] = []
    for node in graph.nodes:
        g = ends.get(id(node))
        if g is None:
            continue
        fused.append(_fused_node(g, len(fused)))
    return graph.rebuilt(fused)


def _fused_node(group: _Group, index: int) -> Node:
    inputs = _group_inputs(group)
    inner = {v.uid: v for v in inputs if not v.is_constant}
    body = Graph(list(inner.values()), group.nodes[-1].outputs, group.nodes, name=f"kernel{index}")
    attrs = {"body": body, "kind": group.kind, "params": list(inputs)}
    if group.kind == "anchor":
        attrs["epilogue"] = tuple(group.epilogue)
    name = "_".join(dict.fromkeys(n.op.replace("nn.", "") for n in group.nodes))
    return Node(FUSED, inputs, list(body.outputs), attrs, f"fused_{name}_{index}")


def fused_kernels(graph: Graph) -> list[Node]:
    """The ``fused`` nodes of a fused graph (GraphError if it has other nodes)."""
    for node in graph.nodes:
        if node.op != FUSED:
            raise GraphError(f"node {node.name!r} ({node.op}) is not fused: run compiler.graph.fuse first")
    return list(graph.nodes)


# ----------------------------------------------------------------------------- the operator


def _evaluate(arrays, attrs):
    body: Graph = attrs["body"]
    env = {v.uid: a for v, a in zip(attrs["params"], arrays)}
    for n in body.nodes:
        results = get_op(n.op).evaluate([env[v.uid] if v.uid in env else v.data for v in n.inputs], n.attrs)
        env.update({v.uid: r for v, r in zip(n.outputs, results)})
    return [env[v.uid] for v in body.outputs]


def _infer(types, attrs):
    return [v.type for v in attrs["body"].outputs]


def _compute(tensors, attrs):
    raise GraphError("a fused node is compiled as a whole (compiler.graph.build), not op by op")


FUSED_OP: OpDef = register_op(OpDef(FUSED, "opaque", _infer, _evaluate, _compute,
                                    doc="a kernel: a group of nodes compiled together"))
