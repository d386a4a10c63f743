"""Every CUDA template at 20 seeded random configs (small shapes): PTX generated for each
and assembled where ptxas exists; the kernels run on the CPU simulator (barriers and all)
against the numpy reference; and on a GPU, where there is one."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble

import compiler
from compiler.backends.cuda import lower_cuda
from compiler.tir.gpu_interpreter import run_gpu_function
from search_spaces import create_task

CASES = [
    ("matmul", (16, 8, 32, "float32")),
    ("dense", (8, 8, 16, "float32", True)),
    ("batch_matmul", (2, 8, 4, 16, "float32")),
    ("conv2d_nchw", (1, 2, 6, 6, 4, 3, 3, 1, 1, 1, "float32")),
    ("conv2d_nchw", (2, 3, 9, 7, 4, 3, 2, 2, 0, 1, "float32")),  # strided, unpadded, batch 2
    ("depthwise_conv2d_nchw", (1, 4, 6, 6, 3, 3, 1, 1, 1, "float32")),
    ("depthwise_conv2d_nchw", (1, 2, 9, 9, 3, 3, 1, (2, 1), 2, "float32")),  # dilated
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
        lowered = compiler.lower(*task.instantiate(cfg), name=name)
        assemble(compiler.build(lowered, target="cuda -arch=sm_80").get_source("ptx"))
        if k % 4 == 0:  # the simulator is slow: every fourth config
            gf = lower_cuda(lowered)[0]
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


@pytest.mark.parametrize("name, args", [
    ("conv2d_nchw", (1, 8, 10, 10, 8, 3, 3, 1, 1, 1, "float32")),
    ("depthwise_conv2d_nchw", (1, 16, 10, 10, 3, 3, 2, 1, 1, "float32")),
])
def test_cuda_conv_stages_tiles_through_shared_memory(name, args):
    """Every config loads input and weight tiles into shared memory, stays within the
    shared memory its constraint allows, and synchronises after the loads and, when the
    outer reduction loop runs more than once, before the next loads (double-buffered:
    before the loop and once per step): nowhere else."""
    from compiler.tir import stmt as S
    from compiler.tir.analysis import collect
    from compiler.tir.builtin import is_sync

    task = create_task(name, args, "cuda -arch=sm_80")
    double_buffered = None
    for cfg in task.config_space.sample(30, np.random.default_rng(11)):
        s, args_ = task.instantiate(cfg)
        gf = lower_cuda(compiler.lower(s, args_))[0]
        (kernel,), (launch,) = gf.kernels, gf.launches
        shared = [a.buffer for a in collect(kernel.body, lambda n: isinstance(n, S.Allocate))
                  if a.buffer.scope == "shared"]
        padded = args_[-1].op.input_tensors[0]  # the topi convolution's padded input
        assert sorted(b.name for b in shared) == sorted(["W.shared", f"{padded.name}.shared"]), cfg
        assert 0 < launch.shared_bytes <= 48 * 1024, cfg
        steps = np.prod([cfg[k].size[0] for k in cfg.keys() if k.startswith("tile_r")])
        assert len(collect(kernel.body, is_sync)) == (1 if steps == 1 else 2), cfg
        if cfg["double_buffer"].val and steps > 1:
            double_buffered = cfg, gf
        assert np.prod(launch.block) <= 1024, cfg
    assert double_buffered is not None  # a double-buffered config computes what numpy does
    cfg, gf = double_buffered
    inputs, expected = task.reference_data(np.random.default_rng(8))
    out = np.full(expected[0].shape, np.nan, expected[0].dtype)
    run_gpu_function(gf, [np.array(x) for x in inputs] + [out])
    _check(out, expected[0], f"{task.workload_name} with {cfg}")


@pytest.mark.parametrize("name, args", [("matmul", (64, 32, 64, "float32")),
                                        ("dense", (64, 32, 64, "float32", False))])
@pytest.mark.parametrize("k_major, double_buffer", [(0, 0), (1, 0), (1, 1)])
def test_cuda_gemm_reads_registers_from_shared_memory_in_vectors(name, args, k_major, double_buffer):
    """With four consecutive columns per thread, the column operand's shared-memory reads
    are 128-bit loads and results leave in 128-bit stores; with ``k_major`` the row
    operands are staged transposed and every shared-memory read is a 128-bit load; with
    ``double_buffer`` the k loop has one barrier instead of two."""
    task = create_task(name, args, "cuda -arch=sm_80")
    cfg = task.config_space.from_json({"knobs": {"tile_y": [1, 2, 8, 4], "tile_x": [1, 2, 8, 4],
                                                 "tile_k": [4, 8], "unroll_k": 1, "vec": 4,
                                                 "double_buffer": double_buffer, "k_major": k_major}})
    lowered = compiler.lower(*task.instantiate(cfg))
    ptx = compiler.build(lowered, target="cuda -arch=sm_80").get_source("ptx")
    assemble(ptx)
    assert "st.global.v4" in ptx
    from compiler.tir import stmt as S
    from compiler.tir.analysis import collect
    from compiler.tir.builtin import is_sync

    (gf,) = lower_cuda(lowered)
    (kernel,) = gf.kernels
    (k_loop,) = collect(kernel.body, lambda n: isinstance(n, S.For) and n.loop_var.name == "k.outer")
    assert len(collect(k_loop.body, is_sync)) == (1 if double_buffer else 2)
    assert len(collect(kernel.body, is_sync)) == 2
    if k_major:
        assert "ld.shared.v4" in ptx and "ld.shared.b32" not in ptx and "ld.shared.f32" not in ptx
    elif name == "matmul":
        assert "ld.shared.v4" in ptx
    inputs, expected = task.reference_data(np.random.default_rng(5))
    out = np.full(expected[0].shape, np.nan, expected[0].dtype)
    run_gpu_function(gf, [np.array(x) for x in inputs] + [out])
    _check(out, expected[0], f"{name} with {cfg}")


def _constant_index(index) -> bool:
    from compiler.tir import expr as E

    if isinstance(index, E.Ramp):
        return isinstance(index.base, E.IntImm)
    return isinstance(index, E.IntImm)


@pytest.mark.parametrize("name, args", [
    ("matmul", (64, 32, 64, "float32")),
    ("batch_matmul", (2, 32, 16, 32, "float32")),
    ("conv2d_nchw", (1, 8, 10, 10, 16, 3, 3, 1, 1, 1, "float32")),
    ("depthwise_conv2d_nchw", (1, 16, 10, 10, 3, 3, 1, 1, 1, "float32")),
])
def test_cuda_register_tiles_are_indexed_by_constants(name, args):
    """Every access to a thread's accumulators and operand registers has a constant index
    (its loops are unrolled): a variable index would put the array in local memory."""
    from compiler.tir import expr as E
    from compiler.tir import stmt as S
    from compiler.tir.analysis import collect

    task = create_task(name, args, "cuda -arch=sm_80")
    for cfg in task.config_space.sample(10, np.random.default_rng(3)):
        s, args_ = task.instantiate(cfg)
        (kernel,) = lower_cuda(compiler.lower(s, args_))[0].kernels
        accesses = collect(kernel.body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))
                           and n.buffer.scope == "local")
        assert accesses, cfg
        for access in accesses:
            assert all(_constant_index(i) for i in access.indices), f"{cfg}: {access}"


def test_cuda_gemm_shared_memory_constraint_counts_the_element_size():
    """Every config the space admits lowers within 48 KiB of shared memory, 8-byte elements too."""
    task = create_task("matmul", (128, 128, 128, "int64"), "cuda -arch=sm_80")
    for cfg in task.config_space.sample(20, np.random.default_rng(0)):
        s, args_ = task.instantiate(cfg)
        (launch,) = lower_cuda(compiler.lower(s, args_))[0].launches
        assert launch.shared_bytes <= 48 * 1024, cfg
