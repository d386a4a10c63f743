"""``dense_pack``: dense with its weight packed before the call, in micro-panels of the width
the caller picks. Its space is dense's with that one tile width; every config tried computes
what numpy computes (NaN-poisoned outputs), with and without epilogues."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import for_each_cpu, poisoned

import compiler
from compiler.simd import vector_lanes
from search_spaces import InstantiationError, SearchSpaceError, create_task
from search_spaces.templates.cpu_dense import pack_dense_weight

LANES = vector_lanes("float32")  # the host's, which "llvm" compiles for

# (batch, in_dim, out_dim, vectors per micro-panel): gemv-like and blocked rows, out_dim
# not a multiple of nr, one and two vectors wide
SHAPES = [(1, 37, 3 * LANES + 5, 1), (1, 20, 2 * LANES - 3, 2), (7, 19, 5 * LANES + 1, 2),
          (16, 24, 4 * LANES, 1), (16, 33, 3 * LANES + 7, 2)]
CONFIGS = 8


def _task(batch, in_dim, out_dim, nr, epilogue=(), target="llvm"):
    return create_task("dense_pack", (batch, in_dim, out_dim, nr, "float32"), target,
                       kwargs={"epilogue": epilogue})


def _check_configs(task, count: int) -> None:
    inputs, (want,) = task.reference_data(np.random.default_rng(31))
    space = task.config_space
    configs = [space.default_config] + space.sample(count, np.random.default_rng(2024))
    for cfg in configs:
        s, tensors = task.instantiate(cfg)
        f = compiler.build(s, tensors, target="llvm", name="dense_pack")
        got = poisoned(want.shape, want.dtype)
        f(*inputs, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(cfg.knob_values()))


def test_pack_dense_weight_lays_out_micro_panels_padded_with_zeros():
    w = np.arange(1, 5 * 3 + 1, dtype="float32").reshape(5, 3)  # out_dim 5, in_dim 3
    wp = pack_dense_weight(w, 2)
    assert wp.shape == (3, 3, 2) and wp.dtype == w.dtype and wp.flags.c_contiguous
    for j in range(5):
        for k in range(3):
            assert wp[j // 2, k, j % 2] == w[j, k]
    assert (wp[2, :, 1] == 0).all()
    assert pack_dense_weight(w, 5).shape == (1, 3, 5)


@pytest.mark.parametrize("batch, in_dim, out_dim, nv", SHAPES, ids=lambda v: str(v))
def test_matches_reference_on_random_configs(batch, in_dim, out_dim, nv):
    task = _task(batch, in_dim, out_dim, nv * LANES)
    assert {c.knob_values()["nr"] for c in task.config_space} == {nv * LANES}
    _check_configs(task, CONFIGS)


@pytest.mark.parametrize("epilogue", [("bias", "gelu"), ("bias", "add")], ids="-".join)
@pytest.mark.parametrize("batch, in_dim, out_dim, nv", [(1, 20, 2 * LANES - 3, 2), (7, 19, 3 * LANES + 1, 1)],
                         ids=lambda v: str(v))
def test_epilogues_match_reference(epilogue, batch, in_dim, out_dim, nv):
    task = _task(batch, in_dim, out_dim, nv * LANES, epilogue)
    _, tensors = task.instantiate(task.config_space.default_config)
    inputs = ("bias", "residual") if "add" in epilogue else ("bias",)
    assert [t.op.name for t in tensors] == ["X", "Wp", *inputs, "dense_pack"]
    _check_configs(task, 3)


@pytest.mark.parametrize("nr", [LANES + 1, LANES // 2, 3 * LANES, 8 * LANES, 0])
def test_a_width_no_microkernel_has_is_refused(nr):
    with pytest.raises(InstantiationError, match="no microkernel is"):
        _task(4, 8, 20, nr).config_space  # noqa: B018


@for_each_cpu
@pytest.mark.parametrize("batch, in_dim, out_dim", [(128, 768, 3072), (1, 1280, 1000), (16, 4096, 1000)])
def test_space_is_denses_at_one_width_and_so_is_the_default(cpu, batch, in_dim, out_dim):
    with compiler.Target(cpu.target):
        lanes = vector_lanes("float32")
    dense = create_task("dense", (batch, in_dim, out_dim, "float32"), cpu.target).config_space
    packed = create_task("dense_pack", (batch, in_dim, out_dim, 2 * lanes, "float32"),
                         cpu.target).config_space
    assert [k.name for k in packed.knobs] == [k.name for k in dense.knobs] + ["prefetch_b"]
    assert {c.knob_values()["nr"] for c in packed} == {2 * lanes}
    assert packed.is_valid(packed.default_config.index)
    configs = [c.knob_values() for c in packed]
    # The next panel is prefetched only where a tile runs the whole reduction
    assert all(c["kc"] == in_dim for c in configs if c["prefetch_b"])
    assert any(c["prefetch_b"] for c in configs) and any(not c["prefetch_b"] for c in configs)
    want = {tuple(c.knob_values().items()) for c in dense if c.knob_values()["nr"] == 2 * lanes}
    unprefetched = {tuple((k, v) for k, v in c.items() if k != "prefetch_b")
                    for c in configs if not c["prefetch_b"]}
    assert unprefetched == want  # every other knob stays tunable
    default = dense.default_config.knob_values()
    if default["nr"] == 2 * lanes:  # the same model picks the same config, prefetching with whole-K panels
        assert packed.default_config.knob_values() == {**default, "prefetch_b": default["kc"] == in_dim}


def _prefetch_and_load_offsets(func):
    """Each prefetch of Wp against the first read of Wp in the same function: their flat indices'
    difference with every variable but the loops over panels and the reduction set to 0."""
    from compiler.arith import Analyzer
    from compiler.tir import expr as E
    from compiler.tir.analysis import collect, substitute
    from compiler.tir.buffer import ACCESS_PTR
    from compiler.tir.builtin import PREFETCH

    prefetches = collect(func.body, lambda n: isinstance(n, E.Call) and n.op == PREFETCH)
    starts = [p.args[0].args[2] for p in prefetches if p.args[0].op == ACCESS_PTR]
    (load,) = collect(func.body, lambda n: isinstance(n, E.BufferLoad) and n.buffer.name == "Wp")[:1]
    index = load.indices[0].base if isinstance(load.indices[0], E.Ramp) else load.indices[0]
    zero = {v: E.const(0, v.dtype) for v in collect(index, lambda n: isinstance(n, E.Var))
            if v.name.startswith(("i1.outer", "i1.inner")) and v.name != "i1.inner.outer"}
    an = Analyzer()
    out = []
    for start in starts:
        lines = {v: E.const(0, v.dtype) for v in collect(start, lambda n: isinstance(n, E.Var))
                 if v.name.startswith("prefetch_")}
        out.append(an.simplify(substitute(start, lines) - substitute(index, zero)))
    return out


@pytest.mark.parametrize("prefetch", [True, False])
def test_prefetch_b_reads_the_next_micro_panel_ahead_and_changes_no_result(prefetch):
    """With ``prefetch_b`` each reduction step of a tile prefetches the same row of the next
    micro-panel (``in_dim * nr`` elements on); the results are the same either way."""
    batch, in_dim, out_dim, nr = 16, 40, 3 * 2 * LANES - 5, 2 * LANES
    task = _task(batch, in_dim, out_dim, nr)
    space = task.config_space
    knobs = {**space.default_config.knob_values(), "kc": in_dim, "prefetch_b": prefetch}
    cfg = space.from_json({"knobs": knobs})
    s, tensors = task.instantiate(cfg)
    offsets = _prefetch_and_load_offsets(compiler.lower(s, tensors, simple_mode=True)["main"])
    if prefetch:
        assert offsets and all(getattr(o, "value", None) == in_dim * nr for o in offsets), offsets
    else:
        assert offsets == []
    inputs, (want,) = task.reference_data(np.random.default_rng(5))
    got = poisoned(want.shape, want.dtype)
    compiler.build(s, tensors, target="llvm")(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_prefetch_b_needs_whole_k_panels_and_old_configs_do_without():
    task = _task(16, 300, 4 * LANES, 2 * LANES)
    space = task.config_space
    base = {**space.default_config.knob_values(), "kc": 128, "parallel_axis": "rows"}
    with pytest.raises(SearchSpaceError, match="prefetch with whole-K panels"):
        space.from_json({"knobs": {**base, "prefetch_b": True}})
    old = {k: v for k, v in base.items() if k != "prefetch_b"}  # a log's config from before the knob
    assert space.from_json({"knobs": old}).knob_values()["prefetch_b"] is False
