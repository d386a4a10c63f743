"""``dense_pack``: dense with its weight packed before the call, in micro-panels of the width
the caller picks. Its space is dense's with that one tile width; every config tried computes
what numpy computes (NaN-poisoned outputs), with and without epilogues."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import for_each_cpu, poisoned

import compiler
from compiler.simd import vector_lanes
from search_spaces import InstantiationError, create_task
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
    assert [k.name for k in packed.knobs] == [k.name for k in dense.knobs]
    assert {c.knob_values()["nr"] for c in packed} == {2 * lanes}
    assert packed.is_valid(packed.default_config.index)
    want = {tuple(c.knob_values().items()) for c in dense if c.knob_values()["nr"] == 2 * lanes}
    assert {tuple(c.knob_values().items()) for c in packed} == want  # every other knob stays tunable
    default = dense.default_config.knob_values()
    if default["nr"] == 2 * lanes:  # the same model picks the same config
        assert packed.default_config.knob_values() == default
