"""depthwise_conv2d_nchwc on CPUs: channel-blocked input, pre-packed weights and blocked output
with no layout change inside, a space of register tiles that fit the target's vector registers,
the epilogue applied by the stage that stores the tile, and the default and random configs
computing what numpy computes (NaN-poisoned outputs) on pinned AVX-512 and AVX2 CPUs: blocks of
whole vectors and narrower ones, strides, asymmetric padding, dilation, odd sizes; bad blocks
refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import CPUS, assert_written, poisoned

import compiler
from compiler.tir import stmt as S
from compiler.tir.analysis import collect
from search_spaces import InstantiationError, create_task
from search_spaces.templates.cpu_depthwise import ROW_PARTS, depthwise_conv2d_nchwc_reference

AVX512 = next(c for c in CPUS if "avx512f" in c.features)
AVX2 = next(c for c in CPUS if "avx512f" not in c.features)
NAME = "depthwise_conv2d_nchwc"


def _file(cpu) -> tuple[int, int]:
    """(float32 lanes, vector registers) of ``cpu``, from its features."""
    return (16, 32) if "avx512f" in cpu.features else (8, 16)


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("C, H, stride, block", [(32, 112, 1, 16), (144, 56, 2, 16), (960, 7, 1, 16),
                                                 (64, 14, 1, 32), (8, 9, 1, 4)])
def test_space_holds_register_tiles_that_fit(cpu, C, H, stride, block):
    task = create_task(NAME, (1, C, H, H, 3, 3, stride, 1, 1, block, "float32"), cpu.target)
    space = task.config_space
    lanes, registers = _file(cpu)
    Wo = (H - 1) // stride + 1
    vectors = -(-block // lanes)
    assert 1 <= len(space) <= 400
    seen, one_row = set(), set()
    for cfg in space:
        v = cfg.knob_values()
        seen.add(v["pad_at"])
        if v["reg_h"] == 1:
            one_row.add(v["reg_w"])
        assert v["reg_h"] * v["reg_w"] * vectors + vectors + 1 <= registers, v  # accumulators, weights, input
        waste = -(-Wo // v["reg_w"]) * v["reg_w"] - Wo
        assert waste == 0 or (v["reg_w"] >= 4 and 4 * waste <= Wo), v  # at most a quarter more columns
    assert seen == {"inline", "block", "row"}  # padded: every place for the padding
    default = space.default_config.knob_values()
    assert default["pad_at"] == "inline" and default["reg_h"] == 1
    # the one-row tile of at most 8 columns and half the registers with the most columns of
    # the row per tile
    useful = {w: w * Wo / (-(-Wo // w) * w) for w in one_row if w <= 8 and w * vectors <= registers // 2}
    assert useful[default["reg_w"]] == max(useful.values()) and default["reg_w"] > 1


def test_unpadded_layers_copy_the_input_only_to_round_tiles_up():
    space = create_task(NAME, (1, 32, 9, 9, 3, 3, 1, 0, 1, 16, "float32"), AVX2.target).config_space
    copies = [c.knob_values() for c in space if c.knob_values()["pad_at"] != "inline"]
    assert copies and all(7 % v["reg_w"] or 7 % v["reg_h"] for v in copies)  # 7 x 7: tiles that round up


def _configs(space, count: int, seed: int) -> list:
    """The default config and ``count`` distinct random ones."""
    return [space.default_config] + space.sample(min(count, len(space)), np.random.default_rng(seed))


def _run(task, configs, cpu=None) -> None:
    inputs, (expected,) = task.reference_data(np.random.default_rng(3))
    tol = 0 if expected.dtype.kind == "i" else 1e-5
    for cfg in configs:
        s, tensors = task.instantiate(cfg)
        f = compiler.build(s, tensors, target=task.target, name=NAME)
        assert f.function_names == [NAME], "one kernel: no layout change, no epilogue pass"
        if cpu is not None and not cpu.runs_here():
            continue
        out = poisoned(expected.shape, expected.dtype)
        f(*inputs, out)
        assert_written(out, expected, rtol=tol, atol=tol, err_msg=f"{task.workload_name} {cfg}")


# (N, C, H, W, KH, KW, stride, padding, dilation, block, dtype)
CASES = [
    (1, 32, 12, 12, 3, 3, 1, 1, 1, 16, "float32"),  # a MobileNet-like layer, whole vectors
    (1, 8, 9, 7, 3, 3, 2, 1, 1, 4, "float32"),  # blocks narrower than a vector, stride 2, odd sizes
    (2, 16, 11, 13, 3, 2, (2, 1), (1, 0, 2, 1), (1, 2), 8, "float32"),  # asymmetric padding
    (1, 16, 10, 9, 3, 3, 1, 2, 2, 8, "float32"),  # dilation 2, rows enough for row parts
    (1, 64, 10, 10, 3, 3, 1, 0, 1, 32, "float32"),  # two vectors (AVX-512) per block, no padding
    (1, 48, 9, 11, 3, 3, 1, 1, 1, 24, "float32"),  # a block of no power of two
    (1, 8, 7, 7, 3, 3, 1, 1, 1, 8, "float64"),
    (1, 4, 6, 5, 3, 3, 1, 1, 1, 2, "int32"),
]


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("args", CASES, ids=lambda a: "-".join(map(str, a)))
def test_default_and_random_configs_compute_the_reference(cpu, args):
    task = create_task(NAME, args, cpu.target)
    _run(task, _configs(task.config_space, 5, seed=5), cpu)


@pytest.mark.parametrize("epilogue", [("bias", "relu6"), ("bias", "add")], ids="+".join)
@pytest.mark.parametrize("args", [CASES[0], CASES[1], CASES[2]], ids=lambda a: "-".join(map(str, a)))
def test_epilogues_compute_the_reference(args, epilogue):
    task = create_task(NAME, args, "llvm", kwargs={"epilogue": epilogue})
    _run(task, _configs(task.config_space, 4, seed=11))


def _is_parallel(node) -> bool:
    return isinstance(node, S.For) and node.kind == S.ForKind.PARALLEL


@pytest.mark.parametrize("axis", ["blocks", "rows", "height"])
def test_each_thread_split_computes_the_reference(axis):
    # By height, the parallel loop runs the row parts outermost and the channel blocks within
    # them, so each thread takes a part of every block's rows, as a convolution by height
    # writes them; by rows, a part of the blocks, each with all its rows.
    task = create_task(NAME, (1, 48, 12, 10, 3, 3, 1, 1, 1, 16, "float32"), "llvm")
    configs = [c for c in task.config_space if c.knob_values()["parallel_axis"] == axis]
    assert {c.knob_values()["pad_at"] for c in configs} == {"inline", "block", "row"}
    by_pad = {c.knob_values()["pad_at"]: c for c in configs}
    _run(task, list(by_pad.values()))
    if axis == "blocks":
        return
    mod = compiler.lower(*task.instantiate(configs[0]))
    (loop,) = [node for _, func in mod.items() for node in collect(func.body, _is_parallel)]
    order = loop.loop_var.name
    assert (order.index("y.outer") < order.index("co")) == (axis == "height"), order
    assert int(loop.extent.value) == 3 * ROW_PARTS


def test_few_rows_are_split_only_by_channel_blocks():
    space = create_task(NAME, (1, 48, 7, 7, 3, 3, 1, 1, 1, 16, "float32"), "llvm").config_space
    assert {c.knob_values()["parallel_axis"] for c in space} == {"blocks"}


def test_tensors_are_blocked_and_the_epilogue_inputs_come_between():
    N, C, H, W, block = 2, 32, 9, 9, 8
    task = create_task(NAME, (N, C, H, W, 3, 3, 2, 1, 1, block, "float32"), "llvm",
                       kwargs={"epilogue": ("bias", "add", "relu")})
    _, tensors = task.instantiate(None)
    shapes = [tuple(int(d.value) for d in t.shape) for t in tensors]
    assert [t.op.name for t in tensors[:4]] == ["X", "W", "bias", "residual"]
    assert shapes == [(N, C // block, H, W, block), (C // block, 3, 3, block), (C,),
                      (N, C // block, 5, 5, block), (N, C // block, 5, 5, block)]
    inputs, (expected,) = task.reference_data(np.random.default_rng(0))
    assert [a.shape for a in inputs] == shapes[:4] and expected.shape == shapes[4]


def test_reference_blocks_channels_as_the_contract_says():
    (x, w, b), (out,) = depthwise_conv2d_nchwc_reference(1, 8, 4, 4, 3, 3, 1, 1, 1, 4, "float64", ("bias",),
                                                         rng=np.random.default_rng(2))
    c = 6  # channel 6: block 1, lane 2
    plane = np.pad(x[0, c // 4, :, :, c % 4], 1)
    want = sum(plane[ky:ky + 4, kx:kx + 4] * w[c // 4, ky, kx, c % 4] for ky in range(3) for kx in range(3))
    np.testing.assert_allclose(out[0, c // 4, :, :, c % 4], want + b[c])


def _allocations(mod) -> list[tuple[str, int]]:
    return sorted((node.buffer.scope, math.prod(int(d.value) for d in node.buffer.shape))
                  for _, func in mod.items()
                  for node in collect(func.body, lambda n: isinstance(n, S.Allocate)))


def test_default_config_reads_the_blocked_input_in_place():
    """No packed, padded or unpacked copy at the default config: only the register tile's
    accumulators are allocated, with and without an epilogue."""
    args = (1, 32, 14, 14, 3, 3, 1, 1, 1, 16, "float32")
    for epilogue in ((), ("bias", "add", "relu6")):
        task = create_task(NAME, args, "llvm", kwargs={"epilogue": epilogue})
        allocations = _allocations(compiler.lower(*task.instantiate(None)))
        assert allocations and all(scope == "local" for scope, _ in allocations), allocations


@pytest.mark.parametrize("block", [5, 0, -4, 64, 16.0, True])
def test_a_block_that_does_not_divide_the_channels_is_refused(block):
    with pytest.raises(InstantiationError, match="block must be a positive divisor of C") as info:
        create_task(NAME, (1, 32, 8, 8, 3, 3, 1, 1, 1, block, "float32"), "llvm").config_space  # noqa: B018
    assert isinstance(info.value.cause, ValueError)
    with pytest.raises(ValueError, match="block must be a positive divisor"):
        depthwise_conv2d_nchwc_reference(1, 32, 8, 8, 3, 3, 1, 1, 1, block)


def test_bad_geometry_is_refused_by_name():
    with pytest.raises(InstantiationError, match="does not fit the padded input") as info:
        create_task(NAME, (1, 16, 5, 5, 9, 3, 1, 1, 1, 16, "float32"), "llvm").config_space  # noqa: B018
    assert isinstance(info.value.cause, ValueError)
