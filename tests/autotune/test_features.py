"""Cost-model features: itervar features follow the loops; knob features are the encoding."""

from __future__ import annotations

import numpy as np
import pytest

import compiler
import search_spaces
from autotune.tuner.features import (
    ITERVAR_LENGTH,
    FeatureCache,
    config_features,
    itervar_feature_names,
    itervar_features,
)
from compiler import te

NAMES = itervar_feature_names()


def matmul_features(schedule_fn, n: int = 64) -> dict[str, float]:
    """Itervar features of an ``n`` cubed matmul scheduled by ``schedule_fn(s, C)``, by name."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    schedule_fn(s, C)
    feats = itervar_features(compiler.lower(s, [A, B, C], simple_mode=True))
    assert feats.shape == (ITERVAR_LENGTH,) and np.isfinite(feats).all()
    return dict(zip(NAMES, feats.tolist()))


def plain(s, C):
    pass


def tiled(s, C):
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    s[C].parallel(i)


def test_names_cover_the_vector():
    assert len(NAMES) == ITERVAR_LENGTH == len(set(NAMES))


def test_hand_written_schedules_differ_where_their_loops_differ():
    a, b = matmul_features(plain), matmul_features(tiled)
    assert matmul_features(plain) == a  # deterministic
    differ = {name for name in NAMES if a[name] != b[name]}
    # Same work and the same allocations...
    assert a["reduce0.work"] == b["reduce0.work"] == pytest.approx(np.log2(1 + 64 ** 3))
    assert "global_alloc_bytes" not in differ
    # ...but the innermost loop is 64 serial iterations of k in one, 8 vector lanes of j in the other.
    assert a["reduce0.L0.extent"] == pytest.approx(np.log2(65)) and a["reduce0.L0.is_serial"] == 1
    assert b["reduce0.L0.extent"] == pytest.approx(np.log2(9)) and b["reduce0.L0.is_vectorized"] == 1
    assert b["reduce0.vector_width"] == pytest.approx(np.log2(9)) and a["reduce0.vector_width"] == 1
    assert b["reduce0.L3.is_parallel"] == 1 and a["reduce0.parallel_extent"] == 1
    assert b["reduce0.loops"] == 4 and a["reduce0.loops"] == 3
    # Strides along the innermost loop: k walks B by rows (64) in one, j walks it by 1 in the other.
    assert a["reduce0.buf2.L0.stride"] == pytest.approx(np.log2(65))
    assert b["reduce0.buf2.L0.stride"] == pytest.approx(1.0)
    # The stored C is reused across the k loop in one, not within the vector loop of the other.
    assert a["reduce0.buf0.L0.reuse"] == pytest.approx(np.log2(65))
    assert b["reduce0.buf0.L0.reuse"] == pytest.approx(1.0)
    assert {"reduce0.L0.extent", "reduce0.buf1.L0.bytes", "reduce0.L2.extent"} <= differ


def test_unroll_shows_up():
    def unrolled(s, C):
        (k,) = C.op.reduce_axis
        ko, ki = s[C].split(k, factor=4)
        s[C].unroll(ki)

    u = matmul_features(unrolled)
    assert u["reduce0.L0.is_unrolled"] == 1 and u["reduce0.unroll_length"] == pytest.approx(np.log2(5))


def test_template_configs_have_fixed_length_and_differ():
    task = search_spaces.create_task("matmul", (512, 512, 512, "float32"), "llvm")
    configs = task.config_space.sample(12, np.random.default_rng(0))
    rows = [config_features(task, c) for c in configs]
    assert all(r.shape == (ITERVAR_LENGTH,) for r in rows)
    assert len({r.tobytes() for r in rows}) == len(rows)


@pytest.fixture
def every_kind_of_knob():
    """A task whose space has one knob of each kind; only its encoding is used here."""

    @search_spaces.template("test_features_knobs")
    def knobs(n):
        A = te.placeholder((n, n, n), name="A")
        B = te.compute((n, n, n), lambda i, j, k: A[i, j, k] * 2.0, name="B")
        s = te.create_schedule(B.op)
        cfg = search_spaces.get_config()
        i, j, k = B.op.axis
        cfg.define_split("tile", n, num_outputs=3)
        cfg.define_reorder("order", [i, j, k])
        cfg.define_annotate("ann", [j, k], policy="try_unroll_vec")
        cfg.define_knob("factor", [4, 8, 16])
        cfg.define_knob("parallel", [False, True])
        cfg.define_knob("where", ["root", "inline", "at_block"])
        return s, [A, B]

    yield search_spaces.create_task("test_features_knobs", (32,), "llvm")
    search_spaces.unregister_template("test_features_knobs")


@pytest.mark.parametrize("knobs, expected", [
    # split sizes as log2; the permutation; annotations none/unroll/vec as 0/1/2; numbers and
    # bools as themselves; other values as their position among the candidates
    ({"tile": [2, 4, 4], "order": [2, 0, 1], "ann": ["unroll", "vec"], "factor": 8, "parallel": True,
      "where": "at_block"}, [1, 2, 2, 2, 0, 1, 1, 2, 8, 1, 2]),
    ({"tile": [32, 1, 1], "order": [0, 1, 2], "ann": ["none", "none"], "factor": 16, "parallel": False,
      "where": "root"}, [5, 0, 0, 0, 1, 2, 0, 0, 16, 0, 0]),
])
def test_knob_features_encode_each_knob_by_hand(every_kind_of_knob, knobs, expected):
    task = every_kind_of_knob
    config = task.config_space.from_json({"knobs": knobs})
    got = config_features(task, config, "knob")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.float32))


def test_feature_cache():
    task = search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm")
    config = task.config_space.sample(1, np.random.default_rng(1))[0]
    cache = FeatureCache("itervar")
    x, ok = cache.get(task, [config.index, config.index])
    assert ok.all() and len(cache) == 1 and (x[0] == x[1]).all()
    np.testing.assert_array_equal(x[0], config_features(task, config))
    with pytest.raises(ValueError, match="unknown feature type"):
        FeatureCache("pixels")


def test_double_buffered_shared_tiles_count_twice():
    """Configs that differ only in double buffering differ in the shared memory they hold."""
    task = search_spaces.create_task("matmul", (256, 256, 256, "float32"), "cuda -arch=sm_80")
    knobs = {"tile_y": [2, 2, 16, 4], "tile_x": [2, 2, 16, 4], "tile_k": [32, 8], "unroll_k": 1, "vec": 4,
             "k_major": 1}
    space = task.config_space
    single, double = (config_features(task, space.from_json({"knobs": {**knobs, "double_buffer": d}}))
                      for d in (0, 1))
    shared = itervar_feature_names().index("shared_alloc_bytes")
    tile_bytes = 4 * 8 * (128 + 128)  # float32, a k tile of 8, both 128-wide operand tiles
    assert single[shared] == pytest.approx(np.log2(1 + tile_bytes))
    assert double[shared] == pytest.approx(np.log2(1 + 2 * tile_bytes))
    assert np.array_equal(np.delete(single, shared), np.delete(double, shared))


def inner_parallel(s, C):
    i, _ = C.op.axis
    io, ii = s[C].split(i, factor=16)
    s[C].parallel(ii)


def test_parallel_loops_count_their_entries():
    """Each entry into a parallel loop is a fork and join: a parallel loop inside a serial one
    of 4 iterations is entered 4 times, one at the top once; no parallel loop, no entry."""
    a, top, inner = (matmul_features(f) for f in (plain, tiled, inner_parallel))
    assert a["parallel_loops"] == a["parallel_launches"] == a["reduce0.parallel_launches"] == 0
    assert top["parallel_loops"] == inner["parallel_loops"] == 1
    assert top["parallel_launches"] == top["reduce0.parallel_launches"] == pytest.approx(1.0)
    assert inner["parallel_launches"] == inner["reduce0.parallel_launches"] == pytest.approx(np.log2(5))
    assert top["parallel_max_extent"] == pytest.approx(np.log2(65))
    assert inner["parallel_max_extent"] == inner["reduce0.parallel_extent"] == pytest.approx(np.log2(17))
    # The plain schedule's work (the reduction and C's initialisation) is all serial; the others' none.
    assert a["serial_work"] == pytest.approx(np.log2(1 + 64 ** 3 + 64 ** 2))
    assert top["serial_work"] == inner["serial_work"] == 0


@pytest.mark.parametrize("kind", ["vectorized", "unrolled"])
def test_guards_on_microkernel_loops_show_up(kind):
    """A split that does not divide the axis guards the inner loop: tail code in a vector or
    unrolled loop is told apart from a guard on outer loops only."""
    def split_j(factor):
        def schedule(s, C):
            _, j = C.op.axis
            _, ji = s[C].split(j, factor=factor)
            (s[C].vectorize if kind == "vectorized" else s[C].unroll)(ji)
        return schedule

    exact, tail = matmul_features(split_j(16)), matmul_features(split_j(24))
    assert exact["reduce0.guarded"] == 0 and tail["reduce0.guarded"] == 1
    other = "unrolled" if kind == "vectorized" else "vectorized"
    assert exact[f"reduce0.guard_{kind}"] == 0 and tail[f"reduce0.guard_{kind}"] == 1
    assert tail[f"reduce0.guard_{other}"] == 0
