"""The ONNX operators imported as compositions of catalog operators.

``Einsum`` becomes transposes and reshapes around the matrix products the templates tune
(``nn.batch_matmul`` without transposed operands, ``nn.dense``), or a broadcast ``multiply`` and
``sum`` where nothing is contracted; the normalisations (``LpNormalization``,
``MeanVarianceNormalization``, ``RMSNormalization``, ``LRN``), the pools (``LpPool``,
``GlobalLpPool``), the reductions (``ReduceProd``, ``ReduceLogSum``) and ``Hardmax`` are written
out in the catalog's reductions, pools and elementwise operators.

Importing this module registers their converters in :data:`compiler.frontend.onnx.CONVERTERS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

import numpy as np

from ... import dtypes
from ...graph import Value
from .importer import NodeContext, converts, element_dtype, scalar_like
from .nn import as_2d, ceil_windows, spatial_rank, window_attrs
from .reduce import reduce_axes

__all__: list[str] = []

def _float_input(ctx: NodeContext, x: Value) -> None:
    if not dtypes.is_float(x.dtype):
        raise ctx.unsupported(f"input of dtype {x.dtype} (a float type is needed)")


def _powers(ctx: NodeContext, x: Value, p: float) -> Value:
    """``|x| ** p``, elementwise (a product or an absolute value where ``p`` is 2 or 1)."""
    if p == 2:
        return ctx.emit("multiply", [x, x])
    magnitude = ctx.emit("abs", [x])
    return magnitude if p == 1 else ctx.emit("power", [magnitude, scalar_like(ctx, x, p)])


def _root(ctx: NodeContext, total: Value, p: float) -> Value:
    """``total ** (1 / p)`` (a square root where ``p`` is 2)."""
    if p == 1:
        return total
    if p == 2:
        return ctx.emit("sqrt", [total])
    return ctx.emit("power", [total, scalar_like(ctx, total, 1.0 / p)])


def _order_p(ctx: NodeContext, attrs) -> float:
    p = attrs.get("p", 2)
    if not p > 0:
        raise ctx.error(f"p={p} must be positive")
    return p


# ---------------------------------------------------------------------------- reductions


@converts("ReduceProd", "ReduceLogSum")
def _reduce_prod_log_sum(ctx: NodeContext, ins, attrs):
    x = ins[0]
    if ctx.op_type == "ReduceLogSum":
        _float_input(ctx, x)
    axes = reduce_axes(ctx, ins, attrs, 18)
    keepdims = bool(attrs.get("keepdims", 1))
    op = "prod" if ctx.op_type == "ReduceProd" else "sum"
    # no reduction: each element is its own product or sum
    total = x if axes is None else ctx.emit(op, [x], axis=axes, keepdims=keepdims)
    return total if ctx.op_type == "ReduceProd" else ctx.emit("log", [total])


@converts("Hardmax")
def _hardmax(ctx: NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    if ndim == 0:
        raise ctx.error("the input is a scalar; Hardmax needs an axis")
    axis = ctx.axis(attrs.get("axis", -1 if ctx.opset >= 13 else 1), ndim)
    if ctx.opset >= 13:
        return _one_hot_of_argmax(ctx, x, axis)
    # before opset 13: over all the axes from axis on, as one (the input seen as 2-D)
    flat = ctx.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    return ctx.reshape(_one_hot_of_argmax(ctx, flat, 1), x.shape)


def _one_hot_of_argmax(ctx: NodeContext, x: Value, axis: int) -> Value:
    """1 where ``x`` is largest along ``axis`` (at the first such index), 0 elsewhere."""
    index = ctx.emit("argmax", [x], axis=axis, keepdims=True)
    n = x.shape[axis]
    positions = np.arange(n, dtype=index.dtype).reshape([n if k == axis else 1 for k in range(len(x.shape))])
    return ctx.cast(ctx.emit("equal", [index, ctx.const(positions)]), x.dtype)


# ---------------------------------------------------------------------------- normalisations


@converts("LpNormalization")
def _lp_normalization(ctx: NodeContext, ins, attrs):
    x = ins[0]
    _float_input(ctx, x)
    axis = ctx.axis(attrs.get("axis", -1), len(x.shape))
    p = attrs.get("p", 2)
    if p not in (1, 2):
        raise ctx.error(f"p={p} is not 1 or 2")
    norm = _root(ctx, ctx.emit("sum", [_powers(ctx, x, p)], axis=(axis,), keepdims=True), p)
    return ctx.emit("divide", [x, norm])


# ONNX's function adds 1e-9 to the standard deviation; as the variance's epsilon its square does the
# same to float precision wherever the variance is not itself below about 1e-16.
_MVN_EPSILON = 1e-18


@converts("MeanVarianceNormalization")
def _mean_variance_normalization(ctx: NodeContext, ins, attrs):
    """``(x - mean) / std`` over ``axes``: a layer norm of ``x`` with those axes moved last and merged."""
    x = ins[0]
    _float_input(ctx, x)
    ndim = len(x.shape)
    axes = sorted({ctx.axis(a, ndim) for a in attrs.get("axes", (0, 2, 3))})
    if not axes:
        raise ctx.error("axes is empty")
    kept = [k for k in range(ndim) if k not in axes]
    perm = tuple(kept + axes)
    moved = x if perm == tuple(range(ndim)) else ctx.emit("transpose", [x], axes=perm)
    rows = math.prod(x.shape[k] for k in kept)
    flat = ctx.reshape(moved, (rows, math.prod(x.shape[a] for a in axes)))
    one, zero = ctx.const(np.ones(1, x.dtype)), ctx.const(np.zeros(1, x.dtype))
    normed = ctx.emit("nn.layer_norm", [flat, one, zero], axis=1, epsilon=_MVN_EPSILON)
    out = ctx.reshape(normed, moved.shape)
    if moved is x:
        return out
    return ctx.emit("transpose", [out], axes=tuple(int(k) for k in np.argsort(perm)))


@converts("RMSNormalization")
def _rms_normalization(ctx: NodeContext, ins, attrs):
    """``x / sqrt(mean(x ** 2) + epsilon) * scale`` over the axes from ``axis`` on, computed in
    ``stash_type`` as ONNX's function does."""
    x, scale = ins[0], ins[1]
    _float_input(ctx, x)
    ndim = len(x.shape)
    axis = ctx.axis(attrs.get("axis", -1), ndim)
    stash = element_dtype(attrs.get("stash_type", 1), f"{ctx.where}: stash_type")
    if not dtypes.is_float(stash):
        raise ctx.unsupported(f"stash_type {stash} (a float type is needed)")
    wide = ctx.cast(x, stash)
    squares = ctx.emit("mean", [ctx.emit("multiply", [wide, wide])], axis=tuple(range(axis, ndim)),
                       keepdims=True)
    rms = ctx.emit("sqrt", [ctx.emit("add", [squares, scalar_like(ctx, wide, attrs.get("epsilon", 1e-5))])])
    normed = ctx.cast(ctx.emit("divide", [wide, rms]), x.dtype)
    return ctx.emit("multiply", [normed, ctx.cast(scale, x.dtype)])


@converts("LRN")
def _lrn(ctx: NodeContext, ins, attrs):
    """``x / (bias + alpha / size * s) ** beta``, ``s`` the sum of squares over a window of ``size``
    channels (``floor((size - 1) / 2)`` before, the rest after): ``alpha / size * s`` is ``alpha``
    times an average pool of the squares over the channels seen as rows, padding counted."""
    x = ins[0]
    _float_input(ctx, x)
    if len(x.shape) < 3:
        raise ctx.error(f"the input must be (N, C, D1, ...), got shape {x.shape}")
    size = attrs.get("size", 0)
    if size < 1:
        raise ctx.error(f"size={size} must be a positive int")
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    N, C = x.shape[:2]
    rows = ctx.reshape(x, (N, 1, C, math.prod(x.shape[2:])))
    before = (size - 1) // 2
    mean = ctx.emit("nn.avg_pool2d", [ctx.emit("multiply", [rows, rows])], pool_size=(size, 1),
                    strides=(1, 1), padding=(before, 0, size - 1 - before, 0), dilation=(1, 1),
                    ceil_mode=False, count_include_pad=True)
    scaled = ctx.emit("multiply", [mean, scalar_like(ctx, x, alpha)])
    base = ctx.emit("add", [scaled, scalar_like(ctx, x, bias)])
    out = ctx.emit("divide", [rows, ctx.emit("power", [base, scalar_like(ctx, x, beta)])])
    return ctx.reshape(out, x.shape)


# ---------------------------------------------------------------------------- pools


@converts("LpPool")
def _lp_pool(ctx: NodeContext, ins, attrs):
    """``(sum |x| ** p) ** (1 / p)`` over each window: an average pool of the powers (padding not
    counted) times the number of input elements in each window."""
    x = ins[0]
    _float_input(ctx, x)
    nd = spatial_rank(ctx, x, "pooling")
    p = _order_p(ctx, attrs)
    kernel = tuple(attrs.get("kernel_shape", ()))
    if len(kernel) != nd:
        raise ctx.error(f"kernel_shape {list(kernel)} must have {nd} entries")
    spatial = x.shape[2:]
    strides, dilations, pads = window_attrs(ctx, attrs, spatial, kernel)
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if ceil_mode:
        pads, ceil_mode = ceil_windows(ctx, spatial, kernel, strides, dilations, pads, False)
    terms = _powers(ctx, x, p)
    if nd == 1:
        terms = ctx.reshape(terms, x.shape[:2] + (1,) + spatial)
        pads = (0, pads[0], 0, pads[1])
    kernel2, strides2, dilations2 = as_2d(kernel, nd, 1), as_2d(strides, nd, 1), as_2d(dilations, nd, 1)
    mean = ctx.emit("nn.avg_pool2d", [terms], pool_size=kernel2, strides=strides2, padding=tuple(pads),
                    dilation=dilations2, ceil_mode=ceil_mode, count_include_pad=False)
    counts = np.outer(*(_taps_inside(terms.shape[2 + k], mean.shape[2 + k], kernel2[k], strides2[k],
                                     dilations2[k], pads[k]) for k in range(2)))
    if np.all(counts == counts.flat[0]):  # no window reaches into the padding: one count for all
        counts = counts.flat[0]
    total = ctx.emit("multiply", [mean, ctx.const(np.asarray(counts, x.dtype))])
    out = _root(ctx, total, p)
    return ctx.reshape(out, out.shape[:2] + out.shape[3:]) if nd == 1 else out


def _taps_inside(size: int, out: int, kernel: int, stride: int, dilation: int, pad: int) -> np.ndarray:
    """How many taps of each of the ``out`` windows along one axis fall inside the input."""
    start = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - pad
    return ((start >= 0) & (start < size)).sum(axis=1)


@converts("GlobalLpPool")
def _global_lp_pool(ctx: NodeContext, ins, attrs):
    x = ins[0]
    _float_input(ctx, x)
    if len(x.shape) < 3:
        raise ctx.error(f"the input must have spatial axes, got shape {x.shape}")
    p = _order_p(ctx, attrs)
    total = ctx.emit("sum", [_powers(ctx, x, p)], axis=tuple(range(2, len(x.shape))), keepdims=True)
    return _root(ctx, total, p)


# ---------------------------------------------------------------------------- Einsum

# A label names one axis of an operand: a letter of the equation, or the position of one of the
# axes an ellipsis stands for (a digit string, counted from the left of the broadcast ellipsis).
_Labels = list[str]


@converts("Einsum")
def _einsum(ctx: NodeContext, ins, attrs):
    """Einstein summation: one operand transposed and summed; two contracted as one matrix product
    (batched over the labels both keep); more, pairwise from the left."""
    equation = attrs.get("equation")
    if not isinstance(equation, str):
        raise ctx.error("attribute equation is missing")
    if not ins or any(v is None for v in ins):
        raise ctx.error("Einsum needs at least one input, none of them empty")
    if len({v.dtype for v in ins}) > 1:
        raise ctx.error(f"the inputs must share one dtype, got {', '.join(v.dtype for v in ins)}")
    operands, out = _einsum_labels(ctx, equation, [v.shape for v in ins])
    sizes = _label_sizes(ctx, equation, ins, operands)
    values = []
    for v, labels in zip(ins, operands):
        # an axis of 1 against a longer one broadcasts: the operand does not vary along that label
        short = [lab for k, lab in enumerate(labels) if v.shape[k] != sizes[lab]]
        values.append(_without(ctx, v, labels, short))
    if len(values) == 1:
        [(v, labels)] = values
        return _summed_to(ctx, v, labels, out)
    current, labels = values[0]
    for k, (v, own) in enumerate(values[1:], start=1):
        last = k == len(values) - 1
        later = {lab for _, ls in values[k + 1:] for lab in ls}
        keep = set(out) | later
        current, labels = _contract(ctx, current, labels, v, own, keep, sizes, out if last else None)
    return current


def _einsum_labels(ctx: NodeContext, equation: str, shapes: Sequence[tuple[int, ...]]) -> tuple[
        list[_Labels], _Labels]:
    """The labels of each operand's axes and of the output's."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ctx.error(f"equation {equation!r} has {len(terms)} operand terms for {len(shapes)} inputs")
    parsed = [_subscripts(ctx, equation, term) for term in terms]
    ranks = []
    for k, ((head, tail, dots), shape) in enumerate(zip(parsed, shapes)):
        extra = len(shape) - len(head) - len(tail)
        if extra < 0 or (extra and not dots):
            raise ctx.error(f"equation {equation!r}: term {terms[k]!r} does not fit input {k} of "
                            f"shape {shape}")
        ranks.append(extra)
        repeated = sorted({c for c in head + tail if (head + tail).count(c) > 1})
        if repeated:
            raise ctx.unsupported(f"equation {equation!r}: label {repeated[0]!r} repeated in term "
                                  f"{terms[k]!r} (a diagonal)")
    broadcast = max(ranks)
    ellipsis = [str(k) for k in range(broadcast)]
    operands = [head + ellipsis[broadcast - extra:] + tail for (head, tail, _), extra in zip(parsed, ranks)]
    letters = [c for head, tail, _ in parsed for c in head + tail]
    if not arrow:  # numpy's implicit output: the broadcast axes, then each label used once, sorted
        return operands, ellipsis + sorted(c for c in set(letters) if letters.count(c) == 1)
    head, tail, dots = _subscripts(ctx, equation, rhs)
    if broadcast and not dots:
        raise ctx.error(f"equation {equation!r}: the inputs have '...' axes but the output has no '...'")
    out = head + ellipsis + tail
    for c in head + tail:
        if (head + tail).count(c) > 1:
            raise ctx.error(f"equation {equation!r}: output label {c!r} is repeated")
        if c not in letters:
            raise ctx.error(f"equation {equation!r}: output label {c!r} is in no input term")
    return operands, out


def _subscripts(ctx: NodeContext, equation: str, term: str) -> tuple[_Labels, _Labels, bool]:
    """One term's letters before and after its ellipsis, and whether it has one."""
    head, dots, tail = term.partition("...")
    if not all(c.isascii() and c.isalpha() for c in head + tail):
        raise ctx.error(f"equation {equation!r}: term {term!r} holds more than letters and one '...'")
    return list(head), list(tail), bool(dots)


def _label_sizes(ctx: NodeContext, equation: str, ins, operands: list[_Labels]) -> dict[str, int]:
    """Each label's length: the same in every operand, or 1 in some (which broadcast)."""
    sizes: dict[str, int] = {}
    for v, labels in zip(ins, operands):
        for lab, d in zip(labels, v.shape):
            if sizes.get(lab, 1) not in (1, d) and d != 1:
                shown = f"'...' axis {lab}" if lab.isdigit() else f"label {lab!r}"
                raise ctx.error(f"equation {equation!r}: {shown} has lengths {sizes[lab]} and {d}")
            sizes[lab] = max(sizes.get(lab, 1), d)
    return sizes


def _without(ctx: NodeContext, v: Value, labels: _Labels, dropped: _Labels) -> tuple[Value, _Labels]:
    """``v`` without its axes of length 1 labelled ``dropped``."""
    if not dropped:
        return v, labels
    kept = [k for k, lab in enumerate(labels) if lab not in dropped]
    return ctx.reshape(v, [v.shape[k] for k in kept]), [labels[k] for k in kept]


def _summed_to(ctx: NodeContext, v: Value, labels: _Labels, out: _Labels) -> Value:
    """``v`` summed over its labels not in ``out``, and its axes put in ``out``'s order."""
    v, labels = _sum_over(ctx, v, labels, [lab for lab in labels if lab not in out])
    return _arranged(ctx, v, labels, out)


def _sum_over(ctx: NodeContext, v: Value, labels: _Labels, summed: _Labels) -> tuple[Value, _Labels]:
    if not summed:
        return v, labels
    axes = tuple(k for k, lab in enumerate(labels) if lab in summed)
    return ctx.emit("sum", [v], axis=axes, keepdims=False), [lab for lab in labels if lab not in summed]


def _arranged(ctx: NodeContext, v: Value, labels: _Labels, order: _Labels) -> Value:
    """``v`` (axes ``labels``) with its axes in ``order`` (the same labels)."""
    if labels == order:
        return v
    return ctx.emit("transpose", [v], axes=tuple(labels.index(lab) for lab in order))


def _contract(ctx: NodeContext, a: Value, la: _Labels, b: Value, lb: _Labels, keep: set[str],
              sizes: dict[str, int], order: _Labels | None) -> tuple[Value, _Labels]:
    """The product of ``a`` and ``b`` summed over their labels not in ``keep``: its value and labels
    (``order``, where given; else the matrix product's own order)."""
    # a label of one operand alone that no one keeps is summed there first
    a, la = _sum_over(ctx, a, la, [lab for lab in la if lab not in lb and lab not in keep])
    b, lb = _sum_over(ctx, b, lb, [lab for lab in lb if lab not in la and lab not in keep])
    if not any(lab in lb and lab not in keep for lab in la):
        return _outer(ctx, a, la, b, lb, sizes, order)
    plan = min(_plans(a, la, b, lb, keep, order), key=lambda p: p[0])
    _, kind, (x, lx), (y, ly), batch, free_x, free_y, contracted = plan
    B, M, K, N = (math.prod(sizes[lab] for lab in group) for group in (batch, free_x, contracted, free_y))
    x = _arranged(ctx, x, lx, batch + free_x + contracted)
    if kind == "dense_weight":  # (M, K) by a constant (N, K), as MatMul imports a weight
        weight = np.transpose(y.data, [ly.index(lab) for lab in free_y + contracted]).reshape(N, K)
        out = ctx.emit("nn.dense", [ctx.reshape(x, (M, K)), ctx.const(weight, f"{y.name}:dense")])
    elif kind == "dense":  # (M, K) by a computed (N, K)
        y = _arranged(ctx, y, ly, free_y + contracted)
        out = ctx.emit("nn.dense", [ctx.reshape(x, (M, K)), ctx.reshape(y, (N, K))])
    else:  # untransposed operands: the batched product the templates tune
        y = _arranged(ctx, y, ly, batch + contracted + free_y)
        out = ctx.emit("nn.batch_matmul", [ctx.reshape(x, (B, M, K)), ctx.reshape(y, (B, K, N))],
                       transpose_a=False, transpose_b=False)
    labels = batch + free_x + free_y
    out = ctx.reshape(out, [sizes[lab] for lab in labels])
    if order is None:
        return out, labels
    return _arranged(ctx, out, labels, order), order


def _plans(a: Value, la: _Labels, b: Value, lb: _Labels, keep: set[str], order: _Labels | None):
    """Every way to write the contraction as one matrix product, each with its count of transposes
    first: which operand gives the rows, the order of the batch and contracted labels, the kind of
    product (``nn.dense`` by a constant weight, or by a computed one; ``nn.batch_matmul``). Ties go
    to the first listed: ``a`` as rows, ``nn.dense`` by a constant weight."""
    for (x, lx), (y, ly) in (((a, la), (b, lb)), ((b, lb), (a, la))):
        free_x = [lab for lab in lx if lab not in ly]
        free_y = [lab for lab in ly if lab not in lx]
        batches = _distinct([lab for lab in ls if lab in lx and lab in ly and lab in keep]
                            for ls in (lx, ly, order or []))
        contracts = _distinct([lab for lab in ls if lab in lx and lab in ly and lab not in keep]
                              for ls in (lx, ly))
        for batch, contracted in product(batches, contracts):
            out_cost = order is not None and batch + free_x + free_y != order
            x_cost = lx != batch + free_x + contracted
            kinds = []
            if not batch and y.is_constant:
                kinds.append(("dense_weight", 0))  # the weight is transposed at import
            if not batch:
                kinds.append(("dense", ly != free_y + contracted))
            kinds.append(("batch_matmul", ly != batch + contracted + free_y))
            for kind, y_cost in kinds:
                yield (int(x_cost) + int(y_cost) + int(out_cost), kind, (x, lx), (y, ly), batch, free_x,
                       free_y, contracted)


def _distinct(orders) -> list[_Labels]:
    seen: list[_Labels] = []
    for o in orders:
        if o not in seen:
            seen.append(o)
    return seen


def _outer(ctx: NodeContext, a: Value, la: _Labels, b: Value, lb: _Labels, sizes: dict[str, int],
           order: _Labels | None) -> tuple[Value, _Labels]:
    """The elementwise product of ``a`` and ``b``, which share no summed label, with numpy's
    broadcasting."""
    target = order if order is not None else la + [lab for lab in lb if lab not in la]

    def spread(v: Value, labels: _Labels) -> Value:
        v = _arranged(ctx, v, labels, [lab for lab in target if lab in labels])
        return ctx.reshape(v, [sizes[lab] if lab in labels else 1 for lab in target])

    out = ctx.emit("multiply", [spread(a, la), spread(b, lb)])
    return ctx.reshape(out, [sizes[lab] for lab in target]), target
