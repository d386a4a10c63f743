"""Shared test helpers: arrays that expose unwritten outputs, and random inputs of any dtype."""

from __future__ import annotations

import numpy as np

__all__ = ["SENTINEL", "SUPPORTED_DTYPES", "poisoned", "random_array", "build_and_check"]

SUPPORTED_DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool")

SENTINEL = -123456789  # clipped to the range of each integer dtype


def poisoned(shape: tuple[int, ...] | int, dtype: str | np.dtype) -> np.ndarray:
    """An array whose every element is a value no kernel should produce.

    Floats are NaN, integers the sentinel clipped to the dtype's range, bools True.
    Compare a kernel's output written into it against a reference to detect elements
    that the kernel never wrote.
    """
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.full(shape, int(np.clip(SENTINEL, info.min, info.max)), dtype=dt)
    if dt.kind == "b":
        return np.ones(shape, dtype=dt)
    raise TypeError(f"poisoned: unsupported dtype {dt}")


def random_array(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: str | np.dtype) -> np.ndarray:
    """Random non-zero data of ``dtype`` (bools are random but may be False).

    Floats lie in [0.5, 1.5) with a random sign; integers in small ranges that do not
    overflow a few sums or products: [1, 8) with a random sign for signed types, [1, 16)
    for unsigned ones.
    """
    dt = np.dtype(dtype)
    if dt.kind == "f":
        sign = rng.choice(np.array([-1.0, 1.0]), size=shape)
        return (sign * rng.uniform(0.5, 1.5, size=shape)).astype(dt)
    if dt.kind == "i":
        sign = rng.choice(np.array([-1, 1]), size=shape)
        return (sign * rng.integers(1, 8, size=shape)).astype(dt)
    if dt.kind == "u":
        return rng.integers(1, 16, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    raise TypeError(f"random_array: unsupported dtype {dt}")


def build_and_check(schedule, args, inputs, expected, *, rtol=1e-5, atol=1e-5, name="kernel",
                    target="llvm"):
    """Build ``schedule`` for ``args``, run it on ``inputs`` with poisoned outputs, compare.

    ``args`` lists the input tensors then the output tensor(s); ``expected`` holds the
    reference result for each output, in order. Returns the built module.
    """
    import compiler

    f = compiler.build(schedule, list(args), target=target, name=name)
    outputs = [poisoned(e.shape, e.dtype) for e in expected]
    f(*inputs, *outputs)
    for got, want in zip(outputs, expected):
        if np.dtype(want.dtype).kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
    return f
