"""Epilogues (bias, residual add, activations) fused into the CPU templates' output stage.

Each template with each epilogue: the default config and a few seeded random ones, built
and run on random data with NaN-poisoned outputs, against the numpy reference. Without an
epilogue a task keeps its arguments and workload key; with one, the epilogue is part of the
one kernel (no extra function, no extra full-size buffer).
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import pytest
from helpers import assert_written, poisoned

import compiler
from compiler.tir import stmt as S
from compiler.tir.analysis import collect
from search_spaces import InstantiationError, Task, create_task, registry, workload_key
from search_spaces.templates._epilogue import Epilogue, check_epilogue, reference_epilogue

EPILOGUES = [("bias", "relu"), ("bias", "add", "relu"), ("relu6",), ("bias", "gelu")]

# (template, args without the epilogue, what the shape exercises)
CASES = [
    ("dense", (8, 24, 32, "float32"), "gemm"),
    ("dense", (8, 24, 32, "float32", True), "gemm, with dense's own bias"),
    ("batch_matmul", (2, 8, 12, 16, "float32"), "gemm, batched"),
    ("conv2d_nchw", (1, 4, 8, 8, 8, 3, 3, 1, 1, 1, "float32"), "blocked"),
    ("conv2d_nchw", (1, 16, 6, 6, 24, 1, 1, 1, 0, 1, "float32"), "gemm"),
    ("conv2d_nchwc", (1, 8, 8, 8, 16, 3, 3, 1, 1, 1, 4, 8, "float32"), "blocked output"),
    ("depthwise_conv2d_nchw", (1, 4, 8, 8, 3, 3, 1, 1, 1, "float32"), "both layouts"),
    ("depthwise_conv2d_nchwc", (1, 16, 8, 8, 3, 3, 1, 1, 1, 8, "float32"), "blocked in and out"),
    ("conv2d_nchwc_winograd", (1, 8, 8, 8, 16, 1, 4, 16, 4, 8, "float32"), "winograd output transform"),
]

# Odd sizes (strides, dilations, padded channel blocks and register tiles) with one epilogue.
ODD_CASES = [
    ("dense", (3, 17, 10, "float32"), "tails"),
    ("conv2d_nchw", (2, 3, 9, 7, 6, 3, 2, 2, (1, 0), (1, 2), "float32"), "blocked, strided"),
    ("conv2d_nchw", (1, 16, 6, 6, 24, 1, 1, 2, 0, 1, "float32"), "gemm, strided"),
    ("depthwise_conv2d_nchw", (2, 3, 9, 7, 3, 2, 2, (1, 0), (1, 2), "float32"), "padded blocks"),
]
ODD_EPILOGUE = ("bias", "add", "silu", "sigmoid", "hardswish", "leaky_relu(0.2)", "gelu_tanh")

RANDOM_CONFIGS = 3
# A Winograd config changes the batched GEMM, not the output transform the epilogue joins, and
# each one takes seconds to build: fewer of them (the template's own tests sample more), and only
# the epilogues that hold every other's parts (bias, the residual, an activation; a long one).
FEWER_CONFIGS = {"conv2d_nchwc_winograd": 1}
FEWER_EPILOGUES = {"conv2d_nchwc_winograd": [("bias", "add", "relu"), ("bias", "gelu")]}
EPILOGUE_CASES = [(name, args, what, epilogue) for name, args, what in CASES
                  for epilogue in FEWER_EPILOGUES.get(name, EPILOGUES)]


def _task(name: str, args: tuple, epilogue: tuple) -> Task:
    return create_task(name, args, "llvm", kwargs={"epilogue": epilogue})


@functools.cache
def _data(name: str, args: tuple, epilogue: tuple):
    return _task(name, args, epilogue).reference_data(np.random.default_rng(99))


def _configs(task: Task, count: int, seed: int = 2024) -> list:
    """The default config and ``count`` random ones; for a template with a ``layout`` knob,
    random ones of each layout."""
    space = task.config_space
    rng = np.random.default_rng(seed)
    if "layout" not in space.default_config.knob_values():
        return [space.default_config] + space.sample(count, rng)
    by_layout: dict = {}
    for k in range(len(space)):
        config = space.get(k)
        by_layout.setdefault(config.knob_values()["layout"], []).append(config)
    assert len(by_layout) == 2, "both layouts must be in the space"
    picked = [space.default_config]
    for configs in by_layout.values():
        chosen = rng.choice(len(configs), min(count // 2 + 1, len(configs)), replace=False)
        picked += [configs[i] for i in chosen]
    return picked


def _check(task: Task, config) -> compiler.runtime.Module:
    inputs, expected = _data(task.template, task.args[:-1], task.args[-1])
    s, tensors = task.instantiate(config)
    assert len(tensors) == len(inputs) + 1
    f = compiler.build(s, tensors, target="llvm", name=task.template)
    out = poisoned(expected[0].shape, expected[0].dtype)
    f(*inputs, out)
    assert_written(out, expected[0], rtol=1e-4, atol=1e-4, err_msg=f"{task.workload_name} with {config}")
    return f


def _arity(name: str) -> int:
    """The parameters of the CPU template ``name`` up to its epilogue, included (options after it,
    such as ``conv2d_nchwc``'s ``groups``, are left out of a workload at their defaults)."""
    return list(inspect.signature(registry.implementation(name, "cpu").func).parameters).index("epilogue") + 1


def _ids(cases):
    return [f"{name}-{'-'.join(str(a) for a in args)}" for name, args, *_ in cases]


@pytest.mark.parametrize("name, args, what, epilogue", EPILOGUE_CASES,
                         ids=[f"{i}-{'+'.join(c[3])}" for i, c in zip(_ids(EPILOGUE_CASES), EPILOGUE_CASES)])
def test_epilogue_matches_reference_on_random_configs(name, args, what, epilogue):
    task = _task(name, args, epilogue)
    assert len(task.args) == _arity(name) and task.args[-1] == epilogue
    for config in _configs(task, FEWER_CONFIGS.get(name, RANDOM_CONFIGS)):
        f = _check(task, config)
        assert f.function_names == [task.template], "the epilogue is part of the one kernel"


@pytest.mark.parametrize("name, args, what", ODD_CASES, ids=_ids(ODD_CASES))
def test_epilogue_on_odd_shapes(name, args, what):
    task = _task(name, args, ODD_EPILOGUE)
    for config in _configs(task, 3):
        _check(task, config)


def test_both_conv2d_nchw_paths_are_covered():
    blocked = _task("conv2d_nchw", CASES[3][1], ("relu",)).config_space.default_config.knob_values()
    gemm = _task("conv2d_nchw", CASES[4][1], ("relu",)).config_space.default_config.knob_values()
    assert "ic_bn" in blocked and "mr" not in blocked
    assert "mr" in gemm and "ic_bn" not in gemm


# ---------------------------------------------------------------------------- identity


@pytest.mark.parametrize("name, args, what", CASES + ODD_CASES, ids=_ids(CASES + ODD_CASES))
def test_no_epilogue_keeps_the_arguments_and_workload_key(name, args, what):
    plain = create_task(name, args, "llvm")
    # The arguments are what they were before templates took an epilogue: every parameter
    # up to dtype (and dense's bias), defaults filled in.
    assert len(plain.args) == _arity(name) - 1
    assert plain.workload_key == workload_key(name, plain.args, "llvm")
    for explicit in (_task(name, args, ()), create_task(name, (*plain.args, ()), "llvm"),
                     create_task(name, (*plain.args, []), "llvm")):
        assert explicit is plain
    fused = _task(name, args, ("relu",))
    assert fused.args == (*plain.args, ("relu",)) and fused.workload_key != plain.workload_key
    assert Task.from_json(fused.to_json()) == fused
    assert Task.from_json(plain.to_json()).workload_key == plain.workload_key


def test_workload_keys_of_existing_logs():
    # The keys that tuning logs from before epilogues hold (for a pinned CPU model, so that
    # they do not depend on this machine).
    target = "llvm -mcpu=znver4"
    dense = create_task("dense", (8, 24, 32, "float32"), target)
    assert dense.args == (8, 24, 32, "float32", False)
    assert dense.workload_key == "a40a3da96208195ef93343cac18864600d6de6fa"
    conv = create_task("conv2d_nchw", (1, 4, 8, 8, 4, 3, 3), target)
    assert conv.args == (1, 4, 8, 8, 4, 3, 3, 1, 0, 1, "float32")
    assert conv.workload_key == "b0e8879bf73b5d32f3519c50b606e899896d1f75"


def test_tensor_order_and_flops():
    task = _task("dense", (8, 24, 32, "float32", True), ("bias", "add", "relu"))
    _, tensors = task.instantiate(None)
    assert [t.op.name for t in tensors] == ["X", "W", "b", "bias", "residual", "dense"]
    assert [tuple(int(d.value) for d in t.shape) for t in tensors[2:5]] == [(32,), (32,), (8, 32)]
    plain = create_task("dense", (8, 24, 32, "float32", True), "llvm")
    assert task.flop == plain.flop + 3 * 8 * 32  # one add, one add, one max per output element
    conv = _task("conv2d_nchwc", CASES[5][1], ("bias", "add"))
    _, tensors = conv.instantiate(None)
    assert [t.op.name for t in tensors[:4]] == ["X", "W", "bias", "residual"]
    assert tuple(int(d.value) for d in tensors[2].shape) == (16,)
    assert tuple(int(d.value) for d in tensors[3].shape) == tuple(int(d.value) for d in tensors[4].shape)
    for name, args, _ in CASES:
        plain, fused = create_task(name, args, "llvm"), _task(name, args, ("bias", "gelu"))
        assert plain.flop < fused.flop < 1.5 * plain.flop


# ---------------------------------------------------------------------------- fusion


def _allocations(mod) -> list[tuple[str, int]]:
    out = []
    for _, func in mod.items():
        for node in collect(func.body, lambda n: isinstance(n, S.Allocate)):
            out.append((node.buffer.scope, math.prod(int(d.value) for d in node.buffer.shape)))
    return sorted(out)


def _top_level(mod) -> int:
    """Statements of the function bodies below their allocations: the loop nests."""
    count = 0
    for _, func in mod.items():
        body = func.body
        while isinstance(body, (S.Allocate, S.AttrStmt, S.LetStmt)):
            body = body.body
        count += len(body.seq) if isinstance(body, S.SeqStmt) else 1
    return count


@pytest.mark.parametrize("name, args", [(n, a) for n, a, _ in (CASES[5], CASES[0], CASES[3], CASES[6])],
                         ids=["conv2d_nchwc", "dense", "conv2d_nchw", "depthwise"])
def test_epilogue_needs_no_buffer_or_loop_nest_of_its_own(name, args):
    """The default configs with and without an epilogue allocate the same buffers (the
    accumulators and packed operands; nothing of the output's size for the epilogue) and run
    the same loop nests."""
    plain_task, fused_task = create_task(name, args, "llvm"), _task(name, args, ("bias", "add", "relu"))
    plain = compiler.lower(*plain_task.instantiate(None))
    fused = compiler.lower(*fused_task.instantiate(None))
    assert _allocations(fused) == _allocations(plain)
    assert _top_level(fused) == _top_level(plain)


# ---------------------------------------------------------------------------- bad epilogues


def test_bad_epilogues_are_clear_value_errors():
    with pytest.raises(ValueError, match=r"entry 1 \('tanh'\) is not one of bias, add"):
        check_epilogue(("relu", "tanh"), "float32")
    with pytest.raises(ValueError, match="tuple of operation names"):
        check_epilogue("relu", "float32")
    for bad in ("leaky_relu", "leaky_relu()", "leaky_relu(inf)", "leaky_relu(0.1x)", "gelu_erf"):
        with pytest.raises(ValueError, match=r"is not one of bias, .* or leaky_relu\(alpha\)"):
            check_epilogue(("bias", bad), "float32")
    assert check_epilogue(("bias", "leaky_relu(0.1)"), "float32") == ("bias", "leaky_relu(0.1)")
    with pytest.raises(ValueError, match="floating-point dtype, got 'int32'"):
        check_epilogue(("bias",), "int32")
    assert check_epilogue((), "int32") == ()
    with pytest.raises(ValueError, match="'swish'"):
        reference_epilogue(("swish",), np.zeros((2, 2)), 1, "float32")
    with pytest.raises(ValueError, match="'swish'"):
        Epilogue.declare(["swish"], "float32", (2, 2), 2)


@pytest.mark.parametrize("name, args, what", CASES, ids=_ids(CASES))
def test_templates_refuse_bad_epilogues(name, args, what):
    with pytest.raises(InstantiationError, match="'softplus' is not one of|\\('softplus'\\)") as info:
        _task(name, args, ("bias", "softplus")).config_space  # noqa: B018
    assert isinstance(info.value.cause, ValueError)


def test_integer_dtypes_take_no_epilogue():
    with pytest.raises(InstantiationError, match="floating-point dtype") as info:
        create_task("dense", (4, 8, 16, "int32"), "llvm", kwargs={"epilogue": ("relu",)}).config_space  # noqa: B018
    assert isinstance(info.value.cause, ValueError)
    assert len(create_task("dense", (4, 8, 16, "int32"), "llvm").config_space) > 0
