"""conv2d_depthwise_nchwc: a pointwise and a depthwise convolution in one kernel, in bands of
output rows. Its space holds only register tiles that fit the target's registers, its default
band covers the rows exactly and its buffer fits the L2 budget, and every knob value computes
what numpy computes, on pinned AVX-512 and AVX2 CPUs, strided, padded and dilated, with two
images, rows that no band divides and epilogues on both layers."""

from __future__ import annotations

import pytest
from helpers import each_config_computes_the_reference, for_each_cpu, for_each_vector_width

from search_spaces import create_task
from search_spaces.templates._gemm import L2_BYTES

# Two images, 12 to 48 channels in blocks of 16, 15 x 13 pixels, 3x3 taps, stride 2, padding 1.
STRIDED = (2, 12, 15, 13, 48, 3, 3, 2, 1, 1, 4, 16, "float32", ("bias", "relu6"), ("bias", "add", "relu"))
# Stride 1, dilation 2, padding 2 (the output as large as the input), no epilogue on the depthwise layer.
DILATED = (1, 8, 9, 11, 32, 3, 3, 1, 2, 2, 8, 16, "float32", ("relu",), ())


def _file(cpu) -> tuple[int, int]:
    """(float32 lanes, vector registers) of ``cpu``, from its features."""
    return (16, 32) if "avx512f" in cpu.features else (8, 16)


def _one_of_each_value(space) -> list:
    """The default config, and for each value of each knob the first config that has it."""
    configs = {str(space.default_config): space.default_config}
    for name in space.space_map:
        for value in space.space_map[name].entities:
            cfg = next(c for c in space if c[name].val == value.val)
            configs.setdefault(str(cfg), cfg)
    return list(configs.values())


@for_each_cpu
def test_space_holds_only_register_tiles_that_fit(cpu):
    lanes, registers = _file(cpu)
    space = create_task("conv2d_depthwise_nchwc", STRIDED, cpu.target).config_space
    assert len(space) > 1
    for cfg in space:
        vectors = cfg["oc_tile"].val * -(-16 // lanes)
        assert cfg["reg_n"].val * vectors + vectors + 1 <= registers
        assert cfg["reg_w"].val * -(-16 // lanes) + -(-16 // lanes) + 1 <= registers


def test_default_band_covers_the_rows_exactly_within_the_buffer_budget():
    # MobileNetV2's expansion to 96 channels at 112 x 112 and its depthwise layer of stride 2.
    args = (1, 16, 112, 112, 96, 3, 3, 2, 1, 1, 16, 32, "float32", ("bias", "relu6"), ("bias", "relu6"))
    space = create_task("conv2d_depthwise_nchwc", args, "llvm -mcpu=skylake-avx512").config_space
    band = space.default_config["band"].val

    def buffer_bytes(b):  # the pointwise rows a band reads, 113 columns of 32 channels
        return ((b - 1) * 2 + 3) * 113 * 32 * 4

    assert 56 % band == 0 and band > 1
    assert buffer_bytes(band) <= L2_BYTES // 2
    taller = [e.val for e in space.space_map["band"].entities if e.val > band and 56 % e.val == 0]
    assert taller and all(buffer_bytes(b) > L2_BYTES // 2 for b in taller)


@for_each_vector_width
@pytest.mark.parametrize("args", [STRIDED, DILATED], ids=["strided", "dilated"])
def test_every_knob_value_computes_the_reference(cpu, args):
    task = create_task("conv2d_depthwise_nchwc", args, cpu.target)
    each_config_computes_the_reference(cpu, task, _one_of_each_value(task.config_space), seed=3)


@pytest.mark.parametrize("change, problem", [
    ({13: ("bias", "add")}, "mid_epilogue"),
    ({11: 20}, "block"),
    ({10: 5}, "ic_bn"),
])
def test_bad_arguments_name_the_problem(change, problem):
    args = list(STRIDED)
    for k, v in change.items():
        args[k] = v
    with pytest.raises(Exception, match=problem):
        create_task("conv2d_depthwise_nchwc", tuple(args), "llvm").config_space  # noqa: B018
