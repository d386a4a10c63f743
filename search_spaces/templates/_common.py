"""Helpers shared by the CPU templates: accumulators, knobs, test data.

Convolution arguments (strides, paddings, output sizes) are read by ``compiler.topi.nn.utils``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["accumulator", "random_data", "float_dtype_check", "defaulted_argument"]


def accumulator(s, C, out):
    """The stage that accumulates reduction ``C``: a local cache of ``C`` when ``C`` is the
    output, else ``C`` itself (to be computed inside ``out``'s loops)."""
    if out is C:
        return s.cache_write(C, "local")
    return C


def random_data(rng: np.random.Generator | None, shape, dtype: str) -> np.ndarray:
    """Random non-zero data: floats in +-[0.5, 1.5), integers in +-[1, 4)."""
    rng = np.random.default_rng(0) if rng is None else rng
    dt = np.dtype(dtype)
    sign = rng.choice(np.array([-1, 1]), size=shape)
    if dt.kind == "f":
        return (sign * rng.uniform(0.5, 1.5, size=shape)).astype(dt)
    if dt.kind == "u":
        return rng.integers(1, 4, size=shape).astype(dt)
    if dt.kind == "i":
        return (sign * rng.integers(1, 4, size=shape)).astype(dt)
    raise ValueError(f"unsupported dtype {dtype!r}")


def float_dtype_check(dtype: str, what: str) -> None:
    if np.dtype(dtype).kind != "f":
        raise ValueError(f"{what} needs a floating-point dtype, got {dtype!r}")


def defaulted_argument(value, default, valid, where: str, expected: str):
    """A template argument added after the template's logs began: ``()`` stands for ``default``
    (an empty option is left out of the workload, so the logs keep their keys), anything else
    must pass ``valid`` (ValueError, naming ``where`` and the ``expected`` values, otherwise)."""
    if isinstance(value, tuple) and not value:
        return default
    if isinstance(value, bool) or not valid(value):
        raise ValueError(f"{where} must be () or {expected}, got {value!r}")
    return value


def parallel_and_vectorize(s, cfg, stage, outer, inner) -> None:
    """Apply the "parallel" and "vec" knobs: ``outer`` on threads, ``inner`` as vector lanes."""
    if cfg["parallel"].val:
        s[stage].parallel(outer)
    if cfg["vec"].val:
        s[stage].vectorize(inner)


def place_padding(s, cfg, P, X, stage, axis) -> None:
    """Apply the "pad" knob: inline the padding stage ``P`` (when there is one, i.e. ``P is
    not X``) into its reader, or compute it once per iteration of ``stage``'s loop ``axis``."""
    if P is X:
        return
    if cfg["pad"].val == "inline":
        s[P].compute_inline()
    else:
        s[P].compute_at(s[stage], axis)
