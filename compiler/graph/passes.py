"""The graph passes, and the pipeline they run in, written once as data.

A :class:`GraphPass` is a named function ``Graph -> Graph``; :data:`OPTIMIZE` lists the
passes every model goes through before its kernels are formed, in order. ``print(OPTIMIZE)``
shows them. Fusion (:mod:`.fuse`) and memory planning (:mod:`.memory`) come after, when the
model is compiled.

* :func:`canonical_batch_matmuls`: a batched matmul's transposed operands become ``transpose``
  nodes, and a shared B of batch 1 takes A's batches as rows, so that its template tunes it;
* :func:`fold_constants`: a node whose inputs are all constants is computed now (with the
  operator's numpy rule) and becomes a constant;
* :func:`lower_conv2d_transpose`: a transposed convolution of a constant kernel becomes a
  convolution, which the templates tune: one that computes each of the stride's output phases as
  channels (its kernel the phase's taps), its pixels rearranged (a U-Net's 2x2 stride-2 step is a
  1x1 convolution so); a dilated one, the input spread out by the stride (zeros between its
  pixels), padded, convolved with the flipped kernel;
* :func:`trim_dead_taps`: a convolution's outer kernel taps that read only padding, for every
  output pixel, are dropped with that padding (a dilation past the image's size makes a 3x3 layer
  1x1);
* :func:`fold_batch_norm`: a batch norm after a convolution scales the convolution's weights
  and becomes a bias (``nn.bias_add``); a convolution's bias followed by one is folded too;
* :func:`decompose_batch_norm`: any other batch norm becomes a multiply and an add of
  per-channel constants;
* :func:`recognize_gelu`: the erf form of GELU, ``x * 0.5 * (1 + erf(x / sqrt(2)))`` in any
  of the orders exporters write it, becomes one ``nn.gelu`` node (which fuses into a dense
  layer's output stage), and its tanh form (GPT-2's) one ``nn.gelu`` with ``approximate="tanh"``;
* :func:`recognize_silu`: ``x * sigmoid(x)`` becomes one ``nn.silu`` node;
* :func:`recognize_layer_norm`: a layer norm written out (``(x - mean) / sqrt(var + eps)``, its
  scale and shift), as exporters write it before opset 17, becomes one ``nn.layer_norm`` node;
* :func:`unit_transposes_as_reshapes`: a transpose that only moves axes of length one is a
  reshape;
* :func:`constant_takes_as_slices`: a ``take`` of one constant index, or of constant indices
  stepping evenly forward, that a transpose of the contiguous axis follows, is a
  ``strided_slice`` (and a reshape dropping the axis);
* :func:`sink_reshapes`: reshapes that keep the last axis move below the elementwise operators
  after them, so a dense layer's bias, activation and residual meet its output; reshapes that
  meet fold into one;
* :func:`duplicate_moves`: a chain of data moves that several injective operators read gets one
  copy per reader, so each fuses into its reader's kernel.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..topi.nn.utils import as_pair
from .ir import Graph, Node, TensorType, Value
from .op import apply_op, get_op
from .ops.reduce import reduced_axes
from .ops.tensor import take_positions, transpose_axes
from .rewrite import Rewriter, rewrite

__all__ = ["GraphPass", "GraphPipeline", "OPTIMIZE", "canonical_batch_matmuls", "fold_constants",
           "fold_batch_norm", "decompose_batch_norm", "lower_conv2d_transpose", "trim_dead_taps",
           "recognize_gelu", "recognize_silu", "recognize_layer_norm", "unit_transposes_as_reshapes",
           "constant_takes_as_slices", "sink_reshapes", "fold_reshapes", "duplicate_moves", "optimize"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphPass:
    """One named step ``Graph -> Graph``."""

    name: str
    run: Callable[[Graph], Graph]


@dataclass(frozen=True)
class GraphPipeline:
    """Passes run in order."""

    name: str
    passes: Sequence[GraphPass]

    def run(self, graph: Graph) -> Graph:
        """``graph`` after every pass, in order."""
        for p in self.passes:
            before = len(graph.nodes)
            graph = p.run(graph)
            log.debug("graph pass %s: %d -> %d nodes", p.name, before, len(graph.nodes))
        return graph

    def __str__(self) -> str:
        return f"{self.name}: " + " -> ".join(p.name for p in self.passes)


# ----------------------------------------------------------------------------- constants


def fold_constants(graph: Graph) -> Graph:
    """Compute every node whose inputs are all constants; its outputs become constants. A node
    whose outputs hold no element (a slice that selects nothing) becomes empty constants whatever
    its inputs, and an empty operand of a concatenation is dropped: no kernel reads or writes
    nothing."""

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op == "fused":
            rw.emit(node)
        elif node.inputs and all(v.is_constant for v in node.inputs):
            results = get_op(node.op).evaluate([v.data for v in node.inputs], node.attrs)
            for old, data in zip(node.outputs, results):
                array = np.asarray(data, dtype=old.dtype).reshape(old.shape)
                rw.replace(old, Value.constant(old.name, array))
        elif all(v.type.size == 0 for v in node.outputs):
            for old in node.outputs:
                rw.replace(old, Value.constant(old.name, np.empty(old.shape, dtype=old.dtype)))
        elif node.op == "concatenate" and any(v.type.size == 0 for v in node.inputs):
            kept = [v for v in node.inputs if v.type.size]
            if len(kept) == 1:
                rw.replace(node.output, kept[0])
            else:
                rw.emit(Node(node.op, kept, node.outputs, dict(node.attrs), node.name))
        else:
            rw.emit(node)

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- batch norm


def _single_reader(graph: Graph) -> Callable[[Value], bool]:
    readers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}
    return lambda v: len(readers.get(v.uid, [])) == 1 and v.uid not in outputs


def _bn_scale_shift(node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """``scale`` and ``shift`` of a batch norm with constant parameters (else None)."""
    _, gamma, beta, mean, var = node.inputs
    if not all(v.is_constant for v in (gamma, beta, mean, var)):
        return None
    eps = float(node.attrs.get("epsilon", 1e-5))
    scale = gamma.data.astype("float64") / np.sqrt(var.data.astype("float64") + eps)
    shift = beta.data.astype("float64") - mean.data.astype("float64") * scale
    return scale, shift


def _taps_read(size: int, out: int, kernel: int, stride: int, dilation: int, before: int) -> tuple[int, int]:
    """The first and last kernel taps on one axis that read the image (not only its padding) for
    some output index: the taps ``r`` where ``y * stride + r * dilation - before`` falls in
    ``[0, size)`` for a ``y`` in ``[0, out)`` (a range: the first at least, since the middle tap
    of a padded kernel reads the image)."""
    reads = [r for r in range(kernel)
             if any(0 <= y * stride + r * dilation - before < size for y in range(out))]
    return (reads[0], reads[-1]) if reads else (0, kernel - 1)


def trim_dead_taps(graph: Graph) -> Graph:
    """A convolution of a constant kernel whose outer taps read only padding, for every output
    pixel, loses those taps (and that padding): DeepLab's pyramid at rate 18 on a 14 x 14 map is
    a 1 x 1 layer, each of its eight outer taps 18 pixels out, past the image. The output is the
    same, exactly: the taps dropped only ever added zeros."""

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op != "nn.conv2d" or not node.inputs[1].is_constant:
            rw.emit(node)
            return
        x, w = node.inputs
        sh, sw = as_pair(node.attrs.get("strides", 1), "strides")
        top, left, bottom, right = (int(p) for p in node.attrs.get("padding", (0, 0, 0, 0)))
        dh, dw = as_pair(node.attrs.get("dilation", 1), "dilation")
        _, _, H, W = x.shape
        _, _, KH, KW = w.shape
        _, _, Ho, Wo = node.output.shape
        (r0, r1), (c0, c1) = _taps_read(H, Ho, KH, sh, dh, top), _taps_read(W, Wo, KW, sw, dw, left)
        pads = (top - r0 * dh, left - c0 * dw, bottom - (KH - 1 - r1) * dh, right - (KW - 1 - c1) * dw)
        if (r0, r1, c0, c1) == (0, KH - 1, 0, KW - 1) or min(pads) < 0:
            rw.emit(node)
            return
        weight = Value.constant(f"{w.name}_taps", np.ascontiguousarray(w.data[:, :, r0:r1 + 1, c0:c1 + 1]))
        attrs = {**node.attrs, "padding": pads,
                 "dilation": (dh if r1 > r0 else 1, dw if c1 > c0 else 1)}
        rw.emit(Node("nn.conv2d", [x, weight], node.outputs, attrs, node.name))

    return rewrite(graph, visit)


def fold_batch_norm(graph: Graph) -> Graph:
    """Fold ``batch_norm(conv2d(x, w) [+ bias])`` into ``bias_add(conv2d(x, w * scale), shift')``."""
    producers = graph.producers()
    single = _single_reader(graph)
    plans: dict[int, tuple] = {}  # id(conv) -> (batch norm node, bias node or None, scale, shift)
    for node in graph.nodes:
        if node.op != "nn.batch_norm" or node.attrs.get("axis", 1) != 1:
            continue
        x, bias_node = node.inputs[0], None
        conv = producers.get(x.uid)
        if conv is not None and conv.op == "nn.bias_add" and conv.inputs[1].is_constant and single(x):
            bias_node, x = conv, conv.inputs[0]
            conv = producers.get(x.uid)
        if conv is None or conv.op != "nn.conv2d" or not conv.inputs[1].is_constant or not single(x):
            continue
        params = _bn_scale_shift(node)
        if params is not None:
            plans[id(conv)] = (node, bias_node, *params)
    if not plans:
        return graph
    dropped = {id(n) for bn, bias, _, _ in plans.values() for n in (bn, bias) if n is not None}

    def visit(rw: Rewriter, node: Node) -> None:
        if id(node) in dropped:
            return  # the batch norm, and the bias before it: folded into the convolution
        if id(node) not in plans:
            rw.emit(node)
            return
        bn, bias_node, scale, shift = plans[id(node)]
        w = node.inputs[1]
        weight = (w.data.astype("float64") * scale.reshape(-1, 1, 1, 1)).astype(w.dtype)
        if bias_node is not None:
            shift = shift + bias_node.inputs[1].data.astype("float64") * scale
        out = Value(node.output.name, node.output.type)
        rw.emit(Node("nn.conv2d", [node.inputs[0], Value.constant(w.name + "_bn", weight)], [out],
                     dict(node.attrs), node.name))
        bias = Value.constant(bn.name + "_bias", shift.astype(w.dtype))
        rw.emit(Node("nn.bias_add", [out, bias], [bn.output], {"axis": 1}, bn.name))

    return rewrite(graph, visit)


def decompose_batch_norm(graph: Graph) -> Graph:
    """Every batch norm left: ``x * scale + shift`` with per-channel constants."""

    def visit(rw: Rewriter, node: Node) -> None:
        params = _bn_scale_shift(node) if node.op == "nn.batch_norm" else None
        if params is None:
            rw.emit(node)
            return
        x = node.inputs[0]
        axis = node.attrs.get("axis", 1) % len(x.shape)
        shape = [1] * len(x.shape)
        shape[axis] = x.shape[axis]
        scale, shift = (Value.constant(f"{node.name}_{what}", a.reshape(shape).astype(x.dtype))
                        for what, a in (("scale", params[0]), ("shift", params[1])))
        scaled = Value(node.output.name + "_scaled", node.output.type)
        rw.emit(Node("multiply", [x, scale], [scaled], {}, node.name + "_scale"))
        rw.emit(Node("add", [scaled, shift], [node.output], {}, node.name + "_shift"))

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- transposed convolutions


class _Emitter:
    """Nodes emitted one after another in place of one node, each output named after it."""

    def __init__(self, rw: Rewriter, node: Node):
        self.rw, self.node, self.count = rw, node, 0

    def __call__(self, op: str, inputs: list[Value], **attrs) -> Value:
        self.count += 1
        name = f"{self.node.name}_{op.split('.')[-1]}{self.count}"
        return self.rw.emit(apply_op(op, inputs, attrs, name, f"{self.node.output.name}_{self.count}")).output


def _phases(emit: _Emitter, node: Node) -> tuple[Value, tuple[int, int]] | None:
    """An undilated transposed convolution as one convolution that computes each output phase of
    the stride as channels, the phases then rearranged into pixels: ``(the full output, its
    top-left crop)``.

    Along an axis, output pixel ``q * s + r`` (phase ``r``, padding not yet cropped) sums
    ``x[q - m] * w[r + m * s]`` over ``m``: a convolution of the input padded by ``M - 1``, ``M =
    ceil(K / s)``, with phase ``r``'s taps flipped (zero past the kernel). The convolution's
    output channels are ``(filter, phase row, phase column)``, rearranged as DepthToSpace's CRD
    order does."""
    x, w = node.inputs
    N, C, H, W = x.shape
    groups = node.attrs.get("groups", 1)
    _, Fg, KH, KW = w.shape
    sh, sw = node.attrs.get("strides", (1, 1))
    top, left = tuple(node.attrs.get("padding", (0,) * 4))[:2]
    Ho, Wo = node.output.shape[2:]
    M = (-(-KH // sh), -(-KW // sw))
    # positions per phase: the H + M - 1 the taps reach, more where the output padding goes past
    Q = tuple(max(n + m - 1, -(-(p + o) // s)) for n, m, p, o, s in zip((H, W), M, (top, left), (Ho, Wo),
                                                                        (sh, sw)))
    Cg = C // groups
    taps = np.zeros((groups, Fg, sh, sw, Cg, *M), w.dtype)
    grouped = w.data.reshape(groups, Cg, Fg, KH, KW)
    for ry, rx, jy, jx in itertools.product(range(sh), range(sw), range(M[0]), range(M[1])):
        ky, kx = ry + (M[0] - 1 - jy) * sh, rx + (M[1] - 1 - jx) * sw
        if ky < KH and kx < KW:
            taps[:, :, ry, rx, :, jy, jx] = grouped[:, :, :, ky, kx].transpose(0, 2, 1)
    kernel = Value.constant(f"{node.name}_phases", taps.reshape(groups * Fg * sh * sw, Cg, *M))
    # M - 1 before; after, what makes the output Q long
    pads = (M[0] - 1, M[1] - 1, Q[0] - H, Q[1] - W)
    phases = emit("nn.conv2d", [x, kernel], strides=(1, 1), padding=pads, dilation=(1, 1), groups=groups)
    split = emit("reshape", [phases], newshape=(N, groups * Fg, sh, sw, *Q))
    moved = emit("transpose", [split], axes=(0, 1, 4, 2, 5, 3))
    return emit("reshape", [moved], newshape=(N, groups * Fg, Q[0] * sh, Q[1] * sw)), (top, left)


def _spread(emit: _Emitter, node: Node) -> tuple[Value, tuple[int, int]]:
    """A dilated transposed convolution as the convolution of the input spread out by the stride
    (``s - 1`` zeros after each pixel), padded by the window's reach less the padding (cropped
    where that is negative), with the flipped kernel: ``(its output, no crop)``."""
    x, w = node.inputs
    a = node.attrs
    strides, dilation = tuple(a.get("strides", (1, 1))), tuple(a.get("dilation", (1, 1)))
    padding, output_padding = tuple(a.get("padding", (0,) * 4)), tuple(a.get("output_padding", (0, 0)))
    groups = a.get("groups", 1)
    N, C = x.shape[:2]
    _, Fg, KH, KW = w.shape
    spread = x
    for axis, s in ((3, strides[1]), (2, strides[0])):
        if s > 1:
            shape = spread.shape
            lifted = emit("reshape", [spread], newshape=(*shape[:axis + 1], 1, *shape[axis + 1:]))
            width = [(0, 0)] * (len(shape) + 1)
            width[axis + 1] = (0, s - 1)
            padded = emit("nn.pad", [lifted], pad_width=tuple(width), pad_value=0.0)
            merged = list(shape)
            merged[axis] *= s
            spread = emit("reshape", [padded], newshape=tuple(merged))
    before = [(k - 1) * d - p for k, d, p in zip((KH, KW), dilation, padding[:2])]
    after = [(k - 1) * d - p + o - (s - 1) for k, d, p, o, s in
             zip((KH, KW), dilation, padding[2:], output_padding, strides)]
    if any(v < 0 for v in before + after):
        begin = (0, 0, *(max(0, -v) for v in before))
        end = (N, C, *(n - max(0, -v) for n, v in zip(spread.shape[2:], after)))
        spread = emit("strided_slice", [spread], begin=begin, end=end)
    if any(v > 0 for v in before + after):
        width = ((0, 0), (0, 0), *((max(0, b), max(0, e)) for b, e in zip(before, after)))
        spread = emit("nn.pad", [spread], pad_width=width, pad_value=0.0)
    Cg = C // groups
    flipped = (w.data.reshape(groups, Cg, Fg, KH, KW).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
               .reshape(groups * Fg, Cg, KH, KW))
    kernel = Value.constant(f"{node.name}_flipped", np.ascontiguousarray(flipped))
    return emit("nn.conv2d", [spread, kernel], strides=(1, 1), padding=(0, 0, 0, 0), dilation=dilation,
                groups=groups), (0, 0)


def lower_conv2d_transpose(graph: Graph) -> Graph:
    """Every ``nn.conv2d_transpose`` of a constant kernel as an ``nn.conv2d`` and the moves around
    it (see the module's docstring); one of a computed kernel stays as it is."""

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op != "nn.conv2d_transpose" or not node.inputs[1].is_constant:
            rw.emit(node)
            return
        emit = _Emitter(rw, node)
        undilated = tuple(node.attrs.get("dilation", (1, 1))) == (1, 1)
        full, (top, left) = (_phases if undilated else _spread)(emit, node)
        out = node.output
        if full.shape == out.shape:
            rw.replace(out, full)
            return
        N, F, Ho, Wo = out.shape
        rw.emit(Node("strided_slice", [full], node.outputs,
                     {"begin": (0, 0, top, left), "end": (N, F, top + Ho, left + Wo)}, node.name))

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- GELU


def _scalar(v: Value) -> float | None:
    if v.is_constant and v.data.size == 1:
        return float(v.data.reshape(()))
    return None


def _other(node: Node, v: Value) -> Value | None:
    """The other input of binary ``node`` besides ``v`` (None if ``v`` is not one of them)."""
    a, b = node.inputs
    return b if a is v else a if b is v else None


def recognize_gelu(graph: Graph) -> Graph:
    """Replace ``x * 0.5 * (1 + erf(x / sqrt(2)))`` with ``nn.gelu(x)``, and its tanh form
    ``x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` (GPT-2's) with
    ``nn.gelu(x, approximate="tanh")``: any association of the products, the constants
    multiplied or divided by, the cube a power or two products."""
    producers = graph.producers()
    readers = graph.consumers()
    found: dict[int, tuple[Value, Value, str]] = {}  # final multiply's id -> (x, output, approximate)
    for node in graph.nodes:
        if node.op == "erf":
            x, approximate = _erf_argument(producers.get(node.inputs[0].uid)), "none"
        elif node.op == "tanh":
            x, approximate = _tanh_argument(producers.get(node.inputs[0].uid), producers), "tanh"
        else:
            continue
        if x is None:
            continue
        plus = readers.get(node.output.uid, [])
        if len(plus) != 1 or plus[0].op != "add" or _scalar(_other(plus[0], node.output)) != 1.0:
            continue
        out = _gelu_product(plus[0].output, x, readers, producers)
        if out is not None:
            found[id(out[0])] = (x, out[1], approximate)
    if not found:
        return graph

    def visit(rw: Rewriter, node: Node) -> None:
        if id(node) in found:
            x, out, approximate = found[id(node)]
            rw.emit(Node("nn.gelu", [rw.value(x)], [out], {"approximate": approximate}, node.name + "_gelu"))
        else:
            rw.emit(node)

    return rewrite(graph, visit)


def _scaled_by(node: Node | None, factor: float) -> Value | None:
    """``y`` where ``node`` is ``y * factor`` or ``y / (1 / factor)`` (to 1e-3), else None."""
    if node is None or node.op not in ("divide", "multiply"):
        return None
    for y, c in (node.inputs, node.inputs[::-1]) if node.op == "multiply" else (node.inputs,):
        k = _scalar(c)
        if k and math.isclose(k if node.op == "multiply" else 1 / k, factor, rel_tol=1e-3):
            return y
    return None


def _erf_argument(scaled: Node | None) -> Value | None:
    """``x`` where ``scaled`` is ``x / sqrt(2)`` (or ``x * (1 / sqrt(2))``), else None."""
    return _scaled_by(scaled, 1 / math.sqrt(2))


def _tanh_argument(scaled: Node | None, producers) -> Value | None:
    """``x`` where ``scaled`` is ``sqrt(2 / pi) * (x + 0.044715 * x^3)``, else None."""
    inner = _scaled_by(scaled, math.sqrt(2 / math.pi))
    plus = producers.get(inner.uid) if inner is not None else None
    if plus is None or plus.op != "add":
        return None
    for x, term in (plus.inputs, plus.inputs[::-1]):
        cube = _scaled_by(producers.get(term.uid), 0.044715)
        if cube is not None and _is_cube(producers.get(cube.uid), x, producers):
            return x
    return None


def _is_cube(node: Node | None, x: Value, producers) -> bool:
    """Whether ``node`` computes ``x^3``: ``power(x, 3)``, or ``x * (x * x)`` in either order."""
    if node is None:
        return False
    if node.op == "power":
        return node.inputs[0] is x and _scalar(node.inputs[1]) == 3.0
    if node.op != "multiply":
        return False
    square = _other(node, x)
    inner = producers.get(square.uid) if square is not None else None
    return inner is not None and inner.op == "multiply" and inner.inputs[0] is x and inner.inputs[1] is x


def _gelu_product(one_plus_erf: Value, x: Value, readers, producers) -> tuple[Node, Value] | None:
    """The multiply that ends ``x * 0.5 * one_plus_erf`` in any association, and its output."""
    factors = {"x": False, "half": False}
    value = one_plus_erf
    for _ in range(2):
        nxt = readers.get(value.uid, [])
        if len(nxt) != 1 or nxt[0].op != "multiply":
            return None
        node = nxt[0]
        other = _other(node, value)
        if other is x and not factors["x"]:
            factors["x"] = True
        elif _scalar(other) == 0.5 and not factors["half"]:
            factors["half"] = True
        else:
            # (x * 0.5) * (1 + erf): the other operand is itself the product of x and 0.5
            return (None if not _is_half_x(producers.get(other.uid), x) or any(factors.values())
                    else (node, node.output))
        value = node.output
    return (node, node.output) if all(factors.values()) else None


def _is_half_x(node: Node | None, x: Value) -> bool:
    return node is not None and node.op == "multiply" and _other(node, x) is not None \
        and _scalar(_other(node, x)) == 0.5


def recognize_silu(graph: Graph) -> Graph:
    """Replace ``x * sigmoid(x)`` (either order; the sigmoid read by the product alone, not a
    graph output) with ``nn.silu(x)``: one operator, computed once per element where the
    written-out form reads ``x`` twice."""
    producers = graph.producers()
    readers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}
    found: dict[int, Value] = {}  # the multiply's id -> x
    for node in graph.nodes:
        if node.op != "multiply":
            continue
        for gate, x in (node.inputs, node.inputs[::-1]):
            sigmoid = producers.get(gate.uid)
            if (sigmoid is not None and sigmoid.op == "sigmoid" and sigmoid.inputs[0] is x
                    and len(readers.get(gate.uid, [])) == 1 and gate.uid not in outputs
                    and node.output.type == x.type):
                found[id(node)] = x
                break
    if not found:
        return graph

    def visit(rw: Rewriter, node: Node) -> None:
        if id(node) in found:
            rw.emit(Node("nn.silu", [rw.value(found[id(node)])], node.outputs, {}, node.name + "_silu"))
        else:
            rw.emit(node)

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- layer norm


def _trailing_mean_axis(node: Node | None) -> int | None:
    """``k`` where ``node`` is a ``mean`` keeping its dimensions over its input's axes ``k`` to the
    last; None otherwise."""
    if node is None or node.op != "mean" or not node.attrs.get("keepdims", False):
        return None
    axes = reduced_axes(node)
    return axes[0] if axes == tuple(range(axes[0], len(node.inputs[0].shape))) else None


def _normalized_constant(v: Value, shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """Constant ``v`` as an array of the normalized shape ``shape[axis:]``, where it broadcasts
    to ``shape`` along those axes alone (a scale or shift per normalized element); else None."""
    if not v.is_constant or len(v.shape) > len(shape):
        return None
    lead = len(shape) - len(v.shape)
    for k, d in enumerate(v.shape):
        if d != 1 and (lead + k < axis or d != shape[lead + k]):
            return None
    trailing = v.shape[max(0, axis - lead):]
    return np.broadcast_to(v.data.reshape(trailing), shape[axis:]).astype(v.dtype)


def _layer_norm_match(mean: Node, readers, single, outputs: set[int]) -> tuple[Node, dict] | None:
    """The last node of ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* gamma] [+ beta]``
    that starts at ``mean`` (the square a power of 2 or a product with itself), and the
    ``nn.layer_norm`` that replaces it: ``{"x", "gamma", "beta", "axis", "epsilon"}``."""
    axis = _trailing_mean_axis(mean)
    x = mean.inputs[0]
    if axis is None or not x.dtype.startswith("float"):
        return None

    def only_reader(v: Value, op: str) -> Node | None:
        nodes = readers.get(v.uid, [])
        return nodes[0] if single(v) and nodes[0].op == op else None

    centre = only_reader(mean.output, "subtract")
    if centre is None or centre.inputs[0] is not x:
        return None
    d = centre.output
    uses = readers.get(d.uid, [])
    if len(uses) != 2 or d.uid in outputs:
        return None
    square = next((n for n in uses if (n.op == "power" and n.inputs[0] is d and _scalar(n.inputs[1]) == 2.0)
                   or (n.op == "multiply" and n.inputs[0] is d and n.inputs[1] is d)), None)
    divide = next((n for n in uses if n.op == "divide" and n.inputs[0] is d), None)
    if square is None or divide is None:
        return None
    variance = only_reader(square.output, "mean")
    if variance is None or _trailing_mean_axis(variance) != axis:
        return None
    plus = only_reader(variance.output, "add")
    epsilon = _scalar(_other(plus, variance.output)) if plus is not None else None
    root = only_reader(plus.output, "sqrt") if epsilon is not None else None
    if root is None or divide.inputs[1] is not root.output or not single(root.output):
        return None
    found = {"x": x, "axis": axis, "epsilon": epsilon, "gamma": None, "beta": None}
    last = divide
    for op, what in (("multiply", "gamma"), ("add", "beta")):
        after = only_reader(last.output, op)
        param = _normalized_constant(_other(after, last.output), x.shape, axis) if after is not None else None
        if param is None:
            continue
        found[what], last = param, after
    return last, found


def recognize_layer_norm(graph: Graph) -> Graph:
    """Replace a layer norm written out, as exporters write it before ONNX's opset 17
    (``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)``, then a scale and a shift by
    constants along the normalized axes), with one ``nn.layer_norm`` node: one kernel reading
    ``x`` twice, where the written-out form is two kernels (the mean, then the rest) and a
    ``pow`` per element."""
    readers = graph.consumers()
    single = _single_reader(graph)
    outputs = {v.uid for v in graph.outputs}
    found: dict[int, dict] = {}  # the last node's id -> the layer norm's parts
    for node in graph.nodes:
        match = _layer_norm_match(node, readers, single, outputs) if node.op == "mean" else None
        if match is not None:
            found[id(match[0])] = match[1]
    if not found:
        return graph

    def visit(rw: Rewriter, node: Node) -> None:
        parts = found.get(id(node))
        if parts is None:
            rw.emit(node)
            return
        x, axis = parts["x"], parts["axis"]
        norm = x.shape[axis:]
        gamma = parts["gamma"] if parts["gamma"] is not None else np.ones(norm, x.dtype)
        beta = parts["beta"] if parts["beta"] is not None else np.zeros(norm, x.dtype)
        rw.emit(Node("nn.layer_norm", [rw.value(x), Value.constant(f"{node.name}_gamma", gamma),
                                       Value.constant(f"{node.name}_beta", beta)],
                     node.outputs, {"axis": axis, "epsilon": parts["epsilon"]}, node.name + "_layer_norm"))

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- batched matmuls


def canonical_batch_matmuls(graph: Graph) -> Graph:
    """Batched matmuls in the form their template multiplies, so that it tunes them (they ran
    the default schedule otherwise):

    * an operand transposed by ``transpose_a`` or ``transpose_b`` (TVM's ``batch_matmul`` takes B
      transposed by default) is read through a ``transpose`` node, the flags cleared; the
      transpose, a data move, folds into a constant operand or fuses into the kernel that
      computes the operand's other moves;
    * a B of batch 1 that every batch of A multiplies (a shared operand, as ONNX's ``MatMul``
      broadcasts it) is one product of A's batches as rows: ``(B, M, K)`` as ``(1, B * M, K)``."""

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op != "nn.batch_matmul":
            rw.emit(node)
            return
        flags = (node.attrs.get("transpose_a", False), node.attrs.get("transpose_b", False))
        operands = []
        for v, flag, side in zip(node.inputs, flags, "ab"):
            if flag:
                v = rw.emit(apply_op("transpose", [v], {"axes": (0, 2, 1)}, f"{node.name}_transpose_{side}",
                                     f"{v.name}_transposed")).output
            operands.append(v)
        a, b = operands
        shared = a.shape[0] > 1 and b.shape[0] == 1
        if not any(flags) and not shared:
            rw.emit(node)
            return
        attrs = {**node.attrs, "transpose_a": False, "transpose_b": False}
        if not shared:
            rw.emit(Node(node.op, [a, b], node.outputs, attrs, node.name))
            return
        (batch, rows, _), out = a.shape, node.output
        a = rw.emit(apply_op("reshape", [a], {"newshape": (1, batch * rows, a.shape[2])},
                             f"{node.name}_rows", f"{a.name}_as_rows")).output
        product = rw.emit(apply_op(node.op, [a, b], attrs, node.name, f"{out.name}_as_rows")).output
        rw.emit(Node("reshape", [product], node.outputs, {"newshape": out.shape}, f"{node.name}_batches"))

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- reshapes

_ELEMENTWISE = ("elemwise", "broadcast")


def _fed_by_anchors(graph: Graph) -> set[int]:
    """The uids of the values that an operator taking an elementwise tail into its output stage
    writes (a dense layer, a convolution: ``out_elemwise_fusable``), directly or through
    elementwise operators."""
    fed: set[int] = set()
    for node in graph.nodes:  # in order: an operator's inputs are marked before it is seen
        pattern = get_op(node.op).pattern
        if pattern == "out_elemwise_fusable" or (pattern in _ELEMENTWISE
                                                 and any(v.uid in fed for v in node.inputs)):
            fed.update(v.uid for v in node.outputs)
    return fed


def _sunk(node: Node, data: Value, reshaped: Value, rw: Rewriter, fed: set[int]) -> list[Value] | None:
    """The inputs of ``node`` with ``reshaped`` (a reshape of ``data``) read as ``data`` and every
    other operand brought to ``data``'s shape; None where an operand does not fit."""
    last = data.shape[-1]
    inputs = []
    for v in node.inputs:
        if v is reshaped:
            inputs.append(data)
        elif v.is_constant and v.data.size == 1:
            inputs.append(Value.constant(v.name, v.data.reshape(())))
        elif v.is_constant and v.data.size == last and v.shape[-1] == last:
            inputs.append(Value.constant(v.name, v.data.reshape(last)))
        elif not v.is_constant and v.shape == reshaped.shape and v.uid not in fed:
            # (an operand that a dense layer or convolution writes stays as it is: its reshape
            # would sink back, and the two would trade places forever)
            out = Value(f"{v.name}_as_{'x'.join(map(str, data.shape))}", data.type)
            rw.emit(Node("reshape", [v], [out], {"newshape": data.shape}, f"{v.name}_reshape"))
            inputs.append(out)
        else:
            return None
    return inputs


def sink_reshapes(graph: Graph) -> Graph:
    """Move a reshape that keeps the last axis below the elementwise operators that read it (their
    other operands: scalars, vectors along the last axis, or tensors reshaped alike), where what
    the reshape reads comes from a dense layer or convolution, directly or through elementwise
    operators, so that its output stage takes them: a dense layer's bias, activation and residual
    then meet its output (``reshape(dense(x)) + b`` is ``reshape(dense(x) + b)``). An operand that
    such a layer writes is not reshaped for another's sake. Reshapes that meet fold into one, and
    one to the shape it starts from disappears."""
    graph = fold_reshapes(graph)  # a reshape of a reshape sinks as one
    for _ in range(len(graph.nodes)):
        sunk = _sink_one_reshape(graph)
        if sunk is None:
            break
        graph = sunk
    return fold_reshapes(graph)


def _sink_one_reshape(graph: Graph) -> Graph | None:
    """``graph`` with one reshape moved below the elementwise operator that reads it (None where
    none can move)."""
    producers = graph.producers()
    single = _single_reader(graph)
    fed = _fed_by_anchors(graph)
    changed = False

    def visit(rw: Rewriter, node: Node) -> None:
        nonlocal changed
        # Not below an operator whose operands run along an ``axis`` (``nn.bias_add``, per-channel
        # ``qnn`` ones): the axis numbers a dimension of the reshaped shape.
        if (not changed and get_op(node.op).pattern in _ELEMENTWISE and len(node.outputs) == 1
                and "axis" not in node.attrs):
            for v in node.inputs:
                r = producers.get(v.uid)
                if r is None or r.op != "reshape" or not single(v) or v.is_constant:
                    continue
                data = r.inputs[0]
                if data.shape[-1:] != v.shape[-1:] or node.output.shape != v.shape:
                    continue
                # Only towards a dense layer or convolution whose output stage the elementwise
                # operator can join.
                if data.uid not in fed:
                    continue
                mark = len(rw.nodes)
                inputs = _sunk(node, data, v, rw, fed)
                if inputs is None:
                    del rw.nodes[mark:]
                    continue
                out = Value(node.output.name + "_unreshaped", TensorType(data.shape, node.output.dtype))
                rw.emit(Node(node.op, inputs, [out], dict(node.attrs), node.name))
                rw.emit(Node("reshape", [out], node.outputs, {"newshape": node.output.shape}, r.name))
                changed = True
                return
        rw.emit(node)

    graph = rewrite(graph, visit)
    return graph if changed else None


def unit_transposes_as_reshapes(graph: Graph) -> Graph:
    """A transpose that keeps the order of its axes longer than one moves no element: it is a
    reshape (``(1, S, D)`` to ``(S, 1, D)``, as a batch-first attention layer of batch 1 is
    exported), which costs nothing where it ends as a kernel of its own and folds into the
    reshapes beside it."""

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op == "transpose":
            shape = node.inputs[0].shape
            kept = [a for a in transpose_axes(node.attrs, len(shape)) if shape[a] != 1]
            if kept == sorted(kept):
                node = Node("reshape", [node.inputs[0]], node.outputs, {"newshape": node.output.shape},
                            node.name)
        rw.emit(node)

    return rewrite(graph, visit)


def _even_steps(positions: np.ndarray) -> tuple[int, int] | None:
    """``(first, step)`` where ``positions`` (a take's, at most one axis) are one position (step
    1) or a run stepping evenly forward; else None."""
    flat = positions.astype(np.int64).ravel()
    if positions.ndim > 1 or flat.size == 0:
        return None
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if step < 1 or np.any(np.diff(flat) != step):
        return None
    return int(flat[0]), step


def _transposed_later(value: Value, consumers) -> bool:
    """Whether data moves after ``value`` (:data:`_MOVES`) reach a transpose that takes its
    input's last (contiguous) axis elsewhere."""
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        for reader in consumers.get(v.uid, []):
            if reader.op == "transpose":
                axes = transpose_axes(reader.attrs, len(reader.inputs[0].shape))
                if axes[-1] != len(axes) - 1:
                    return True
            if _is_move(reader) and reader.output.uid not in seen:
                seen.add(reader.output.uid)
                todo.append(reader.output)
    return False


def constant_takes_as_slices(graph: Graph) -> Graph:
    """A ``take`` of constant indices that are one index, or a run stepping evenly forward
    (``2, 3, 4``; ``0, 2, 4``), whose result data moves take to a transpose of the contiguous
    axis (an attention layer's keys, taken from one projection by index and moved to ``(heads,
    dim, sequence)``), becomes a ``strided_slice`` (then, for one index, a reshape without that
    axis): its kernel reads at addresses known when it is compiled instead of at ones loaded from
    the index and clamped, which the default schedule copies in tiles transposed in registers.
    Other takes keep their index as an input: the kernels of a recurrent layer's steps, which
    differ only in it, stay one function."""
    consumers = graph.consumers()

    def visit(rw: Rewriter, node: Node) -> None:
        steps = None
        if node.op == "take" and node.inputs[1].is_constant and _transposed_later(node.output, consumers):
            data, indices = node.inputs
            shape = data.shape
            axis, positions = take_positions(node.attrs, shape, np.asarray(indices.data))
            steps = _even_steps(positions)
        if steps is None:
            rw.emit(node)
            return
        first, step = steps
        count = positions.size
        begin = tuple(first if a == axis else 0 for a in range(len(shape)))
        end = tuple(first + (count - 1) * step + 1 if a == axis else d for a, d in enumerate(shape))
        strides = tuple(step if a == axis else 1 for a in range(len(shape)))
        attrs = {"begin": begin, "end": end, "strides": strides}
        if positions.ndim == 1:
            rw.emit(Node("strided_slice", [data], node.outputs, attrs, node.name))
            return
        sliced = Value(f"{node.output.name}:slice",
                       TensorType(shape[:axis] + (1,) + shape[axis + 1:], node.output.dtype))
        rw.emit(Node("strided_slice", [data], [sliced], attrs, f"{node.name}:slice"))
        rw.emit(Node("reshape", [sliced], node.outputs, {"newshape": node.output.shape}, node.name))

    return rewrite(graph, visit)


def fold_reshapes(graph: Graph) -> Graph:
    """``reshape(reshape(x))`` is one reshape of ``x``; a reshape to its input's shape is dropped,
    and two reshapes of one value to one shape are one."""
    producers = graph.producers()
    made: dict[tuple[int, tuple], Value] = {}

    def visit(rw: Rewriter, node: Node) -> None:
        if node.op != "reshape":
            rw.emit(node)
            return
        x = node.inputs[0]
        inner = producers.get(x.uid)
        while inner is not None and inner.op == "reshape":
            x = rw.value(inner.inputs[0])
            inner = producers.get(inner.inputs[0].uid)
        key = (x.uid, node.output.shape)
        if x.shape == node.output.shape:
            rw.replace(node.output, x)
        elif key in made:
            rw.replace(node.output, made[key])
        else:
            made[key] = node.output
            rw.emit(node if x is node.inputs[0]
                    else Node("reshape", [x], node.outputs, dict(node.attrs), node.name))

    return rewrite(graph, visit)


#: Operators that only move data: each output element is one input element, read where its index says.
_MOVES = ("reshape", "transpose", "take", "strided_slice")


def _is_move(node: Node | None) -> bool:
    """Whether ``node`` is one of :data:`_MOVES`, its indices (if any) constants."""
    return (node is not None and node.op in _MOVES and len(node.outputs) == 1
            and all(v.is_constant for v in node.inputs[1:]))


def _move_chain(node: Node, producers: dict, single) -> list[Node]:
    """The moves that end at ``node`` (a move): ``node`` and the moves before it whose output only
    the next one reads, first to last."""
    chain = [node]
    while True:
        prev = producers.get(chain[0].inputs[0].uid)
        if not _is_move(prev) or not single(chain[0].inputs[0]):
            return chain
        chain.insert(0, prev)


def duplicate_moves(graph: Graph) -> Graph:
    """Give each reader of a chain of data moves (reshape, transpose, take and strided_slice of
    constant indices) its own copy of the chain, where every reader is an injective operator: each
    copy then fuses into its reader's kernel, which reads the data where it lies, instead of one
    kernel writing the moved data out for the readers to read again (an attention layer's query,
    key and value, taken from one projection). Never more kernels: what the chain read, were it
    computed by an injective kernel, is written once either way."""
    producers = graph.producers()
    consumers = graph.consumers()
    single = _single_reader(graph)
    outputs = {v.uid for v in graph.outputs}
    chains: dict[int, list[Node]] = {}  # the chain's last value -> its moves
    for node in graph.nodes:
        if not _is_move(node):
            continue
        readers = consumers.get(node.output.uid, [])
        if (node.output.uid in outputs or len(readers) < 2
                or any(get_op(r.op).pattern not in ("elemwise", "broadcast", "injective") for r in readers)):
            continue
        chains[node.output.uid] = _move_chain(node, producers, single)
    if not chains:
        return graph
    in_chain = {id(n) for chain in chains.values() for n in chain}
    copies = 0

    def visit(rw: Rewriter, node: Node) -> None:
        if id(node) in in_chain:
            return  # each reader gets its own copy instead
        mine: dict[int, Value] = {}  # one copy per reader, however often it reads the value

        def copy(v: Value) -> Value:  # a chain may start at another chain's end: copied too
            nonlocal copies
            chain = chains.get(v.uid)
            if chain is None:
                return rw.value(v)
            if v.uid not in mine:
                moved = copy(chain[0].inputs[0])
                copies += 1
                for move in chain:
                    out = Value(f"{move.output.name}:{copies}", move.output.type)
                    rw.emit(Node(move.op, [moved, *move.inputs[1:]], [out], dict(move.attrs),
                                 f"{move.name}:{copies}"))
                    moved = out
                mine[v.uid] = moved
            return mine[v.uid]

        inputs = [copy(v) for v in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, node.outputs, dict(node.attrs), node.name)
        rw.emit(node)

    return rewrite(graph, visit)


# ----------------------------------------------------------------------------- pipeline

OPTIMIZE = GraphPipeline("optimize", (
    GraphPass("canonical_batch_matmuls", canonical_batch_matmuls),  # first: a constant's transpose folds
    GraphPass("fold_constants", fold_constants),
    GraphPass("lower_conv2d_transpose", lower_conv2d_transpose),
    GraphPass("trim_dead_taps", trim_dead_taps),
    GraphPass("fold_batch_norm", fold_batch_norm),
    GraphPass("decompose_batch_norm", decompose_batch_norm),
    GraphPass("recognize_gelu", recognize_gelu),
    GraphPass("recognize_silu", recognize_silu),
    GraphPass("recognize_layer_norm", recognize_layer_norm),
    GraphPass("unit_transposes_as_reshapes", unit_transposes_as_reshapes),
    GraphPass("constant_takes_as_slices", constant_takes_as_slices),
    GraphPass("sink_reshapes", sink_reshapes),
    GraphPass("duplicate_moves", duplicate_moves),
))


def optimize(graph: Graph) -> Graph:
    """``graph`` after :data:`OPTIMIZE`."""
    return OPTIMIZE.run(graph)
