"""Numpy reference of ``topi.image.resize2d``."""

from __future__ import annotations

import numpy as np

__all__ = ["resize2d_python"]


def _source(n_in: int, n_out: int, scale: float, mode: str) -> np.ndarray:
    """Every output index of one axis as its float32 source coordinate (the operator's order of
    operations, so that ties round alike)."""
    y = np.arange(n_out, dtype=np.float32)
    half, s = np.float32(0.5), np.float32(scale)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and n_out == 1:
            return np.zeros(1, np.float32)
        return (y + half) / s - half
    if mode == "align_corners":
        return np.zeros(1, np.float32) if n_out == 1 else y * np.float32(n_in - 1) / np.float32(n_out - 1)
    if mode == "asymmetric":
        return y / s
    if mode == "tf_half_pixel_for_nn":
        return y if s == 1 else (y + half) / s
    if mode == "half_pixel_symmetric":
        offset = np.float32(n_in) / 2 * (1 - np.float32(n_out) / (s * np.float32(n_in)))
        return (np.float64(offset) + (y.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(np.float32)
    raise ValueError(f"resize2d_python: unknown coordinate_transformation_mode {mode!r}")


def _nearest(coord: np.ndarray, n_in: int, rounding: str) -> np.ndarray:
    frac = coord - np.floor(coord)
    if rounding == "round_prefer_floor":
        index = np.where(frac == 0.5, np.floor(coord), np.floor(coord + 0.5))
    elif rounding == "round_prefer_ceil":
        index = np.where(frac == 0.5, np.ceil(coord), np.floor(coord + 0.5))
    elif rounding == "floor":
        index = np.floor(coord)
    elif rounding == "ceil":
        index = np.ceil(coord)
    else:  # round: halves away from zero
        index = np.sign(coord) * np.floor(np.abs(coord) + 0.5)
    return np.clip(index, 0, n_in - 1).astype(np.int64)


def _cubic_taps(coord: np.ndarray, n: int, alpha: float, exclude: bool):
    """Per output position: the four source indices (clamped) and their Keys cubic weights."""
    low = np.floor(coord.astype(np.float64))
    t = (coord.astype(np.float64) - low)[:, None]
    d = np.abs(np.array([-1.0, 0.0, 1.0, 2.0])[None, :] - t)  # distances to the four taps
    w = np.where(d <= 1, ((alpha + 2) * d - (alpha + 3)) * d * d + 1,
                 ((alpha * d - 5 * alpha) * d + 8 * alpha) * d - 4 * alpha)
    taps = low.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
    if exclude:
        w = np.where((taps >= 0) & (taps < n), w, 0.0)
        w = w / w.sum(axis=1, keepdims=True)
    return np.clip(taps, 0, n - 1), w


def _antialias_matrix(coord: np.ndarray, n_in: int, scale: float, method: str, alpha: float,
                      exclude: bool) -> np.ndarray:
    """One axis's antialiased resize as a matrix (output index by source pixel): each row the
    stretched filter's weights of the pixels in its reach, scaled to sum to one, those past the
    edge given to the edge pixel or, with ``exclude``, dropped."""
    shrink = 1 / np.float32(scale)
    support = (1.0 if method == "linear" else 2.0) * max(float(shrink), 1.0)
    stretch = 1 / float(shrink) if shrink >= 1 else 1.0
    matrix = np.zeros((len(coord), n_in))
    centres = coord.astype(np.float64) if shrink != 1 else np.arange(len(coord), dtype=np.float64)
    for i, c in enumerate(centres):
        pixels = np.arange(np.floor(c - support + 1), np.floor(c + support + 1)).astype(np.int64)
        d = np.abs((pixels - c) * stretch)
        if method == "linear":
            w = np.clip(1 - d, 0, None)
        else:
            w = np.where(d < 1, ((alpha + 2) * d - (alpha + 3)) * d * d + 1,
                         np.where(d < 2, (((d - 5) * d + 8) * d - 4) * alpha, 0.0))
        if exclude:
            w = np.where((pixels >= 0) & (pixels < n_in), w, 0.0)
        np.add.at(matrix[i], np.clip(pixels, 0, n_in - 1), w / (w.sum() or 1.0))
    return matrix


def resize2d_python(data, size, method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
                    rounding_method: str = "", scale=None, bicubic_alpha: float = -0.5,
                    bicubic_exclude: int = 0, antialias: bool = False):
    """``data`` (NCHW) resized to ``size`` as ``topi.image.resize2d`` does, computed in float64
    (the coordinates in float32) and returned in ``data``'s dtype."""
    x = np.asarray(data)
    in_hw, out_hw = x.shape[2:], tuple(int(s) for s in size)
    scale = tuple(o / i for o, i in zip(out_hw, in_hw)) if scale is None else tuple(scale)
    coords = [_source(i, o, s, coordinate_transformation_mode) for i, o, s in zip(in_hw, out_hw, scale)]
    if antialias:
        my, mx = (_antialias_matrix(c, n, s, method, bicubic_alpha, bool(bicubic_exclude))
                  for c, n, s in zip(coords, in_hw, scale))
        return np.einsum("yi,ncij,xj->ncyx", my, x.astype(np.float64), mx).astype(x.dtype)
    if method == "nearest_neighbor":
        iy, ix = (_nearest(c, n, rounding_method or "round") for c, n in zip(coords, in_hw))
        return np.ascontiguousarray(x[:, :, iy[:, None], ix[None, :]])
    wide = x.astype(np.float64)
    if method == "cubic":
        (ty, wy), (tx, wx) = (_cubic_taps(c, n, bicubic_alpha, bool(bicubic_exclude))
                              for c, n in zip(coords, in_hw))
        # out[.., i, j] = sum over taps a, b of wy[i, a] * wx[j, b] * x[.., ty[i, a], tx[j, b]]
        picked = wide[:, :, ty[:, :, None, None], tx[None, None, :, :]]  # N, C, Ho, 4, Wo, 4
        return np.einsum("ncaybx,ay,bx->ncab", picked, wy, wx).astype(x.dtype)
    if method != "linear":
        raise ValueError(f"resize2d_python: unknown method {method!r}")
    picks = []
    for c, n in zip(coords, in_hw):
        c = np.clip(c.astype(np.float64), 0, n - 1)
        low = np.floor(c).astype(np.int64)
        picks.append((low, np.minimum(low + 1, n - 1), c - low))
    (y0, y1, wy), (x0, x1, wx) = picks
    wy, wx = wy[:, None], wx[None, :]
    top = wide[:, :, y0[:, None], x0[None, :]] * (1 - wx) + wide[:, :, y0[:, None], x1[None, :]] * wx
    bottom = wide[:, :, y1[:, None], x0[None, :]] * (1 - wx) + wide[:, :, y1[:, None], x1[None, :]] * wx
    return (top * (1 - wy) + bottom * wy).astype(x.dtype)
