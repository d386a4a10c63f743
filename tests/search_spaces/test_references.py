"""Every template's numpy reference against a plain-loop implementation written here.

The references are the oracles of the template tests and of the correctness check
while tuning, so they are checked on their own: each reference makes random inputs
and its expected outputs at tiny shapes, and a loop version written from the textbook
definitions, with its own output sizes, recomputes the outputs from those inputs.
Every stride, padding, dilation, layout, pool type and op that a template accepts
appears in a case. Templates are discovered from the registry: a built-in template
without a loop version here fails the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import search_spaces  # noqa: F401 - registers the built-in templates
from compiler.topi.nn.winograd import winograd_matrices
from search_spaces.template import get_template, list_templates

# ---------------------------------------------------------------------------- arguments


def _two(value) -> tuple[int, int]:
    """A stride or dilation: one int for both axes, or (h, w)."""
    return (value, value) if isinstance(value, int) else tuple(value)


def _pads(padding) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from one int, (h, w) or the four sides."""
    if isinstance(padding, int):
        return (padding,) * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)


def _out_size(size: int, k: int, stride: int, lo: int, hi: int, dilation: int = 1) -> int:
    """floor((size + lo + hi - dilation * (k - 1) - 1) / stride) + 1."""
    return (size + lo + hi - dilation * (k - 1) - 1) // stride + 1


def _exact(dtype: str) -> bool:
    return np.dtype(dtype).kind in "iu"


def _to(values, dtype: str) -> np.ndarray:
    """Python numbers (nested lists) as an array of ``dtype``, rounded once."""
    return np.array(values, dtype="float64" if not _exact(dtype) else "int64").astype(dtype)


def _shape_of(a: np.ndarray, shape: tuple, dtype: str) -> None:
    assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype), (a.shape, a.dtype, shape, dtype)


def _value(a, *idx):
    """One element as a Python int or float (float64 arithmetic from here on)."""
    v = a[idx]
    return int(v) if a.dtype.kind in "iu" else float(v)


# ---------------------------------------------------------------------------- loop versions
# Each takes the template's arguments and the reference's inputs, checks the input shapes
# and returns the outputs.


def _loop_matmul(args, inputs):
    N, L, M, dtype = args
    a, b = inputs
    _shape_of(a, (N, L), dtype)
    _shape_of(b, (L, M), dtype)
    return [_to([[sum(_value(a, i, k) * _value(b, k, j) for k in range(L)) for j in range(M)]
                 for i in range(N)], dtype)]


def _loop_dense(args, inputs):
    batch, in_dim, out_dim, dtype, *rest = args
    bias = bool(rest[0]) if rest else False
    x, w, *b = inputs
    _shape_of(x, (batch, in_dim), dtype)
    _shape_of(w, (out_dim, in_dim), dtype)
    assert len(b) == (1 if bias else 0)
    if bias:
        _shape_of(b[0], (out_dim,), dtype)
    out = [[sum(_value(x, i, k) * _value(w, j, k) for k in range(in_dim)) + (_value(b[0], j) if bias else 0)
            for j in range(out_dim)] for i in range(batch)]
    return [_to(out, dtype)]


def _loop_dense_pack(args, inputs):
    batch, in_dim, out_dim, nr, dtype = args
    x, wp = inputs
    _shape_of(x, (batch, in_dim), dtype)
    _shape_of(wp, (-(-out_dim // nr), in_dim, nr), dtype)
    out = [[sum(_value(x, i, k) * _value(wp, j // nr, k, j % nr) for k in range(in_dim))
            for j in range(out_dim)] for i in range(batch)]
    return [_to(out, dtype)]


def _loop_batch_matmul(args, inputs):
    B, N, L, M, dtype = args
    a, b = inputs
    _shape_of(a, (B, N, L), dtype)
    _shape_of(b, (B, L, M), dtype)
    return [_to([[[sum(_value(a, n, i, k) * _value(b, n, k, j) for k in range(L)) for j in range(M)]
                  for i in range(N)] for n in range(B)], dtype)]


def _conv_tap(x, n, c, iy, ix, H, W, layout):
    """The input at (iy, ix) of image n, channel c; zero in the padding."""
    if not (0 <= iy < H and 0 <= ix < W):
        return 0
    return _value(x, n, c, iy, ix) if layout == "NCHW" else _value(x, n, iy, ix, c)


def _conv(args, inputs, layout, depthwise=False):
    """A direct convolution by loops; returns the output as nested lists, NCHW or NHWC."""
    if depthwise:
        N, C, H, W, KH, KW, stride, padding, dilation, dtype = args
        F = C
    elif layout == "NCHW":
        N, C, H, W, F, KH, KW, stride, padding, dilation, dtype = args
    else:
        N, H, W, C, F, KH, KW, stride, padding, dilation, dtype = args
    (sh, sw), (dh, dw), (top, left, bottom, right) = _two(stride), _two(dilation), _pads(padding)
    x, w = inputs
    _shape_of(x, (N, C, H, W) if layout == "NCHW" else (N, H, W, C), dtype)
    _shape_of(w, (C, 1, KH, KW) if depthwise else (F, C, KH, KW) if layout == "NCHW" else (KH, KW, C, F),
              dtype)
    Ho = _out_size(H, KH, sh, top, bottom, dh)
    Wo = _out_size(W, KW, sw, left, right, dw)

    def weight(f, c, ry, rx):
        if depthwise:
            return _value(w, f, 0, ry, rx)
        return _value(w, f, c, ry, rx) if layout == "NCHW" else _value(w, ry, rx, c, f)

    def at(n, f, y, xo):
        channels = [f] if depthwise else range(C)
        return sum(_conv_tap(x, n, c, y * sh - top + ry * dh, xo * sw - left + rx * dw, H, W, layout)
                   * weight(f, c, ry, rx)
                   for c in channels for ry in range(KH) for rx in range(KW))

    if layout == "NCHW":
        out = [[[[at(n, f, y, xo) for xo in range(Wo)] for y in range(Ho)] for f in range(F)]
               for n in range(N)]
    else:
        out = [[[[at(n, f, y, xo) for f in range(F)] for xo in range(Wo)] for y in range(Ho)]
               for n in range(N)]
    return [_to(out, dtype)]


def _loop_conv2d_nchw(args, inputs):
    return _conv(args, inputs, "NCHW")


def _loop_conv2d_nhwc(args, inputs):
    return _conv(args, inputs, "NHWC")


def _loop_conv2d_nchwc(args, inputs):
    """The NCHW loop convolution of the unblocked inputs, its output blocked again."""
    N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, oc_bn, dtype = args
    x, w = inputs
    _shape_of(x, (N, C // ic_bn, H, W, ic_bn), dtype)
    _shape_of(w, (F // oc_bn, C // ic_bn, KH, KW, ic_bn, oc_bn), dtype)
    x_nchw = _to([[[[_value(x, n, c // ic_bn, h, i, c % ic_bn) for i in range(W)] for h in range(H)]
                   for c in range(C)] for n in range(N)], dtype)
    w_nchw = _to([[[[_value(w, f // oc_bn, c // ic_bn, ry, rx, c % ic_bn, f % oc_bn) for rx in range(KW)]
                    for ry in range(KH)] for c in range(C)] for f in range(F)], dtype)
    (y,) = _conv((N, C, H, W, F, KH, KW, stride, padding, dilation, dtype), [x_nchw, w_nchw], "NCHW")
    Ho, Wo = y.shape[2:]
    return [_to([[[[[_value(y, n, fc * oc_bn + b, i, j) for b in range(oc_bn)] for j in range(Wo)]
                   for i in range(Ho)] for fc in range(F // oc_bn)] for n in range(N)], dtype)]


def _loop_conv2d_nchwc_winograd(args, inputs):
    """Winograd's algorithm in loops, from the blocked data and the transformed kernel: per tile
    ``A^T [sum over channels of U * (B^T d B)] A``, the output blocked."""
    N, C, H, W, F, padding, m, nr, ic_bn, oc_bn, dtype = args
    x, u = inputs
    AT, _, BT = winograd_matrices(m)
    a = m + 2
    top, left, bottom, right = (padding,) * 4 if isinstance(padding, int) else padding
    Ho, Wo = H + top + bottom - 2, W + left + right - 2
    _shape_of(x, (N, C // ic_bn, H, W, ic_bn), dtype)
    _shape_of(u, (a * a, F // nr, C, nr), dtype)

    def data(n, c, y, i):
        return _value(x, n, c // ic_bn, y, i, c % ic_bn) if 0 <= y < H and 0 <= i < W else 0.0

    out = [[[[[0.0] * oc_bn for _ in range(Wo)] for _ in range(Ho)] for _ in range(F // oc_bn)]
           for _ in range(N)]
    for n in range(N):
        for ty in range(-(-Ho // m)):
            for tx in range(-(-Wo // m)):
                d = [[[data(n, c, ty * m + i - top, tx * m + j - left) for j in range(a)] for i in range(a)]
                     for c in range(C)]
                v = [[[sum(BT[e1][i] * BT[e2][j] * d[c][i][j] for i in range(a) for j in range(a))
                       for e2 in range(a)] for e1 in range(a)] for c in range(C)]
                for f in range(F):
                    prod = [[sum(_value(u, e1 * a + e2, f // nr, c, f % nr) * v[c][e1][e2]
                                 for c in range(C)) for e2 in range(a)] for e1 in range(a)]
                    for i in range(m):
                        for j in range(m):
                            y, col = ty * m + i, tx * m + j
                            if y < Ho and col < Wo:
                                out[n][f // oc_bn][y][col][f % oc_bn] = sum(
                                    AT[i][e1] * AT[j][e2] * prod[e1][e2]
                                    for e1 in range(a) for e2 in range(a))
    return [_to(out, dtype)]


def _loop_conv2d_depthwise_nchwc(args, inputs):
    """The loop pointwise convolution, its activation (``"relu"``, ``"relu6"`` or none), then the
    loop depthwise convolution of its output, all blocked."""
    N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, block, dtype, mid_epilogue, epilogue = args
    assert not epilogue and set(mid_epilogue) <= {"relu", "relu6"}, "loops for activations only"
    x, w1, w2 = inputs
    (mid,) = _loop_conv2d_nchwc((N, C, H, W, F, 1, 1, 1, 0, 1, ic_bn, block, dtype), [x, w1])
    for op in mid_epilogue:
        mid = np.clip(mid, 0, 6 if op == "relu6" else None).astype(dtype)
    depthwise = (N, F, H, W, KH, KW, stride, padding, dilation, block, dtype)
    return _loop_depthwise_conv2d_nchwc(depthwise, [mid, w2])


def _loop_depthwise_conv2d_nchw(args, inputs):
    return _conv(args, inputs, "NCHW", depthwise=True)


def _loop_depthwise_conv2d_nchwc(args, inputs):
    """The NCHW loop depthwise convolution of the unblocked inputs, its output blocked again."""
    N, C, H, W, KH, KW, stride, padding, dilation, block, dtype = args
    x, w = inputs
    _shape_of(x, (N, C // block, H, W, block), dtype)
    _shape_of(w, (C // block, KH, KW, block), dtype)
    x_nchw = _to([[[[_value(x, n, c // block, h, i, c % block) for i in range(W)] for h in range(H)]
                   for c in range(C)] for n in range(N)], dtype)
    w_nchw = _to([[[[_value(w, c // block, ry, rx, c % block) for rx in range(KW)] for ry in range(KH)]]
                  for c in range(C)], dtype)
    (y,) = _conv((N, C, H, W, KH, KW, stride, padding, dilation, dtype), [x_nchw, w_nchw], "NCHW",
                 depthwise=True)
    Ho, Wo = y.shape[2:]
    return [_to([[[[[_value(y, n, c * block + b, i, j) for b in range(block)] for j in range(Wo)]
                   for i in range(Ho)] for c in range(C // block)] for n in range(N)], dtype)]


def _loop_pool2d(args, inputs):
    """Max over the taps inside the input (padding never wins); average over all KH * KW taps,
    padding counted as zeros."""
    N, C, H, W, KH, KW, stride, padding, pool_type, dtype = args
    (sh, sw), (top, left, bottom, right) = _two(stride), _pads(padding)
    (x,) = inputs
    _shape_of(x, (N, C, H, W), dtype)
    Ho, Wo = _out_size(H, KH, sh, top, bottom), _out_size(W, KW, sw, left, right)

    def at(n, c, y, xo):
        y0, x0 = y * sh - top, xo * sw - left
        taps = [_value(x, n, c, iy, ix) for iy in range(y0, y0 + KH) for ix in range(x0, x0 + KW)
                if 0 <= iy < H and 0 <= ix < W]
        return max(taps) if pool_type == "max" else sum(taps) / (KH * KW)

    return [_to([[[[at(n, c, y, xo) for xo in range(Wo)] for y in range(Ho)] for c in range(C)]
                 for n in range(N)], dtype)]


def _loop_softmax(args, inputs):
    M, N, dtype = args
    (x,) = inputs
    _shape_of(x, (M, N), dtype)
    out = []
    for i in range(M):
        e = [math.exp(_value(x, i, j)) for j in range(N)]
        out.append([v / sum(e) for v in e])
    return [_to(out, dtype)]


def _loop_layer_norm(args, inputs):
    M, N, dtype = args
    x, gamma, beta = inputs
    _shape_of(x, (M, N), dtype)
    _shape_of(gamma, (N,), dtype)
    _shape_of(beta, (N,), dtype)
    eps = 1e-5
    out = []
    for i in range(M):
        row = [_value(x, i, j) for j in range(N)]
        mean = sum(row) / N
        var = sum((v - mean) ** 2 for v in row) / N  # the biased variance
        out.append([(v - mean) / math.sqrt(var + eps) * _value(gamma, j) + _value(beta, j)
                    for j, v in enumerate(row)])
    return [_to(out, dtype)]


_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a / b, "max": max, "min": min}
_UNARY = {
    "relu": lambda v: max(v, 0),
    "gelu": lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
    "sigmoid": lambda v: 1 / (1 + math.exp(-v)),
    "tanh": math.tanh,
    "exp": math.exp,
    "neg": lambda v: -v,
    "abs": abs,
}


def _loop_elementwise(args, inputs):
    """The chain left to right, each step rounded to the dtype; the k-th binary operand is
    ``(N,)``, ``(M, 1)`` or ``(M, N)`` for k % 3 = 0, 1, 2, broadcast against the value."""
    M, N, ops, dtype = args
    chain = ops.split(",")
    x, *operands = inputs
    _shape_of(x, (M, N), dtype)
    assert len(operands) == sum(o in _BINARY for o in chain)
    for k, b in enumerate(operands):
        _shape_of(b, ((N,), (M, 1), (M, N))[k % 3], dtype)
    scalar = np.dtype(dtype).type

    def at(i, j):
        v, k = _value(x, i, j), 0
        for o in chain:
            if o in _BINARY:
                b = operands[k]
                bv = _value(b, j) if b.ndim == 1 else _value(b, i, 0) if b.shape[1] == 1 else _value(b, i, j)
                v, k = _BINARY[o](v, bv), k + 1
            else:
                v = _UNARY[o](v)
            v = int(v) if _exact(dtype) else float(scalar(v))  # the dtype of each intermediate
        return v

    return [_to([[at(i, j) for j in range(N)] for i in range(M)], dtype)]


# ---------------------------------------------------------------------------- cases

_CONV2D_NCHW = [
    (1, 2, 5, 5, 3, 3, 3, 1, 0, 1, "float32"),
    (2, 3, 7, 6, 2, 3, 2, 2, 1, 1, "float32"),
    (1, 2, 7, 8, 2, 2, 3, (2, 1), (1, 2), (2, 1), "float32"),
    (1, 1, 6, 7, 2, 3, 3, (1, 3), (0, 1, 2, 1), (1, 2), "float64"),
    (1, 2, 4, 4, 2, 3, 3, 3, 2, 2, "float32"),
    (1, 2, 5, 4, 2, 1, 1, 1, 0, 1, "int32"),
]

# template name -> (loop version, argument lists covering every variant the template accepts)
ORACLES = {
    "matmul": (_loop_matmul, [(3, 4, 5, "float32"), (2, 3, 4, "float64"), (3, 2, 4, "int32"),
                              (1, 1, 1, "float32")]),
    "dense": (_loop_dense, [(3, 4, 5, "float32"), (3, 4, 5, "float32", True), (2, 3, 2, "int32", True),
                            (2, 3, 4, "float64", False)]),
    # (batch, in_dim, out_dim, nr, dtype): whole panels only (padding would be zeros in the inputs)
    "dense_pack": (_loop_dense_pack, [(3, 4, 6, 2, "float32"), (2, 3, 4, 4, "float64"), (2, 3, 3, 1, "int32"),
                                      (1, 5, 8, 8, "float32")]),
    "batch_matmul": (_loop_batch_matmul, [(2, 3, 4, 5, "float32"), (3, 2, 3, 2, "int32"),
                                          (1, 2, 2, 2, "float64")]),
    # (N, C, H, W, F, KH, KW, stride, padding, dilation, dtype): strides, paddings and
    # dilations as one int, a pair, and (for padding) four sides
    "conv2d_nchw": (_loop_conv2d_nchw, _CONV2D_NCHW),
    # (N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, oc_bn, dtype): blocked layouts
    "conv2d_nchwc": (_loop_conv2d_nchwc, [
        (1, 4, 5, 5, 6, 3, 3, 1, 0, 1, 2, 3, "float32"),
        (2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 3, 2, "float32"),
        (1, 2, 7, 8, 2, 2, 3, (2, 1), (0, 1, 2, 1), (2, 1), 1, 2, "float64"),
    ]),
    # (N, C, H, W, F, padding, m, nr, ic_bn, oc_bn, dtype): 3x3 stride 1; partial tiles, uneven padding
    "conv2d_nchwc_winograd": (_loop_conv2d_nchwc_winograd, [
        (1, 4, 5, 5, 4, 1, 2, 4, 2, 2, "float32"),
        (1, 2, 6, 5, 4, (1, 1, 1, 0), 4, 2, 1, 4, "float64"),
        (2, 2, 4, 4, 2, 0, 2, 2, 2, 1, "float64"),
    ]),
    # (N, H, W, C, F, KH, KW, stride, padding, dilation, dtype): the same convolutions
    "conv2d_nhwc": (_loop_conv2d_nhwc, [(n, h, w, c, *rest) for n, c, h, w, *rest in _CONV2D_NCHW]),
    # (N, C, H, W, KH, KW, stride, padding, dilation, dtype)
    "depthwise_conv2d_nchw": (_loop_depthwise_conv2d_nchw, [
        (1, 2, 5, 5, 3, 3, 1, 0, 1, "float32"),
        (2, 3, 7, 6, 3, 2, 2, 1, 1, "float32"),
        (1, 2, 7, 8, 2, 3, (2, 1), (1, 2), (2, 1), "float32"),
        (1, 3, 6, 7, 3, 3, (1, 3), (0, 1, 2, 1), (1, 2), "float64"),
        (1, 2, 4, 4, 3, 3, 3, 2, 2, "int32"),
    ]),
    # (N, C, H, W, KH, KW, stride, padding, dilation, block, dtype): blocked layouts
    "depthwise_conv2d_nchwc": (_loop_depthwise_conv2d_nchwc, [
        (1, 4, 5, 5, 3, 3, 1, 0, 1, 2, "float32"),
        (2, 6, 7, 6, 3, 2, 2, 1, 1, 3, "float32"),
        (1, 4, 7, 8, 2, 3, (2, 1), (0, 1, 2, 1), (2, 1), 4, "float64"),
        (1, 2, 4, 4, 3, 3, 3, 2, 2, 1, "int32"),
    ]),
    # (N, C, H, W, F, KH, KW, stride, padding, dilation, ic_bn, block, dtype, mid_epilogue, epilogue)
    "conv2d_depthwise_nchwc": (_loop_conv2d_depthwise_nchwc, [
        (1, 4, 5, 5, 6, 3, 3, 1, 1, 1, 2, 3, "float32", (), ()),
        (2, 2, 6, 7, 4, 3, 2, 2, (0, 1, 1, 0), 1, 1, 2, "float64", ("relu",), ()),
        (1, 3, 7, 6, 4, 3, 3, 1, 2, 2, 3, 4, "float32", ("relu6",), ()),
    ]),
    # (N, C, H, W, KH, KW, stride, padding, pool_type, dtype)
    "pool2d": (_loop_pool2d, [
        (1, 2, 5, 5, 2, 2, 2, 0, "max", "float32"),
        (1, 2, 5, 6, 3, 3, 1, 1, "max", "float32"),
        (1, 1, 5, 5, 3, 3, (1, 2), (1, 1, 1, 1), "max", "float64"),
        (1, 2, 6, 7, 3, 2, 2, (2, 1), "max", "float32"),
        (2, 1, 7, 5, 3, 2, (2, 1), (1, 0), "avg", "float32"),
        (1, 2, 6, 7, 3, 3, 2, (1, 0, 0, 1), "avg", "float64"),
        (1, 2, 4, 4, 2, 2, 1, 1, "avg", "float32"),
    ]),
    "softmax": (_loop_softmax, [(3, 5, "float32"), (2, 7, "float64"), (1, 1, "float32")]),
    "layer_norm": (_loop_layer_norm, [(3, 5, "float32"), (2, 6, "float64"), (1, 2, "float32")]),
    # every binary op, each operand shape, every unary op; float and integer chains
    "elementwise": (_loop_elementwise, [
        (3, 4, "add,mul,sub,max,min,div", "float32"),
        (2, 5, "relu,gelu,sigmoid,tanh,exp,neg,abs", "float32"),
        (3, 4, "sub,neg,add,abs,mul,relu,max,min", "int32"),
        (2, 3, "div,gelu,add,sigmoid", "float64"),
        (2, 3, "mul", "float32"),
    ]),
}


def _builtin_templates() -> dict[str, list[str]]:
    """The templates this package registers (not those that tests register), by name: their kinds."""
    return {name: kinds for name, kinds in list_templates().items()
            if all(get_template(name).impl(k).module.startswith("search_spaces.") for k in kinds)}


def _references(name: str) -> list:
    """The distinct numpy references registered under ``name`` (CPU and CUDA may share one)."""
    refs = []
    for kind in sorted(get_template(name).impls):
        ref = get_template(name).impl(kind).reference
        if ref not in refs:
            refs.append(ref)
    return refs


def test_every_built_in_template_has_a_reference_and_a_loop_version():
    builtin = _builtin_templates()
    assert builtin, "no built-in template registered"
    for name, kinds in builtin.items():
        for kind in kinds:
            assert get_template(name).impl(kind).reference is not None, f"{name} ({kind}) has no reference"
        assert name in ORACLES, f"template {name!r} has no loop version in {__name__}"
    assert set(ORACLES) <= set(builtin)


# ---------------------------------------------------------------------------- the check


def _tolerance(dtype: str, name: str = "") -> dict:
    if _exact(dtype):
        return {"rtol": 0, "atol": 0}
    if name == "conv2d_nchwc_winograd":
        # Another algorithm than the direct reference's, from a kernel transformed and rounded to
        # dtype on its own: the difference is a few units of the transforms' rounding.
        if np.dtype(dtype).itemsize <= 4:
            return {"rtol": 1e-5, "atol": 1e-6}
        return {"rtol": 1e-12, "atol": 1e-13}
    # Both sides compute in float64 (summing in their own orders) and round to dtype: at most
    # a last-bit difference, two units in the last place of float32 or float64.
    if np.dtype(dtype).itemsize <= 4:
        return {"rtol": 2.5e-7, "atol": 1e-12}
    return {"rtol": 5e-16, "atol": 1e-15}


_CASES = [(name, args) for name, (_, cases) in ORACLES.items() for args in cases]


def _case_id(value) -> str:
    return value if isinstance(value, str) else "-".join(map(str, value))


@pytest.mark.parametrize("name, args", _CASES, ids=_case_id)
def test_reference_matches_the_loop_version(name, args):
    loop, _ = ORACLES[name]
    dtype = args[3] if name == "dense" else [a for a in args if isinstance(a, str)][-1]  # the last string
    for ref in _references(name):
        inputs, expected = ref(*args, rng=np.random.default_rng(7))
        values = np.concatenate([x.ravel() for x in inputs])
        assert not (values == 0).any()  # random data, never zeros nor one repeated value
        assert len(np.unique(values)) > 1 or values.size == 1
        want = loop(args, inputs)
        assert len(expected) == len(want)
        for got, w in zip(expected, want):
            _shape_of(got, w.shape, dtype)
            if not _exact(dtype):
                assert np.isfinite(got).all() and np.isfinite(w).all()
            np.testing.assert_allclose(got, w, **_tolerance(dtype, name))
