"""``pool2d(N, C, H, W, KH, KW, stride, padding, pool_type, dtype)`` for CPUs (NCHW).

``pool_type`` is ``"max"`` (padding never wins) or ``"avg"`` (padding counts as
zeros and the sum is divided by ``KH * KW``, PyTorch's ``count_include_pad=True``).
``stride`` and ``padding`` as ``topi.nn.pool2d`` takes them. The output is tiled into
rows x columns tiles vectorized along columns; the window taps may be unrolled; channel
blocks run in parallel.
"""

from __future__ import annotations

from compiler import te, topi
from compiler.simd import vector_lanes
from compiler.topi.utils import get_const_tuple
from search_spaces.template import get_config, template
from search_spaces.templates._common import (
    accumulator,
    float_dtype_check,
    parallel_and_vectorize,
    place_padding,
    random_data,
)

__all__ = ["pool2d", "pool2d_reference"]


def pool2d_reference(N, C, H, W, KH, KW, stride, padding, pool_type, dtype="float32", rng=None):
    """Random input ``(N, C, H, W)`` and its pooled output (``topi.testing.pool2d_python``,
    which reads the output size off the padded input, so it checks the template's sizes too)."""
    x = random_data(rng, (N, C, H, W), dtype)
    out = topi.testing.pool2d_python(x, (KH, KW), stride, 1, padding, pool_type)
    return [x], [out]


@template("pool2d", target="cpu", reference=pool2d_reference)
def pool2d(N: int, C: int, H: int, W: int, KH: int, KW: int, stride=1, padding=0,
           pool_type: str = "max", dtype: str = "float32"):
    """Max or average pooling over ``KH x KW`` windows."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    float_dtype_check(dtype, "pool2d")
    X = te.placeholder((N, C, H, W), name="X", dtype=dtype)
    # topi's stages: [pad_temp ->] pool_max, or [pad_temp ->] pool_sum -> pool_avg
    out = topi.nn.pool2d(X, (KH, KW), stride, 1, padding, pool_type)
    R = out if pool_type == "max" else out.op.input_tensors[0]
    P = R.op.input_tensors[0]  # X itself where there is no padding
    _, _, Ho, Wo = get_const_tuple(out.shape)

    cfg = get_config()
    lanes = vector_lanes(dtype)
    cfg.define_split("tile_y", Ho, num_outputs=2, filter=lambda e: e.size[-1] <= 8, default=[-1, 1])
    cfg.define_split("tile_x", Wo, num_outputs=2, filter=lambda e: e.size[-1] <= 4 * lanes,
                     default=[-1, lanes])
    if P is not X:
        cfg.define_knob("pad", ["inline", "at_block"])
    cfg.define_annotate("unroll_kernel", [0, 1], policy="try_unroll", default=["none", "unroll"])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    s = te.create_schedule(out.op)
    acc = accumulator(s, R, out)
    n, c, y, x = s[out].op.axis
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, c, yo, xo, yi, xi)
    outer = s[out].fuse(n, c)
    parallel_and_vectorize(s, cfg, out, outer, xi)
    s[acc].compute_at(s[out], xo)
    nc, cc, yc, xc = s[acc].op.axis
    ry_, rx_ = s[acc].op.reduce_axis
    s[acc].reorder(nc, cc, ry_, rx_, yc, xc)
    cfg["unroll_kernel"].apply(s, acc, [ry_, rx_])
    if cfg["vec"].val:
        s[acc].vectorize(xc)
    place_padding(s, cfg, P, X, out, outer)
    return s, [X, out]
