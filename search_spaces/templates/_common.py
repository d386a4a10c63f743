"""Helpers shared by the CPU templates: vector width, padding, accumulators, test data."""

from __future__ import annotations

import numpy as np

from compiler import te

__all__ = ["vector_lanes", "padding4", "pad_nchw_like", "accumulator", "random_data", "pair", "conv_out_size",
           "float_dtype_check"]

# CPUs whose vector registers are 64 bytes wide (AVX-512) when the target names them.
_AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake", "tigerlake",
                "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5",
                "x86-64-v4")


def _vector_bytes() -> int:
    from compiler.target import Target, host_cpu_name

    t = Target.current() or Target("llvm")
    if t.kind != "llvm":
        return 16
    if "-avx512f" in t.mattr:
        return 32
    if "+avx512f" in t.mattr:
        return 64
    mcpu = t.mcpu or ""
    if t.options.get("mcpu") in (None, host_cpu_name()) and not t.mtriple:
        import llvmlite.binding as llvm

        return 64 if llvm.get_host_cpu_features().get("avx512f") else 32
    if mcpu.startswith(_AVX512_CPUS):
        return 64
    return 16 if mcpu.startswith(("generic", "arm", "apple")) else 32


def vector_lanes(dtype: str) -> int:
    """Elements of ``dtype`` in one vector register of the current target (16 f32 on AVX-512)."""
    return max(1, _vector_bytes() // np.dtype(dtype).itemsize)


def pair(value, name: str) -> tuple[int, int]:
    """``value`` (an int or a pair of ints) as a pair."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")


def conv_out_size(size: int, k: int, stride: int, pad_lo: int, pad_hi: int, dilation: int = 1) -> int:
    out = (size + pad_lo + pad_hi - (k - 1) * dilation - 1) // stride + 1
    if out < 1:
        raise ValueError(f"the window (size {k}, dilation {dilation}) does not fit the padded input "
                         f"(size {size} + {pad_lo} + {pad_hi})")
    return out


def padding4(padding) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from an int, a pair ``(h, w)`` or four ints."""
    if isinstance(padding, (int, np.integer)) and not isinstance(padding, bool):
        return (int(padding),) * 4
    if isinstance(padding, (tuple, list)):
        if len(padding) == 2:
            return int(padding[0]), int(padding[1]), int(padding[0]), int(padding[1])
        if len(padding) == 4:
            return tuple(int(p) for p in padding)
    raise ValueError(f"padding must be an int, (h, w) or (top, left, bottom, right), got {padding!r}")


def pad_nchw_like(X, h_axis: int, pads: tuple[int, int, int, int], value, name: str = "pad"):
    """``X`` padded on axes ``h_axis`` and ``h_axis + 1`` by ``pads`` with ``value``
    (X itself when there is no padding)."""
    top, left, bottom, right = pads
    if not any(pads):
        return X
    shape = list(X.shape)
    H, W = shape[h_axis].value, shape[h_axis + 1].value
    shape[h_axis] = H + top + bottom
    shape[h_axis + 1] = W + left + right

    def body(*idx):
        h, w = idx[h_axis], idx[h_axis + 1]
        src = list(idx)
        src[h_axis], src[h_axis + 1] = h - top, w - left
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        return te.if_then_else(inside, X[tuple(src)], te.const(value, X.dtype))

    return te.compute(tuple(shape), body, name=name)


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
