"""Convolutions on CPUs: conv2d_nchw through channel blocks (and 1x1 layers through the GEMM),
conv2d_nchwc on the caller's blocks. Spaces hold only register tiles that fit the target's
vector registers; every knob value computes what numpy computes, on pinned AVX-512 and AVX2
CPUs, at odd channel counts, strides, paddings and dilations."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from helpers import (
    CPUS,
    assert_written,
    covering_pairs,
    each_config_computes_the_reference,
    for_each_cpu,
    for_each_vector_width,
    poisoned,
)

import compiler
from compiler.tir import stmt as S
from search_spaces import InstantiationError, create_task
from search_spaces.templates.cpu_conv2d_nchwc import kernel_block_intrin

AVX512 = next(c for c in CPUS if "avx512f" in c.features)
AVX2 = next(c for c in CPUS if "avx512f" not in c.features)


def _file(cpu) -> tuple[int, int]:
    """(float32 lanes, vector registers) of ``cpu``, from its features."""
    return (16, 32) if "avx512f" in cpu.features else (8, 16)


def _conv(C, H, F, k, stride=1, pad=1, N=1, W=None, dilation=1):
    return (N, C, H, W or H, F, k, k, stride, pad, dilation, "float32")


@for_each_cpu
@pytest.mark.parametrize("C, H", [(64, 56), (128, 28)], ids=["56", "28"])
def test_blocked_space_holds_only_register_tiles_that_fit(cpu, C, H):
    task = create_task("conv2d_nchw", _conv(C, H, C, 3), cpu.target)
    lanes, registers = _file(cpu)
    space = task.config_space
    assert len(space) <= 1000  # 128 trials cover a good share of it
    tiles = set()
    for cfg in space:
        v = cfg.knob_values()
        assert C % v["ic_bn"] == 0 and v["oc_bn"] % lanes == 0, v
        nv = v["oc_bn"] // lanes
        budget = registers - nv - 1  # the kernel operands and one broadcast
        assert v["reg_n"] * nv <= budget and (2 * v["reg_n"] * nv >= budget or v["reg_n"] == H), v
        tiles.add((v["oc_bn"], v["reg_n"]))
    assert {o for o, _ in tiles} == {lanes, 2 * lanes, 4 * lanes}  # 3 vectors would pad C
    default = space.default_config.knob_values()
    assert default["oc_bn"] == 2 * lanes and default["ic_bn"] == lanes
    assert default["reg_n"] * 2 >= 10 and space.is_valid(space.default_config.index)


def test_output_blocks_are_whole_vectors_that_divide_the_channels_where_there_are_such():
    def values(args):
        task = create_task("conv2d_nchw", args, AVX512.target)
        return {k.name: {e.value() for e in k.entities} for k in task.config_space.knobs}

    assert values(_conv(96, 12, 96, 3))["oc_bn"] == {16, 32, 48}  # 64 does not divide 96
    v = values(_conv(100, 12, 100, 3))
    assert v["oc_bn"] == {10, 20, 25, 50}  # no vector divides 100: half a vector or more
    assert v["ic_bn"] == {10, 20, 25, 50}  # divisors of 100, none too short
    v = values(_conv(3, 9, 6, 3))
    assert v["ic_bn"] == {3} and v["oc_bn"] == {6}


@pytest.mark.parametrize("args", [_conv(3, 9, 20, 3, stride=2, W=8), _conv(100, 12, 100, 3, N=2),
                                  _conv(6, 5, 40, 3), _conv(20, 7, 24, 1, stride=2, pad=0)],
                         ids=["blocked", "blocked-100", "im2col", "1x1"])
def test_flops_count_the_convolution_only(args):
    N, C, H, W, F, KH, KW, stride, pad, dilation, _ = args
    Ho, Wo = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    assert create_task("conv2d_nchw", args, AVX512.target).flop == 2 * N * F * Ho * Wo * C * KH * KW


@pytest.mark.parametrize("args", [_conv(128, 28, 256, 1, stride=2, pad=0), _conv(64, 14, 32, 1, pad=0, N=2),
                                  _conv(256, 4, 256, 3), _conv(512, 8, 512, 3, stride=2),
                                  _conv(512, 3, 512, 3)],
                         ids=["1x1-s2", "1x1-batch2", "3x3-4", "3x3-s2-4", "3x3-3"])
def test_1x1_layers_and_small_images_run_as_gemms(args):
    """1x1 layers without padding, and layers with fewer than half as many output pixels as
    filters (packing their kernel into blocks would cost more than gathering their windows)
    whose pixels fill whole vectors (4x4: 16) or whose rows are too short for a blocked
    register tile (3x3)."""
    knobs = {k.name for k in create_task("conv2d_nchw", args, AVX512.target).config_space.knobs}
    assert {"mr", "nr", "mc_panels", "kc", "pack_a"} <= knobs and "oc_bn" not in knobs


@pytest.mark.parametrize("args", [_conv(16, 28, 32, 1, pad=1), _conv(64, 56, 64, 3), _conv(256, 17, 256, 3),
                                  _conv(256, 14, 256, 3), _conv(512, 7, 512, 3),
                                  _conv(512, 14, 512, 3, stride=2)],
                         ids=["1x1-padded", "3x3-56", "3x3-17", "3x3-14", "3x3-7", "3x3-s2-7"])
def test_other_layers_run_in_channel_blocks(args):
    """Among them the 7x7 images of many filters: as a GEMM their 49 pixels would fill 4
    vectors of 16 (or 7 of 8), a quarter of each FMA wasted; a blocked tile covers 7 columns."""
    knobs = {k.name for k in create_task("conv2d_nchw", args, AVX512.target).config_space.knobs}
    assert {"ic_bn", "oc_bn", "reg_n"} <= knobs and "mr" not in knobs


def _config(task, **knobs):
    """The first config of ``task``'s space with these knob values."""
    return next(c for c in (task.config_space.get(i) for i in range(len(task.config_space)))
                if all(c[k].val == v for k, v in knobs.items()))


@pytest.mark.parametrize("parallel_axis", ["rows", "oc"])
@pytest.mark.parametrize("args, oc_bn, transposed", [
    (_conv(64, 56, 64, 3), 16, {"data_vec", "kernel_vec", "conv2d_nchw"}),
    (_conv(3, 9, 20, 3, stride=2, W=8), 20, {"kernel_vec", "conv2d_nchw"}),  # 3-channel data blocks: gathered
    (_conv(3, 9, 20, 3, stride=2, W=8), 10, set()),  # and no 4, 8 or 16 channels divide 10 filters
    (_conv(16, 17, 18, 3), 18, {"data_vec"}),  # 17 columns (prime), 18 filters: element by element
], ids=["56", "3-channels", "10-filters", "17x18"])
def test_layout_transforms_are_transposed_in_tiles_where_they_fit(args, oc_bn, transposed, parallel_axis):
    task = create_task("conv2d_nchw", args, AVX512.target)
    config = _config(task, parallel_axis=parallel_axis, oc_bn=oc_bn)
    text = str(compiler.lower(*task.instantiate(config)))
    stores = {line.split("tvm_access_ptr('float32', ")[1].split(",")[0]
              for line in text.splitlines() if "autotune_transpose" in line}
    assert stores == transposed


def _loops_around(text: str, store: str) -> list[str]:
    """The loop variables around the first store into ``store`` in lowered ``text``, outermost first
    (a store, or a transpose whose destination it is)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"{store}[")
              or f"autotune_transpose', tvm_access_ptr('float32', {store}," in line)
    loops, depth = [], len(lines[at]) - len(lines[at].lstrip())
    for line in reversed(lines[:at]):
        indent = len(line) - len(line.lstrip())
        if indent < depth and line.lstrip().startswith("for "):
            loops.append(line.split()[1])
            depth = indent
    return loops[::-1]


@pytest.mark.parametrize("parallel_axis", ["rows", "oc"])
def test_a_kernel_packed_element_by_element_is_packed_in_the_order_it_is_read(parallel_axis):
    # each input channel's taps (consecutive in W) for the whole output block, before the next
    # channel's: not each tap across every input channel, which strides through W
    task = create_task("conv2d_nchw", _conv(16, 17, 18, 3), AVX512.target)
    text = str(compiler.lower(*task.instantiate(_config(task, parallel_axis=parallel_axis))))
    loops = _loops_around(text, "kernel_vec")
    assert loops.index("b") < loops.index("ry") < loops.index("rx") < loops.index("fb")


@pytest.mark.parametrize("parallel_axis", ["rows", "oc"])
def test_with_threads_on_channel_blocks_each_packs_its_kernel_blocks_where_it_uses_them(parallel_axis):
    # in transposed tiles either way; under "oc" inside the thread's loop over its output blocks
    # (the block just packed is in its cache), under "rows" before, on threads of their own
    task = create_task("conv2d_nchw", _conv(64, 14, 64, 3), AVX512.target)
    text = str(compiler.lower(*task.instantiate(_config(task, parallel_axis=parallel_axis, oc_bn=16))))
    loops = _loops_around(text, "kernel_vec")
    assert loops[0] == ("f.outer.n.fused" if parallel_axis == "oc" else "fc"), loops
    assert f"for {loops[0]} in range(4) parallel:" in text


def test_threads_on_the_height_pad_the_input_rows_they_read(monkeypatch):
    # A stride-2 3x3 layer at 56x56 whose kernel fits a core's L2 (ResNet's 64 to 128 channels):
    # by default threads take the output's height, each output row's channel blocks in turn, and
    # the padding stage is split by input rows (each row's channel blocks in turn) alike.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    args = (1, 64, 56, 56, 128, 3, 3, 2, 1, 1, 32, 32, "float32", ("bias", "relu"))
    task = create_task("conv2d_nchwc", args, AVX512.target)
    default = task.config_space.default_config
    assert default["parallel_axis"].val == "height"
    text = str(compiler.lower(*task.instantiate(default)))
    tile_blocks = default["oc_tile"].val
    assert "for i0.i2.fused.i1.fused in range(116) parallel:" in text  # 58 padded rows x 2 blocks
    assert f"for n.y.fused.fc.outer.fused in range({28 * 4 // tile_blocks}) parallel:" in text
    # With a kernel of megabytes each thread would read all of it: not by default.
    wide = create_task("conv2d_nchwc", (1, 512, 14, 14, 512, 3, 3, 2, 1, 1, 32, 32, "float32"), AVX512.target)
    assert wide.config_space.default_config["parallel_axis"].val != "height"
    # Rows that end in partial tiles may run along the plane: no height to share there.
    plane = create_task("conv2d_nchwc", (1, 64, 15, 15, 64, 3, 3, 1, 1, 1, 32, 32, "float32"), AVX512.target)
    assert [e.value() for e in plane.config_space.space_map["parallel_axis"].entities] == ["rows", "oc"]


def test_threads_on_the_height_of_a_pointwise_layer_take_pieces_of_its_row(monkeypatch):
    # A pointwise layer runs as one row of its plane: by height, the row's pieces (ranges of the
    # height) are outside the channel blocks, so each thread reads only its piece of the input.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    args = (1, 16, 1, 12544, 96, 1, 1, 1, 0, 1, 16, 32, "float32", ("bias", "relu6"))
    task = create_task("conv2d_nchwc", args, AVX512.target)
    by_rows, by_height = (_config(task, parallel_axis=a, reg_n=14) for a in ("rows", "height"))
    rows, height = (str(compiler.lower(*task.instantiate(c))) for c in (by_rows, by_height))
    # 3 channel blocks, 896 tiles of 14 pixels in 14 pieces: 42 pieces to share either way
    assert "for n.fc.outer.fused.y.fused.x.outer.outer.fused in range(42) parallel:" in rows
    assert "for n.y.fused.x.outer.outer.fused.fc.outer.fused in range(42) parallel:" in height


@for_each_vector_width
def test_threads_on_the_height_compute_the_convolution(cpu):
    # Strided and padded, two images, an odd height (rows split unevenly over the threads).
    args = (2, 16, 15, 12, 32, 3, 3, 2, 1, 1, 8, 16, "float32", ("bias", "add", "relu"))
    task = create_task("conv2d_nchwc", args, cpu.target)
    configs = [c for c in task.config_space if c["parallel_axis"].val == "height"]
    assert configs
    each_config_computes_the_reference(cpu, task, configs, seed=4)


def test_threads_on_rows_share_a_pointwise_row_in_pieces_of_whole_register_tiles():
    # A pointwise layer runs as one row of its plane: with three output blocks, threads on rows
    # alone would have three rows to share. The row's 12 tiles of 10 columns go in 6 pieces of 2
    # tiles, 18 in all, with no bounds test on a tile.
    cpu = AVX2
    task = create_task("conv2d_nchwc", (1, 32, 1, 120, 24, 1, 1, 1, 0, 1, 16, 8, "float32"), cpu.target)
    cfg = _config(task, parallel_axis="rows", reg_n=10)
    s, tensors = task.instantiate(cfg)
    text = str(compiler.lower(s, tensors))
    assert "in range(18) parallel:" in text and " if " not in text, text
    f = compiler.build(*task.instantiate(cfg), target=task.target)
    if cpu.runs_here():
        inputs, (expected,) = task.reference_data(np.random.default_rng(4))
        out = poisoned(expected.shape, expected.dtype)
        f(*inputs, out)
        assert_written(out, expected, rtol=1e-4, atol=1e-4)


def _accumulator_tiles(mod) -> tuple[int, set[int]]:
    """How many register tiles ``mod`` computes (the runs of its local allocations, the products of
    the loops around each; a partial last tile is an allocation of its own), and their sizes."""
    runs, sizes = 0, set()

    def walk(node, times):
        nonlocal runs
        if isinstance(node, S.For):
            walk(node.body, times * int(node.extent.value))
        elif isinstance(node, S.Allocate) and node.buffer.scope == "local":
            runs += times
            sizes.add(math.prod(int(d.value) for d in node.buffer.shape))
        elif isinstance(node, S.SeqStmt):
            for child in node.seq:
                walk(child, times)
        elif isinstance(node, S.IfThenElse):  # a parallel loop's rows specialised: one branch a row
            walk(node.then_case, times)
        elif hasattr(node, "body"):
            walk(node.body, times)

    for _, func in mod.items():
        walk(func.body, 1)
    return runs, sizes


@pytest.mark.parametrize("epilogue", [(), ("bias", "add", "relu")], ids=["plain", "epilogue"])
def test_register_tiles_run_along_the_whole_plane_where_rows_end_in_partial_tiles(epilogue, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # threads on channel blocks: a tile of blocks each
    # A 7x7 output in tiles of 6 columns and 16 channels: by rows, 6 + 1 columns each, so 14 tiles
    # per channel block, 7 of them one column wide; along the plane, 8 tiles of 6 pixels and one
    # of 1, so 9. A tile holds 6 pixels' accumulators either way, also where they span two rows.
    cpu = AVX2
    args = (2, 16, 14, 14, 64, 3, 3, 2, 1, 1, 8, 16, "float32", epilogue)
    task = create_task("conv2d_nchwc", args, cpu.target)
    assert task.config_space.default_config["plane"].val  # where rows end in partial tiles
    inputs, (expected,) = task.reference_data(np.random.default_rng(6))
    blocks = 2 * 64 // 16
    for plane, tiles in ((False, blocks * 7 * 2), (True, blocks * 9)):
        cfg = _config(task, parallel_axis="oc", reg_n=6, plane=plane)
        s, tensors = task.instantiate(cfg)
        assert _accumulator_tiles(compiler.lower(s, tensors)) == (tiles, {6 * 16}), cfg
        f = compiler.build(s, tensors, target=task.target)
        if cpu.runs_here():
            out = poisoned(expected.shape, expected.dtype)
            f(*inputs, out)
            assert_written(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_the_plane_is_a_knob_only_where_rows_end_in_partial_tiles(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # the default split follows the threads
    def knobs(args):
        return set(create_task("conv2d_nchwc", (*args, "float32"), AVX2.target).config_space.space_map)

    assert "plane" in knobs((1, 16, 14, 14, 64, 3, 3, 2, 1, 1, 8, 16))  # 7 columns: tiles of 6 + 1
    assert "plane" not in knobs((1, 16, 12, 12, 64, 3, 3, 1, 1, 1, 8, 16))  # 12 columns: tiles of 6
    assert "plane" not in knobs((1, 16, 1, 49, 64, 1, 1, 1, 0, 1, 8, 16))  # one row already
    # Threads on rows of one channel block would share the plane in pieces: there only threads on
    # channel blocks run along it, and the default keeps the rows.
    args = (1, 8, 14, 14, 16, 3, 3, 2, 1, 1, 8, 16, "float32")
    space = create_task("conv2d_nchwc", args, AVX2.target).config_space
    assert space.default_config["parallel_axis"].val == "rows" and not space.default_config["plane"].val
    planes = [space.get(i) for i in range(len(space)) if space.get(i)["plane"].val]
    assert planes and all(c["parallel_axis"].val == "oc" for c in planes)


@for_each_cpu
def test_a_register_tile_may_span_output_blocks_within_the_register_file(cpu, monkeypatch):
    # 64 -> 128 channels in blocks of 16: tiles of 1, 2 or 4 blocks (at most 4 vectors of
    # channels), each with its accumulators, the kernel vectors of its blocks and a broadcast
    # in the vector registers.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    lanes, registers = _file(cpu)
    task = create_task("conv2d_nchwc", (1, 64, 1, 3136, 128, 1, 1, 1, 0, 1, 16, 16, "float32"), cpu.target)
    nv = 16 // lanes
    spans = set()
    for cfg in task.config_space:
        v = cfg.knob_values()
        k = v["oc_tile"]
        spans.add(k)
        assert k * nv <= 4 and v["reg_n"] * k * nv + k * nv + 1 <= registers, v
    assert spans == ({1, 2, 4} if nv == 1 else {1, 2})


def test_a_tile_of_blocks_holds_their_accumulators_and_computes_the_convolution(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # threads on channel blocks: a tile of blocks each
    cpu = AVX512
    args = (1, 32, 9, 10, 64, 3, 3, 1, 1, 1, 16, 16, "float32", ("bias", "add", "relu"))
    task = create_task("conv2d_nchwc", args, cpu.target)
    inputs, (expected,) = task.reference_data(np.random.default_rng(8))
    for axis, k, reg_n in (("rows", 4, 5), ("oc", 2, 10), ("rows", 1, 10)):
        cfg = _config(task, parallel_axis=axis, oc_tile=k, reg_n=reg_n)
        s, tensors = task.instantiate(cfg)
        tiles = 64 // 16 // k * 9 * (10 // reg_n)
        assert _accumulator_tiles(compiler.lower(s, tensors)) == (tiles, {k * reg_n * 16}), cfg
        f = compiler.build(s, tensors, target=task.target)
        if cpu.runs_here():
            out = poisoned(expected.shape, expected.dtype)
            f(*inputs, out)
            assert_written(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_by_default_a_pointwise_layer_reads_its_data_once_per_four_vectors_of_channels(monkeypatch):
    # A 1x1 layer that reduces 256 channels to 64 at 56x56 (as ResNet-50's do), in blocks of 32:
    # a tile of both blocks, so that each thread reads the data once, not once per block; with
    # one tile of blocks in all, the threads take pieces of the row. A config logged before the
    # knob existed reads as one block a tile.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    args = (1, 256, 1, 3136, 64, 1, 1, 1, 0, 1, 32, 32, "float32", ("bias", "relu"))
    space = create_task("conv2d_nchwc", args, AVX512.target).config_space
    default = space.default_config.knob_values()
    assert default["oc_tile"] == 2 and default["parallel_axis"] == "rows", default
    assert 10 <= default["reg_n"] * 2 * 2 <= 32 - 4 - 1, default
    old = space.from_json({"knobs": {"reg_n": 14, "unroll_kw": False, "parallel_axis": "oc"}})
    assert old.knob_values()["oc_tile"] == 1
    # Threads on channel blocks need a tile of blocks each: with 2 blocks, tiles of 1.
    assert all(c["oc_tile"].val == 1 for c in space if c["parallel_axis"].val == "oc")


def test_a_kernel_of_megabytes_is_reduced_in_passes_over_the_output(monkeypatch):
    # ResNet-50's 1024 to 512 channels at 7x7 (a 2 MiB kernel; a pointwise layer, one row of its
    # plane): by default threads take tiles of channel blocks, and each runs the reduction in
    # passes of one 32-channel block over its tile's whole output, the accumulators of all its
    # register tiles in one allocation between passes. The last choice is the reduction whole
    # in each register tile, as configs logged before the knob read.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    args = (1, 1024, 1, 49, 512, 1, 1, 1, 0, 1, 32, 32, "float32", ("bias", "relu"))
    task = create_task("conv2d_nchwc", args, AVX512.target)
    space = task.config_space
    default = space.default_config
    assert default["ic_chunk"].val == 1 and default["parallel_axis"].val == "oc"
    assert [e.value() for e in space.space_map["ic_chunk"].entities] == [1, 2, 4, 8, 32]
    k, reg_n = default["oc_tile"].val, default["reg_n"].val
    tiles = math.ceil(49 / reg_n)
    lowered = compiler.lower(*task.instantiate(default))
    assert "for cc.outer in range(32):" in str(lowered)
    assert _accumulator_tiles(lowered) == (16 // k, {tiles * reg_n * k * 32})
    whole = _config(task, parallel_axis="oc", oc_tile=k, reg_n=reg_n, ic_chunk=32)
    assert _accumulator_tiles(compiler.lower(*task.instantiate(whole))) == (16 // k * tiles, {reg_n * k * 32})
    old = space.from_json({"knobs": {"reg_n": reg_n, "unroll_kw": False, "parallel_axis": "oc",
                                     "oc_tile": k}})
    assert old["ic_chunk"].val == 32
    assert all(c["parallel_axis"].val == "oc" for c in space if c["ic_chunk"].val != 32)


def test_passes_over_the_output_are_a_knob_only_for_kernels_streamed_from_memory(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # the default follows the default thread split
    def chunks(args):
        space = create_task("conv2d_nchwc", (*args, "float32"), AVX512.target).config_space
        knob = space.space_map.get("ic_chunk")
        return knob and ([e.value() for e in knob.entities], space.default_config["ic_chunk"].val)

    assert chunks((1, 512, 1, 49, 512, 1, 1, 1, 0, 1, 32, 32)) == ([1, 2, 4, 8, 16], 16)  # 1 MiB: fits L2
    assert not chunks((1, 256, 1, 49, 512, 1, 1, 1, 0, 1, 32, 32))  # 512 KiB: a core's L2 keeps it
    assert not chunks((1, 512, 1, 3136, 512, 1, 1, 1, 0, 1, 32, 32))  # 784 KiB of output a pass
    assert chunks((1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 32, 32)) == ([1, 2, 4, 8, 16], 1)  # 9 MiB


def _tap_ranges(text: str, tap: str) -> list[str]:
    """The loops over kernel taps ``tap`` in lowered ``text`` that do not run all three taps, and
    the tests of which taps run."""
    whole = f"for {tap} in range(3):"
    return [line for line in text.splitlines()
            if (line.lstrip().startswith(f"for {tap} in range(") and line.strip() != whole)
            or (line.lstrip().startswith("if ") and re.search(rf"\b{tap}\b", line))]


def _branches_inside(text: str, loop: str) -> int:
    """How many ``if`` lines lie inside the loops over ``loop`` in lowered ``text``."""
    lines, count, depth = text.splitlines(), 0, None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if depth is not None and indent <= depth:
            depth = None
        if depth is None and line.lstrip().startswith(f"for {loop} in range("):
            depth = indent
        elif depth is not None and line.lstrip().startswith("if "):
            count += 1
    return count


@for_each_vector_width
def test_dilated_convolutions_skip_the_taps_that_read_only_padding(cpu):
    # Dilation 6 on a 12 x 12 map: an off-centre tap reads the image for half the rows and
    # columns. Each register tile skips the taps that read only padding for it: the test is at
    # the tap's loops, outside the loop over a block's channels, or is their bounds (but with
    # unroll_kw, whose column taps run inside that loop: there the tiles at a row's ends test
    # them inside).
    args = (1, 32, 12, 12, 32, 3, 3, 1, 6, 6, 16, 16, "float32", ("bias", "relu"))
    task = create_task("conv2d_nchwc", args, cpu.target)
    configs = covering_pairs([c for c in task.config_space if not c["plane"].val]
                             if "plane" in task.config_space.space_map else list(task.config_space))
    for cfg in configs:
        text = str(compiler.lower(*task.instantiate(cfg)))
        assert cfg["unroll_kw"].val or _branches_inside(text, "cb") == 0, cfg
        assert _tap_ranges(text, "ry"), cfg  # rows of taps; columns where a tile is not the whole row
        assert cfg["unroll_kw"].val or cfg["reg_n"].val == 12 or _tap_ranges(text, "rx"), cfg
    each_config_computes_the_reference(cpu, task, configs, seed=7)
    # The same layer through conv2d_nchw (its data blocked inside the operator).
    nchw = create_task("conv2d_nchw", (1, 32, 12, 12, 32, 3, 3, 1, 6, 6, "float32"), cpu.target)
    each_config_computes_the_reference(cpu, nchw, covering_pairs(list(nchw.config_space)), seed=8)
    # Undilated, a 3x3 layer's first and last output rows skip the row of taps in the padding.
    small = create_task("conv2d_nchwc", (1, 32, 7, 7, 32, 3, 3, 1, 1, 1, 16, 16, "float32"), cpu.target)
    assert _tap_ranges(str(compiler.lower(*small.instantiate(small.config_space.default_config))), "ry")


def test_a_dilated_layers_partial_register_tile_stays_unrolled():
    # 14 columns in register tiles of 6 (the last one 2 columns), dilation 12: the tiles' column
    # guard and the taps' guards never hold together for one range of tiles. The last tile gets
    # code of its own; before, its column loop ran to min(6, 14 - 6 * x.outer), a loop that no
    # longer unrolled, its accumulators in memory (DeepLabV3's pyramid layer at rate 12, 2048
    # to 256 channels: 5.4 ms so, 3.0 since).
    args = (1, 64, 14, 14, 64, 3, 3, 1, 12, 12, 32, 32, "float32", ("bias", "relu"))
    task = create_task("conv2d_nchwc", args, AVX512.target)  # tiles of 2 blocks by 6 columns fit it
    configs = [c for c in task.config_space if c["reg_n"].val == 6]
    assert {c["oc_tile"].val for c in configs} == {2}
    for cfg in configs:
        text = str(compiler.lower(*task.instantiate(cfg)))
        assert not re.search(r"for x\.inner in range\(min\(", text), cfg
        assert cfg["unroll_kw"].val or _tap_ranges(text, "rx"), cfg  # the tiles skip columns of taps
    each_config_computes_the_reference(AVX512, task, configs, seed=9)


def _configs_in_passes(task, whole: int) -> list:
    """Configs of ``task`` that run the reduction in passes (``ic_chunk`` below ``whole``): each
    pair of values of two knobs among them (:func:`covering_pairs`)."""
    configs = [c for c in task.config_space if c["ic_chunk"].val != whole]
    assert {c["ic_chunk"].val for c in configs} == {d for d in (1, 2, 4, 8) if d < whole}
    return covering_pairs(configs)


@for_each_vector_width
def test_passes_over_the_output_compute_the_convolution(cpu, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # threads on channel blocks: a tile of blocks each
    # Strided and padded 3x3, two images, a residual: configs that run in passes.
    args = (2, 256, 9, 9, 64, 3, 3, 2, 1, 1, 32, 16, "float32", ("bias", "add", "relu"))
    task = create_task("conv2d_nchwc", args, cpu.target)
    each_config_computes_the_reference(cpu, task, _configs_in_passes(task, 8), seed=5)


@for_each_vector_width
def test_passes_over_a_row_that_ends_in_a_partial_tile_compute_the_convolution(cpu, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")  # threads on channel blocks: a tile of blocks each
    # A pointwise layer, one row of 13 pixels: tiles of 6 (or 2) leave a partial one at its end.
    args = (1, 512, 1, 13, 512, 1, 1, 1, 0, 1, 32, 32, "float32", ("bias",))
    task = create_task("conv2d_nchwc", args, cpu.target)
    configs = _configs_in_passes(task, 16)
    assert any(13 % c["reg_n"].val for c in configs)
    each_config_computes_the_reference(cpu, task, configs, seed=6)


@pytest.mark.parametrize("args, message", [
    ((12, 3, 3, 8, 16), "ic_bn 8 does not divide C 12"),
    ((16, 3, 3, 8, 10), "blocks of 10 filters by 9 taps"),
    ((16, 9, 9, 8, 16), "blocks of 16 filters by 81 taps"),
    ((16, 1, 1, 8, 16), "blocks of 16 filters by 1 taps"),
    ((16, 3, 3, 0, 16), "ic_bn must be a positive int"),
])
def test_a_kernel_block_intrinsic_of_no_whole_tiles_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        kernel_block_intrin(*args, "float32")


def test_nchwc_blocks_must_divide_the_channels():
    with pytest.raises(InstantiationError, match="ic_bn must be a positive divisor of 12"):
        create_task("conv2d_nchwc", (1, 12, 6, 6, 16, 3, 3, 1, 1, 1, 8, 16, "float32"), "llvm").config_space  # noqa: B018
    with pytest.raises(InstantiationError, match="oc_bn must be a positive divisor of 16"):
        create_task("conv2d_nchwc", (1, 12, 6, 6, 16, 3, 3, 1, 1, 1, 4, 5, "float32"), "llvm").config_space  # noqa: B018


def _covering(space, rng, knobs=None) -> list:
    """The default, then random configs until every value of every knob (of those named in
    ``knobs``, if given) has been drawn."""
    missing = {(k.name, repr(e.value())) for k in space.knobs for e in k.entities
               if knobs is None or k.name in knobs}
    configs = [space.default_config]
    missing -= {(k, repr(v)) for k, v in space.default_config.knob_values().items()}
    for cfg in space.sample(len(space), rng):
        if not missing:
            break
        new = {(k, repr(v)) for k, v in cfg.knob_values().items()} & missing
        if new:
            configs.append(cfg)
            missing -= new
    assert not missing, f"no valid config has {sorted(missing)}"
    return configs


# Small shapes with odd channel counts (3 inputs; 20 outputs, a block and a half), strides, paddings,
# dilation, a batch; 1x1 layers and small images with many filters take the GEMM path (stride,
# padding and dilation included; its microkernels and blockings are covered in
# test_cpu_gemm.py, here its threads and packing). Outputs at most 5 columns wide keep the
# register tiles few.
GEMM_KNOBS = ("parallel_axis", "pack_a")
CASES = [
    ("conv2d_nchw", _conv(3, 9, 20, 3, stride=2, W=8)),
    ("conv2d_nchw", (2, 12, 7, 9, 18, 3, 2, (1, 2), (1, 0, 2, 1), (2, 1), "float32")),
    ("conv2d_nchw", _conv(20, 7, 24, 1, stride=2, pad=0)),
    ("conv2d_nchw", _conv(6, 5, 40, 3)),
    ("conv2d_nchw", (1, 5, 7, 6, 30, 3, 2, 2, (1, 0, 1, 1), (1, 2), "float32")),
    ("conv2d_nchw", _conv(9, 5, 10, 1, pad=0, N=2, W=6)),
    ("conv2d_nchw", _conv(16, 18, 16, 3)),  # transposed in tiles: 18 columns by 9, padded to 32
    ("conv2d_nchwc", (1, 8, 9, 5, 16, 3, 3, 1, 1, 1, 4, 8, "float32")),
    ("conv2d_nchwc", (2, 6, 8, 9, 32, 3, 2, 2, (0, 1), (1, 2), 3, 32, "float32")),
    # rows of 15 columns end in partial tiles on both CPUs: the tiles may run along the plane
    ("conv2d_nchwc", (2, 8, 30, 29, 64, 3, 3, 2, 1, 1, 8, 32, "float32", ("bias", "add", "relu"))),
]


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("name, args", CASES, ids=[f"{n}-{'-'.join(map(str, a[:7]))}" for n, a in CASES])
def test_every_knob_value_computes_the_reference(cpu, name, args):
    task = create_task(name, args, cpu.target)
    inputs, expected = task.reference_data(np.random.default_rng(3))
    gemm = "mr" in {k.name for k in task.config_space.knobs}
    for cfg in _covering(task.config_space, np.random.default_rng(5), GEMM_KNOBS if gemm else None):
        s, tensors = task.instantiate(cfg)
        f = compiler.build(s, tensors, target=task.target, name=name)
        if not cpu.runs_here():
            continue
        (out,) = [poisoned(e.shape, e.dtype) for e in expected]
        f(*inputs, out)
        assert_written(out, expected[0], rtol=1e-4, atol=1e-4, err_msg=f"{task.workload_name} {cfg}")


def test_nchwc_reference_is_the_blocked_nchw_convolution():
    from search_spaces.templates.cpu_conv2d import conv2d_nchw_reference
    from search_spaces.templates.cpu_conv2d_nchwc import conv2d_nchwc_reference

    args = (1, 6, 5, 4, 8, 3, 3, 1, 1, 1)
    (x, w), (y,) = conv2d_nchwc_reference(*args, 3, 4, "float64", rng=np.random.default_rng(0))
    (x2, w2), (y2,) = conv2d_nchw_reference(*args, "float64", rng=np.random.default_rng(0))
    assert x[0, 1, 2, 3, 2] == x2[0, 5, 2, 3] and w[1, 0, 2, 1, 2, 3] == w2[7, 2, 2, 1]
    assert y[0, 1, 4, 3, 2] == y2[0, 6, 4, 3]


@pytest.mark.parametrize("name", ["conv2d_nchw", "conv2d_nhwc"])
def test_string_paddings_compute_topis_convolution(name):
    """The templates take padding as topi does ("SAME" pads the dilated window) and compute
    what topi's references compute on the same data."""
    from compiler import topi

    nchw = name == "conv2d_nchw"
    shape = (1, 5, 7, 6, 8, 3, 2) if nchw else (1, 7, 6, 5, 8, 3, 2)
    task = create_task(name, (*shape, 1, "SAME", (1, 2), "float32"), AVX2.target)
    s, tensors = task.instantiate(task.config_space.default_config)
    f = compiler.build(s, tensors, target=task.target, name=name)
    if not AVX2.runs_here():
        return
    rng = np.random.default_rng(7)
    x, w = (rng.uniform(0.5, 1.5, size=[int(d) for d in t.shape]).astype("float32") for t in tensors[:2])
    python = topi.testing.conv2d_nchw_python if nchw else topi.testing.conv2d_nhwc_python
    expected = python(x, w, 1, "SAME", dilation=(1, 2))
    want = (1, 8, 7, 6) if nchw else (1, 7, 6, 8)  # "SAME" keeps the image's size
    assert expected.shape == tuple(int(d) for d in tensors[2].shape) == want
    out = poisoned(expected.shape, "float32")
    f(x, w, out)
    assert_written(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu", [c for c in CPUS if "avx512f" not in c.features], ids=str)
def test_a_short_padded_row_gets_zeros_past_its_end(cpu):
    """The blocked data of a 7-wide image: rows padded to 9 and rounded up to the transposes'
    16 columns, channel blocks of 8. The columns past the padded image are masked off and must
    be zeros; LLVM's AVX2 backend read such a half of a 16-lane masked load unmasked (the next
    row's values), so the convolution's last column came out wrong. The default config of a
    7x7 layer on AVX2 is such a blocking. (Every x86 host we run on has AVX2.)"""
    from compiler import te
    from search_spaces.templates.cpu_conv2d_nchwc import nchw_to_blocks, schedule_data_blocks

    X = te.placeholder((1, 16, 7, 7), name="X")
    D = nchw_to_blocks(X, 8, (1, 1, 1, 1), "float32")
    s = te.create_schedule(D.op)
    schedule_data_blocks(s, D)
    f = compiler.build(s, [X, D], target=cpu.target)
    x = np.random.default_rng(9).random((1, 16, 7, 7), dtype=np.float32) + 1
    got = poisoned(tuple(int(d.value) for d in D.shape), "float32")
    f(x, got)
    padded = np.zeros((1, 16, 9, got.shape[3]), np.float32)
    padded[:, :, 1:8, 1:8] = x
    want = padded.reshape(1, 2, 8, 9, -1).transpose(0, 1, 3, 4, 2)
    assert_written(got, want)

    task = create_task("conv2d_nchw", _conv(16, 7, 16, 3), cpu.target)
    cfg = task.config_space.default_config
    assert cfg["ic_bn"].val == 8
    inputs, expected = task.reference_data(np.random.default_rng(4))
    out = poisoned(expected[0].shape, "float32")
    compiler.build(*task.instantiate(cfg), target=cpu.target)(*inputs, out)
    assert_written(out, expected[0], rtol=1e-4, atol=1e-4)


@for_each_vector_width
@pytest.mark.parametrize("args", [
    # ResNeXt's 3x3 layer: 4 groups of 16, a residual; strided, 3 groups of 8 on blocks of 4 by 8
    (1, 64, 9, 9, 64, 3, 3, 1, 1, 1, 16, 16, "float32", ("bias", "add", "relu"), 4),
    (2, 24, 10, 7, 48, 3, 3, 2, 1, 1, 4, 8, "float32", (), 3),
    # groups of four blocks of 8 filters: a register tile spans two of a group's blocks
    (1, 64, 6, 6, 64, 1, 1, 1, 0, 1, 8, 8, "float32", ("bias",), 2),
    # data blocks of 16 channels, each two groups of 8: a group read within its block
    (1, 32, 7, 9, 32, 3, 3, 1, 1, 1, 16, 8, "float32", ("bias", "relu"), 4),
], ids=["resnext", "strided", "tiles", "groups-in-a-block"])
def test_grouped_configs_compute_the_convolution(cpu, args):
    task = create_task("conv2d_nchwc", args, cpu.target)
    groups = args[-1]
    N, C, H, W, F, KH, KW, stride, pad = args[:9]
    Ho, Wo = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    assert task.flop >= 2 * N * F * Ho * Wo * C // groups * KH * KW  # a group's channels only
    assert task.flop < 2 * N * F * Ho * Wo * (C // groups * KH * KW + 4)
    space = task.config_space
    blocks_per_group = F // groups // args[11]
    if "oc_tile" in space.space_map:  # a register tile's blocks read the same input: one group's
        spans = {e.value() for e in space.space_map["oc_tile"].entities}
        assert spans and all(blocks_per_group % k == 0 for k in spans), spans
    each_config_computes_the_reference(cpu, task, _covering(space, np.random.default_rng(0)), seed=7)


def test_one_group_keeps_the_workload_of_a_convolution_without_groups():
    args = (1, 32, 6, 6, 32, 3, 3, 1, 1, 1, 16, 16, "float32", ("bias",))
    one = create_task("conv2d_nchwc", (*args, ()), "llvm")
    assert one.args == create_task("conv2d_nchwc", args, "llvm").args
    assert create_task("conv2d_nchwc", (*args, 2), "llvm").args[-1] == 2


@pytest.mark.parametrize("groups, ic_bn, oc_bn, message", [
    (3, 16, 16, "groups=3 must divide the 32 input channels"),
    (4, 6, 8, "ic_bn must be a positive divisor of 8, or a multiple of it that divides 32"),
    (4, 8, 16, "oc_bn must be a positive divisor of 8"),
    (0, 8, 8, r"groups must be \(\) or a positive int, got 0"),
    ("2", 8, 8, r"groups must be \(\) or a positive int"),
])
def test_grouped_blocks_must_divide_a_groups_channels(groups, ic_bn, oc_bn, message):
    args = (1, 32, 6, 6, 32, 3, 3, 1, 1, 1, ic_bn, oc_bn, "float32", (), groups)
    with pytest.raises(InstantiationError, match=message):
        create_task("conv2d_nchwc", args, "llvm").config_space  # noqa: B018


def test_threads_share_data_blocks_of_several_groups_by_rows(monkeypatch):
    # 16 groups of 8 channels at 56x56: on blocks of 8, threads take channel blocks by default;
    # on blocks of 32 (four groups each, as the layer before wrote them) they take rows, each
    # thread reading whole cache lines of the blocks it reads
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    axes = {}
    for ic_bn in (8, 32):
        args = (1, 128, 56, 56, 128, 3, 3, 1, 1, 1, ic_bn, 8, "float32", ("bias", "relu"), 16)
        default = create_task("conv2d_nchwc", args, AVX512.target).config_space.default_config
        axes[ic_bn] = default["parallel_axis"].val
    assert axes == {8: "oc", 32: "rows"}


@for_each_vector_width
@pytest.mark.parametrize("F", [5, 20], ids=["part-of-a-vector", "vector-and-a-part"])
def test_a_block_of_all_filters_that_no_vector_divides_computes_the_convolution(cpu, F):
    # a segmentation head's few classes, one block: its last vector partial
    args = (1, 32, 1, 96, F, 1, 1, 1, 0, 1, 16, F, "float32", ("bias",))
    task = create_task("conv2d_nchwc", args, cpu.target)
    configs = _covering(task.config_space, np.random.default_rng(1))
    each_config_computes_the_reference(cpu, task, configs, seed=8)


@for_each_cpu
def test_an_output_one_column_wide_is_unpacked_element_by_element(cpu):
    # Three images whose 3x3 kernel at stride 2 leaves one output column: no transposed tile is
    # one column wide, so the blocks unpack element by element (the space could not be defined).
    task = create_task("conv2d_nchw", _conv(4, 3, 4, 3, stride=2, pad=0, N=3), cpu.target)
    text = str(compiler.lower(*task.instantiate(task.config_space.default_config)))
    assert "autotune_transpose', tvm_access_ptr('float32', conv2d_nchw" not in text
    each_config_computes_the_reference(cpu, task, covering_pairs(list(task.config_space)), seed=9)
