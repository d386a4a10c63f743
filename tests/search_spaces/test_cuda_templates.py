"""Every CUDA template at 20 seeded random configs (small shapes): PTX generated for each
and assembled where ptxas exists; the kernels run on the CPU simulator (barriers and all)
against the numpy reference; and on a GPU, where there is one."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble

import compiler
from compiler.codegen.cuda import lower_cuda
from compiler.tir.gpu_interpreter import run_gpu_function
from search_spaces import create_task

CASES = [
    ("matmul", (16, 8, 32, "float32")),
    ("dense", (8, 8, 16, "float32", True)),
    ("batch_matmul", (2, 8, 4, 16, "float32")),
    ("conv2d_nchw", (1, 2, 6, 6, 4, 3, 3, 1, 1, 1, "float32")),
    ("depthwise_conv2d_nchw", (1, 4, 6, 6, 3, 3, 1, 1, 1, "float32")),
    ("softmax", (4, 16, "float32")),
    ("elementwise", (4, 16, "add,mul,relu", "float32")),
]
COUNT = 20
_IDS = [f"{n}-{'-'.join(map(str, a))}" for n, a in CASES]


def _configs(task):
    space = task.config_space
    return [space.default_config] + space.sample(COUNT, np.random.default_rng(2024))


def _check(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=what)


@pytest.mark.parametrize("name, args", CASES, ids=_IDS)
def test_cuda_template_ptx_and_simulation(name, args):
    task = create_task(name, args, "cuda -arch=sm_80")
    inputs, expected = task.reference_data(np.random.default_rng(7))
    configs = _configs(task)
    assert len(configs) == COUNT + 1 or len(configs) == len(task.config_space) + 1
    for k, cfg in enumerate(configs):
        s, args_ = task.instantiate(cfg)
        mod = compiler.build(s, args_, target="cuda -arch=sm_80", name=name)
        assemble(mod.get_source("ptx"))
        if k % 4 == 0:  # the simulator is slow: every fourth config
            s, args_ = task.instantiate(cfg)
            gf = lower_cuda(compiler.lower(s, args_))[0]
            outs = [np.full(e.shape, np.nan, e.dtype) for e in expected]
            run_gpu_function(gf, [np.array(x) for x in inputs] + outs)
            for got, want in zip(outs, expected):
                _check(got, want, f"{task.workload_name} with {cfg}")


@pytest.mark.cuda
@pytest.mark.parametrize("name, args", CASES, ids=_IDS)
def test_cuda_template_on_gpu(name, args):
    task = create_task(name, args, "cuda")
    inputs, expected = task.reference_data(np.random.default_rng(7))
    for cfg in _configs(task):
        s, args_ = task.instantiate(cfg)
        mod = compiler.build(s, args_, target="cuda", name=name)
        outs = [np.full(e.shape, np.nan, e.dtype) for e in expected]
        mod(*inputs, *outs)
        for got, want in zip(outs, expected):
            _check(got, want, f"{task.workload_name} with {cfg}")


@pytest.mark.parametrize("threads", [32, 64, 256])
def test_cuda_softmax_reduces_rows_across_threads(threads):
    task = create_task("softmax", (3, 70, "float32"), "cuda -arch=sm_80")
    inputs, expected = task.reference_data(np.random.default_rng(3))
    cfgs = [c for c in task.config_space.sample(40, np.random.default_rng(5))
            if c["row_threads"].val == threads]
    assert cfgs
    s, args_ = task.instantiate(cfgs[0])
    gf = lower_cuda(compiler.lower(s, args_))[0]
    reductions = [gf.kernels[0], gf.kernels[2]]  # row max, row sum
    for kernel, launch in zip(reductions, [gf.launches[0], gf.launches[2]]):
        assert launch.block == [threads, 1, 1]
        assert ".red" in str(kernel) and "tvm_storage_sync" in str(kernel)
    assemble(compiler.build(s, args_, target="cuda -arch=sm_80").get_source("ptx"))
    outs = [np.full(e.shape, np.nan, e.dtype) for e in expected]
    run_gpu_function(gf, [np.array(x) for x in inputs] + outs)
    for got, want in zip(outs, expected):
        _check(got, want, f"softmax with {cfgs[0]}")
