"""The pass pipelines of compiler.passes are what lower() and build() run."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import vector_add_schedule
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import passes, te
from compiler.codegen.cuda import lower_cuda
from compiler.errors import CompilerError
from compiler.tir.function import IRModule


def _double(n=64):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    return s, [A, B]


def _recording(log: list, label: str) -> passes.Pass:
    def run(func):
        log.append((label, func.name))
        return func

    return passes.Pass(label, run)


def test_every_pipeline_is_a_tuple_of_passes():
    for pipeline in (passes.LOWER, passes.LLVM_CODEGEN, passes.CUDA_HOST, passes.CUDA_KERNEL):
        assert pipeline and all(isinstance(p, passes.Pass) and callable(p.run) for p in pipeline)
    # Vectorization comes after every other optimisation: later passes do not know vector nodes.
    names = [p.name for p in passes.LOWER if p.optimize]
    assert names[-1] == "vectorize_loops"


def test_lower_runs_the_lower_pipeline(monkeypatch):
    log: list = []
    monkeypatch.setattr(passes, "LOWER", passes.LOWER + (_recording(log, "extra"),))
    compiler.lower(*_double(), name="f")
    assert log == [("extra", "f")]


def test_simple_mode_skips_the_optimising_passes(monkeypatch):
    log: list = []
    step = passes.Pass("opt", _recording(log, "opt").run, optimize=True)
    monkeypatch.setattr(passes, "LOWER", passes.LOWER + (step,))
    simple = compiler.lower(*_double(), simple_mode=True)
    assert log == []
    assert "vectorized" in str(simple["main"].body)
    compiler.lower(*_double())
    assert log == [("opt", "main")]


def test_lower_cuda_runs_host_then_kernel_pipelines(monkeypatch):
    log: list = []
    monkeypatch.setattr(passes, "CUDA_HOST", passes.CUDA_HOST + (_recording(log, "host"),))
    monkeypatch.setattr(passes, "CUDA_KERNEL", passes.CUDA_KERNEL + (_recording(log, "kernel"),))
    s, args = vector_add_schedule()
    (gf,) = lower_cuda(compiler.lower(s, args, name="vadd"))
    assert log == [("host", "vadd")] + [("kernel", k.name) for k in gf.kernels]


def test_llvm_build_runs_the_codegen_pipeline_and_computes(monkeypatch):
    log: list = []
    monkeypatch.setattr(passes, "LLVM_CODEGEN", passes.LLVM_CODEGEN + (_recording(log, "cg"),))
    mod = compiler.build(*_double(), target="llvm", name="double")
    assert log == [("cg", "double")]
    a = random_array(np.random.default_rng(0), 64, "float32")
    b = poisoned(64, "float32")
    mod(a, b)
    assert_written(b, a * 2)


def test_cuda_build_goes_through_lower_cuda(monkeypatch):
    log: list = []
    monkeypatch.setattr(passes, "CUDA_KERNEL", passes.CUDA_KERNEL + (_recording(log, "kernel"),))
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda", name="vadd")
    assert log and all(kind == "kernel" for kind, _ in log)
    assert mod.get_source("ptx")


def test_build_dispatch_refuses_an_unknown_backend_and_an_empty_module():
    class Fake:
        kind = "opencl"

    mod = compiler.lower(*_double())
    with pytest.raises(CompilerError, match="no backend builds target kind 'opencl'"):
        passes.build_module(mod, Fake())
    with pytest.raises(CompilerError, match="empty IRModule"):
        passes.build_module(IRModule({}), compiler.Target("llvm"))


def test_run_passes_applies_in_order():
    func = compiler.lower(*_double(), simple_mode=True)["main"]
    order = []
    steps = tuple(passes.Pass(str(i), (lambda f, i=i: order.append(i) or f)) for i in range(3))
    assert passes.run_passes(func, steps) is func
    assert order == [0, 1, 2]
