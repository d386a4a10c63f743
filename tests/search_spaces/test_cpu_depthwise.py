"""depthwise_conv2d_nchw on CPUs: channel blocks and register tiles read off the target, a
space of feasible tiles only (blocked and plain layouts), and every knob value computing
what numpy computes, on pinned AVX-512 and AVX2 CPUs, at odd channel counts, strides,
paddings (``topi.nn``'s forms) and dilations, and bad ones refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CPUS, assert_written, poisoned

import compiler
from search_spaces import create_task
from search_spaces.templates.cpu_depthwise import channel_blocks, register_tiles

AVX512 = next(c for c in CPUS if "avx512f" in c.features)
AVX2 = next(c for c in CPUS if "avx512f" not in c.features)


def _file(cpu) -> tuple[int, int]:
    """(float32 lanes, vector registers) of ``cpu``, from its features."""
    return (16, 32) if "avx512f" in cpu.features else (8, 16)


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("C, H", [(32, 112), (128, 56), (256, 28), (5, 9)])
def test_space_holds_only_channel_blocks_and_tiles_that_fit(cpu, C, H):
    task = create_task("depthwise_conv2d_nchw", (1, C, H, H, 3, 3, 1, 1, 1, "float32"), cpu.target)
    space = task.config_space
    lanes, registers = _file(cpu)
    assert 1 <= len(space) <= 600  # 128 trials cover a good part of it
    layouts = set()
    for cfg in space:
        v = cfg.knob_values()
        layouts.add(v["layout"])
        cb, nv = v["cb"], max(1, v["cb"] // lanes)
        if C >= lanes:
            assert cb % lanes == 0 and cb <= 2 * lanes, v  # whole vectors of channels
        else:
            assert cb >= C, v  # one block holds every channel
        if v["layout"] == "NCHWc":
            assert v["reg_h"] * v["reg_w"] * nv + nv + 1 <= registers, v  # accumulators, weights, one input
            assert v["vec_w"] == space.space_map["vec_w"].entities[0].value(), v
        else:  # rows of whole tiles; the blocked layout's knobs at their first values
            vectors = -(-v["vec_w"] // lanes)
            assert H % v["vec_w"] == 0 and v["reg_h"] * vectors + 2 <= registers, v
            fixed = (v["reg_w"], v["layout_at"], v["unpack"], v["parallel_axis"])
            assert fixed == (1, "block", "c", "blocks"), v
    assert layouts == {"NCHWc", "NCHW"}
    default = space.default_config.knob_values()
    if H >= 2 * lanes:  # long rows: the plain layout, four rows of up to two vectors, no tail
        assert default["layout"] == "NCHW" and default["reg_h"] == 4
        assert lanes <= default["vec_w"] <= 2 * lanes and H % default["vec_w"] == 0
    else:
        assert default["layout"] == "NCHWc" and default["layout_at"] == "block" and default["reg_w"] > 1
        assert default["cb"] == (lanes if C >= lanes else min(channel_blocks(C, lanes)))


def test_channel_blocks_are_whole_vectors_or_hold_every_channel():
    assert channel_blocks(256, 16) == [16, 32]
    assert channel_blocks(20, 16) == [16, 32]  # 20 channels round up to 32
    assert channel_blocks(16, 16) == [16]
    assert channel_blocks(5, 16) == [8, 16]
    assert channel_blocks(3, 8) == [4, 8]


@pytest.mark.parametrize("Wo, Ho", [(28, 28), (7, 7), (13, 1), (112, 112)])
def test_register_tiles_divide_the_row_or_round_it_up_by_an_eighth(Wo, Ho):
    for cb, lanes, registers in [(16, 16, 32), (32, 16, 32), (8, 8, 16), (16, 8, 16)]:
        tiles = register_tiles(Wo, Ho, cb, lanes, registers)
        assert (1, 1) in tiles
        nv = max(1, cb // lanes)
        for reg_h, reg_w in tiles:
            assert reg_h <= Ho and reg_w <= Wo and reg_h * reg_w * nv + nv + 1 <= registers
            waste = -(-Wo // reg_w) * reg_w - Wo
            assert waste == 0 or 8 * waste <= Wo, (reg_w, Wo)


def _covering(space, rng) -> list:
    """Random configs until every value of every knob has been drawn (plus the default)."""
    missing = {(k.name, repr(e.value())) for k in space.knobs for e in k.entities}
    configs = [space.default_config]
    for cfg in space.sample(len(space), rng):
        new = {(k, repr(v)) for k, v in cfg.knob_values().items()} & missing
        if new:
            configs.append(cfg)
            missing -= new
        if not missing:
            return configs
    raise AssertionError(f"no valid config has {sorted(missing)}")


@pytest.mark.parametrize("args, message", [
    ((1, 2, 5, 5, 3, 3, 0, 1, 1), "stride must be positive"),
    ((1, 2, 5, 5, 3, 3, 1, 1, (1, 0)), "dilation must be positive"),
    ((1, 2, 5, 5, 3, 3, 1, -1, 1), "padding must not be negative"),
    ((1, 2, 5, 5, 3, 3, 1, (1, 2, 3), 1), "padding must be an int, a tuple of 2 or 4 ints"),
    ((1, 2, 5, 5, 9, 3, 1, 1, 1), "does not fit the padded input"),
])
def test_bad_window_arguments_are_refused_by_name(args, message):
    from search_spaces import InstantiationError

    with pytest.raises(InstantiationError, match=message):
        create_task("depthwise_conv2d_nchw", (*args, "float32"), AVX2.target).config_space  # noqa: B018


# (N, C, H, W, KH, KW, stride, padding, dilation, dtype): channel counts that no block
# divides, strides, asymmetric padding, dilation, enough rows for row blocks, other dtypes
CASES = [
    (1, 37, 10, 11, 3, 3, 2, 1, 1, "float32"),
    (2, 5, 9, 7, 3, 2, (2, 1), (1, 0, 2, 1), (1, 2), "float32"),
    (1, 20, 16, 18, 3, 3, 1, 1, 1, "float32"),
    (1, 3, 8, 6, 3, 3, 1, 2, 2, "float64"),
    (1, 6, 7, 7, 2, 2, 1, (0, 1), 1, "int32"),
    (1, 4, 7, 6, 3, 3, 1, "SAME", 2, "float32"),  # topi.nn's padding forms: (2, 2, 2, 2) here
]


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("args", CASES, ids=lambda a: "-".join(map(str, a)))
def test_every_knob_value_computes_the_reference(cpu, args):
    task = create_task("depthwise_conv2d_nchw", args, cpu.target)
    inputs, (expected,) = task.reference_data(np.random.default_rng(3))
    tol = 0 if expected.dtype.kind == "i" else 1e-5
    for cfg in _covering(task.config_space, np.random.default_rng(5)):
        s, tensors = task.instantiate(cfg)
        f = compiler.build(s, tensors, target=task.target, name="depthwise")
        if not cpu.runs_here():
            continue
        out = poisoned(expected.shape, expected.dtype)
        f(*inputs, out)
        assert_written(out, expected, rtol=tol, atol=tol, err_msg=f"{task.workload_name} {cfg}")
