"""AutoTVM's dispatch contexts, written as AutoTVM code with only the imports renamed:
``DispatchContext.current``, nesting through ``_old_ctx``, the fallback context's memory
and warnings, ``ApplyConfig`` and contexts that override ``_query_inside``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from autotvm_templates import elementwise_template

import compiler as tvm
from autotune import autotvm
from autotune.autotvm.task.dispatcher import ApplyConfig, DispatchContext, FallbackContext
from compiler import te
from search_spaces import unregister_template

N = 64


@pytest.fixture(scope="module")
def scale():
    with elementwise_template("test_autotvm_dispatch/scale", lambda a: a * 2.0 - 1.0) as scale:
        yield scale


@pytest.fixture
def task(scale):
    return autotvm.task.create("test_autotvm_dispatch/scale", args=(N, "float32"), target="llvm")


def _run(s, args):
    f = tvm.build(s, args)
    a = np.random.default_rng(1).random(N).astype("float32")
    b = np.full(N, np.nan, dtype="float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 2.0 - 1.0, rtol=1e-6)


def test_contexts_stack_and_the_innermost_is_current(task):
    root = DispatchContext.current
    assert isinstance(root, FallbackContext)
    first, second = task.config_space.get(3), task.config_space.get(8)
    with ApplyConfig(first) as outer:
        assert DispatchContext.current is outer and outer._old_ctx is root
        with ApplyConfig(second) as inner:
            assert DispatchContext.current is inner and inner._old_ctx is outer
            assert DispatchContext.current.query(tvm.target.Target("llvm"), task.workload) is second
        assert DispatchContext.current is outer
    assert DispatchContext.current is root


def test_a_query_the_inner_context_cannot_answer_falls_through(scale, task):
    mine = task.config_space.get(5)
    other = autotvm.task.create("test_autotvm_dispatch/scale", args=(2 * N, "float32"), target="llvm")

    class OneWorkload(DispatchContext):
        """A context written as in AutoTVM: a Target and a workload tuple."""

        def __init__(self, workload, cfg):
            super().__init__()
            self.best = {workload: cfg}
            self.asked = []

        def _query_inside(self, target, workload):
            self.asked.append((target.model, workload))
            return self.best.get(workload)

    outer_cfg = other.config_space.get(2)
    with ApplyConfig(outer_cfg), OneWorkload(task.workload, mine) as ctx:
        with tvm.target.Target("llvm"):
            s, args = scale(N, "float32")  # answered by the inner context
            assert ctx.query(tvm.target.Target("llvm"), task.workload) is mine
            assert ctx.query(tvm.target.Target("llvm"), other.workload) is outer_cfg  # from ApplyConfig
        # the template's own call asked the inner context with AutoTVM's workload tuple
        workload = ("test_autotvm_dispatch/scale", N, "float32")
        assert ctx.asked[0] == (tvm.target.Target("llvm").model, workload)
    _run(s, args)


def test_fallback_context_remembers_warns_once_and_can_be_updated(task, caplog):
    fallback = DispatchContext.current
    target = tvm.target.Target("llvm")
    fallback.clear_cache(target, task.workload)
    with caplog.at_level(logging.WARNING):
        cfg = fallback.query(target, task.workload)
        again = fallback.query(target, task.workload)
    assert cfg.is_fallback and again is cfg
    assert sum("no tuned config" in r.getMessage() for r in caplog.records) == 1
    assert cfg.index == task.config_space.default_config.index

    chosen = task.config_space.get(9)
    fallback.update(target, task.workload, chosen)
    assert fallback.query(target, task.workload) is chosen
    with tvm.target.Target("llvm"):
        s, args = task.instantiate(fallback.query(target, task.workload))
    _run(s, args)

    autotvm.task.clear_fallback_cache(target, task.workload)
    autotvm.env.GLOBAL_SCOPE.silent = True
    caplog.clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert fallback.query(target, task.workload).is_fallback
    finally:
        autotvm.env.GLOBAL_SCOPE.silent = False
    assert not any("no tuned config" in r.getMessage() for r in caplog.records)


def test_apply_config_update_and_workload(scale, task):
    ctx = ApplyConfig(task.config_space.get(1))
    with ctx:
        with tvm.target.Target("llvm"):
            s, args = scale(N, "float32")
        assert ctx.workload == task.workload
        ctx.update(tvm.target.Target("llvm"), task.workload, task.config_space.get(11))
        assert DispatchContext.current.query(tvm.target.Target("llvm"), task.workload).index == 11
    _run(s, args)
    with pytest.raises(TypeError, match="ConfigEntity"):
        ApplyConfig("not a config")
    with pytest.raises(NotImplementedError, match="cannot be updated"):
        DispatchContext().update(None, task.workload, task.config_space.get(0))


def test_a_template_registered_again_gets_a_fallback_of_its_new_space():
    def define(knob):
        @autotvm.template("test_autotvm_dispatch/again")
        def again(n):
            A = te.placeholder((n,), name="A")
            B = te.compute((n,), lambda i: A[i] * 2.0 - 1.0, name="B")
            s = te.create_schedule(B.op)
            cfg = autotvm.get_config()
            if knob:
                cfg.define_knob("unused", [1, 2, 3])
            else:
                cfg.define_split("tile", B.op.axis[0], num_outputs=2)
                cfg["tile"].apply(s, B, B.op.axis[0])
            return s, [A, B]

        return again

    try:
        with tvm.target.Target("llvm"):
            define(False)(N)
            unregister_template("test_autotvm_dispatch/again")
            s, args = define(True)(N)  # the remembered split config is not of this space
        _run(s, args)
    finally:
        unregister_template("test_autotvm_dispatch/again")


def test_a_context_keyed_on_target_keys_as_autotvms_apply_history_best(scale, task):
    """AutoTVM's ApplyHistoryBest looks a workload up under str(target), then each target key."""
    mine = task.config_space.get(4)

    class ByKey(DispatchContext):
        def __init__(self, records):
            super().__init__()
            self._best_by_targetkey = records
            self.answered = []

        def _query_inside(self, target, workload):
            self.answered.append(self._lookup(target, workload))
            return self.answered[-1]

        def _lookup(self, target, workload):
            if target is None:
                raise RuntimeError("Need a target context to find the history best.")
            key = (str(target), workload)
            if key in self._best_by_targetkey:
                return self._best_by_targetkey[key]
            for k in target.keys:
                key = (k, workload)
                if key in self._best_by_targetkey:
                    return self._best_by_targetkey[key]
            return None

    with ByKey({("cpu", task.workload): mine}) as ctx:
        assert ctx.query(tvm.target.Target("llvm"), task.workload) is mine
        with tvm.target.Target("llvm"):
            s, args = scale(N, "float32")
        assert ctx.query(tvm.target.Target("cuda"), task.workload).is_fallback  # no "cuda"/"gpu" record
    assert ctx.answered == [mine, mine, None]  # the template's call was answered by the "cpu" key
    _run(s, args)
