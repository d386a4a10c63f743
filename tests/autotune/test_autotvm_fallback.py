"""AutoTVM's fallback configs, written as AutoTVM code with only the imports renamed: a template
called where no log has its workload gets a ``FallbackConfigEntity`` (``cfg.is_fallback``) and
sets its own defaults with ``cfg["tile"] = SplitEntity([-1, ...])``, ``cfg.fallback_split`` or
``cfg.fallback_with_reference_log``; the kernels it builds compute the right values. Also
the values AutoTVM's ``define_*`` return."""

from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from autotune import autotvm
from autotune.autotvm.task.dispatcher import FallbackContext
from autotune.autotvm.task.space import (
    FallbackConfigEntity,
    OtherOptionEntity,
    SplitEntity,
)
from compiler import te
from search_spaces import SearchSpaceError, unregister_template

M, N, K = 48, 20, 12
NAME = "test_autotvm_fallback/matmul"
SEEN = []  # the split sizes each run of the template applied


@pytest.fixture(scope="module")
def matmul():
    @autotvm.template(NAME)
    def matmul(m, n, k):
        A = te.placeholder((m, k), name="A")
        B = te.placeholder((k, n), name="B")
        r = te.reduce_axis((0, k), name="r")
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
        s = te.create_schedule(C.op)
        cfg = autotvm.get_config()
        y, x = s[C].op.axis
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_split("tile_x", x, num_outputs=3)
        cfg.define_knob("unroll", [0, 1])
        if cfg.is_fallback:  # as TOPI schedules do: a default better than the space's
            cfg["tile_y"] = SplitEntity([-1, 5])  # not a factor of 48: a guarded tail
            cfg.fallback_split("tile_x", [-1, 4, 2])
            cfg["unroll"] = OtherOptionEntity(1)
        SEEN.append((cfg["tile_y"].size, cfg["tile_x"].size))
        yo, yi = cfg["tile_y"].apply(s, C, y)
        xo, xm, xi = cfg["tile_x"].apply(s, C, x)
        s[C].reorder(yo, xo, yi, xm, xi)
        if cfg["unroll"].val:
            s[C].unroll(xi)
        return s, [A, B, C]

    yield matmul
    unregister_template(NAME)


def _check(s, args):
    f = tvm.build(s, args, target="llvm")
    rng = np.random.default_rng(7)
    a = rng.random((M, K)).astype("float32")
    b = rng.random((K, N)).astype("float32")
    c = np.full((M, N), np.nan, dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_the_fallback_context_hands_out_a_config_the_template_sets(matmul):
    SEEN.clear()
    fallback = FallbackContext()
    task = autotvm.task.create(NAME, args=(M, N, K), target="llvm")
    cfg = fallback.query(tvm.target.Target("llvm"), task.workload)
    assert isinstance(cfg, FallbackConfigEntity) and cfg.is_fallback
    with tvm.target.Target("llvm"):
        s, args = task.instantiate(cfg)
    # The template's settings stay on the config the context keeps for the workload.
    assert SEEN[-1] == ((10, 5), (5, 2, 2))
    assert cfg["tile_y"].size == [10, 5] and cfg["tile_y"].size[-1] == 5
    assert cfg["tile_x"].size == [5, 2, 2] and cfg["unroll"].val == 1
    assert cfg.index == -1  # a split of 48 by 5 is no point of the space
    assert fallback.query(tvm.target.Target("llvm"), task.workload) is cfg
    _check(s, args)


def test_a_template_called_outside_any_log_uses_its_fallback_settings(matmul):
    SEEN.clear()
    with tvm.target.Target("llvm"):
        s, args = matmul(M, N, K)
    assert SEEN[-1] == ((10, 5), (5, 2, 2))
    _check(s, args)


def test_a_tuned_config_is_not_a_fallback(matmul):
    SEEN.clear()
    task = autotvm.task.create(NAME, args=(M, N, K), target="llvm")
    config = task.config_space.get(5)
    assert not config.is_fallback
    with autotvm.ApplyConfig(config):
        with tvm.target.Target("llvm"):
            s, args = matmul(M, N, K)
    assert SEEN[-1] == (config["tile_y"].size, config["tile_x"].size)
    _check(s, args)


def test_fallback_split_picks_the_largest_bounded_factors_innermost_first():
    cfg = FallbackConfigEntity()
    cfg.define_split("tile_0", cfg.axis(128), num_outputs=3)
    cfg.fallback_split("tile_0", [-1, 8, 4])
    assert cfg["tile_0"].size == [4, 8, 4] and cfg["tile_0"].size[1:] == [8, 4]
    cfg.define_split("tile_1", cfg.axis(49), num_outputs=3)
    cfg.fallback_split("tile_1", [-1, 8, 4])
    assert cfg["tile_1"].size == [7, 7, 1]
    with pytest.raises(SearchSpaceError, match="3 axes"):
        cfg.fallback_split("tile_1", [-1, 8])


def test_setting_a_knob_checks_its_kind_and_sizes():
    cfg = FallbackConfigEntity()
    cfg.define_split("tile", cfg.axis(64), num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    cfg["tile"] = SplitEntity([-1, 16])
    assert cfg["tile"].size == [4, 16] and cfg.index >= 0
    assert cfg.index == cfg.space.from_json(cfg.to_json()).index
    cfg["tile"] = SplitEntity([4, 16])
    with pytest.raises(SearchSpaceError, match="takes a SplitEntity"):
        cfg["tile"] = OtherOptionEntity(16)
    with pytest.raises(SearchSpaceError, match="outermost size"):
        cfg["tile"] = SplitEntity([3, 16])
    with pytest.raises(SearchSpaceError, match="2 axes"):
        cfg["tile"] = SplitEntity([-1, 4, 4])


def test_a_fallback_knob_keeps_its_absent_choice():
    """A knob a fallback config defines with ``absent=`` reads a config recorded without it as
    that choice, as the template's own space does."""
    cfg = FallbackConfigEntity()
    cfg.define_knob("unroll", [0, 1])
    cfg.define_knob("plane", [False, True], default=True, absent=False)
    config = cfg.space.from_json({"knobs": {"unroll": 1}})
    assert config["plane"].val is False and config["unroll"].val == 1


def test_fallback_with_reference_log_mimics_the_closest_config():
    def measured(size_n, tile, unroll):
        ref = FallbackConfigEntity()
        ref.define_split("tile_n", ref.axis(size_n), num_outputs=3)
        ref.define_knob("unroll", [0, 1])
        ref["tile_n"] = SplitEntity(tile)
        ref["unroll"] = OtherOptionEntity(unroll)
        return autotvm.MeasureInput("llvm", None, ref), autotvm.MeasureResult((1e-3,), 0, 0.1, 0.0)

    cfg = FallbackConfigEntity()
    cfg.define_split("tile_n", cfg.axis(96), num_outputs=3)
    cfg.define_knob("unroll", [0, 1])
    cfg.fallback_with_reference_log([])  # nothing to mimic: unchanged
    before = cfg.knob_values()
    assert cfg.knob_values() == before
    # 64's factors share 6 of 96's 12; 81's share only 1 and 3.
    cfg.fallback_with_reference_log([measured(81, [-1, 9, 3], 0), measured(64, [-1, 8, 4], 1)])
    assert cfg["tile_n"].size == [3, 8, 4] and cfg["unroll"].val == 1


def test_define_returns_the_output_axes_as_autotvm():
    space = autotvm.ConfigSpace()
    x = space.axis(32)
    assert isinstance(x, autotvm.task.space.VirtualAxis) and x.length == 32
    assert isinstance(space.reduce_axis(8), autotvm.task.space.VirtualAxis)
    axes = space.define_split("tile", x, num_outputs=3)
    assert [a.index for a in axes] == [0, 1, 2] and axes[0].space is space.space_map["tile"]
    assert len(space.define_reorder("order", [space.axis(2), space.axis(3)], policy="all")) == 2
    assert len(space.define_annotate("ann", [space.axis(2), space.axis(4)], policy="try_unroll")) == 2
    assert space.define_knob("unroll", [0, 1]) == []
    cfg = space.get(0)  # in a config the knobs exist: no knob space
    assert [a.index for a in cfg.define_split("tile", x, num_outputs=3)] == [0, 1, 2]
    assert cfg.define_split("tile", x, num_outputs=3)[0].space is None
    assert cfg.define_knob("unroll", [0, 1]) == []
    assert cfg["tile"].size[-1] == cfg["tile"].size[2]
