"""ONNX's convolutions, pools and matrix products: ``Conv``, ``ConvTranspose``, ``MaxPool``,
``AveragePool``, the global pools, ``BatchNormalization``, ``Gemm`` and ``MatMul``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ... import dtypes
from ...graph import Value
from .importer import NodeContext, converts, optional_input
from .volume import conv3d, conv3d_transpose

__all__ = ["as_2d", "ceil_windows", "matmul", "spatial_rank", "window_attrs"]

# ---------------------------------------------------------------------------- convolution and pooling


def _window_pads(ctx: NodeContext, attrs, spatial: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int]) -> tuple[int, ...]:
    """ONNX ``pads`` (all begins, then all ends) with ``auto_pad`` resolved."""
    n = len(spatial)
    mode = attrs.get("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = tuple(attrs.get("pads", (0,) * (2 * n)))
        if len(pads) != 2 * n or any(p < 0 for p in pads):
            raise ctx.error(f"pads {list(pads)} must be {2 * n} non-negative ints")
        return pads
    if mode == "VALID":
        return (0,) * (2 * n)
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(f"auto_pad={mode!r}")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else big)
        ends.append(big if mode == "SAME_UPPER" else small)
    return tuple(begins + ends)


def window_attrs(ctx: NodeContext, attrs, spatial: Sequence[int], kernel: Sequence[int]):
    """``(strides, dilations, pads)`` of a 2-D convolution or pool, in the catalog's form."""
    n = len(spatial)
    strides = tuple(attrs.get("strides", (1,) * n))
    dilations = tuple(attrs.get("dilations", (1,) * n))
    if len(strides) != n or len(dilations) != n:
        raise ctx.error(f"strides {list(strides)} and dilations {list(dilations)} must have {n} entries")
    pads = _window_pads(ctx, attrs, spatial, kernel, strides, dilations)
    return strides, dilations, pads


def spatial_rank(ctx: NodeContext, x: Value, what: str, most: int = 2) -> int:
    """How many spatial axes ``x`` (N, C, ...) has: 1 to ``most`` (UnsupportedOperatorError
    otherwise)."""
    nd = len(x.shape) - 2
    if not 1 <= nd <= most:
        covered = "1-D and 2-D are" if most == 2 else "1-D, 2-D and 3-D are"
        raise ctx.unsupported(f"{nd}-D {what} (input shape {x.shape}; {covered})")
    return nd


def as_2d(attrs_value: Sequence[int], nd: int, fill: int) -> tuple[int, ...]:
    """A 1-D window attribute as the 2-D one over a height of 1."""
    return tuple(attrs_value) if nd == 2 else (fill,) + tuple(attrs_value)


def _convolution(ctx: NodeContext, ins, attrs, op: str, window) -> Value:
    """Conv or ConvTranspose as ``op``: ``window(spatial, kernel)`` gives the node's ``(strides,
    dilations, pads, other window attributes)``, pads as ONNX lists them. A 1-D one runs over a
    height of 1; the bias is a ``nn.bias_add`` after it."""
    x, w, b = ins[0], ins[1], optional_input(ins, 2)
    nd = spatial_rank(ctx, x, "convolution" if op == "nn.conv2d" else "transposed convolution", most=3)
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        raise ctx.error(f"kernel_shape {attrs['kernel_shape']} differs from the weight's {kernel}")
    if len(w.shape) != len(x.shape):
        raise ctx.error(f"the weight {w.shape} and the input {x.shape} differ in rank")
    strides, dilations, pads, other = window(x.shape[2:], kernel)
    if nd == 3:
        groups = int(attrs.get("group", 1))
        if op == "nn.conv2d":
            out = conv3d(ctx, x, w, strides, dilations, pads, groups)
        else:
            out = conv3d_transpose(ctx, x, w, strides, dilations, pads, other["output_padding"], groups)
        return out if b is None else ctx.emit("nn.bias_add", [out, b], axis=1)
    if nd == 1:
        x = ctx.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        w = ctx.reshape(w, w.shape[:2] + (1,) + w.shape[2:])
        pads = (0, pads[0], 0, pads[1])
    other = {name: as_2d(value, nd, 0) for name, value in other.items()}
    out = ctx.emit(op, [x, w], strides=as_2d(strides, nd, 1), padding=tuple(int(p) for p in pads),
                   dilation=as_2d(dilations, nd, 1), groups=int(attrs.get("group", 1)), **other)
    if b is not None:
        out = ctx.emit("nn.bias_add", [out, b], axis=1)
    if nd == 1:
        out = ctx.reshape(out, out.shape[:2] + out.shape[3:])
    return out


@converts("Conv")
def _conv(ctx: NodeContext, ins, attrs):
    return _convolution(ctx, ins, attrs, "nn.conv2d",
                        lambda spatial, kernel: (*window_attrs(ctx, attrs, spatial, kernel), {}))


def _transpose_pads(ctx: NodeContext, attrs, spatial, kernel, strides, dilations, output_padding) -> tuple:
    """ConvTranspose's pads (all starts, then all ends), from ``pads``, ``auto_pad`` or
    ``output_shape`` as ONNX defines them: where an output shape is given (by it, or by SAME's
    ``input * stride``), the padding its size leaves is split, the larger half at the end for
    SAME_UPPER and at the start otherwise."""
    n = len(spatial)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad={auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    wanted = attrs.get("output_shape")
    if wanted is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(spatial, strides)]
    if wanted is None:
        pads = tuple(attrs.get("pads", (0,) * 2 * n)) if auto_pad == "NOTSET" else (0,) * 2 * n
        if len(pads) != 2 * n:
            raise ctx.error(f"pads {list(pads)} must have {2 * n} entries")
        return pads
    wanted = list(wanted)[-n:]
    starts, ends = [], []
    for size, k, s, d, op, out in zip(spatial, kernel, strides, dilations, output_padding, wanted):
        total = s * (size - 1) + op + (k - 1) * d + 1 - out
        if total < 0:
            raise ctx.unsupported(f"output_shape {list(wanted)} beyond the full output (negative padding)")
        upper = auto_pad == "SAME_UPPER"
        starts.append(total // 2 if upper else total - total // 2)
        ends.append(total - starts[-1])
    return tuple(starts + ends)


@converts("ConvTranspose")
def _conv_transpose(ctx: NodeContext, ins, attrs):
    def window(spatial, kernel):
        nd = len(spatial)
        strides = tuple(attrs.get("strides", (1,) * nd))
        dilations = tuple(attrs.get("dilations", (1,) * nd))
        output_padding = tuple(attrs.get("output_padding", (0,) * nd))
        if not len(strides) == len(dilations) == len(output_padding) == nd:
            raise ctx.error(f"strides {list(strides)}, dilations {list(dilations)} and output_padding "
                            f"{list(output_padding)} must have {nd} entries")
        pads = _transpose_pads(ctx, attrs, spatial, kernel, strides, dilations, output_padding)
        if any(p < 0 for p in pads):
            raise ctx.unsupported(f"negative pads {list(pads)}")
        return strides, dilations, pads, {"output_padding": output_padding}

    return _convolution(ctx, ins, attrs, "nn.conv2d_transpose", window)


@converts("Col2Im")
def _col2im(ctx: NodeContext, ins, attrs):
    """Columns (N, C * block, L) summed back into the image (torch's ``F.fold``): a transposed
    convolution of groups of one output channel, whose constant kernel puts each column row
    ``(c, tap)`` at its tap, so the overlapping blocks add up in the tuned kernel."""
    x = ins[0]
    image, block = ctx.ints(ins[1], "image_shape"), ctx.ints(ins[2], "block_shape")
    nd = len(image)
    if nd != 2 or len(block) != 2:
        raise ctx.unsupported(f"a {nd}-D image (image_shape {image}, block_shape {block}; 2-D is)")
    strides = tuple(attrs.get("strides", (1, 1)))
    dilations = tuple(attrs.get("dilations", (1, 1)))
    pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
    if len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
        raise ctx.error(f"strides {list(strides)}, dilations {list(dilations)} and pads {list(pads)} must "
                        "have 2, 2 and 4 entries")
    taps = block[0] * block[1]
    # the blocks along each axis, as the image, the pads and the strides give them
    counts = [(size + pads[k] + pads[k + 2] - d * (b - 1) - 1) // s + 1
              for k, (size, b, s, d) in enumerate(zip(image, block, strides, dilations))]
    if len(x.shape) != 3 or x.shape[1] % taps or x.shape[2] != counts[0] * counts[1]:
        raise ctx.error(f"the input {x.shape} must be (N, C * {taps}, {counts[0]} * {counts[1]}) for "
                        f"image_shape {image} and block_shape {block}")
    n, channels = x.shape[0], x.shape[1] // taps
    blocks = ctx.reshape(x, (n, channels * taps, *counts))
    kernel = np.zeros((channels * taps, 1, *block), x.dtype)
    for c in range(channels):
        for t in range(taps):
            kernel[c * taps + t, 0, t // block[1], t % block[1]] = 1
    # a last row or column of the image no block reaches: output padding
    full = [(o - 1) * s + d * (b - 1) + 1 - pads[k] - pads[k + 2]
            for k, (o, s, d, b) in enumerate(zip(counts, strides, dilations, block))]
    return ctx.emit("nn.conv2d_transpose", [blocks, ctx.const(kernel)], strides=strides, padding=pads,
                    dilation=dilations, groups=channels,
                    output_padding=tuple(size - f for size, f in zip(image, full)))


def ceil_windows(ctx: NodeContext, spatial, kernel, strides, dilations, pads,
                  count_include_pad: bool) -> tuple[tuple[int, ...], bool]:
    """``(pads, ceil_mode)`` for the catalog's pools that give ONNX Runtime's ``ceil_mode`` output.

    ONNX Runtime (as torch) drops a last window that would start in the end padding; the
    catalog's ceil_mode keeps it. Where the two differ, the windows ONNX Runtime keeps are
    reached with end padding instead (which an average counting its padding would count)."""
    n = len(spatial)
    floor_out, ceil_out, wanted = [], [], []
    for k, (size, kk, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        span = size + pads[k] + pads[n + k] - (kk - 1) * d - 1
        floor_out.append(span // s + 1)
        ceil_out.append(-(-span // s) + 1)
        wanted.append(ceil_out[-1] - ((ceil_out[-1] - 1) * s >= size + pads[k]))
    if wanted == floor_out:
        return tuple(pads), False
    if wanted == ceil_out:
        return tuple(pads), True
    if count_include_pad:
        raise ctx.unsupported("ceil_mode=1 with count_include_pad=1 where one axis keeps a last partial "
                              "window and another drops one")
    ends = [pads[n + k] + (w - f) * s for k, (w, f, s) in enumerate(zip(wanted, floor_out, strides))]
    return tuple(pads[:n]) + tuple(ends), False


@converts("MaxPool", "AveragePool")
def _pool(ctx: NodeContext, ins, attrs):
    x = ins[0]
    nd = spatial_rank(ctx, x, "pooling", most=3)
    indices = ctx.op_type == "MaxPool" and ctx.wants(1)
    if indices and nd == 3:
        raise ctx.unsupported("the Indices output of a 3-D MaxPool")
    kernel = tuple(attrs["kernel_shape"])
    if len(kernel) != nd:
        raise ctx.error(f"kernel_shape {list(kernel)} must have {nd} entries")
    strides, dilations, pads = window_attrs(ctx, attrs, x.shape[2:], kernel)
    window = {"ceil_mode": bool(attrs.get("ceil_mode", 0)),
              "count_include_pad": bool(attrs.get("count_include_pad", 0))}
    if nd < 3:
        out = _pooled(ctx, x, kernel, strides, dilations, pads, **window)
        if not indices:
            return out
        return out, _argmax_indices(ctx, x, out, kernel, strides, dilations, pads,
                                    int(attrs.get("storage_order", 0)))
    # A box is the product of its axes' windows, and so is the count an average divides by: pool
    # height and width on each depth slice, then depth over the pooled pixels.
    n, c, depth, h, w = x.shape
    flat = _pooled(ctx, ctx.reshape(x, (n, c * depth, h, w)), kernel[1:], strides[1:], dilations[1:],
                   pads[1:3] + pads[4:], **window)
    ho, wo = flat.shape[2:]
    deep = _pooled(ctx, ctx.reshape(flat, (n, c, depth, ho * wo)), (kernel[0], 1), (strides[0], 1),
                   (dilations[0], 1), (pads[0], 0, pads[3], 0), **window)
    return ctx.reshape(deep, (n, c, deep.shape[2], ho, wo))


def _argmax_indices(ctx: NodeContext, x: Value, pooled: Value, kernel, strides, dilations, pads,
                    storage_order: int) -> Value:
    """MaxPool's Indices: where in ``x`` each window's maximum (``pooled``) lies, as a flat int64
    index into ``x`` (rows of each plane in turn; with ``storage_order`` 1, columns), the first
    of equal ones in the window's order. Each tap of the window is a strided view of ``x`` (its
    padding -inf) and of a constant plane of flat indices (its padding past every index); the
    least index among the taps holding the maximum is the first of them."""
    nd = len(x.shape) - 2
    if nd == 1:  # a row of height 1
        x, pooled = (ctx.reshape(v, v.shape[:2] + (1,) + v.shape[2:]) for v in (x, pooled))
        kernel, strides, dilations = (1, *kernel), (1, *strides), (1, *dilations)
        pads = (0, pads[0], 0, pads[1])
    n, c, h, w = x.shape
    out_h, out_w = pooled.shape[2:]
    # pad the ends so that every window, ceil mode's last ones too, lies inside
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip((out_h, out_w), strides, kernel, dilations)]
    ends = [max(r - size - before, 0) for r, size, before in zip(reach, (h, w), pads[:2])]
    widths = ((0, 0), (0, 0), (pads[0], ends[0]), (pads[1], ends[1]))
    lowest = float("-inf") if dtypes.is_float(x.dtype) else float(np.iinfo(x.dtype).min)
    padded = ctx.emit("nn.pad", [x], pad_width=widths, pad_value=lowest)
    beyond = n * c * h * w
    plane = np.pad(np.arange(h * w, dtype=np.int64).reshape(1, 1, h, w), widths, constant_values=beyond)
    first = None
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            begin = (0, 0, kh * dilations[0], kw * dilations[1])
            end = (n, c, begin[2] + (out_h - 1) * strides[0] + 1, begin[3] + (out_w - 1) * strides[1] + 1)
            tap = ctx.emit("strided_slice", [padded], begin=begin, end=end, strides=(1, 1, *strides))
            where = plane[:, :, begin[2]:end[2]:strides[0], begin[3]:end[3]:strides[1]]
            hit = ctx.emit("where", [ctx.emit("equal", [tap, pooled]), ctx.const(np.ascontiguousarray(where)),
                                     ctx.const(np.array(beyond, np.int64))])
            first = hit if first is None else ctx.emit("minimum", [first, hit])
    if storage_order:  # the column-major index of the same element
        row, col = (ctx.emit(op, [first, ctx.const(np.array(w, np.int64))]) for op in ("divide", "mod"))
        first = ctx.emit("add", [ctx.emit("multiply", [col, ctx.const(np.array(h, np.int64))]), row])
    offsets = (np.arange(n * c, dtype=np.int64) * h * w).reshape(n, c, 1, 1)
    indices = ctx.emit("add", [first, ctx.const(offsets)])
    return ctx.reshape(indices, indices.shape[:2] + indices.shape[3:]) if nd == 1 else indices


@converts("MaxUnpool")
def _max_unpool(ctx: NodeContext, ins, attrs):
    """Each value put back where MaxPool's Indices say it came from, zeros elsewhere. Each output
    element looks at the few windows that cover it (``ceil(kernel / stride)`` per axis), gathered
    by constant tables, and takes the value of one whose index is its own: an injective kernel,
    where a scatter would compare every output element with every index. An index pointing
    outside its own window (not one MaxPool gives) is not put back."""
    x, indices, wanted = ins[0], ins[1], optional_input(ins, 2)
    nd = spatial_rank(ctx, x, "unpooling")
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", (1,) * nd))
    pads = tuple(attrs.get("pads", (0,) * 2 * nd))
    if len(kernel) != nd or len(strides) != nd or len(pads) != 2 * nd:
        raise ctx.error(f"kernel_shape {list(kernel)}, strides {list(strides)} and pads {list(pads)} must "
                        f"have {nd}, {nd} and {2 * nd} entries")
    if indices.shape != x.shape or indices.dtype != "int64":
        raise ctx.error(f"the indices must be int64 of the input's shape {x.shape}, got "
                        f"{indices.dtype}{list(indices.shape)}")
    spatial = [(o - 1) * s - b - e + k
               for o, s, b, e, k in zip(x.shape[2:], strides, pads[:nd], pads[nd:], kernel)]
    if wanted is not None:
        shape = ctx.ints(wanted, "output_shape")
        if len(shape) != nd + 2 or tuple(shape[:2]) != x.shape[:2] or \
                any(g < d for g, d in zip(shape[2:], spatial)):
            raise ctx.error(f"output_shape {shape} must be {x.shape[:2]} and at least {spatial}")
        spatial = shape[2:]
    if nd == 1:  # a row of height 1
        x, indices = (ctx.reshape(v, v.shape[:2] + (1,) + v.shape[2:]) for v in (x, indices))
        kernel, strides, pads, spatial = (1, *kernel), (1, *strides), (0, pads[0], 0, pads[1]), [1, *spatial]
    n, c = x.shape[:2]
    h, w = spatial
    plane = np.arange(h * w, dtype=np.int64).reshape(1, 1, h, w)
    offsets = (np.arange(n * c, dtype=np.int64) * h * w).reshape(n, c, 1, 1)
    position = ctx.emit("add", [ctx.const(plane), ctx.const(offsets)])
    out = ctx.const(np.zeros((1, 1, 1, 1), x.dtype))
    tables = [_covering_windows(size, pooled, k, s, b)
              for size, pooled, k, s, b in zip((h, w), x.shape[2:], kernel, strides, pads[:2])]
    for rows, row_ok in tables[0]:
        for cols, col_ok in tables[1]:
            picked = [ctx.emit("take", [ctx.emit("take", [v, ctx.const(rows)], axis=2), ctx.const(cols)],
                               axis=3) for v in (x, indices)]
            mine = ctx.emit("equal", [picked[1], position])
            ok = ctx.const(row_ok[:, None] & col_ok[None, :])
            hit = ctx.emit("where", [ok, mine, ctx.const(np.array(False))])
            out = ctx.emit("where", [hit, picked[0], out])
    if out.shape != (n, c, h, w):  # no window covers any element
        out = ctx.emit("expand", [out], shape=(n, c, h, w))
    return ctx.reshape(out, out.shape[:2] + out.shape[3:]) if nd == 1 else out


def _covering_windows(size: int, pooled: int, kernel: int, stride: int, before: int) -> list:
    """For each of the ``ceil(kernel / stride)`` windows that may cover an output element along
    one axis: the window of each element (clipped into range) and whether it covers it."""
    at = np.arange(size) + before
    tables = []
    for back in range(-(-kernel // stride)):
        window = at // stride - back
        covers = (window >= 0) & (window < pooled) & (at - window * stride < kernel)
        tables.append((np.clip(window, 0, pooled - 1).astype(np.int64), covers))
    return tables


def _pooled(ctx: NodeContext, x: Value, kernel, strides, dilations, pads, ceil_mode: bool,
            count_include_pad: bool) -> Value:
    """A 1-D or 2-D MaxPool or AveragePool (the node's) of ``x`` with the windows given."""
    nd = len(x.shape) - 2
    extra = {}
    if ctx.op_type == "AveragePool":
        extra["count_include_pad"] = count_include_pad
    if ceil_mode:
        pads, ceil_mode = ceil_windows(ctx, x.shape[2:], kernel, strides, dilations, pads,
                                        extra.get("count_include_pad", False))
    if nd == 1:
        x = ctx.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        pads = (0, pads[0], 0, pads[1])
    op = "nn.max_pool2d" if ctx.op_type == "MaxPool" else "nn.avg_pool2d"
    out = ctx.emit(op, [x], pool_size=as_2d(kernel, nd, 1), strides=as_2d(strides, nd, 1),
                   padding=tuple(pads), dilation=as_2d(dilations, nd, 1), ceil_mode=ceil_mode, **extra)
    if nd == 1:
        out = ctx.reshape(out, out.shape[:2] + out.shape[3:])
    return out


@converts("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if len(x.shape) < 3:
        raise ctx.error(f"the input must have spatial axes, got shape {x.shape}")
    if ctx.op_type == "GlobalAveragePool" and len(x.shape) == 4:
        return ctx.emit("nn.global_avg_pool2d", [x])
    op = "mean" if ctx.op_type == "GlobalAveragePool" else "max"
    return ctx.emit(op, [x], axis=tuple(range(2, len(x.shape))), keepdims=True)


@converts("BatchNormalization")
def _batch_norm(ctx: NodeContext, ins, attrs):
    if attrs.get("training_mode", 0):
        raise ctx.unsupported("training_mode=1")
    if ctx.opset < 9 and attrs.get("spatial", 1) == 0:
        raise ctx.unsupported("spatial=0")
    if any(ctx.wants(k) for k in range(1, len(ctx.node.output))):
        raise ctx.unsupported("the training outputs (running mean and variance)")
    x = ins[0]
    params = [ctx.cast(v, x.dtype) for v in ins[1:5]]
    return ctx.emit("nn.batch_norm", [x, *params], epsilon=float(attrs.get("epsilon", 1e-5)), axis=1)


# ---------------------------------------------------------------------------- products


@converts("Gemm")
def _gemm(ctx: NodeContext, ins, attrs):
    a, b, c = ins[0], ins[1], optional_input(ins, 2)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ctx.error(f"A and B must be 2-D, got {a.shape} and {b.shape}")
    if attrs.get("transA", 0):
        a = ctx.emit("transpose", [a], axes=(1, 0))
    if b.is_constant:  # the weight (N, K), alpha folded into it
        weight = b.data if attrs.get("transB", 0) else b.data.T
        if alpha != 1.0:
            weight = weight * np.asarray(alpha, weight.dtype)
        out = ctx.emit("nn.dense", [a, ctx.const(weight, f"{b.name}:dense")])
    else:
        weight = b if attrs.get("transB", 0) else ctx.emit("transpose", [b], axes=(1, 0))
        out = ctx.emit("nn.dense", [a, weight])
        if alpha != 1.0:
            out = ctx.emit("multiply", [out, ctx.const(np.array(alpha, out.dtype))])
    if c is None or beta == 0.0:
        return out
    if beta != 1.0:
        c = ctx.emit("multiply", [c, ctx.const(np.array(beta, c.dtype))])
    if c.shape in ((out.shape[1],), (1, out.shape[1])):
        return ctx.emit("nn.bias_add", [out, ctx.reshape(c, (out.shape[1],))], axis=1)
    return ctx.emit("add", [out, c])


@converts("MatMul")
def _matmul(ctx: NodeContext, ins, attrs):
    return matmul(ctx, *ins)


def matmul(ctx: NodeContext, a: Value, b: Value) -> Value:
    """ONNX's ``MatMul`` of ``a`` and ``b`` (numpy's rules): ``nn.dense`` where ``b`` is a 2-D
    constant (a weight), else ``nn.batch_matmul`` over the broadcast batch."""
    if not a.shape or not b.shape:
        raise ctx.error(f"MatMul of a scalar (shapes {a.shape} and {b.shape})")
    # numpy's 1-D rules: a vector a is a row (dropped after), a vector b a column
    a2 = ctx.reshape(a, (1,) + a.shape) if len(a.shape) == 1 else a
    b2 = ctx.reshape(b, b.shape + (1,)) if len(b.shape) == 1 else b
    (m, k), (kb, n) = a2.shape[-2:], b2.shape[-2:]
    if k != kb:
        raise ctx.error(f"the reduction lengths differ: {a.shape} @ {b.shape}")
    if b2.is_constant and len(b2.shape) == 2:  # a weight: nn.dense on a 2-D view
        lead = a2.shape[:-1]
        weight = ctx.const(b2.data.T, f"{b.name}:dense")
        out = ctx.emit("nn.dense", [ctx.reshape(a2, (math.prod(lead), k)), weight])
        out = ctx.reshape(out, lead + (n,))
    else:
        batch = _broadcast(ctx, a2.shape[:-2], b2.shape[:-2])
        a3, b3 = (_batch_view(ctx, v, batch) for v in (a2, b2))
        out = ctx.emit("nn.batch_matmul", [a3, b3], transpose_a=False, transpose_b=False)
        out = ctx.reshape(out, batch + (m, n))
    shape = out.shape
    if len(a.shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b.shape) == 1:
        shape = shape[:-1]
    return ctx.reshape(out, shape)


def _broadcast(ctx: NodeContext, s1: tuple[int, ...], s2: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(s1, s2))
    except ValueError:
        raise ctx.error(f"batch shapes {s1} and {s2} do not broadcast") from None


def _batch_view(ctx: NodeContext, v: Value, batch: tuple[int, ...]) -> Value:
    """``v`` (..., rows, cols) as 3-D (batch, rows, cols); a batch of 1 stays 1 (it broadcasts)."""
    rows, cols = v.shape[-2:]
    own = v.shape[:-2]
    if math.prod(own) == 1 or own == batch:
        return ctx.reshape(v, (math.prod(own), rows, cols))
    v = ctx.emit("expand", [v], shape=batch + (rows, cols))
    return ctx.reshape(v, (math.prod(batch), rows, cols))
