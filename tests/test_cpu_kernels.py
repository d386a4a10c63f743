"""The hand-written schedules of ``scripts/bench_cpu.py``, built small and checked against numpy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import compiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import cpu_kernels as K  # noqa: E402


def test_vector_add(rng):
    s, args = K.vector_add(1000, block=64)
    f = compiler.build(s, args)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    c = np.full(1000, np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_row_sum(rng):
    s, args = K.row_sum(24, 80)
    f = compiler.build(s, args)
    a = rng.random((24, 80), dtype=np.float32)
    out = np.full(24, np.nan, np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("shape", [(8, 64, 16), (12, 128, 33)])
def test_matmul(rng, shape):
    M, N, Kdim = shape
    s, args = K.matmul(M, N, Kdim)
    f = compiler.build(s, args)
    a, b = rng.random((M, Kdim), dtype=np.float32), rng.random((Kdim, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match="N % 64"):
        K.matmul(8, 48, 8)


def test_softmax(rng):
    s, args = K.softmax(6, 48)
    f = compiler.build(s, args)
    x = rng.standard_normal((6, 48), dtype=np.float32) * 4
    y = np.full_like(x, np.nan)
    f(x, y)
    np.testing.assert_allclose(y, K.reference_softmax(x), rtol=1e-5, atol=1e-8)


def test_softmax_exp_is_vector_code():
    f = compiler.build(*K.softmax(4, 64))
    ir_text = f.get_source("ll")
    assert "@expf" not in ir_text and "@llvm.exp." not in ir_text  # no per-lane libm calls
    assert "llvm.fma.v16f32" in ir_text  # exp's polynomial, 16 lanes at a time


def test_fma_peak():
    f = compiler.build(K.fma_peak(100, 2), target="llvm -fast-math")
    out = np.full((2, K.FMA_LANES), np.nan, np.float32)
    f(out, 0.5, 1.0)
    # Thread t starts every chain at t; acc -> acc / 2 + 1 converges to 2.
    np.testing.assert_allclose(out, K.FMA_CHAINS * 2.0, rtol=1e-6)
    assert "fma" in f.get_source("asm")


def test_empty_parallel_records_thread_ids(monkeypatch):
    f = compiler.build(K.empty_parallel())
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    ids = np.full(2, -1, np.int32)
    f(ids)
    assert ids.tolist() == [0, 1]
    serial = compiler.build(K.empty_parallel(parallel=False))
    serial(ids)
    assert ids.tolist() == [0, 0]
