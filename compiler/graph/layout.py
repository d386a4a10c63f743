"""Layout planning: convolutions in channel blocks, and the blocks flowing from layer to layer.

A dense layer's constant weight is packed in micro-panels (``nn.dense_pack``). A convolution
(floating point, filters a whole number of vectors or half of one, or on blocked data up to two
vectors of filters that no block divides, all in one block) becomes ``nn.conv2d_nchwc``,
a depthwise one ``nn.depthwise_conv2d_nchwc``, on channel-blocked data (``NCHW{b}c``, see
:mod:`.ops.layout`): its weight is packed into blocks now, once, at build time. A grouped one
(ResNeXt's 3x3 layers) is blocked by its groups' channels, each output block reading its own
group's input blocks (or its part of one, where a data block holds several groups); where a
group has too few filters for a block, a few groups run as one (:func:`merged_groups`, the
others' channels zero in each filter). The blocked output stays blocked through what can work
on blocks (activations, per-channel biases and scales, residual adds, a squeeze-and-excitation
gate's product, pooling, the global average, resizes, concatenations of whole channel blocks),
so the next convolution reads it as it is. A ``layout_transform`` appears only where a tensor
enters the blocked region (its data blocked with the convolution's input block), where the block
size changes, and where an operator needs plain NCHW (a reshape, a dense layer, the model's
outputs); each tensor is transformed once, however many read it.

A 3x3 convolution with stride 1 runs by Winograd's ``F(m x m, 3 x 3)`` instead
(``nn.conv2d_winograd_nchwc``, its kernel transformed at build time; see
:mod:`compiler.topi.nn.winograd`) where :func:`winograd_tile_size` finds a tile: a quarter of the
multiply-adds with ``m = 4``, four ninths with ``m = 2``, for a kernel ``(m + 2)^2 / 9`` times
larger, which a model streams from memory every run (dilated alike along both axes, by phases of
the image: :data:`MIN_DILATED_WINOGRAD_USE`); ``plan_layouts(..., winograd=False)`` keeps
them direct. Its input and output are blocked as the direct convolution's, so each such layer can
run either way with the rest of the plan unchanged: :func:`algorithm_options` lists the layers and
their choices, and ``plan_layouts(..., algorithms={layer: m})`` overrides the rule for some of them
(``m`` the tile size, 0 for direct: ``autotune.choose_algorithms`` measures them in the model).

A 1x1 convolution with a stride reads every stride-th pixel: a ``strided_slice`` of the blocked
input picks them, and the convolution runs with stride 1 on them (a pointwise convolution, whose
kernel tiles run along the whole plane, see :mod:`search_spaces.graph_tasks`). ResNet-50's
downsampling layers ran 1.1-1.2x faster so on Zen 3, the copy included.

Blocks: ``oc_bn``, the output block of a convolution, is two vectors of the target's float lanes
where they divide the filters (one vector else): the register tile of the blocked template. The
input block ``ic_bn`` is whatever block the data comes in; plain data is blocked by one vector,
or, when it has fewer channels (an image's 3), by one channel: ``NCHW1c`` holds the same bytes
as ``NCHW``, so the convolution reads the plain data where it is, through a reshape that moves
nothing (ResNet's and MobileNetV2's stems run as fast on it as on ``NCHW3c``, and the transform
into three-channel blocks cost MobileNetV2 2% of its latency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..simd import vector_lanes
from ..topi.nn.winograd import conv2d_winograd_weight_transform, winograd_tiles
from .errors import GraphError
from .ir import Graph, Node, Value
from .op import apply_op
from .ops.layout import (
    layout_name,
    pack_dense_weight,
    pack_depthwise_weight,
    pack_weight,
    to_blocks,
    window_attrs,
)
from .ops.math import UNARY_OPS
from .ops.reduce import reduced_axes

__all__ = ["plan_layouts", "output_block", "input_block", "merged_groups", "block_diagonal", "panel_width",
           "winograd_tile_size", "winograd_tile_sizes", "algorithm_options", "algorithm_name", "DIRECT",
           "MAX_WINOGRAD_WEIGHT_BYTES"]

#: The largest transformed kernel a convolution runs by Winograd with, per tile size ``m``:
#: ``F(m x m, 3 x 3)`` makes a kernel ``(m + 2)^2 / 9`` times larger (4x for m = 4, 1.8x for
#: m = 2), and a model streams its weights from memory every run. In ResNet-18 on Zen 5, the
#: 256-channel 14x14 layers ran faster inside the model with F(2x2) (a 4 MiB kernel) than with
#: F(4x4) (9 MiB), though F(4x4) was faster timed alone; the 512-channel 7x7 layers ran faster
#: with F(2x2) (16 MiB) than direct. On a 2-vCPU Intel Xeon guest (AVX-512) those layers ran
#: faster direct: untuned ResNet-18 took 9.65 ms with them direct, 10.38 ms with F(2x2). One
#: limit cannot fit both hosts (see docs/performance.md, "Models").
MAX_WINOGRAD_WEIGHT_BYTES = {4: 4 * 1024 * 1024, 2: 16 * 1024 * 1024}
#: The "tile size" that stands for running a 3x3 convolution direct, in ``algorithms`` maps.
DIRECT = 0
#: Fewer tiles than this leave the Winograd GEMM's rows too short to fill a register tile.
MIN_WINOGRAD_TILES = 16
#: A dilated kernel runs by Winograd only where its phases' tiles hold at least this share of
#: outputs (the rest are partial tiles' extra outputs): a dilation of 2 at 14x14, phases of 7x7 in
#: tiles of 8x8, holds 77%; DeepLab's rate 6 at 14x14, phases of 3x3 in tiles of 4x4, holds 34%,
#: and runs faster direct, where its taps that read only padding are skipped.
MIN_DILATED_WINOGRAD_USE = 0.75
#: The most groups of a grouped convolution merged into one (:func:`merged_groups`).
MAX_MERGED_GROUPS = 4

# Elementwise operators that act on each element alone, whatever the layout
_UNARY = (*UNARY_OPS, "nn.relu", "clip", "sigmoid", "nn.gelu", "nn.silu", "nn.hardswish", "nn.leaky_relu",
          "isnan", "isinf")
_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")


def output_block(filters: int, lanes: int) -> int | None:
    """The channel block of a convolution with ``filters`` outputs (None: leave it plain): two
    vectors, one, or half of one (MobileNet's 24 channels on 16 lanes)."""
    for block in (2 * lanes, lanes, lanes // 2):
        if block >= 4 and filters % block == 0:
            return block
    return None


def panel_width(units: int, lanes: int) -> int:
    """The micro-panel width of a dense layer's packed weight: two vectors, one where the layer
    has fewer outputs."""
    return 2 * lanes if units > lanes else lanes


def merged_groups(groups: int, filters: int, lanes: int) -> int | None:
    """How many of a grouped convolution's ``groups`` (of ``filters`` each) run as one group so
    that its filters make a channel block (:func:`output_block`): the fewest that do, up to
    :data:`MAX_MERGED_GROUPS` (each merged group multiplies the work by zeros); None where none
    do."""
    for k in range(1, min(groups, MAX_MERGED_GROUPS) + 1):
        if groups % k == 0 and output_block(filters * k, lanes) is not None:
            return k
    return None


def block_diagonal(w: np.ndarray, groups: int, merged: int) -> np.ndarray:
    """The weight ``(F, C/groups, KH, KW)`` of a grouped convolution as that of ``groups /
    merged`` groups: each filter's channels of the ``merged - 1`` groups joined to its own zero."""
    F, Cg, KH, KW = w.shape
    Fg = F // groups
    out = np.zeros((F, Cg * merged, KH, KW), dtype=w.dtype)
    for f in range(F):
        at = f // Fg % merged * Cg  # the filter's own group within the merged one
        out[f, at:at + Cg] = w[f]
    return out


def winograd_tile_sizes(C: int, Ho: int, Wo: int, lanes: int, dilation: int = 1) -> list[int]:
    """The ``m`` of each ``F(m x m, 3 x 3)`` a 3x3 stride-1 convolution from ``C`` channels to an
    ``Ho x Wo`` output can run by, largest first: those that leave :data:`MIN_WINOGRAD_TILES`
    tiles, for at least a vector of input channels (whatever the size of their kernels); with a
    ``dilation`` above one, whose tiles of each phase hold :data:`MIN_DILATED_WINOGRAD_USE` of
    outputs."""
    if C < lanes:
        return []
    d = dilation
    sizes = []
    for m in (4, 2):
        tiles = d * d * math.prod(winograd_tiles(Ho, Wo, m, d))
        if tiles >= MIN_WINOGRAD_TILES and (d == 1 or Ho * Wo >= MIN_DILATED_WINOGRAD_USE * tiles * m * m):
            sizes.append(m)
    return sizes


def winograd_tile_size(C: int, F: int, Ho: int, Wo: int, itemsize: int, lanes: int,
                       dilation: int = 1) -> int | None:
    """The ``m`` of ``F(m x m, 3 x 3)`` for a 3x3 stride-1 convolution of ``C`` to ``F`` channels
    with an ``Ho x Wo`` output, its kernel dilated by ``dilation`` (None: leave it direct): the
    largest of :func:`winograd_tile_sizes` whose transformed kernel fits its limit in
    :data:`MAX_WINOGRAD_WEIGHT_BYTES`."""
    for m in winograd_tile_sizes(C, Ho, Wo, lanes, dilation):
        if (m + 2) ** 2 * C * F * itemsize <= MAX_WINOGRAD_WEIGHT_BYTES[m]:
            return m
    return None


def _square_dilation(node: Node) -> int | None:
    """The dilation of convolution ``node`` where it is the same along both axes, else None."""
    dh, dw = (int(d) for d in node.attrs.get("dilation", (1, 1)))
    return dh if dh == dw else None


def algorithm_name(m: int) -> str:
    """How reports name tile size ``m``: ``"direct"`` for :data:`DIRECT`, else ``"F(2x2,3x3)"``..."""
    return "direct" if m == DIRECT else f"F({m}x{m},3x3)"


def input_block(channels: int, lanes: int) -> int | None:
    """The block plain data of ``channels`` channels is cut into for a blocked convolution."""
    if channels % lanes == 0:
        return lanes
    return 1 if channels < lanes else None


def _spatial_mean(node: Node) -> bool:
    """Whether ``mean`` node averages an NCHW tensor over its height and width, keeping them."""
    keeps = bool(node.attrs.get("keepdims"))
    return len(node.inputs[0].shape) == 4 and keeps and reduced_axes(node) == (2, 3)


class _Planner:
    def __init__(self, graph: Graph, lanes: int, winograd: bool, algorithms: Mapping[str, int] | None):
        self.graph = graph
        self.lanes = lanes
        self.winograd = winograd
        if algorithms is not None and not isinstance(algorithms, Mapping):
            raise GraphError(f"algorithms must map 3x3 convolutions' names to tile sizes, got "
                             f"{type(algorithms).__name__} {algorithms!r:.60}")
        self.algorithms = dict(algorithms or {})
        for name, m in self.algorithms.items():
            if isinstance(m, bool) or not isinstance(m, int | np.integer):
                raise GraphError(f"algorithms[{name!r}] is {m!r}: give a Winograd tile size (4 or 2) or "
                                 f"{DIRECT} for direct")
        self.options: dict[str, tuple[int, list[int]]] = {}  # a 3x3 layer -> (the rule's m, its choices)
        self.nodes: list[Node] = []
        self.current: dict[int, tuple[Value, int | None]] = {}  # original uid -> (value now, its block)
        self.plain: dict[int, Value] = {}  # uid of a blocked value -> its NCHW copy
        self.blocked: dict[tuple[int, int], Value] = {}  # (uid of a value, block) -> its blocked copy

    def now(self, v: Value) -> tuple[Value, int | None]:
        return self.current.get(v.uid, (v, None))

    def emit(self, op: str, inputs: list[Value], attrs: dict, name: str, like: Value | None = None) -> Value:
        node = apply_op(op, inputs, attrs, name, f"{name}_out")
        if like is not None and like.type == node.output.type:
            node.output.name = like.name
        self.nodes.append(node)
        return node.output

    def as_plain(self, v: Value) -> Value:
        value, block = self.now(v)
        if block is None:
            return value
        if value.uid not in self.plain:
            self.plain[value.uid] = self.emit("layout_transform", [value],
                                              {"src_layout": layout_name(block), "dst_layout": "NCHW"},
                                              f"{v.name}_to_nchw", like=v)
        return self.plain[value.uid]

    def as_blocked(self, v: Value, block: int) -> Value:
        value, have = self.now(v)
        if have == block:
            return value
        if v.is_constant:
            return Value.constant(f"{v.name}_nchw{block}c", to_blocks(v.data, block))
        key = (value.uid, block)
        if key not in self.blocked and have is None and block == 1:  # the same bytes
            self.blocked[key] = self.emit("reshape", [value], {"newshape": (*value.shape, 1)},
                                          f"{v.name}_nchw1c")
        if key not in self.blocked:
            self.blocked[key] = self.emit("layout_transform", [value],
                                          {"src_layout": layout_name(have), "dst_layout": layout_name(block)},
                                          f"{v.name}_to_nchw{block}c")
        return self.blocked[key]

    # ------------------------------------------------------------------ per node

    def visit(self, node: Node) -> None:
        result = self._blocked_form(node)
        if result is not None:
            value, block = result
            self.current[node.output.uid] = (value, block)
            return
        inputs = [self.as_plain(v) for v in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, node.outputs, node.attrs, node.name)
        self.nodes.append(node)

    def _blocked_form(self, node: Node) -> tuple[Value, int] | None:
        if len(node.outputs) != 1 or not node.output.dtype.startswith("float"):
            return None
        if node.op == "nn.conv2d":
            return self._conv(node)
        if node.op == "nn.dense":
            return self._dense(node)
        blocks = {self.now(v)[1] for v in node.inputs if not v.is_constant} - {None}
        if len(blocks) == 0 or len(node.output.shape) != 4:
            return None
        block = max(blocks)  # where blocks differ, the larger one wins
        x = node.inputs[0]
        if node.op in _UNARY:
            return self.emit(node.op, [self.as_blocked(x, block)], dict(node.attrs), node.name), block
        if node.op == "nn.bias_add" and node.attrs.get("axis", 1) % 4 == 1 and node.inputs[1].is_constant:
            attrs = {"axis": 1, "block": block}
            return self.emit("nn.bias_add", [self.as_blocked(x, block), node.inputs[1]], attrs,
                             node.name), block
        if node.op == "add":  # a per-channel constant added: a blocked bias
            a, b = node.inputs
            for other, vector in ((a, self._channel_vector(b, node.output)),
                                  (b, self._channel_vector(a, node.output))):
                if vector is not None and other.shape == node.output.shape:
                    bias = Value.constant(f"{node.name}_bias", vector)
                    attrs = {"axis": 1, "block": block}
                    return self.emit("nn.bias_add", [self.as_blocked(other, block), bias], attrs,
                                     node.name), block
        if node.op in _BINARY:
            operands = [self._operand(v, node.output, block) for v in node.inputs]
            if any(o is None for o in operands):
                return None
            return self.emit(node.op, operands, dict(node.attrs), node.name), block
        if node.op in ("nn.max_pool2d", "nn.avg_pool2d"):
            attrs = {**node.attrs, "kind": node.op[3:6]}
            return self.emit("nn.pool2d_nchwc", [self.as_blocked(x, block)], attrs, node.name), block
        if node.op == "nn.global_avg_pool2d" or (node.op == "mean" and _spatial_mean(node)):
            attrs = {"axis": (2, 3), "keepdims": True}
            return self.emit("mean", [self.as_blocked(x, block)], attrs, node.name), block
        if node.op == "image.resize2d":  # each block's lanes resized together
            attrs = {**node.attrs, "layout": layout_name(block)}
            return self.emit(node.op, [self.as_blocked(x, block)], attrs, node.name), block
        if (node.op == "concatenate" and node.attrs.get("axis", 0) % 4 == 1
                and all(not v.is_constant and v.shape[1] % block == 0 for v in node.inputs)):
            # whole blocks of channels, one input's after another's
            inputs = [self.as_blocked(v, block) for v in node.inputs]
            return self.emit(node.op, inputs, {**node.attrs, "axis": 1}, node.name), block
        return None

    @staticmethod
    def _channel_vector(v: Value, out: Value) -> np.ndarray | None:
        """A constant ``v`` that adds one value per channel of NCHW ``out``, as a vector."""
        channels = out.shape[1]
        if not v.is_constant or (1,) * (4 - len(v.shape)) + v.shape != (1, channels, 1, 1):
            return None
        return v.data.reshape(channels)

    def _operand(self, v: Value, out: Value, block: int) -> Value | None:
        """``v`` as an operand of a blocked binary operator whose plain output is ``out``: of its
        shape, or one value per image and channel (a squeeze-and-excitation gate)."""
        if not v.is_constant:
            per_channel = v.shape == (*out.shape[:2], 1, 1)
            return self.as_blocked(v, block) if v.shape == out.shape or per_channel else None
        if v.data.size == 1:
            return Value.constant(v.name, v.data.reshape(()))
        channels = out.shape[1]
        full = (1,) * (4 - len(v.shape)) + v.shape
        if full == (1, channels, 1, 1):
            per_channel = v.data.reshape(1, channels // block, 1, 1, block)
            return Value.constant(f"{v.name}_nchw{block}c", np.ascontiguousarray(per_channel))
        if full == out.shape:
            return Value.constant(f"{v.name}_nchw{block}c", to_blocks(v.data.reshape(full), block))
        return None

    def _conv(self, node: Node) -> tuple[Value, int] | None:
        x, w = node.inputs
        F, C = w.shape[0], x.shape[1]
        if not w.is_constant or len(x.shape) != 4:
            return None
        if node.attrs.get("groups", 1) != 1:
            return self._depthwise(node) if w.shape[1] == 1 and F == C else self._grouped(node)
        oc_bn = output_block(F, self.lanes)
        have = self.now(x)[1]
        if oc_bn is None and have is not None and F <= 2 * self.lanes:
            # Few filters that no block divides (a segmentation head's classes) on blocked data:
            # all of them one block, its last vector partial, not the data back to NCHW
            oc_bn = F
        ic_bn = have if have is not None and C % have == 0 else input_block(C, self.lanes)
        if oc_bn is None or ic_bn is None:
            return None
        m = self._winograd_tile(node, oc_bn)
        if m is not None:
            weight = Value.constant(f"{w.name}_winograd{m}_{oc_bn}o",
                                    conv2d_winograd_weight_transform(w.data, m, oc_bn))
            attrs = {"padding": tuple(int(p) for p in node.attrs.get("padding", (0, 0, 0, 0))),
                     "tile_size": m, "block": oc_bn}
            dilation = _square_dilation(node)
            if dilation != 1:
                attrs["dilation"] = dilation
            out = self.emit("nn.conv2d_winograd_nchwc", [self.as_blocked(x, ic_bn), weight], attrs, node.name)
            return out, oc_bn
        return self._direct(node, w, ic_bn, oc_bn), oc_bn

    def _grouped(self, node: Node) -> tuple[Value, int] | None:
        """A grouped convolution (not depthwise) on blocks of its groups' channels. Where a
        group's filters make no block, :func:`merged_groups` groups join into one, with zeros
        for the channels of the others in each filter."""
        x, w = node.inputs
        groups = node.attrs["groups"]
        merged = merged_groups(groups, w.shape[0] // groups, self.lanes)
        if merged is None:
            return None
        weight = w if merged == 1 else Value.constant(f"{w.name}_groups{groups // merged}",
                                                      block_diagonal(w.data, groups, merged))
        groups //= merged
        oc_bn, Cg = output_block(w.shape[0] // groups, self.lanes), weight.shape[1]
        have = self.now(x)[1]
        # The data's own blocks where they hold whole groups, or a group whole blocks of them
        fits = have is not None and (Cg % have == 0 or have % Cg == 0)
        ic_bn = have if fits else math.gcd(Cg, self.lanes)
        return self._direct(node, weight, ic_bn, oc_bn, groups), oc_bn

    def _direct(self, node: Node, w: Value, ic_bn: int, oc_bn: int, groups: int = 1) -> Value:
        """Convolution ``node`` as ``nn.conv2d_nchwc`` of weight ``w`` (OIHW, ``groups`` groups)
        on blocks of ``ic_bn`` input and ``oc_bn`` output channels (the weight's input blocks a
        group's channels where a data block holds several groups)."""
        x = node.inputs[0]
        attrs = window_attrs(node.attrs)
        if groups != 1:
            attrs["groups"] = groups
        wb = min(ic_bn, w.shape[1])
        weight = Value.constant(f"{w.name}_nchw{wb}i{oc_bn}o", pack_weight(w.data, wb, oc_bn))
        data = self.as_blocked(x, ic_bn)
        strides = tuple(int(s) for s in attrs.get("strides", (1, 1)))
        if w.shape[2:] == (1, 1) and strides != (1, 1) and not any(attrs.get("padding", (0,))):
            # A strided 1x1 convolution reads every stride-th pixel: those pixels first (a small
            # copy), then a pointwise convolution over them, whose tiles run along whole planes.
            sh, sw = strides
            data = self.emit("strided_slice", [data], {"begin": (0,) * 5, "end": data.shape,
                                                      "strides": (1, 1, sh, sw, 1)}, f"{node.name}_subsample")
            attrs = {**attrs, "strides": (1, 1)}
        return self.emit("nn.conv2d_nchwc", [data, weight], attrs, node.name)

    def _winograd_tile(self, node: Node, oc_bn: int) -> int | None:
        """The Winograd tile size of convolution ``node`` (None: direct): the caller's choice in
        ``algorithms``, else :func:`winograd_tile_size`'s. Records the layer's choices in
        ``options``."""
        x, w = node.inputs
        a = node.attrs
        _, C, _, _ = x.shape
        _, _, Ho, Wo = node.output.shape
        sizes = []
        dilation = _square_dilation(node)
        if (w.shape[2:] == (3, 3) and not oc_bn % self.lanes and tuple(a.get("strides", (1, 1))) == (1, 1)
                and dilation is not None):
            sizes = winograd_tile_sizes(C, Ho, Wo, self.lanes, dilation)
        rule = None
        if sizes and self.winograd:
            rule = winograd_tile_size(C, w.shape[0], Ho, Wo, w.data.dtype.itemsize, self.lanes, dilation)
        if sizes:
            self.options[node.name] = (rule or DIRECT, [*sizes, DIRECT])
        chosen = self.algorithms.pop(node.name, None)
        if chosen is None:
            return rule
        if chosen not in (*sizes, DIRECT):
            choices = ", ".join(algorithm_name(m) for m in (*sizes, DIRECT))
            raise GraphError(f"convolution {node.name!r} cannot run by {algorithm_name(chosen)}; "
                             f"its choices: {choices}")
        return chosen or None

    def _dense(self, node: Node) -> tuple[Value, None] | None:
        """A dense layer's constant weight, packed in micro-panels of :func:`panel_width` columns."""
        x, w = node.inputs
        if not w.is_constant:
            return None
        nr = panel_width(w.shape[0], self.lanes)
        weight = Value.constant(f"{w.name}_panels{nr}", pack_dense_weight(w.data, nr))
        return self.emit("nn.dense_pack", [self.as_plain(x), weight], {"units": w.shape[0]}, node.name,
                         like=node.output), None

    def _depthwise(self, node: Node) -> tuple[Value, int] | None:
        x, w = node.inputs
        C = x.shape[1]
        block = self.now(x)[1]
        if block is None or C % block:
            block = output_block(C, self.lanes)
        if block is None:
            return None
        weight = Value.constant(f"{w.name}_nchw{block}c", pack_depthwise_weight(w.data, block))
        attrs = window_attrs(node.attrs)
        return self.emit("nn.depthwise_conv2d_nchwc", [self.as_blocked(x, block), weight], attrs,
                         node.name), block


def _plan(graph: Graph, lanes: int | None, winograd: bool,
          algorithms: Mapping[str, int] | None = None) -> _Planner:
    planner = _Planner(graph, lanes or vector_lanes("float32"), winograd, algorithms)
    for node in graph.nodes:
        planner.visit(node)
    return planner


def plan_layouts(graph: Graph, lanes: int | None = None, winograd: bool = True,
                 algorithms: Mapping[str, int] | None = None) -> Graph:
    """``graph`` with its convolutions in channel blocks (see the module's docstring); ``lanes``
    is the float32 vector width (default: the current target's). ``winograd=False`` keeps every
    3x3 convolution direct. ``algorithms`` maps a 3x3 convolution's name to the Winograd tile
    size it runs by, :data:`DIRECT` (0) for direct, in place of the rule's choice (the names
    and choices :func:`algorithm_options` lists; a name of no such layer raises GraphError)."""
    planner = _plan(graph, lanes, winograd, algorithms)
    if planner.algorithms:
        raise GraphError(f"no 3x3 convolution that can run by Winograd is named "
                         f"{', '.join(map(repr, planner.algorithms))} in graph {graph.name!r}")
    outputs = [planner.as_plain(v) for v in graph.outputs]
    return graph.rebuilt(planner.nodes, outputs)


def algorithm_options(graph: Graph, lanes: int | None = None,
                      winograd: bool = True) -> dict[str, tuple[int, list[int]]]:
    """The convolutions of ``graph`` (optimised, as :func:`plan_layouts` takes it) that can run by
    Winograd or direct: ``{name: (the rule's tile size, every tile size it can run by)}``, a tile
    size of :data:`DIRECT` (0) standing for direct."""
    return _plan(graph, lanes, winograd).options
