"""Winograd convolution of channel-blocked data for CPUs: ``conv2d_nchwc_winograd``.

A 3x3 convolution with stride 1 computes each ``m x m`` tile of its output from an
``a x a`` tile of its input (``a = m + 2``) with Winograd's minimal filtering algorithm
``F(m x m, 3 x 3)``: ``Y = A^T [(G g G^T) * (B^T d B)] A``, elementwise in the middle. Summed
over the input channels, the middle is ``a * a`` independent matrix products, one per
position of the transformed tile, each ``tiles x C`` by ``C x F``: a batched GEMM doing
``a^2 / (m^2 * 9)`` of the direct convolution's multiply-adds (``F(4x4, 3x3)``: 36 / 144,
a quarter; ``F(2x2, 3x3)``: 16 / 36). As in TVM's ``conv2d_nchw_winograd`` templates, three
stages make the operator:

* **input transform** ``V[e, p, c] = (B^T d_p B)[e]``, for each tile ``p`` of the padded input
  and channel ``c``, ``e`` the flattened tile position: per tile and vector of channels, the
  tile is loaded (the only step that tests the borders), its rows transformed (``d B``) and
  then its columns, each position a sum of the few nonzero terms of its row of ``B^T``
  (written out, so no zero is multiplied), in local arrays, vectorised along the channels
  of a block. In two steps of ``a`` terms a position takes less than half the time to lower and
  compile that ``B^T d B`` written out at once did (up to ``a * a`` terms a position, each
  testing the borders), and runs no slower;
* **batched GEMM** ``M[e] = V[e] @ U[e]`` (the GEMM of ``_gemm``, with its knobs), ``U`` the
  transformed kernel ``G g G^T`` packed in micro-panels once, when the model is built
  (``topi.nn.winograd.conv2d_winograd_weight_transform``): ``(a * a, F / nr, C, nr)``;
* **output transform** ``Y = A^T M_p A`` per tile, written straight into the blocked output
  ``(N, F / oc_bn, Ho, Wo, oc_bn)``, through the ``epilogue`` (bias, residual, activation).

Where ``m`` does not divide the output's height or width, the last tiles are partial: their
input reads zeros past the padding and their extra outputs are not written. A kernel dilated by
``d`` runs as ``d * d`` undilated convolutions, one per phase of the image (every ``d``-th row and
column from each offset), each phase by tiles of its own, all in one batched GEMM: a dilation-2
layer of 512 channels at 14x14 is four at 7x7 that share the transformed kernel.
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.simd import vector_lanes
from compiler.topi.nn.winograd import (
    conv2d_winograd_weight_transform,
    winograd_input_transform,
    winograd_matrices,
    winograd_output_transform,
    winograd_tiles,
)
from search_spaces.flops import expr_flops
from search_spaces.template import get_config, template
from search_spaces.templates._common import defaulted_argument, random_data
from search_spaces.templates._epilogue import Epilogue, reference_epilogue
from search_spaces.templates._gemm import define_gemm_knobs, gemm_compute, schedule_gemm

__all__ = ["conv2d_nchwc_winograd", "conv2d_nchwc_winograd_reference"]


def _dilation(dilation) -> int:
    """``conv2d_nchwc_winograd``'s ``dilation`` argument as a number; ValueError for anything but
    ``()`` (one) or a positive int."""
    return int(defaulted_argument(dilation, 1, lambda d: isinstance(d, (int, np.integer)) and d >= 1,
                                  "conv2d_nchwc_winograd: dilation", "a positive int"))


def _check_args(N, C, H, W, F, padding, m, ic_bn, oc_bn, dilation=1) -> tuple[int, int, tuple]:
    """The output size and the padding (top, left, bottom, right); ValueError on bad arguments
    (``dilation`` checked by :func:`_dilation`)."""
    for name, v in (("N", N), ("C", C), ("H", H), ("W", W), ("F", F)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    winograd_matrices(m)
    for name, block, total in (("ic_bn", ic_bn, C), ("oc_bn", oc_bn, F)):
        if not isinstance(block, int) or block < 1 or total % block:
            raise ValueError(f"{name} must be a positive divisor of {total}, got {block!r}")
    pads = topi.nn.get_pad_tuple(padding, (3, 3))
    Ho, Wo = H + pads[0] + pads[2] - 2 * dilation, W + pads[1] + pads[3] - 2 * dilation
    if Ho < 1 or Wo < 1:
        raise ValueError(f"a 3x3 window dilated by {dilation} does not fit the {H}x{W} input padded by "
                         f"{padding!r}")
    return Ho, Wo, pads


def conv2d_nchwc_winograd_reference(N, C, H, W, F, padding, m, nr, ic_bn, oc_bn, dtype="float32",
                                    epilogue=(), dilation=(), rng=None):
    """Random blocked data ``(N, C/ic_bn, H, W, ic_bn)``, the kernel transformed by
    ``conv2d_winograd_weight_transform``, and the direct convolution (stride 1, ``dilation``)
    through ``epilogue``, blocked ``(N, F/oc_bn, Ho, Wo, oc_bn)``."""
    dilation = _dilation(dilation)
    Ho, Wo, pads = _check_args(N, C, H, W, F, padding, m, ic_bn, oc_bn, dilation)
    x, w = random_data(rng, (N, C, H, W), dtype), random_data(rng, (F, C, 3, 3), dtype)
    out = topi.testing.conv2d_nchw_python(x, w, (1, 1), pads, dilation=dilation)
    extra, out = reference_epilogue(epilogue, out, 1, dtype, rng)

    def blocked(v, b):
        n, c, h, w_ = v.shape
        return np.ascontiguousarray(v.reshape(n, c // b, b, h, w_).transpose(0, 1, 3, 4, 2))

    extra = [e if e.ndim == 1 else blocked(e, oc_bn) for e in extra]
    return [blocked(x, ic_bn), conv2d_winograd_weight_transform(w, m, nr), *extra], [blocked(out, oc_bn)]


@template("conv2d_nchwc_winograd", target="cpu", reference=conv2d_nchwc_winograd_reference)
def conv2d_nchwc_winograd(N: int, C: int, H: int, W: int, F: int, padding=1, m: int = 4, nr: int = 32,
                          ic_bn: int = 16, oc_bn: int = 16, dtype: str = "float32", epilogue: tuple = (),
                          dilation=()):
    """3x3, stride-1 convolution of blocked data by ``F(m x m, 3 x 3)``, its kernel dilated by
    ``dilation`` (``()`` for one: left out of the workload, as an empty option is, the key the
    template's logs have always had; see the module's docstring). Tensors: X ``(N, C/ic_bn, H,
    W, ic_bn)``, U ``(a*a, F/nr, C, nr)`` (``topi.nn.conv2d_winograd_weight_transform``), the
    epilogue's inputs, then Y ``(N, F/oc_bn, Ho, Wo, oc_bn)``."""
    dilation = _dilation(dilation)
    Ho, Wo, pads = _check_args(N, C, H, W, F, padding, m, ic_bn, oc_bn, dilation)
    a = m + 2
    th, tw = winograd_tiles(Ho, Wo, m, dilation)
    tiles = N * dilation * dilation * th * tw
    cfg = get_config()
    # Threads on tiles by default where the tiles split fairly and U fits a core's L2: each then
    # multiplies the tiles its input transform wrote and transforms back the ones it multiplied.
    # On the batch (tile positions) each reads half of V and of M from the other core: as fast
    # with the two vCPUs of a 2-vCPU Zen 4 guest in one core complex (64 channels at 56x56:
    # 0.34-0.36 ms either way), 1.5x slower with them in two (0.65-0.73 against 0.45 ms). On
    # tiles each thread reads all of U: with 512 channels (16.8 MB) twice as slow.
    define_gemm_knobs(cfg, tiles, F, C, dtype, batch=a * a, nr=nr, rows_first=True)
    X = te.placeholder((N, C // ic_bn, H, W, ic_bn), name="X", dtype=dtype)
    U = te.placeholder((a * a, F // nr, C, nr), name="U", dtype=dtype)
    ep = Epilogue.declare(epilogue, dtype, (N, F // oc_bn, Ho, Wo, oc_bn), F)
    # The direct convolution's work and the epilogue's, as TVM's Winograd templates count it:
    # GFLOPS then compare with the direct template's, and say how much faster than a direct
    # convolution the kernel runs.
    per_output = expr_flops(ep.apply(X[0, 0, 0, 0, 0], 0, (0,) * 5)) if ep else 0
    cfg.add_flop(N * F * Ho * Wo * (2 * C * 9 + per_output))
    V = winograd_input_transform(X, m, pads, (Ho, Wo), dilation=dilation)
    t = gemm_compute(cfg, lambda e, p, c: V[e, p, c], None, (a * a,), tiles, F, C, dtype,
                     name="winograd_M", b_rows_are_k=True, b_packed=U)
    Y = winograd_output_transform(t.out, m, (N, F // oc_bn, Ho, Wo, oc_bn),
                                  (lambda value, f, idx: ep.apply(value, f, idx)) if ep else None,
                                  name="conv2d_nchwc_winograd", dilation=dilation)
    s = te.create_schedule(Y.op)
    schedule_gemm(cfg, s, t)
    _schedule_input_transform(s, V, ic_bn)
    _schedule_output_transform(s, Y, m, dilation)
    return s, [X, U, *ep.inputs, Y]


def _schedule_input_transform(s, V, ic_bn: int) -> None:
    """Threads on tiles; per tile and channel vector, the tile loaded, its rows transformed and
    then its columns, each stage's ``a * a`` positions unrolled (their coefficients become
    constants) into local arrays that the code generator keeps in registers where they fit."""
    lanes = vector_lanes(V.dtype)
    e, p, c = s[V].op.axis
    co, ci = s[V].split(c, factor=min(lanes, ic_bn))
    s[V].reorder(p, co, e, ci)
    s[V].parallel(p)
    s[V].unroll(e)
    s[V].vectorize(ci)
    (rows,) = V.op.input_tensors
    (tile,) = rows.op.input_tensors
    for stage in (tile, rows):
        s[stage].set_scope("local")
        s[stage].compute_at(s[V], co)
        _, i, j, cc = s[stage].op.axis
        s[stage].unroll(i)
        s[stage].unroll(j)
        s[stage].vectorize(cc)


def _schedule_output_transform(s, Y, m: int, dilation: int = 1) -> None:
    """Threads on rows of tiles, each row's channel blocks in turn, so that each thread writes a
    range of the output's height, as a convolution by height does and the next layer's threads
    by height read it; per tile and vector of output channels, the ``m x m`` outputs unrolled
    (their coefficients become constants, and the tile's loads of M are shared). Dilated, a row
    of tiles is ``m * d`` rows of the output, each phase's tiles in turn."""
    lanes = vector_lanes(Y.dtype)
    n, fc, y, x, fb = s[Y].op.axis
    inner = []
    if dilation != 1:  # a phase's rows and columns, then its tiles
        y, py = s[Y].split(y, factor=dilation)
        x, px = s[Y].split(x, factor=dilation)
        inner = [py, px]
    yo, yi = s[Y].split(y, factor=m)
    xo, xi = s[Y].split(x, factor=m)
    fbo, fbi = s[Y].split(fb, factor=lanes)
    s[Y].reorder(n, yo, fc, xo, *inner, fbo, yi, xi, fbi)
    s[Y].parallel(s[Y].fuse(n, yo, fc))
    s[Y].unroll(yi)
    s[Y].unroll(xi)
    s[Y].vectorize(fbi)
