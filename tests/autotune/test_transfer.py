"""autotune.transfer: tuned configs of other shapes, adapted to shapes nobody tuned."""

from __future__ import annotations

import logging

import pytest
from helpers import assert_written, poisoned, random_array

import autotune
import compiler
import db
from autotune.selection import record_of
from autotune.transfer import BorrowedConfig, adapt, arg_distance, borrow, candidates, warm_start_configs
from measure.records import MeasureResult

# Spaces depend on the target's vectors: pinned models keep them the same on every machine.
# Haswell's code (AVX2) runs on every x86 machine the suite runs on; znver4's is only compiled.
RUNS_HERE = "llvm -mcpu=haswell"
ZEN4 = "llvm -mcpu=znver4"


def _record(task, cfg, *costs):
    result = MeasureResult(tuple(costs), None, "", 0.1, 0.1, 1.7e9, "w")
    return record_of(task, cfg, result, host="h")


@pytest.fixture
def log(tmp_path):
    with db.open(tmp_path / "tuning.db") as opened:
        yield opened


@autotune.template("test_transfer_tiles")
def _tiles(n, m, policy):
    """``B = A * 2 + 1`` on an ``n x m`` array, both axes split (three ways and two)."""
    from compiler import te

    A = te.placeholder((n, m), name="A", dtype="float32")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    i, j = B.op.axis
    cfg.define_split("tile_i", i, num_outputs=3, policy=policy)
    cfg.define_split("tile_j", j, num_outputs=2, policy=policy, max_factor=16)
    cfg.define_knob("unroll", [False, True])
    io, im, ii = cfg["tile_i"].apply(s, B, i)
    jo, ji = cfg["tile_j"].apply(s, B, j)
    s[B].reorder(io, jo, im, ii, ji)
    s[B].vectorize(ji)
    if cfg["unroll"].val:
        s[B].unroll(ii)
    return s, [A, B]


def _run_tiles(task, config, rng):
    s, args = task.instantiate(config)
    f = compiler.build(s, args, target=task.target)
    n, m, _ = task.args
    a = random_array(rng, (n, m), "float32")
    b = poisoned((n, m), "float32")
    f(a, b)
    assert_written(b, a * 2 + 1)


# ---------------------------------------------------------------------------- adapting splits


def test_every_config_of_a_power_of_two_shape_adapts_to_a_valid_config_of_an_odd_one():
    src = autotune.create_task("test_transfer_tiles", (64, 32, "factors"), RUNS_HERE)
    dst = autotune.create_task("test_transfer_tiles", (100, 30, "factors"), RUNS_HERE)
    adapted = set()
    for cfg in src.config_space:
        got = adapt(cfg.knob_values(), dst.config_space, src.args, dst.args)
        assert got is not None
        assert dst.config_space.is_valid(got.config.index)
        assert dst.config_space.from_json(got.config.to_json()) == got.config
        for name, (old, new) in got.changed.items():  # only what had to change did
            assert old != new and cfg[name].value() == old
        adapted.add(got.config.index)
    assert len(adapted) > 1  # the tuned choices matter, not one default for all


def test_a_split_takes_the_nearest_factorisation_keeping_the_innermost_factor():
    src = autotune.create_task("test_transfer_tiles", (64, 32, "factors"), RUNS_HERE)
    dst = autotune.create_task("test_transfer_tiles", (100, 30, "factors"), RUNS_HERE)
    tuned = {"tile_i": [4, 4, 4], "tile_j": [4, 8], "unroll": True}
    got = adapt(tuned, dst.config_space, src.args, dst.args)
    # 100 = 25 * 4: innermost 4 kept, the middle 4 becomes the nearest that fits with it (5);
    # 8 does not divide 30: its nearest divisor in log space is 10 (6 and 5 are further).
    assert got.config["tile_i"].size == (5, 5, 4)
    assert got.config["tile_j"].size == (3, 10)
    assert got.config["unroll"].val is True
    assert set(got.changed) == {"tile_i", "tile_j"}


def test_a_split_keeps_its_factors_with_a_guarded_tail_where_the_policy_allows_one():
    src = autotune.create_task("test_transfer_tiles", (64, 32, "power2"), RUNS_HERE)
    dst = autotune.create_task("test_transfer_tiles", (100, 30, "power2"), RUNS_HERE)
    tuned = {"tile_i": [4, 4, 4], "tile_j": [4, 8], "unroll": False}
    got = adapt(tuned, dst.config_space, src.args, dst.args)
    assert got.config["tile_i"].size == (7, 4, 4)  # 112 >= 100: a guarded tail
    assert got.config["tile_j"].size == (4, 8)


def test_a_split_that_held_the_whole_axis_still_does():
    src = autotune.create_task("test_transfer_tiles", (64, 32, "factors"), RUNS_HERE)
    dst = autotune.create_task("test_transfer_tiles", (120, 30, "factors"), RUNS_HERE)
    tuned = {"tile_i": [1, 16, 4], "tile_j": [2, 16], "unroll": False}
    got = adapt(tuned, dst.config_space, src.args, dst.args)
    assert got.config["tile_i"].size == (1, 30, 4)  # not (2, 15, 4), nearer to 16 x 4


@pytest.mark.parametrize("policy", ["factors", "power2"])
def test_adapted_kernels_compute_what_numpy_does(policy, rng):
    src = autotune.create_task("test_transfer_tiles", (64, 32, policy), RUNS_HERE)
    dst = autotune.create_task("test_transfer_tiles", (100, 30, policy), RUNS_HERE)
    for cfg in src.config_space.sample(3, rng=5):
        got = adapt(cfg.knob_values(), dst.config_space, src.args, dst.args)
        _run_tiles(dst, got.config, rng)


def test_conv2d_configs_of_16_channels_adapt_to_12_in_and_20_out(rng):
    def conv(c, f):
        return autotune.create_task("conv2d_nchw", (1, c, 8, 8, f, 3, 3, 1, 1, 1, "float32"), RUNS_HERE)

    src, dst = conv(16, 16), conv(12, 20)
    adapted = [adapt(c.knob_values(), dst.config_space, src.args, dst.args, src.config_space).config
               for c in src.config_space]
    assert all(dst.config_space.is_valid(c.index) for c in adapted)
    inputs, (expected,) = dst.reference_data(rng)
    adapted.sort(key=lambda c: c.index)
    for cfg in {adapted[0], adapted[-1]}:  # the two ends of what the tuned configs became
        s, args = dst.instantiate(cfg)
        f = compiler.build(s, args, target=dst.target)
        out = poisoned(expected.shape, "float32")
        f(*inputs, out)
        assert_written(out, expected, rtol=1e-4, atol=1e-4)


def test_unknown_knobs_are_dropped_and_missing_ones_take_their_default():
    dst = autotune.create_task("test_transfer_tiles", (100, 30, "factors"), RUNS_HERE)
    got = adapt({"tile_i": [4, 5, 5], "gone": 3}, dst.config_space)
    default = dst.config_space.default_config
    assert got.config["tile_i"].size == (4, 5, 5)
    assert got.config["tile_j"] == default["tile_j"] and got.config["unroll"] == default["unroll"]


def test_arg_distance():
    assert arg_distance([64, "float32"], [64, "float32"]) == 0
    assert arg_distance([64, (1, 2)], [128, (1, 4)]) == pytest.approx(2.0)  # log2 ratios, nested too
    assert arg_distance([64, "float32"], [64, "float64"]) is None
    assert arg_distance([64], [64, 1]) is None


# ---------------------------------------------------------------------------- GEMM


def test_matmul_1000_borrows_an_adapted_config_from_power_of_two_shapes(log, caplog):
    tuned = {n: autotune.create_task("matmul", (n, n, n, "float32"), ZEN4) for n in (512, 1024)}
    new = autotune.create_task("matmul", (1000, 1000, 1000, "float32"), ZEN4)
    space = tuned[1024].config_space
    # The tuned winner runs the whole reduction in registers: kc = K = 1024, which 1000's space lacks.
    best = space.from_json({"knobs": {**space.default_config.knob_values(), "mr": 10, "nr": 32,
                                      "mc_panels": 16, "kc": 1024}})
    log.add([_record(tuned[1024], best, 1e-3), _record(tuned[1024], space.default_config, 2e-3),
             _record(tuned[512], tuned[512].config_space.default_config, 1e-4)])
    with caplog.at_level(logging.WARNING):
        cfg = autotune.apply_history_best(log).query(ZEN4, ("matmul", 1000, 1000, 1000, "float32"))
    assert isinstance(cfg, BorrowedConfig) and not cfg.is_fallback
    assert cfg.borrowed_from.startswith("matmul(1024,1024,1024,float32)")
    assert cfg.knob_values() == {**best.knob_values(), "kc": 1000}  # kc followed K, the rest kept
    assert cfg.changed == {"kc": (1024, 1000)}
    assert cfg.index != new.config_space.default_config.index
    assert new.config_space.is_valid(cfg.index)
    assert "borrowing the best config of matmul(1024,1024,1024,float32)" in caplog.text
    assert "kc 1024 -> 1000" in caplog.text


def test_a_gemm_block_at_the_end_of_its_range_stays_there():
    src, dst = (autotune.create_task("matmul", (n, n, n, "float32"), ZEN4) for n in (1024, 1536))
    tuned = src.config_space.from_json({"knobs": {**src.config_space.default_config.knob_values(), "mr": 8,
                                                  "nr": 32, "mc_panels": 16, "nc_panels": 32, "kc": 1024,
                                                  "parallel_axis": "rows"}})
    assert src.config_space.space_map["nc_panels"].entities[-1].val == 32  # all columns of 1024
    got = adapt(tuned.knob_values(), dst.config_space, src.args, dst.args, src.config_space)
    # all columns of 1536 are 64 panels of 32; the register tile is kept
    assert got.changed == {"nc_panels": (32, 64), "kc": (1024, 1536)}


def test_an_adapted_matmul_config_computes_the_product(log, rng):
    src = autotune.create_task("matmul", (64, 64, 64, "float32"), RUNS_HERE)
    dst = autotune.create_task("matmul", (50, 70, 45, "float32"), RUNS_HERE)
    for cfg in src.config_space.sample(4, rng=11):
        log.add(_record(src, cfg, 1e-4 * (1 + cfg.index % 7)))
    configs = warm_start_configs(log, dst, 3)
    assert len(configs) == 3
    a, b = random_array(rng, (50, 70), "float32"), random_array(rng, (70, 45), "float32")
    for cfg in configs:
        s, args = dst.instantiate(cfg)
        f = compiler.build(s, args, target=dst.target)
        c = poisoned((50, 45), "float32")
        f(a, b, c)
        assert_written(c, a @ b, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- ranking


def _scale(n, target=ZEN4):
    return autotune.create_task("test_transfer_tiles", (n, 16, "factors"), target)


def test_candidates_rank_by_how_well_they_did_where_they_were_tuned(log):
    near, far, new = _scale(64), _scale(256), _scale(96)
    n1, n2, n3 = near.config_space.sample(3, rng=1)
    f1, f2 = far.config_space.sample(2, rng=2)
    # near: n1 best, n2 1.5x slower, n3 3x; far (slower in seconds, a bigger shape): f1 best, f2 1.2x.
    log.add([_record(near, n1, 1e-3), _record(near, n2, 1.5e-3), _record(near, n3, 3e-3),
             _record(far, f1, 4e-3), _record(far, f2, 4.8e-3)])
    found = candidates(log, new, 5)
    assert [(c.source_key, round(c.relative_score, 3)) for c in found][:4] == [
        (near.workload_key, 1.0), (far.workload_key, 1.0), (far.workload_key, 1.2), (near.workload_key, 1.5)]
    assert found[0].borrowed_from == f"test_transfer_tiles(64,16,factors) on {ZEN4}"
    assert found[0].source_score == pytest.approx(1e-3 * 1.1)  # the confident cost of one sample
    assert len({c.index for c in found}) == len(found)  # no config twice
    assert all(new.config_space.is_valid(c.index) for c in found)
    with pytest.raises(ValueError, match="k must be"):
        candidates(log, new, 0)


def test_the_choice_does_not_depend_on_the_order_records_arrived_in(tmp_path):
    near, far, new = _scale(64), _scale(256), _scale(96)
    records = [_record(task, c, 1e-3 * (1 + i % 3)) for task, seed in ((near, 3), (far, 4))
               for i, c in enumerate(task.config_space.sample(6, rng=seed))]
    picks = []
    for name, order in (("a", records), ("b", records[::-1])):
        with db.open(tmp_path / f"{name}.db") as log:
            log.add(order)
            picks.append([(c.index, c.source_key) for c in candidates(log, new, 6)])
    assert picks[0] == picks[1]


def test_warm_start_configs(log):
    near, new = _scale(64), _scale(96)
    tuned = near.config_space.sample(4, rng=6)
    log.add([_record(near, c, 1e-3 * (i + 1)) for i, c in enumerate(tuned)])
    log.add(_record(new, new.config_space.default_config, 1e-6))  # its own records are not borrowed
    configs = warm_start_configs(log, new, 2)
    assert [c.source_key for c in configs] == [near.workload_key] * 2
    assert [c.relative_score for c in configs] == [1.0, pytest.approx(2.0)]
    assert warm_start_configs(log, new, 0) == []
    with pytest.raises(ValueError, match="k must be"):
        warm_start_configs(log, new, -1)


def test_other_models_only_when_asked(log):
    elsewhere, new = _scale(64, "llvm -mcpu=skylake-avx512"), _scale(96)
    log.add(_record(elsewhere, elsewhere.config_space.default_config, 1e-3))
    assert borrow(log, new) is None
    got = borrow(log, new, other_models=True)
    assert got.source_key == elsewhere.workload_key
