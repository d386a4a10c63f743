"""Winograd's minimal filtering for 3x3 convolutions: the transforms of ``F(m x m, 3 x 3)``.

A stride-1 3x3 convolution computes each ``m x m`` output tile from an ``a x a`` input tile
(``a = m + 2``) as ``Y = A^T [(G g G^T) * (B^T d B)] A``, elementwise in the middle. Summed
over the input channels, the middle is ``a * a`` matrix products (tiles by channels, channels
by filters): ``a^2 / (9 m^2)`` of the direct convolution's multiply-adds (``m = 4``: a quarter;
``m = 2``: 4/9). The kernel's transform ``G g G^T`` is made once, when a model is built
(:func:`conv2d_winograd_weight_transform`, TVM's name), and is ``a^2 / 9`` times the kernel's
size. The CPU template is ``search_spaces``' ``conv2d_nchwc_winograd``.

A 3x3 convolution dilated by ``d`` is ``d * d`` undilated ones: the outputs whose row and column
leave the same remainders by ``d`` (a phase) read only the inputs that leave those remainders,
as one undilated 3x3 convolution on every ``d``-th pixel. Each phase runs by tiles of its own
(a tile's ``m x m`` outputs and ``a x a`` inputs ``d`` pixels apart), the phases of an image
after one another in the tiles' order, with the same transformed kernel.
"""

from __future__ import annotations

import numpy as np

from ... import te
from ..utils import get_const_tuple

__all__ = ["WINOGRAD_TILE_SIZES", "winograd_matrices", "winograd_tiles", "conv2d_winograd_weight_transform",
           "conv2d_winograd_nchwc_numpy", "winograd_input_transform", "winograd_output_transform",
           "conv2d_winograd_nchwc"]

#: The output tile sizes ``m`` that there are transforms for.
WINOGRAD_TILE_SIZES = (2, 4)

# Cook-Toom transforms on the points 0, +-1, (+-2,) infinity (Lavin and Gray, 2016): (A^T, G, B^T).
# In float32 the errors of F(4, 3) stay within about 2e-5 of the output's scale.
_MATRICES = {
    2: ([[1, 1, 1, 0],
         [0, 1, -1, -1]],
        [[1, 0, 0],
         [1 / 2, 1 / 2, 1 / 2],
         [1 / 2, -1 / 2, 1 / 2],
         [0, 0, 1]],
        [[1, 0, -1, 0],
         [0, 1, 1, 0],
         [0, -1, 1, 0],
         [0, 1, 0, -1]]),
    4: ([[1, 1, 1, 1, 1, 0],
         [0, 1, -1, 2, -2, 0],
         [0, 1, 1, 4, 4, 0],
         [0, 1, -1, 8, -8, 1]],
        [[1 / 4, 0, 0],
         [-1 / 6, -1 / 6, -1 / 6],
         [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6],
         [0, 0, 1]],
        [[4, 0, -5, 0, 1, 0],
         [0, -4, -4, 1, 1, 0],
         [0, 4, -4, -1, 1, 0],
         [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0],
         [0, 4, 0, -5, 0, 1]]),
}


def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T, G, B^T)`` of ``F(m x m, 3 x 3)`` in float64: ``m x a``, ``a x 3`` and ``a x a``
    (ValueError for an ``m`` not in :data:`WINOGRAD_TILE_SIZES`)."""
    if m not in _MATRICES:
        raise ValueError(f"Winograd tile size m must be one of {WINOGRAD_TILE_SIZES}, got {m!r}")
    return tuple(np.array(x, dtype="float64") for x in _MATRICES[m])


def winograd_tiles(Ho: int, Wo: int, m: int, dilation: int = 1) -> tuple[int, int]:
    """The tile rows and columns that cover an ``Ho x Wo`` output, or with ``dilation`` d each of
    its ``d * d`` phases (every ``d``-th row and column from an offset; the module's docstring):
    the last ones may be partial (their input is read as zeros past the padding, their extra
    outputs are not written)."""
    ph, pw = -(-Ho // dilation), -(-Wo // dilation)
    return -(-ph // m), -(-pw // m)


def conv2d_winograd_weight_transform(w: np.ndarray, m: int, nr: int) -> np.ndarray:
    """The kernel ``w`` (F, C, 3, 3) transformed (``G w G^T``) and packed in micro-panels of
    ``nr`` filters for the GEMM: ``U[e, f // nr, c, f % nr]``, ``e`` the flattened ``a x a``
    position; shape ``(a * a, F / nr, C, nr)``, ``w``'s dtype. ValueError for another kernel
    size or an ``nr`` that does not divide F."""
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"Winograd transforms (F, C, 3, 3) kernels, got shape {w.shape}")
    F, C = w.shape[:2]
    if not isinstance(nr, (int, np.integer)) or nr < 1 or F % nr:
        raise ValueError(f"panel width nr must divide the {F} filters, got {nr!r}")
    _, G, _ = winograd_matrices(m)
    a = G.shape[0]
    u = np.einsum("ai,fcij,bj->abcf", G, w.astype("float64"), G).reshape(a * a, C, F // nr, nr)
    return np.ascontiguousarray(u.transpose(0, 2, 1, 3).astype(w.dtype))


def conv2d_winograd_nchwc_numpy(x: np.ndarray, u: np.ndarray, padding, m: int, oc_bn: int,
                                dilation: int = 1) -> np.ndarray:
    """The Winograd convolution in numpy (float64 inside): blocked data ``x`` (N, C/ib, H, W, ib)
    and a transformed kernel ``u`` (:func:`conv2d_winograd_weight_transform`) to the blocked output
    ``(N, F/oc_bn, Ho, Wo, oc_bn)``; ``padding`` is (top, left, bottom, right), ``dilation`` the
    kernel's (each phase by tiles of its own)."""
    AT, _, BT = winograd_matrices(m)
    a, d = m + 2, dilation
    N, Cc, H, W, ib = x.shape
    e, Fp, C, nr = u.shape
    F = Fp * nr
    top, left, bottom, right = padding
    Ho, Wo = H + top + bottom - 2 * d, W + left + right - 2 * d
    th, tw = winograd_tiles(Ho, Wo, m, d)
    plain = x.transpose(0, 1, 4, 2, 3).reshape(N, C, H, W).astype("float64")
    # Every phase's tiles fit: phase (py, px) reads rows py + d * r of the padded input
    padded = np.zeros((N, C, d * (th * m + 3), d * (tw * m + 3)))
    rows, cols = min(H, padded.shape[2] - top), min(W, padded.shape[3] - left)
    padded[:, :, top:top + rows, left:left + cols] = plain[:, :, :rows, :cols]
    weight = u.reshape(a, a, Fp, C, nr).transpose(0, 1, 3, 2, 4).reshape(a, a, C, F)
    y = np.zeros((N, F, d * th * m, d * tw * m))
    for py in range(d):
        for px in range(d):
            phase = padded[:, :, py::d, px::d][:, :, :th * m + 2, :tw * m + 2]
            windows = np.lib.stride_tricks.sliding_window_view(phase, (a, a), axis=(2, 3))[:, :, ::m, ::m]
            v = np.einsum("ai,ncyxij,bj->abnyxc", BT, windows, BT)  # (a, a, N, th, tw, C)
            mt = np.einsum("abnyxc,abcf->abnyxf", v, weight)
            out = np.einsum("ia,abnyxf,jb->nfyixj", AT, mt, AT)
            y[:, :, py::d, px::d] = out.reshape(N, F, th * m, tw * m)
    y = y[:, :, :Ho, :Wo]
    blocked = y.reshape(N, F // oc_bn, oc_bn, Ho, Wo).transpose(0, 1, 3, 4, 2)
    return np.ascontiguousarray(blocked).astype(x.dtype)


def _tile_sum(terms):
    """The sum of ``(coefficient, expression)`` terms; coefficients of 1 and -1 add and subtract."""
    total = None
    for coef, expr in terms:
        term = expr if coef in (1, -1) else expr * float(coef)
        if total is None:
            total = -term if coef == -1 else term
        else:
            total = total - term if coef == -1 else total + term
    return total


def _by_position(index, exprs, start: int = 0):
    """``exprs[index - start]``, as a balanced tree of selects that the simplifier resolves once
    unrolling makes ``index`` a constant (a chain would take it through all ``a * a`` of them for
    each unrolled position)."""
    if len(exprs) == 1:
        return exprs[0]
    half = len(exprs) // 2
    return te.if_then_else(index < start + half, _by_position(index, exprs[:half], start),
                           _by_position(index, exprs[half:], start + half))


def winograd_input_transform(data: te.Tensor, m: int, padding, out_size: tuple[int, int],
                             name: str = "winograd_V", dilation: int = 1) -> te.Tensor:
    """``V[e, p, c] = (B^T d B)[e]`` of blocked ``data`` (N, C/ib, H, W, ib): ``p`` runs over the
    ``N x th x tw`` tiles of the padded input (:func:`winograd_tiles` of ``out_size``), or with
    ``dilation`` d over ``N x d x d x th x tw`` (each image's phases in turn, rows first), ``e``
    over the flattened ``a x a`` positions. ``padding``: (top, left, ...).

    Three stages, each read by the next: the tiles of the padded input (``{name}_tile``, ``d``,
    ``(P, a, a, C)``: the only stage that tests the borders), each tile's rows transformed
    (``{name}_rows``, ``d B``: ``[p, i, e2, c]``) and then its columns (``V``: ``B^T (d B)``).
    Each position of the two transforms is the sum of its nonzero terms, picked by its index
    (unroll it to make the coefficients constants): a transform of ``a`` terms per position,
    twice, where ``B^T d B`` written out at once sums up to ``a * a`` terms per position, each
    testing the borders, for the simplifier and the code generator to walk."""
    _, _, BT = winograd_matrices(m)
    a = m + 2
    N, Cc, H, W, ib = get_const_tuple(data.shape)
    th, tw = winograd_tiles(*out_size, m, dilation)
    phases = dilation * dilation
    top, left = padding[0], padding[1]
    dtype = data.dtype

    def read(p, i, j, c):  # element (i, j) of tile p of the padded input, channel c
        n, t = p // (phases * th * tw), p % (th * tw)
        y, x = (t // tw) * m + i, (t % tw) * m + j
        if dilation != 1:
            phase = p // (th * tw) % phases
            y, x = phase // dilation + dilation * y, phase % dilation + dilation * x
        y, x = y - top, x - left
        inside = te.all(y >= 0, y < H, x >= 0, x < W)
        return te.if_then_else(inside, data[n, c // ib, y, x, c % ib], te.const(0, dtype))

    tiles = (N * phases * th * tw, a, a, Cc * ib)
    d = te.compute(tiles, read, name=f"{name}_tile")
    rows = te.compute(tiles, lambda p, i, e2, c: _by_position(
        e2, [_tile_sum((BT[k, j], d[p, i, j, c]) for j in range(a) if BT[k, j]) for k in range(a)]),
        name=f"{name}_rows")
    return te.compute((a * a, tiles[0], Cc * ib), lambda e, p, c: _by_position(
        e, [_tile_sum((BT[e1, i], rows[p, i, e2, c]) for i in range(a) if BT[e1, i])
            for e1 in range(a) for e2 in range(a)]), name=name)


def winograd_output_transform(M: te.Tensor, m: int, out_shape: tuple[int, ...], epilogue=None,
                              name: str = "conv2d_winograd_nchwc", dilation: int = 1) -> te.Tensor:
    """The blocked output ``Y`` (``out_shape``: N, F/ob, Ho, Wo, ob) of the transformed products
    ``M[e, p, f]``: ``A^T M_p A`` per tile, each of the ``m x m`` outputs the sum of its nonzero
    terms, picked by its place in the tile (split rows and columns by ``m`` and unroll them to
    make them constants; with ``dilation`` d, by ``d`` first, each phase's rows and columns).
    ``epilogue(value, f, index)`` maps each output (bias, activation...)."""
    AT, _, _ = winograd_matrices(m)
    a, d = m + 2, dilation
    N, _, Ho, Wo, ob = out_shape
    th, tw = winograd_tiles(Ho, Wo, m, d)

    def body(n, fc, y, x, fb):
        f = fc * ob + fb
        # the tile's image (or image and phase) and the output's row and column in it
        ty, tx, tn = (y, x, n) if d == 1 else (y // d, x // d, n * d * d + y % d * d + x % d)
        p = (tn * th + ty // m) * tw + tx // m
        # Picked by row, then by column within the row: unrolling the columns (the inner loop)
        # resolves the inner selects in each copy, so the simplifier does not walk every
        # output's terms once per column.
        value = _by_position(ty % m, [
            _by_position(tx % m, [_tile_sum((AT[i, e1] * AT[j, e2], M[e1 * a + e2, p, f])
                                           for e1 in range(a) for e2 in range(a) if AT[i, e1] * AT[j, e2])
                                 for j in range(m)])
            for i in range(m)])
        return value if epilogue is None else epilogue(value, f, (n, fc, y, x, fb))

    return te.compute(tuple(out_shape), body, name=name)


def conv2d_winograd_nchwc(data: te.Tensor, U: te.Tensor, padding, m: int, oc_bn: int,
                          dilation: int = 1) -> te.Tensor:
    """Stride-1 3x3 convolution of blocked ``data`` (N, C/ib, H, W, ib) by ``F(m x m, 3 x 3)``, the
    kernel given transformed (``U``, :func:`conv2d_winograd_weight_transform`) and dilated by
    ``dilation``: the blocked output ``(N, F/oc_bn, Ho, Wo, oc_bn)``. ``padding`` is (top, left,
    bottom, right). The three stages of the module's docstring; the products are a plain
    reduction over the channels."""
    N, _, H, W, _ = get_const_tuple(data.shape)
    e, Fp, C, nr = get_const_tuple(U.shape)
    top, left, bottom, right = padding
    Ho, Wo = H + top + bottom - 2 * dilation, W + left + right - 2 * dilation
    V = winograd_input_transform(data, m, padding, (Ho, Wo), dilation=dilation)
    c = te.reduce_axis((0, C), name="c")
    M = te.compute((e, int(V.shape[1].value), Fp * nr),
                   lambda b, p, f: te.sum(V[b, p, c] * U[b, f // nr, c, f % nr], axis=c), name="winograd_M")
    return winograd_output_transform(M, m, (N, Fp * nr // oc_bn, Ho, Wo, oc_bn), dilation=dilation)
