"""Every CPU template computes what its numpy reference computes, at every point tried.

For each template: the default config and 20 seeded random configs at small shapes,
each built and run on random data with poisoned outputs. Extra shapes (strides,
dilations, odd sizes, other dtypes) get a few configs each. Hypothesis then roams the
matmul and conv2d spaces.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import CPUS, poisoned
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler
from search_spaces import create_task

# (template, args, configs to draw besides the default; the templates with a test file of their own
# check each knob value there)
MAIN_CASES = [
    ("matmul", (16, 24, 32, "float32"), 10),
    ("dense", (8, 24, 32, "float32", True), 10),
    ("batch_matmul", (2, 8, 12, 16, "float32"), 10),
    ("conv2d_nchw", (1, 4, 8, 8, 4, 3, 3, 1, 1, 1, "float32"), 10),
    ("conv2d_nhwc", (1, 8, 8, 4, 8, 3, 3, 1, 1, 1, "float32"), 10),
    ("conv2d_nchwc", (1, 8, 8, 8, 16, 3, 3, 1, 1, 1, 4, 8, "float32"), 10),
    ("conv2d_nchwc_winograd", (1, 8, 8, 8, 16, 1, 4, 16, 4, 8, "float32"), 5),  # slow to build: fewer
    ("depthwise_conv2d_nchw", (1, 4, 8, 8, 3, 3, 1, 1, 1, "float32"), 10),
    ("depthwise_conv2d_nchwc", (1, 16, 8, 8, 3, 3, 1, 1, 1, 8, "float32"), 10),
    ("pool2d", (1, 4, 8, 8, 3, 3, 1, 1, "max", "float32"), 10),
    ("pool2d", (1, 3, 9, 8, 2, 3, 2, (1, 0, 0, 1), "avg", "float32"), 10),
    ("softmax", (9, 33, "float32"), 10),
    ("layer_norm", (8, 40, "float32"), 10),
    ("elementwise", (8, 32, "add,mul,relu,gelu", "float32"), 10),
]

EXTRA_CASES = [
    ("matmul", (12, 10, 14, "int32"), 4),
    ("matmul", (7, 5, 9, "float64"), 4),
    ("dense", (3, 17, 10, "float32"), 4),
    ("conv2d_nchw", (2, 3, 9, 7, 6, 3, 2, 2, (1, 0), (1, 2), "float32"), 5),
    ("conv2d_nhwc", (2, 9, 7, 3, 6, 3, 2, 2, (1, 0, 2, 1), (2, 1), "float32"), 5),
    ("conv2d_nchw", (1, 16, 6, 6, 24, 1, 1, 2, 0, 1, "float32"), 5),
    ("depthwise_conv2d_nchw", (2, 3, 9, 7, 3, 2, 2, (1, 0), (1, 2), "float32"), 5),
    ("conv2d_nchwc_winograd", (2, 16, 7, 6, 32, (1, 1, 1, 0), 2, 32, 16, 16, "float32"), 5),  # partial tiles
    # dilated by 2 (rows of 13 in phases of 7 and 6) and by 3
    ("conv2d_nchwc_winograd", (2, 16, 13, 10, 32, (2, 1, 2, 3), 2, 32, 16, 16, "float32", (), 2), 5),
    ("conv2d_nchwc_winograd", (1, 8, 11, 12, 16, 3, 4, 16, 8, 8, "float32", ("bias", "relu"), 3), 3),
    ("softmax", (4, 19, "float64"), 4),
    ("layer_norm", (6, 24, "float32", 0.5), 4),  # an epsilon of its own (a ViT's is 1e-6)
    ("elementwise", (7, 19, "sub,div,sigmoid,max,tanh,min,exp,neg,abs", "float32"), 5),
    ("elementwise", (5, 12, "add,max,relu,mul,abs", "int32"), 4),
]


@functools.cache
def _data(name: str, args: tuple):
    task = create_task(name, args, "llvm")
    return task.reference_data(np.random.default_rng(1234))


def _check(task, config) -> None:
    inputs, expected = _data(task.template, task.args)
    s, args = task.instantiate(config)
    f = compiler.build(s, args, target="llvm", name=task.template)
    outputs = [poisoned(e.shape, e.dtype) for e in expected]
    f(*inputs, *outputs)
    for got, want in zip(outputs, expected):
        tol = 1e-4 if want.dtype == np.float32 else 1e-10
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol,
                                       err_msg=f"{task.workload_name} with {config}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{task.workload_name} with {config}")


def vector_lanes_of(task) -> int:
    """float32 lanes of a vector register of the task's target."""
    from compiler.simd import vector_lanes

    with compiler.Target(task.target):
        return vector_lanes("float32")


def _ids(cases):
    return [f"{name}-{'-'.join(str(a) for a in args)}" for name, args, _ in cases]


@pytest.mark.parametrize("name, args, count", MAIN_CASES + EXTRA_CASES, ids=_ids(MAIN_CASES + EXTRA_CASES))
def test_template_matches_reference_on_random_configs(name, args, count):
    task = create_task(name, args, "llvm")
    space = task.config_space
    configs = [space.default_config] + space.sample(count, np.random.default_rng(2024))
    assert len({c.index for c in configs[1:]}) == min(count, len(space))
    for cfg in configs:
        _check(task, cfg)


@pytest.mark.parametrize("name, args, count", MAIN_CASES, ids=_ids(MAIN_CASES))
def test_default_config_is_sensible(name, args, count):
    task = create_task(name, args, "llvm")
    space = task.config_space
    default = space.default_config
    assert default == create_task(name, args, "llvm").config_space.default_config
    assert space.is_valid(default.index)
    values = default.knob_values()
    if "vec" in values:
        assert values["vec"] is True
    if "parallel" in values:
        assert values["parallel"] is True
    splits = [v for k, v in values.items() if k.startswith("tile_")]
    assert not splits or not all(all(x == 1 for x in v[1:]) for v in splits), "defaults must not be all ones"
    if "mr" in values:  # the GEMM family (see test_cpu_gemm.py): a register tile of whole vectors
        assert values["mr"] > 1 and values["nr"] % vector_lanes_of(task) == 0
    assert task.flop > 0 and task.reference is not None


def test_template_called_with_no_config_uses_the_default():
    import search_spaces

    s, args = search_spaces.matmul(16, 24, 32, "float32", target="llvm")
    task = create_task("matmul", (16, 24, 32, "float32"), "llvm")
    s2, args2 = task.instantiate(None)
    assert str(compiler.lower(s, args)) == str(compiler.lower(s2, args2))


def test_bad_template_arguments_are_clear():
    from search_spaces import InstantiationError

    with pytest.raises(InstantiationError, match="pool_type"):
        create_task("pool2d", (1, 1, 4, 4, 2, 2, 1, 0, "median", "float32"), "llvm").config_space  # noqa: B018
    with pytest.raises(InstantiationError, match="unknown elementwise op 'cube'"):
        create_task("elementwise", (4, 4, "add,cube", "float32"), "llvm").config_space  # noqa: B018
    with pytest.raises(InstantiationError, match="does not fit"):
        create_task("conv2d_nchw", (1, 1, 2, 2, 1, 5, 5, 1, 0, 1, "float32"), "llvm").config_space  # noqa: B018
    for epsilon in (0, 2.0, True, "1e-6"):
        with pytest.raises(InstantiationError, match=r"epsilon must be \(\) or a number in \(0, 1\)"):
            create_task("layer_norm", (4, 16, "float32", epsilon), "llvm").config_space  # noqa: B018
    winograd = (1, 8, 11, 12, 16, 3, 4, 16, 8, 8, "float32", ())
    for dilation in (0, True, 1.5, (2,)):
        with pytest.raises(InstantiationError, match=r"dilation must be \(\) or a positive int"):
            create_task("conv2d_nchwc_winograd", (*winograd, dilation), "llvm").config_space  # noqa: B018
    with pytest.raises(InstantiationError, match="dilated by 6 does not fit"):
        create_task("conv2d_nchwc_winograd", (*winograd[:5], 0, *winograd[6:], 6), "llvm").config_space  # noqa: B018


_MATMUL = create_task("matmul", (12, 8, 20, "float32"), "llvm")
_CONV = create_task("conv2d_nchw", (1, 4, 6, 6, 4, 3, 3, 1, 1, 1, "float32"), "llvm")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hypothesis_matmul_space(data):
    space = _MATMUL.config_space
    position = data.draw(st.integers(0, len(space) - 1), label="position")
    _check(_MATMUL, space.get(position))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hypothesis_conv2d_space(data):
    space = _CONV.config_space
    position = data.draw(st.integers(0, len(space) - 1), label="position")
    _check(_CONV, space.get(position))


@pytest.mark.parametrize("name, args", [("softmax", (6, 64, "float32")), ("layer_norm", (5, 48, "float32"))])
def test_row_statistics_accumulate_in_vector_lanes_by_default(name, args):
    # Rows of whole vectors: each statistic (a row's max and sum, its mean and variance) is first
    # accumulated as partial results in vector lanes (two vectors of 8 where they tile the row,
    # else one), then reduced; both ways compute the reference.
    haswell = next(c for c in CPUS if c.name == "haswell")
    task = create_task(name, args, haswell.target)
    space = task.config_space
    default = space.default_config
    assert default["vec_stats"].val is True
    text = str(compiler.lower(*task.instantiate(default)))
    width = 16 if args[1] % 16 == 0 else 8
    assert f".rf<x{width}>[ramp(" in text and f".rf[float32 * {width}]" in text, text
    inputs, expected = task.reference_data(np.random.default_rng(7))
    plain = next(space.get(i) for i in range(len(space))
                 if {**space.get(i).knob_values(), "vec_stats": True} == default.knob_values()
                 and not space.get(i)["vec_stats"].val)
    for config in (default, plain):
        f = compiler.build(*task.instantiate(config), target=task.target)
        if haswell.runs_here():
            (out,) = [poisoned(e.shape, e.dtype) for e in expected]
            f(*inputs, out)
            np.testing.assert_allclose(out, expected[0], rtol=1e-5, atol=1e-6, err_msg=str(config))


def test_rows_of_no_whole_vectors_keep_their_statistics_scalar():
    haswell = next(c for c in CPUS if c.name == "haswell")
    space = create_task("softmax", (6, 20, "float32"), haswell.target).config_space
    (knob,) = [k for k in space.knobs if k.name == "vec_stats"]
    assert [e.val for e in knob.entities] == [False]


def test_winograd_threads_take_rows_of_tiles_of_every_channel_block():
    # The input transform's threads take tiles (in row order) and the output transform's rows
    # of tiles, each row's channel blocks in turn: each thread reads and writes a range of the
    # image's height, as a convolution by height does, so that inside a model a layer reads the
    # rows its own core wrote.
    from compiler.tir import stmt as S
    from compiler.tir.analysis import collect

    task = create_task("conv2d_nchwc_winograd", (1, 8, 8, 8, 16, 1, 4, 16, 4, 8, "float32"), "llvm")
    mod = compiler.lower(*task.instantiate(None))
    loops = [node.loop_var.name for _, func in mod.items()
             for node in collect(func.body, lambda n: isinstance(n, S.For) and n.kind == S.ForKind.PARALLEL)]
    assert loops[0] == "p" and loops[-1] == "n.y.outer.fused.fc.fused", loops
