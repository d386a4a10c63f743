"""Templates and dispatch: registration, get_config, dispatch contexts, errors, the autotune re-exports."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers import build_and_check

import autotune
import compiler
import search_spaces
from compiler import te
from search_spaces import (
    ApplyConfig,
    ConfigEntity,
    ConfigSpace,
    DispatchContext,
    InstantiationError,
    SearchSpaceError,
    create_task,
    get_config,
    template,
    unregister_template,
)
from search_spaces.dispatch import _FALLBACK


def _scale_ref(n, factor):
    a = np.arange(n, dtype="float32")
    return [a], [a * factor]


@pytest.fixture
def scale_template():
    """A small user template with a split knob, a choice knob and a constraint."""

    @template("test_scale", target="cpu", reference=_scale_ref)
    def scale(n, factor=2.0):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * factor, name="B")
        s = te.create_schedule(B.op)
        cfg = get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg.define_knob("vec", [True, False])
        cfg.add_constraint(lambda c: c["tile"].size[1] <= 8, knobs=["tile"])
        outer, inner = cfg["tile"].apply(s, B, B.op.axis[0])
        if cfg["vec"].val:
            s[B].vectorize(inner)
        return s, [A, B]

    yield scale
    unregister_template("test_scale")


def test_template_call_builds_and_computes(scale_template, rng):
    s, args = scale_template(32, 3.0, target="llvm")
    a = rng.random(32).astype("float32")
    build_and_check(s, args, [a], [a * 3.0])
    assert search_spaces.test_scale is scale_template  # user templates are attributes too


def test_define_mode_sees_space_and_apply_mode_sees_entity(scale_template):
    seen = []

    @template("test_probe")
    def probe(n):
        cfg = get_config()
        seen.append(type(cfg))
        cfg.define_knob("k", [1, 2])
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + cfg["k"].val, name="B")
        return te.create_schedule(B.op), [A, B]

    try:
        task = create_task("test_probe", (8,), "llvm")
        assert len(task.config_space) == 2
        task.instantiate(task.config_space.get(1))
        assert seen == [ConfigSpace, ConfigEntity]
    finally:
        unregister_template("test_probe")


def test_get_config_outside_a_template_is_an_error():
    with pytest.raises(SearchSpaceError, match="only available inside a template"):
        get_config()


def test_apply_config_context_and_nesting(scale_template):
    task = create_task("test_scale", (32,), "llvm")
    space = task.config_space
    chosen = space.from_json({"knobs": {"tile": [8, 4], "vec": False}})
    with ApplyConfig(chosen):
        s, args = scale_template(32, target="llvm")
        assert len(s[args[-1]].leaf_iter_vars) == 2
        assert s[args[-1]].leaf_iter_vars[1].var.name.endswith("inner")

        class Nothing(DispatchContext):
            def _query(self, target_key, task):
                assert target_key.startswith("llvm:")
                return None

        with Nothing() as ctx:  # no answer: falls through to ApplyConfig
            assert ctx.query("llvm", task) == chosen


def test_fallback_warns_once_per_workload(scale_template, caplog):
    _FALLBACK.clear_warnings()
    with caplog.at_level(logging.WARNING, logger="search_spaces.dispatch"):
        scale_template(32, target="llvm")
        scale_template(32, target="llvm")
        scale_template(64, target="llvm")
    warnings = [r.getMessage() for r in caplog.records if "no tuned config" in r.getMessage()]
    assert len(warnings) == 2
    assert "test_scale(32,2.0)" in warnings[0] and "test_scale(64,2.0)" in warnings[1]


def test_target_comes_from_context(scale_template):
    with compiler.Target("llvm"):
        s, args = scale_template(16)
    assert len(args) == 2
    with pytest.raises(SearchSpaceError, match="no 'cuda' implementation"):
        scale_template(16, target="cuda")


def test_args_are_normalised(scale_template):
    t1 = create_task("test_scale", (16,), "llvm")
    t2 = create_task("test_scale", [16, 2.0], "llvm")
    t3 = create_task("test_scale", (np.int64(16),), "llvm", kwargs={"factor": 2.0})
    assert t1 is t2 is t3 and t1.args == (16, 2.0)
    with pytest.raises(SearchSpaceError, match="test_scale"):
        create_task("test_scale", (16, 2.0, 3), "llvm")
    with pytest.raises(SearchSpaceError, match="not JSON-serialisable"):
        create_task("test_scale", (object(),), "llvm")


def test_instantiation_errors_name_template_config_and_cause(scale_template):
    @template("test_broken")
    def broken(n):
        cfg = get_config()
        cfg.define_knob("mode", ["ok", "bad"])
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        if cfg["mode"].val == "bad":
            s[B].vectorize(B.op.axis[0])
            s[B].split(B.op.axis[0], factor=2)  # split after annotate: a ScheduleError
        return s, [A, B]

    try:
        task = create_task("test_broken", (8,), "llvm")
        task.instantiate(task.config_space.get(0))
        with pytest.raises(InstantiationError, match="test_broken.*'mode': 'bad'.*ScheduleError") as info:
            task.instantiate(task.config_space.get(1))
        assert info.value.template == "test_broken"
        assert info.value.config.knob_values() == {"mode": "bad"}
        assert isinstance(info.value.cause, compiler.ScheduleError)
        # A config of another space is rejected before the template runs.
        other = create_task("test_scale", (32,), "llvm").config_space.get(0)
        with pytest.raises(InstantiationError, match="not in its space"):
            task.instantiate(other)
    finally:
        unregister_template("test_broken")


def test_template_failing_in_define_mode():
    @template("test_bad_args")
    def bad(n):
        raise ValueError("n must be even")

    try:
        with pytest.raises(InstantiationError, match="n must be even"):
            create_task("test_bad_args", (3,), "llvm").config_space  # noqa: B018
    finally:
        unregister_template("test_bad_args")


def test_registration_rules():
    for bad in ("not a name", "a//b", "/a", "a/", "a/b c", ""):
        with pytest.raises(SearchSpaceError, match="identifier"):
            template(bad)
    with pytest.raises(SearchSpaceError, match="'cpu', 'cuda' or None"):
        template("x", target="llvm")
    with pytest.raises(SearchSpaceError, match="already has a 'cpu' implementation"):
        @template("matmul", target="cpu")
        def other_matmul(N, L, M, dtype):
            pass
    # A generic implementation would fill in for every kind: it clashes with any other function.
    with pytest.raises(SearchSpaceError, match="already has a '(cpu|cuda)' implementation"):
        @template("matmul")
        def generic_matmul(N, L, M, dtype):
            pass
    with pytest.raises(SearchSpaceError, match="reserved"):
        @template("test_reserved")
        def uses_target(n, target):
            pass
    with pytest.raises(SearchSpaceError, match="unknown template 'nope'"):
        create_task("nope", (1,), "llvm")


def test_one_name_many_target_kinds():
    @template("test_multi", target="cuda")
    def multi_cuda(n):
        raise NotImplementedError

    @template("test_multi", target="cpu")
    def multi_cpu(n):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        return te.create_schedule(B.op), [A, B]

    try:
        assert multi_cpu is multi_cuda
        assert search_spaces.list_templates()["test_multi"] == ["cpu", "cuda"]
        assert create_task("test_multi", (4,), "llvm").target_kind == "cpu"
        assert create_task("test_multi", (4,), "cuda").target_kind == "cuda"
    finally:
        unregister_template("test_multi")


def test_autotune_reexports():
    assert autotune.template is template
    assert autotune.get_config is get_config
    assert autotune.create_task is create_task
    assert autotune.Task is search_spaces.Task
    assert autotune.ConfigSpace is ConfigSpace and autotune.ConfigEntity is ConfigEntity
    with pytest.raises(AttributeError):
        autotune.no_such_name  # noqa: B018


def test_builtin_templates_are_registered():
    names = set(search_spaces.list_templates())
    assert {"matmul", "dense", "batch_matmul", "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw",
            "pool2d", "softmax", "layer_norm", "elementwise"} <= names
    for name in names & {"matmul", "dense"}:
        assert search_spaces.get_template(name).impl("cpu").reference is not None


def _add_one(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    cfg = get_config()
    cfg.define_split("tile", B.op.axis[0], num_outputs=2)
    cfg["tile"].apply(s, B, B.op.axis[0])
    return s, [A, B]


def test_names_with_slashes_and_one_template_for_every_target(rng):
    def add_one(n):  # defined here: it travels by value
        return _add_one(n)

    tmpl = template("test/add_one")(add_one)
    try:
        assert search_spaces.list_templates()["test/add_one"] == ["any"]
        cpu = create_task("test/add_one", (8,), "llvm")
        gpu = create_task("test/add_one", (8,), "cuda")
        assert cpu.target_kind == "cpu" and gpu.target_kind == "cuda"
        assert cpu.workload_key != gpu.workload_key
        assert len(cpu.config_space) == len(gpu.config_space) == 4
        s, args = tmpl(8, target="llvm")
        a = rng.random(8).astype("float32")
        build_and_check(s, args, [a], [a + 1.0])
        # The task travels by value and registers again as a generic template.
        from search_spaces.task import Task
        data = cpu.to_json(by_value=True)
        unregister_template("test/add_one")
        again = Task.from_json(data, allow_code=True)
        assert again.args == (8,) and search_spaces.list_templates()["test/add_one"] == ["any"]
    finally:
        unregister_template("test/add_one")


def test_a_target_specific_implementation_wins_over_the_generic_one():
    template("test.restricted")(_add_one)

    @template("test.restricted", target="cuda")
    def restricted_cuda(n):
        raise RuntimeError("the cuda implementation ran")

    try:
        assert search_spaces.list_templates()["test.restricted"] == ["any", "cuda"]
        assert len(create_task("test.restricted", (8,), "llvm").config_space) == 4
        with pytest.raises(InstantiationError, match="the cuda implementation ran"):
            create_task("test.restricted", (8,), "cuda").config_space  # noqa: B018
    finally:
        unregister_template("test.restricted")


def test_query_takes_an_autotvm_workload(scale_template):
    task = create_task("test_scale", (32,), "llvm")
    chosen = task.config_space.from_json({"knobs": {"tile": [4, 8], "vec": True}})

    class OnlyThisTask(DispatchContext):
        def _query(self, target_key, asked):
            return chosen if asked is task else None

    ctx = OnlyThisTask()
    assert ctx.query("llvm", task.workload) == chosen  # ("test_scale", 32, 2.0)
    assert ctx.query("llvm", ("test_scale", 32)) == chosen  # defaults filled in, as create_task does
    assert ctx.lookup("llvm", ("test_scale", 64)) is None
    assert ctx.query("llvm", ("test_scale", 64)).is_fallback  # the fallback answers, as in AutoTVM
    with pytest.raises(SearchSpaceError, match="unknown template 'nope'"):
        ctx.query("llvm", ("nope", 1))
    with pytest.raises(SearchSpaceError, match="a workload is"):
        ctx.query("llvm", ())
