"""The hand-written schedules of ``scripts/benchmarks/bench_cpu.py``, built small and checked against
numpy."""

from __future__ import annotations

import re

import cpu_kernels as K  # scripts/benchmarks, on the path through pyproject.toml's pytest pythonpath
import numpy as np
import pytest
from helpers import assert_written, for_each_cpu, poisoned

import compiler
from compiler.simd import vector_lanes


def test_vector_add(rng):
    s, args = K.vector_add(1000, block=64)
    f = compiler.build(s, args)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    c = poisoned(1000, np.float32)
    f(a, b, c)
    assert_written(c, a + b)


def test_row_sum(rng):
    s, args = K.row_sum(24, 80)
    f = compiler.build(s, args)
    a = rng.random((24, 80), dtype=np.float32)
    out = poisoned(24, np.float32)
    f(a, out)
    assert_written(out, a.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("shape", [(8, 64, 16), (12, 128, 33)])
def test_matmul(rng, shape):
    M, N, Kdim = shape
    s, args = K.matmul(M, N, Kdim)
    f = compiler.build(s, args)
    a, b = rng.random((M, Kdim), dtype=np.float32), rng.random((Kdim, N), dtype=np.float32)
    c = poisoned((M, N), np.float32)
    f(a, b, c)
    assert_written(c, a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match="N % 64"):
        K.matmul(8, 48, 8)


def test_softmax(rng):
    s, args = K.softmax(6, 48)
    f = compiler.build(s, args)
    x = rng.standard_normal((6, 48), dtype=np.float32) * 4
    y = poisoned(x.shape, x.dtype)
    f(x, y)
    assert_written(y, K.reference_softmax(x), rtol=1e-5, atol=1e-8)


def _vector_register(cpu) -> str:
    """The registers that hold the kernels' 16-lane float vectors on ``cpu``."""
    return "zmm" if "avx512f" in cpu.features else "ymm"


@for_each_cpu
def test_softmax_exp_is_vector_code(cpu, rng):
    f = compiler.build(*K.softmax(4, 64), target=cpu.target)
    ir_text = f.get_source("ll")
    assert "@expf" not in ir_text and "@llvm.exp." not in ir_text  # no per-lane libm calls
    assert "llvm.fma.v16f32" in ir_text  # exp's polynomial, 16 lanes at a time
    assert re.search(rf"vfmadd\w+\s+%\w+, %{_vector_register(cpu)}", f.get_source("asm"))
    if cpu.runs_here():
        x = rng.standard_normal((4, 64), dtype=np.float32) * 4
        y = poisoned(x.shape, x.dtype)
        f(x, y)
        assert_written(y, K.reference_softmax(x), rtol=1e-5, atol=1e-8)


@for_each_cpu
def test_fma_peak(cpu):
    lanes = vector_lanes("float32", cpu.target)
    f = compiler.build(K.fma_peak(100, 2, lanes), target=f"{cpu.target} -fast-math")
    # every chain's update is one fused multiply-add on whole vectors
    fmas = re.findall(r"vfmadd\w+\s+%\w+, %(\w+)", f.get_source("asm"))
    assert fmas and {r[:3] for r in fmas} == {_vector_register(cpu)}
    # the accumulators and both operands fit the register file: the FMA loop never spills
    asm = f.get_source("asm")
    fma = asm.index("vfmadd")
    loop = asm[asm.rindex("\n.LBB", 0, fma):asm.index("\n\tj", fma)]
    assert "(%rsp)" not in loop
    if cpu.runs_here():
        out = poisoned((2, lanes), np.float32)
        f(out, 0.5, 1.0)
        # Thread t starts every chain at t; acc -> acc / 2 + 1 converges to 2.
        assert_written(out, np.full_like(out, K.FMA_CHAINS * 2.0), rtol=1e-6)


def test_empty_parallel_records_thread_ids(monkeypatch):
    f = compiler.build(K.empty_parallel())
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    ids = np.full(2, -1, np.int32)
    f(ids)
    assert ids.tolist() == [0, 1]
    serial = compiler.build(K.empty_parallel(parallel=False))
    serial(ids)
    assert ids.tolist() == [0, 0]


@pytest.mark.parametrize("swap", [False, True], ids=["own-block", "next-threads-block"])
def test_core_exchange_sums_its_own_or_the_next_threads_block(rng, swap):
    s, args = K.core_exchange(3, 100, swap, lanes=8)
    f = compiler.build(s, args)
    a = rng.uniform(-1, 1, (3, 100)).astype(np.float32)
    out = poisoned(3, np.float32)
    f(a, out)
    assert_written(out, K.reference_core_exchange(a, swap), rtol=1e-5)
