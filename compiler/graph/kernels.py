"""A fused node's kernel: its tensor expressions and the default schedule.

:func:`kernel_tensors` builds a ``fused`` node's computation from its members' operators (each
one's ``compute``), with one placeholder per input of the node, in order. A kernel that no template
schedules gets :func:`default_schedule`: the injective stages inlined into their readers (but those
on a reduction's input side whose bodies are large, such as a Winograd input transform: computed at
the root, once); each reduction computed at the root, its outer loops on threads; the output's
loops fused, vectorized along the innermost elements and split over the threads; where the last
axis is no whole number of vectors and the vectors of the fused axes would gather what the kernel
reads, rows of the last axes along which it reads at a constant stride instead (a channel shuffle's
planes; :func:`_contiguous_suffix`). A reduction along rows of two vectors or more (a row's mean,
variance or maximum) accumulates a vector of partial results per row (``rfactor``; a row's last
vector partial where vectors do not tile it), then reduces those: one element at a time, a row of
768 would wait on 768 dependent additions. A kernel whose output is elementwise over rows of
statistics taken along its last axis (a softmax or a layer norm, with what the graph fused before
and after it) runs row by row instead: one parallel loop over the rows, each row's statistics
computed inside it, and each elementwise stage that two stages read (a softmax's exp) computed once
into a row of its own. A kernel that transposes its input's last axis next to last is copied in
square tiles, each transposed in vector registers. A bilinear resize mixes each output row's two
source rows once, in the loop over the output's rows.

A channel-blocked image ``(N, C/b, H, W, b)`` is written row by row, each row's channel blocks in
turn, so that each thread writes a range of the height of every block: as a convolution whose
threads take the height writes it, as the next layer's threads by height (a convolution's, a
Winograd transform's tiles) read it, and as the tuner's timing writes a kernel's input
(:func:`compiler.runtime.timer.touched_planes`). Split by channel blocks, each of those threads
would read half of its rows from the other core's caches.
"""

from __future__ import annotations

import math

from .. import te, topi
from ..arith import Analyzer
from ..arith.canonical import flatten
from ..errors import CompilerError
from ..lowering import lower
from ..schedule.bound import inline_bodies
from ..schedule.schedule import Schedule
from ..simd import vector_lanes
from ..te.tensor import ComputeOp, PlaceholderOp
from ..te.tensor_intrin import MAX_TILE, transpose_columns, transpose_rows
from ..tir import expr as E
from ..tir.analysis import collect, substitute, uses_var
from ..tir.expr import ProducerLoad
from ..topi.utils import get_const_tuple, vectorize_reduction
from .errors import GraphError
from .fuse import FUSED
from .ir import Node
from .op import get_op
from .ops.reduce import reduced_axes

__all__ = ["kernel_tensors", "default_schedule", "keeps_last_axis", "kernel_key", "PARALLEL_MIN_ELEMENTS"]

# Loops of fewer elements than this stay on one thread: starting the others costs more.
PARALLEL_MIN_ELEMENTS = 1 << 14
#: The most nodes of an elementwise stage's body that the default schedule inlines into a
#: reduction that reads it (see :func:`_large_reduction_inputs`); a padding's or a layout
#: transform's bodies hold a few dozen.
INLINE_INTO_REDUCTION_NODES = 128
#: The narrowest channel block an elementwise kernel vectorizes by itself (one short vector a block).
MIN_BLOCK_VECTOR = 4
#: Fewer rows than this, written row by row, are shared among threads in pieces of rows.
MIN_PARALLEL_ROWS = 16


def kernel_tensors(node: Node) -> tuple[list[te.Tensor], list[te.Tensor]]:
    """The placeholders of ``node``'s inputs (in order) and its outputs' tensors."""
    if node.op != FUSED:
        raise GraphError(f"node {node.name!r} ({node.op}) is not a fused kernel")
    env: dict[int, te.Tensor] = {}
    params = []
    for k, v in enumerate(node.inputs):
        # one placeholder per input, even where a value comes twice (the first one is read)
        params.append(te.placeholder(v.shape, name=f"p{k}", dtype=v.dtype))
        env.setdefault(v.uid, params[-1])
    for member in node.attrs["body"].nodes:
        missing = [v.name for v in member.inputs if v.uid not in env]
        if missing:
            raise GraphError(f"kernel {node.name!r}: node {member.name!r} reads {missing} from outside "
                             "the kernel, which are not among its inputs")
        outs = get_op(member.op).compute([env[v.uid] for v in member.inputs], member.attrs)
        for v, t in zip(member.outputs, outs):
            env[v.uid] = t
    return params, [env[v.uid] for v in node.outputs]


def _size(t) -> int:
    return math.prod(get_const_tuple(t.shape))


def default_schedule(outputs: list[te.Tensor], vector_last: bool = False) -> Schedule:
    """A schedule for any fused kernel (see the module's docstring). ``vector_last``: the
    reductions' last axis is contiguous in what they read (a channel block's), so it is
    vectorized, innermost, below the reduction's loops."""
    s = te.create_schedule([t.op for t in outputs])
    if not vector_last and _schedule_row_by_row(s, outputs):
        return s
    tiled = _transposed_in_tiles(outputs)
    if tiled is None:
        tiled = _relaid_in_tiles(outputs)
    if tiled is not None:
        return tiled
    if _schedule_resized_rows(s, outputs):
        return s
    out_ops = {t.op for t in outputs}
    at_root = _large_reduction_inputs(s)
    for stage in list(s.stages):
        op = stage.op
        if not isinstance(op, ComputeOp) or op in out_ops:
            continue
        if op.reduce_axis:
            _schedule_reduction(s, op.output(0), vector_last)
        elif op in at_root:
            _fuse_vectorize(s, op.output(0))
        else:
            s[op].compute_inline()
    for t in outputs:
        if t.op.reduce_axis:
            _schedule_reduction(s, t, vector_last)
        else:
            _fuse_vectorize(s, t)
    return s


def _large_reduction_inputs(s: Schedule) -> set:
    """The elementwise stages on a reduction's input side (read by one, or by such a stage)
    whose bodies hold more than :data:`INLINE_INTO_REDUCTION_NODES` nodes: computed at the root,
    not inlined. Inlined, such a body is computed again for every output of the reduction that
    reads it, and copied into every read for the simplifier to walk: a Winograd input
    transform's 36 positions, each a sum over six rows of six terms, once per output channel
    (the transform lowered in 3.2 s so, the kernel recomputing it per output channel)."""
    large = set()
    for stage in reversed(s.stages):  # readers before the stages they read
        op = stage.op
        if not isinstance(op, ComputeOp) or op.reduce_axis:
            continue
        if any(c.op.reduce_axis or c.op in large for c in s.consumers(stage)) and \
                sum(len(collect(b, lambda _: True)) for b in op.bodies) > INLINE_INTO_REDUCTION_NODES:
            large.add(op)
    return large


def _row_reductions(s: Schedule, out: te.Tensor) -> list[te.Tensor] | None:
    """The reductions of a kernel whose one output ``out`` is elementwise over rows, each
    reducing a row along the output's last axis (a row's max and sum of a softmax, a layer
    norm's mean and variance), in stage order; None where any stage reduces otherwise, or none
    reduces."""
    if out.op.reduce_axis or len(out.shape) < 2:
        return None
    rows, length = get_const_tuple(out.shape)[:-1], int(out.shape[-1].value)
    found = []
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and op.reduce_axis:
            shape = get_const_tuple(op.output(0).shape)
            if (len(op.reduce_axis) != 1 or int(op.reduce_axis[0].dom.extent.value) != length
                    or shape not in (rows, (*rows, 1)) or len(op.bodies) > 1):
                return None
            found.append(op.output(0))
    return found or None


def _schedule_row_by_row(s: Schedule, outputs: list[te.Tensor]) -> bool:
    """Schedule a kernel of row reductions (:func:`_row_reductions`) row by row: one parallel
    loop over the output's rows, each row's statistics (in vector lanes where the row holds two
    vectors or more) computed inside it while the row is in the caches, then the row written,
    vectorized. Each reduction at the root would be a pass over all the rows of its own: a
    softmax scaled and masked before it (an attention layer's, 12 x 128 x 128) took 1.6x as long
    so.
    False (nothing scheduled) where the kernel is not such a kernel."""
    if len(outputs) != 1:
        return False
    (out,) = outputs
    reductions = _row_reductions(s, out)
    if reductions is None:
        return False
    lanes = vector_lanes(out.dtype)
    length = int(out.shape[-1].value)
    readers: dict = {}
    for stage in s.stages:
        for t in getattr(stage.op, "input_tensors", []):
            readers[t.op] = readers.get(t.op, 0) + 1
    kept = []  # elementwise stages read twice or more (a softmax's exp): a row of each, computed once
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and not op.reduce_axis and op is not out.op:
            if readers.get(op, 0) > 1 and get_const_tuple(op.output(0).shape) == get_const_tuple(out.shape):
                kept.append(op.output(0))
            else:
                s[op].compute_inline()
    *rows, column = s[out].op.axis
    row = s[out].fuse(*rows) if len(rows) > 1 else rows[0]
    if length >= lanes:
        _, inner = s[out].split(column, factor=lanes)
        s[out].vectorize(inner)
    if _size(out) * len(reductions) >= PARALLEL_MIN_ELEMENTS:
        s[out].parallel(row)
    # Whole vectors where they tile the row, else vectors with the row's last one partial (its
    # lanes past the end guarded; loop partitioning keeps the guard out of the others): a row of
    # 197 (a ViT's attention) done element by element took 2.4x as long.
    width = next((w for w in (2 * lanes, lanes) if length % w == 0), lanes if length >= 2 * lanes else None)
    for stage in kept:
        s[stage].compute_at(s[out], row)
        *_, last = s[stage].op.axis
        if length >= lanes:
            s[stage].vectorize(s[stage].split(last, factor=lanes)[1])
    for red in reductions:
        if width is not None:
            s[vectorize_reduction(s, red, width)].compute_at(s[out], row)
        s[red].compute_at(s[out], row)
    return True


def _moves_last_axis_next_to_last(op) -> bool:
    """Whether ``op`` is a transpose whose next-to-last axis is its input's last (contiguous)
    one: ``T[..., j, i] = x[..., i, ..., j]``, its other axes in any order."""
    if not isinstance(op, ComputeOp) or op.reduce_axis or len(op.bodies) != 1 or len(op.axis) < 2:
        return False
    body = op.bodies[0]
    if not isinstance(body, ProducerLoad) or len(body.indices) != len(op.axis):
        return False
    axes = [a.var for a in op.axis]
    return all(any(i is a for a in axes) for i in body.indices) and body.indices[-1] is axes[-2]


def _transposed_in_tiles(outputs: list[te.Tensor]) -> Schedule | None:
    """A schedule for an injective kernel that transposes (a stage moves its input's last axis
    next to last, as an attention layer's keys are moved to ``(heads, dim, sequence)``): the
    output in square tiles of a vector's lanes, in parallel, each tile of the transposing stage
    copied in vector registers (``te.transpose_intrin``: loads, shuffles, stores) and what
    follows it computed on the tile, vectorized. Vectorized along the output's rows instead, each
    vector gathers one element from each of a vector's rows of the input: the encoder layer's
    keys (12 x 128 x 64 floats, scaled) took 53 us a call inside the model so, 17-20 in tiles.
    None where the kernel is not such a kernel, or where its tiles do not lower (the moves
    before the transpose leave the input's rows not contiguous, or their index arithmetic does
    not simplify to a tile's)."""
    if len(outputs) != 1 or len(outputs[0].shape) < 2:
        return None
    (out,) = outputs
    s = te.create_schedule(out.op)
    computes = [st.op for st in s.stages if isinstance(st.op, ComputeOp)]
    if any(op.reduce_axis for op in computes):  # the output's too
        return None
    moved = [op for op in computes if op is not out.op and _moves_last_axis_next_to_last(op)]
    if len(moved) != 1:
        return None
    (swap,) = moved
    dtype = swap.output(0).dtype
    lanes = vector_lanes(dtype)
    if not 2 <= lanes <= MAX_TILE:
        return None
    rows, cols = (int(d.value) for d in out.shape[-2:])
    if get_const_tuple(swap.output(0).shape)[-2:] != (rows, cols) or rows % lanes or cols % lanes:
        return None
    for op in computes:
        if op is not out.op and op is not swap:
            s[op].compute_inline()
    *outer, row, col = s[out].op.axis
    row_o, row_i = s[out].split(row, factor=lanes)
    col_o, col_i = s[out].split(col, factor=lanes)
    s[out].reorder(*outer, row_o, col_o, row_i, col_i)
    tile = s[out].fuse(*outer, row_o, col_o)
    s[out].vectorize(col_i)
    if _size(out) >= PARALLEL_MIN_ELEMENTS:
        s[out].parallel(tile)
    s[swap].compute_at(s[out], tile)
    s[swap].tensorize(s[swap].op.axis[-2], te.transpose_intrin(lanes, lanes, dtype))
    inputs = [st.op.output(0) for st in s.stages if isinstance(st.op, PlaceholderOp)]
    try:
        lower(s, [*inputs, out])
    except CompilerError:
        return None
    return s


def _relaid_in_tiles(outputs: list[te.Tensor]) -> Schedule | None:
    """A schedule for a kernel that is one layout transform between NCHW and channel blocks (a
    model's feature map on its way out of the blocked layers, or into them where a layer's
    channels are no whole number of blocks: ShuffleNetV2's 232): each row of a block is a tile of
    channels by columns transposed in vector registers (``te.transpose_intrin``). Into NCHW the
    threads take the rows of each block in turn; into blocks, ranges of the height of every
    block, as the module's docstring has a blocked image written. Vectorized along the output's
    last axis, each vector gathers a lane from each pixel's block, or from each channel's plane:
    a YOLO-style block's output, 32 channels at 64x64 from blocks of 32, took 40 us so, 16-22 in
    tiles; ShuffleNetV2's 232 channels at 14x14 into blocks of 8, 21 us so. None where the
    kernel is not such a transform or no tile fits its sizes."""
    if len(outputs) != 1:
        return None
    (out,) = outputs
    into_blocks = out.op.name == "T_layout_blocks"
    if out.op.name != "T_layout_nchw" and not into_blocks:
        return None
    (x,) = out.op.input_tensors
    blocked, plain = (out, x) if into_blocks else (x, out)
    if not isinstance(x.op, PlaceholderOp) or len(blocked.shape) != 5 or len(plain.shape) != 4:
        return None
    block, width = int(blocked.shape[-1].value), int(plain.shape[-1].value)
    channels, columns = transpose_rows(block), transpose_columns(width)
    if channels is None or columns is None:
        return None
    s = te.create_schedule(out.op)
    if into_blocks:
        n, blocks, h, w, c = s[out].op.axis
        tiles, ci = s[out].split(c, factor=channels)
        wo, wi = s[out].split(w, factor=columns)
        s[out].reorder(n, h, blocks, tiles, wo, wi, ci)
        rows, tile = s[out].fuse(n, h), wi
        intrin = te.transpose_intrin(channels, columns, out.dtype, in_ndim=3)
    else:
        n, c, h, w = s[out].op.axis
        blocks, within = s[out].split(c, factor=block)
        tiles, ci = s[out].split(within, factor=channels)
        wo, wi = s[out].split(w, factor=columns)
        s[out].reorder(n, blocks, h, tiles, wo, ci, wi)
        rows, tile = s[out].fuse(n, blocks, h), ci
        intrin = te.transpose_intrin(columns, channels, out.dtype, out_ndim=3)
    if _size(out) >= PARALLEL_MIN_ELEMENTS:
        s[out].parallel(rows)
    s[out].tensorize(tile, intrin)
    try:
        lower(s, [x, out])
    except CompilerError:
        return None
    return s


def _schedule_reduction(s: Schedule, t: te.Tensor, vector_last: bool) -> None:
    """A reduction at the root, its outer loops on threads; one along rows of two vectors or more
    accumulates each row in vector lanes first (see the module's docstring)."""
    lanes = vector_lanes(t.dtype)
    axes = s[t].op.reduce_axis
    extent = int(axes[0].dom.extent.value) if len(axes) == 1 else 0
    if vector_last or len(t.op.bodies) > 1 or extent < 2 * lanes:
        _parallel_outer(s, t, vector_last)
        return
    partial = vectorize_reduction(s, t, lanes)
    rows = s[partial].op.axis[:-1]
    if rows:
        outer = s[partial].fuse(*rows) if len(rows) > 1 else rows[0]
        if _size(t) * extent >= PARALLEL_MIN_ELEMENTS:
            s[partial].parallel(outer)
    _parallel_outer(s, t)


def _rows_before_blocks(s: Schedule, t: te.Tensor) -> list:
    """``t``'s axes in loop order: a channel-blocked image's ``(n, h, c/b, w, b)`` (see the
    module's docstring), reordered so; others' as declared."""
    axes = list(s[t].op.axis)
    if len(axes) == 5 and all(int(t.shape[k].value) > 1 for k in (1, 2)):
        n, blocks, h, w, c = axes
        axes = [n, h, blocks, w, c]
        s[t].reorder(*axes)
    return axes


def _parallel_outer(s: Schedule, t: te.Tensor, vector_last: bool = False) -> None:
    axes = s[t].op.axis
    if not axes or _size(t) < 2:
        return
    if vector_last:
        axes = _rows_before_blocks(s, t)
    outer = axes
    if vector_last and len(axes) >= 2 and int(t.shape[-1].value) >= 4:
        outer = axes[:-1]
        s[t].reorder(*outer, *s[t].op.reduce_axis, axes[-1])
        s[t].vectorize(axes[-1])
    fused = s[t].fuse(*outer) if len(outer) > 1 else outer[0]
    if _size(t) * _reduce_extent(t) >= PARALLEL_MIN_ELEMENTS:
        s[t].parallel(fused)


def keeps_last_axis(node: Node) -> bool:
    """Whether every reduction of fused ``node`` keeps its input's last (contiguous) axis as its own
    last axis: blocked pooling, and means or sums over other axes."""
    for member in node.attrs["body"].nodes:
        if get_op(member.op).pattern != "reduce":
            continue
        if member.op == "nn.pool2d_nchwc":
            continue
        if member.op not in ("mean", "sum", "max", "min") or not member.attrs.get("keepdims"):
            return False
        if len(member.inputs[0].shape) - 1 in reduced_axes(member):
            return False
    return True


def _reduce_extent(t: te.Tensor) -> int:
    n = 1
    for r in t.op.reduce_axis:
        n *= int(r.dom.extent.value)
    return n


def _schedule_resized_rows(s: Schedule, outputs: list[te.Tensor]) -> bool:
    """Schedule a kernel that resizes an image bilinearly (with what the graph fused around it)
    and writes an image: one parallel loop over the output's rows (its first three axes), each
    row's mixed source rows (``topi.image.ROWS_TAG``) computed inside it, the row then written
    vectorized; the tables of source pixels and weights (``TABLE_TAG``) once, before. With each
    output pixel mixing its four source pixels itself, a DeepLab-style head's 21 classes from
    28x28 to 224x224 took 1.35 ms (0.40 so); inside that model, from blocks of 21 to NCHW,
    1.3-1.6 ms (0.45 so).
    False (nothing scheduled) where the kernel is not such a kernel."""
    rows = [st.op for st in s.stages if getattr(st.op, "tag", "") == topi.image.ROWS_TAG]
    if len(outputs) != 1 or len(rows) != 1 or len(outputs[0].shape) not in (4, 5):
        return False
    (out,) = outputs
    resized = next(st.op.output(0) for st in s.stages if st.op.name == "T_resize2d")
    if not _same_image(resized, out):
        return False  # the image reshaped after (a volume's slices): its rows are not the output's
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and op is not out.op and op not in rows \
                and getattr(op, "tag", "") != topi.image.TABLE_TAG:
            if op.reduce_axis:
                return False
            s[op].compute_inline()
    n, c, y, *pixel = s[out].op.axis
    row = s[out].fuse(n, c, y)
    lanes, length = vector_lanes(out.dtype), int(out.shape[-1].value)
    if length >= lanes:  # a partial last vector is guarded (and partitioned off)
        s[out].vectorize(s[out].split(pixel[-1], factor=lanes)[1])
    elif lanes % length == 0 and length >= MIN_BLOCK_VECTOR:
        s[out].vectorize(pixel[-1])
    # the rows count as written too: shrinking, they outnumber the output's pixels
    if _size(out) + _size(rows[0].output(0)) >= PARALLEL_MIN_ELEMENTS:
        s[out].parallel(row)
    s[rows[0]].compute_at(s[out], row)
    return True


def _same_image(a: te.Tensor, b: te.Tensor) -> bool:
    """Whether ``a`` and ``b`` (NCHW or channel-blocked) hold one image: the same batch, height,
    width and channels, in either layout."""
    sa, sb = ([int(d.value) for d in t.shape] for t in (a, b))
    if len(sa) not in (4, 5) or len(sb) not in (4, 5):
        return False
    channels = [math.prod(sh[1:2] + sh[4:]) for sh in (sa, sb)]
    return sa[0] == sb[0] and sa[2:4] == sb[2:4] and channels[0] == channels[1]


def _fuse_vectorize(s: Schedule, t: te.Tensor) -> None:
    axes = s[t].op.axis
    if not axes:
        return
    lanes = vector_lanes(t.dtype)
    size = _size(t)
    if size < 4 * lanes:  # too small to vectorize (or to split over threads)
        if len(axes) > 1:
            s[t].fuse(*axes)
        return
    last = int(t.shape[-1].value)
    if len(axes) > 1 and last % lanes == 0:
        axes = _rows_before_blocks(s, t)
        # Whole vectors along the last axis (a channel block): split it first, so that each
        # vector's elements are consecutive in every tensor it reads with that axis last, as a
        # split of the fused axes would not show to the code generator.
        last_outer, inner = s[t].split(axes[-1], factor=lanes)
        outer = s[t].fuse(*axes[:-1], last_outer)
    elif len(axes) > 1 and lanes % last == 0 and last >= MIN_BLOCK_VECTOR:
        # A block of half a vector or less (blocks of 8 on 16 lanes): one short vector a block.
        # Vectors of whole lanes would span two blocks, gathered from two places where a
        # block's source lies apart (256 channels at 56x56 from blocks of 32 to blocks of 8:
        # 0.54 ms so, 0.20 in short vectors).
        axes = _rows_before_blocks(s, t)
        outer, inner = s[t].fuse(*axes[:-1]), axes[-1]
    else:
        suffix = _contiguous_suffix(s, t) if len(axes) > 1 else len(axes)
        if suffix < len(axes):
            _vectorize_rows(s, t, suffix)
            return
        outer, inner = s[t].split(s[t].fuse(*axes) if len(axes) > 1 else axes[0], factor=lanes)
    s[t].vectorize(inner)
    if size >= PARALLEL_MIN_ELEMENTS:
        s[t].parallel(outer)


def _contiguous_suffix(s: Schedule, t: te.Tensor) -> int:
    """How many of ``t``'s last axes, fused into one row, every tensor the kernel reads is read
    along at a constant stride (one: vector loads; more: gathers whose addresses take one
    multiply-add; none: a per-channel bias): the most, or all of them where not even the last
    axis alone is so read, or where its rows are shorter than :data:`MIN_BLOCK_VECTOR` (then no
    better than vectors over all axes fused).

    A channel shuffle, ``(1, 232, 14, 14)`` read as ``(1, 2, 116, 14, 14)`` transposed, reads
    each output plane of 196 pixels at one place: fused, they make whole vector loads, where
    vectors over all axes fused span planes read from two places, and each lane's address takes
    divisions of its own (a copy of 116 of those planes took 20 us so, 1.5 us by planes)."""
    axes, shape = s[t].op.axis, get_const_tuple(t.shape)
    body = inline_bodies(s)[s[t]][t.value_index]
    loads = collect(body, lambda n: isinstance(n, ProducerLoad))
    analyzer = Analyzer()
    for iv in axes:
        analyzer.bind(iv.var, iv.dom)
    row = E.Var("row", axes[-1].var.dtype)
    for k in range(len(axes), 0, -1):
        length = math.prod(shape[-k:])
        if length < MIN_BLOCK_VECTOR:
            break
        inner, unfused = length, {}
        for iv, extent in zip(axes[-k:], shape[-k:]):
            inner //= extent
            unfused[iv.var] = row // inner % extent if unfused else row // inner
        with analyzer.bound(row, (0, length - 1)):
            if all(_strided_along(load, unfused, row, analyzer) for load in loads):
                return k
    return len(axes)


def _strided_along(load: ProducerLoad, unfused: dict, row: E.Var, analyzer: Analyzer) -> bool:
    """Whether ``load``, its indices in the output's axes (``unfused`` gives the last few as
    positions in ``row``), reads at a constant stride along ``row`` (zero included)."""
    shape = get_const_tuple(load.producer.shape)
    flat = E.const(0, row.dtype)
    for index, extent in zip(load.indices, shape):
        flat = flat * extent + index
    offset = flatten(analyzer.simplify(substitute(flat, unfused)))
    return all(atom is row or not uses_var(atom, {row}) for atom, _ in offset.terms.values())


def _vectorize_rows(s: Schedule, t: te.Tensor, k: int) -> None:
    """``t`` written row by row, a row its last ``k`` axes fused (:func:`_contiguous_suffix`),
    in vectors (the last one partial, masked); threads take rows, or pieces of rows where the
    rows are few."""
    axes = s[t].op.axis
    rows = s[t].fuse(*axes[:-k]) if len(axes) - k > 1 else axes[0]
    row = s[t].fuse(*axes[-k:]) if k > 1 else axes[-1]
    pieces, inner = s[t].split(row, factor=vector_lanes(t.dtype))
    s[t].vectorize(inner)
    if _size(t) >= PARALLEL_MIN_ELEMENTS:
        few = math.prod(get_const_tuple(t.shape)[:-k]) < MIN_PARALLEL_ROWS
        s[t].parallel(s[t].fuse(rows, pieces) if few else rows)


def kernel_key(node: Node) -> tuple:
    """What a kernel's code depends on: its members' operators and attributes over the same input
    types. Two fused nodes with the same key compile to the same function."""
    number: dict[int, int] = {}
    for v in node.inputs:
        number.setdefault(v.uid, len(number))
    parts: list = [tuple((str(v.type), v.is_constant) for v in node.inputs)]
    for member in node.attrs["body"].nodes:
        for v in member.outputs:
            number.setdefault(v.uid, len(number))
        parts.append((member.op, _frozen(member.attrs), tuple(number.get(v.uid, -1) for v in member.inputs),
                      tuple(str(v.type) for v in member.outputs)))
    parts.append(tuple(number[v.uid] for v in node.outputs))
    return tuple(parts)


def _frozen(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if hasattr(value, "tobytes"):
        return (value.shape, str(value.dtype), value.tobytes())
    return value
