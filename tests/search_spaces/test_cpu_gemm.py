"""The GEMM family on CPUs (matmul, dense, batch_matmul): the register file read off the target,
a space of feasible microkernels and blockings only, a sensible default, and every knob value
computing what numpy computes on pinned AVX-512 and AVX2 CPUs."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CPUS, assert_written, for_each_cpu, poisoned

import compiler
from compiler.codegen.llvm import MAX_STACK_BYTES
from compiler.simd import vector_lanes, vector_registers
from search_spaces import create_task
from search_spaces.templates._gemm import L2_BYTES, L3_BYTES_PER_CORE

AVX512 = next(c for c in CPUS if "avx512f" in c.features)
AVX2 = next(c for c in CPUS if "avx512f" not in c.features)


def _file(cpu) -> tuple[int, int]:
    """(float32 lanes, vector registers) of ``cpu``, from its features."""
    return (16, 32) if "avx512f" in cpu.features else (8, 16)


@for_each_cpu
def test_vector_width_and_registers_follow_the_target(cpu):
    with compiler.Target(cpu.target):
        assert (vector_lanes("float32"), vector_registers()) == _file(cpu)
        assert vector_lanes("float64") == _file(cpu)[0] // 2
    with compiler.Target("llvm -mcpu=x86-64"):  # SSE2 only
        assert (vector_lanes("float32"), vector_registers()) == (4, 16)
    with compiler.Target(f"{cpu.target} -mattr=-avx512f"):
        assert (vector_lanes("float32"), vector_registers()) == (8, 16)
    # a target named in the call wins over the current one
    with compiler.Target("llvm -mcpu=x86-64"):
        assert (vector_lanes("float32", cpu.target), vector_registers(cpu.target)) == _file(cpu)


def _gemm_sizes(task):
    """(M, N, K) of a GEMM task: output rows and columns, reduction."""
    a = task.args
    if task.template in ("matmul", "dense"):
        return a[0], a[2], a[1]
    return a[1], a[3], a[2]


@for_each_cpu
@pytest.mark.parametrize("size", [1024, 2048])
def test_space_holds_only_feasible_microkernels_and_blockings(cpu, size):
    task = create_task("matmul", (size, size, size, "float32"), cpu.target)
    space = task.config_space
    lanes, registers = _file(cpu)
    assert 300 <= len(space) <= 3000  # small enough for 128 trials to cover its good region
    seen = set()
    for cfg in space:
        v = cfg.knob_values()
        mr, nr, kc = v["mr"], v["nr"], v["kc"]
        mc, nc = v["mc_panels"] * mr, v["nc_panels"] * nr
        nv = nr // lanes
        assert nr % lanes == 0 and nv in (2, 4)  # three vectors wide compiles to slow code
        budget = registers - nv - 1  # the B operands and one broadcast
        assert budget / 2 <= mr * nv <= budget, v
        shortest = -(-32 // mr) * mr  # row blocks of at least 32 rows
        assert mc >= 32 and (mc == shortest or mc * size * 4 <= L3_BYTES_PER_CORE), v
        if kc < size:
            assert mc * nc * 4 <= MAX_STACK_BYTES and v["parallel_axis"] == "rows", v
            assert mc * kc * 4 <= L2_BYTES, v  # the slice of A a sweep reads stays in L2
        elif v["parallel_axis"] != "cols":
            assert nc >= size, v  # one column block
        seen.add((mr, nr))
    assert {nr for _, nr in seen} == {2 * lanes, 4 * lanes}
    assert len(space.space_map["kc"]) > 1


@for_each_cpu
@pytest.mark.parametrize("size", [1000, 1001])
def test_default_for_sizes_no_vector_divides_is_two_vectors_wide(cpu, size):
    lanes, _ = _file(cpu)
    knobs = create_task("matmul", (size, size, size, "float32"), cpu.target).config_space.default_config
    assert knobs["nr"].val == 2 * lanes


@for_each_cpu
def test_default_config_is_a_blis_kernel(cpu, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    lanes, registers = _file(cpu)
    for size in (1024, 2048, 8192):
        task = create_task("matmul", (size, size, size, "float32"), cpu.target)
        v = task.config_space.default_config.knob_values()
        mr, nr = v["mr"], v["nr"]
        nv = nr // lanes
        assert mr * nv >= 8 and mr * nv + nv + 1 <= registers  # covers the FMA latency, no spills
        if registers == 32:
            assert (mr, nr) == (8, 32)  # two vectors wide, no padding
        mc = v["mc_panels"] * mr
        blocks = -(-size // mc)
        assert blocks / (-(-blocks // 2) * 2) >= 0.9  # row blocks shared fairly by two threads
        if registers == 32:
            assert size % mc == 0 and blocks % 2 == 0  # no tail: even blocks
        assert v["parallel_axis"] == "rows"
        assert v["kc"] * nr * 4 <= L2_BYTES // 2  # the B micro-panel in use fits half of L2
        assert (v["kc"] < size) == (size * nr * 4 > L2_BYTES // 2)  # blocked only where K x nr spills
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "4")
    v = create_task("batch_matmul", (8, 64, 256, 64, "float32"), cpu.target).config_space.default_config
    assert v["parallel_axis"].val == "batch"
    v = create_task("dense", (4, 512, 1024, "float32"), cpu.target).config_space.default_config
    assert v["parallel_axis"].val == "cols"  # four rows cannot feed four threads


@for_each_cpu
@pytest.mark.parametrize("filters, size", [(116, 14), (58, 28), (64, 28), (256, 14)])
def test_default_threads_share_the_tiles_fairly(cpu, monkeypatch, filters, size):
    # A 1x1 convolution as a GEMM of `filters` rows: threads on row blocks only where each gets
    # a fair share of the row tiles, a short last block counted as short (116 rows in tiles of
    # 13 make 9, in blocks of 8 and 1: 8 to 1), else on columns
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    args = (1, filters, size, size, filters, 1, 1, 1, 0, 1, "float32", ("bias", "relu"))
    v = create_task("conv2d_nchw", args, cpu.target).config_space.default_config.knob_values()
    tiles = -(-filters // v["mr"])
    blocks = -(-tiles // v["mc_panels"])
    busiest = min(tiles, v["mc_panels"] * -(-blocks // 2))  # the tiles of the first thread's blocks
    if v["parallel_axis"] == "rows":
        assert tiles / (2 * busiest) >= 0.9, v
    else:
        assert v["parallel_axis"] == "cols" and tiles / (2 * busiest) < 0.9, v


@pytest.mark.parametrize("threads", ["1", "3", "16"])
def test_default_config_is_valid_for_any_thread_count(threads, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", threads)
    for name, args in [("matmul", (1024, 1024, 1024, "float32")), ("matmul", (1, 300, 7, "float32")),
                       ("dense", (16, 4096, 1000, "float32")), ("batch_matmul", (1, 64, 64, 64, "float32")),
                       ("batch_matmul", (12, 128, 64, 128, "float32"))]:
        space = create_task(name, args, AVX512.target).config_space
        assert space.is_valid(space.default_config.index)
        assert space.default_config.knob_values() == {k.name: k[k.default].value() for k in space.knobs}


def _computes_the_reference_on_avx2(task, s, tensors, seed: int) -> None:
    """``task``'s schedule ``s`` builds for AVX2 and, where that runs, writes the reference."""
    f = compiler.build(s, tensors, target=task.target, name=task.name)
    if AVX2.runs_here():
        inputs, expected = task.reference_data(np.random.default_rng(seed))
        out = poisoned(expected[0].shape, expected[0].dtype)
        f(*inputs, out)
        assert_written(out, expected[0], rtol=1e-4, atol=1e-4)


def test_threads_share_the_last_row_block():
    # 100 rows in blocks of 48: the last block holds 4. Run on one thread after the parallel
    # loop, such a block cost a 2048 matmul with 6-row tiles a tenth of its time on two
    # threads; in the loop, it gets code of its own that checks only the rows past M.
    task = create_task("matmul", (100, 64, 64, "float32"), AVX2.target)
    knobs = {"mr": 6, "nr": 16, "mc_panels": 8, "nc_panels": 4, "kc": 64, "parallel_axis": "rows",
             "pack_a": True}
    s, tensors = task.instantiate(task.config_space.from_json({"knobs": knobs}))
    lines = [line.strip() for line in str(compiler.lower(s, tensors)).splitlines()]
    packing_b, row_blocks = [line for line in lines if line.endswith(" parallel:")]
    assert packing_b == "for i1.outer.i0.fused in range(16) parallel:"  # 4 runs of 16 rows x 4 panels
    assert row_blocks == "for i0.outer in range(3) parallel:"  # all three of them
    # inside it only the rows past M are checked: the first tile's four rows, unrolled, where
    # they are zeroed and where they accumulate (the other tiles' rows all lie past M), and the
    # rows written back
    assert [line for line in lines if line.startswith("if ")] == [
        "if i0.outer == 2:", *["if i0.inner.outer < 1:"] * 8, "if i0.inner.outer * 6 + i0.inner.inner < 4:"]
    _computes_the_reference_on_avx2(task, s, tensors, seed=3)


@pytest.mark.parametrize("pack_a", [False, True])
def test_a_batched_gemm_split_by_rows_forks_once_for_every_product(pack_a):
    # The threads take the same rows of every product in one parallel region, not one region per
    # product: a Winograd layer's 36 tile positions were 36 forks and joins a call.
    task = create_task("batch_matmul", (3, 40, 48, 33, "float32"), AVX2.target)
    knobs = {"mr": 4, "nr": 16, "mc_panels": 8, "nc_panels": 4, "kc": 48, "parallel_axis": "rows",
             "pack_a": pack_a}
    s, tensors = task.instantiate(task.config_space.from_json({"knobs": knobs}))
    lines = [line.strip() for line in str(compiler.lower(s, tensors)).splitlines()]
    parallel = [i for i, line in enumerate(lines) if line.endswith(" parallel:")]
    row_blocks = parallel[-1]
    assert lines[row_blocks] == "for i1.outer in range(2) parallel:"  # 40 rows in blocks of 32
    # every product's loop inside the region, and A packed for one product's block at a time
    assert any(line.startswith("for i0 in range(3)") for line in lines[row_blocks:])
    assert not any(line.startswith("for i0 in range(3)") for line in lines[parallel[0] + 1:row_blocks])
    if pack_a:
        assert "allocate A_packed[float32 * 1536], global" in lines  # one product's 32 rows x 48
    _computes_the_reference_on_avx2(task, s, tensors, seed=5)


# Shapes with tails in every axis and K long enough for kc blocks (128 < K).
CASES = [("matmul", (20, 150, 40, "float32")),
         ("dense", (9, 140, 50, "float32", True)),
         ("batch_matmul", (3, 19, 136, 33, "float32"))]


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


@pytest.mark.parametrize("cpu", [AVX512, AVX2], ids=str)
@pytest.mark.parametrize("name, args", CASES, ids=[c[0] for c in CASES])
def test_every_knob_value_computes_the_reference(cpu, name, args):
    task = create_task(name, args, cpu.target)
    inputs, expected = task.reference_data(np.random.default_rng(7))
    configs = _covering(task.config_space, np.random.default_rng(11))
    kcs = {c["kc"].val for c in configs}
    K = _gemm_sizes(task)[2]
    assert K in kcs and min(kcs) < K  # the whole reduction in registers, and in kc blocks
    for cfg in configs:
        s, tensors = task.instantiate(cfg)
        f = compiler.build(s, tensors, target=task.target, name=name)
        if not cpu.runs_here():
            continue
        (out,) = [poisoned(e.shape, e.dtype) for e in expected]
        f(*inputs, out)
        assert_written(out, expected[0], rtol=1e-4, atol=1e-4, err_msg=f"{task.workload_name} {cfg}")


@pytest.mark.parametrize("channels, tiles_axis", [(64, "rows"), (512, "batch")])
def test_a_winograd_gemm_s_threads_take_its_tiles_by_default_while_u_fits_l2(monkeypatch, channels,
                                                                              tiles_axis):
    # On tiles each thread multiplies the tiles its input transform wrote (on tile positions half
    # of them come from the other core), but reads all of U: 64 channels' (576 KiB) fits a core's
    # L2; 512 channels' (16 MiB) would be read twice from memory.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    task = create_task("conv2d_nchwc_winograd", (1, channels, 56, 56, channels, 1, 4, 32, 32, 32, "float32"),
                       AVX2.target)
    default = task.config_space.default_config
    assert (36 * channels * channels * 4 <= L2_BYTES) is (tiles_axis == "rows")
    assert default["parallel_axis"].val == tiles_axis
    # the other split stays in the space, for the tuner to time
    assert {c["parallel_axis"].val for c in task.config_space} >= {"rows", "batch"}
