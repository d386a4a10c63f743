"""The pass pipelines are what lower() and build() run, and users extend them as in TVM: passes
added at a phase through PassContext, instruments around every pass, the IR dumped after each
named pass (COMPILER_DUMP_IR) and checked between passes (COMPILER_VERIFY_IR)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import vector_add_schedule
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import backends, passes, te
from compiler.backends.cuda import lower_cuda
from compiler.errors import CompilerError, LoweringError
from compiler.passes import Pass, PassContext, PassInstrument, Phase, Pipeline, prim_func_pass
from compiler.tir import stmt as S
from compiler.tir.analysis import collect, post_order_visit
from compiler.tir.function import IRModule
from compiler.tir.functor import IRMutator
from compiler.transform.pipeline import DUMP_IR_ENV, VERIFY_IR_ENV, VerifyIR
from compiler.transform.verify import verify_ir


def _double(n=64):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    return s, [A, B]


def _recording(log: list, label: str, **kwargs) -> Pass:
    def run(func):
        log.append((label, func.name))
        return func

    return Pass(label, run, **kwargs)


def test_every_pipeline_is_passes_and_phases():
    for pipeline in (passes.LOWER, *(b.pipeline for b in backends.registered())):
        assert pipeline.steps and all(isinstance(p, (Pass, Phase)) for p in pipeline.steps)
        assert all(callable(p.run) for p in pipeline.steps if isinstance(p, Pass))
    # Vectorization comes after every other optimisation: later passes do not know vector nodes.
    names = [p.name for p in passes.LOWER.passes() if p.optimize]
    assert names[-1] == "vectorize_loops"
    # TVM's four phases, in order.
    assert [s.number for s in passes.LOWER.steps if isinstance(s, Phase)] == [0, 1, 2, 3]


def test_synchronisation_and_splitting_are_listed_cuda_passes():
    cuda = [(p.name, p.scope) for p in backends.get("cuda").pipeline.passes()]
    split = cuda.index(("split_host_device", "module"))
    assert ("insert_thread_sync", "kernel") in cuda[split + 1:]
    assert "lower_intrin" in str(backends.get("llvm").pipeline)


def test_user_pass_runs_at_its_phase():
    log: list = []
    seen_vector = []

    def phase(n):
        def run(func):
            log.append(n)
            found = []
            post_order_visit(func.body, lambda x: found.append(x) if isinstance(x, S.For)
                             and x.kind is S.ForKind.VECTORIZED else None)
            seen_vector.append((n, bool(found)))
            return func

        return run

    config = {"tir.add_lower_pass": [(3, phase(3)), (0, phase(0)), (2, phase(2)), (1, phase(1))]}
    with PassContext(config=config):
        compiler.lower(*_double(), name="f")
    assert log == [0, 1, 2, 3]
    # Before vectorize_loops (phases 0, 1) the loop is still a vectorized For; after (2, 3) it is gone.
    assert seen_vector == [(0, True), (1, True), (2, False), (3, False)]
    compiler.lower(*_double(), name="f")  # outside the context: no user pass
    assert log == [0, 1, 2, 3]


def test_tvm_style_prim_func_pass_rewrites_what_lower_returns(rng):
    # A user pass that doubles every stored value, written as TVM's tutorials write one.
    class Doubler(IRMutator):
        def visit_BufferStore(self, s):
            return S.BufferStore(s.buffer, s.value * 2.0, s.indices, s.predicate)

    @prim_func_pass(opt_level=0)
    def double_stores(func, mod, ctx):
        assert isinstance(mod, IRModule) and ctx is PassContext.current()
        return func.with_body(Doubler().visit(func.body))

    with PassContext(config={"tir.add_lower_pass": [(1, double_stores)]}):
        f = compiler.build(*_double(), target="llvm", name="quad")
    a = random_array(rng, 64, "float32")
    b = poisoned(64, "float32")
    f(a, b)
    assert_written(b, a * 4)


def test_simple_mode_skips_the_optimising_passes():
    log: list = []
    with PassContext(config={"tir.add_lower_pass": [(3, _recording(log, "opt", optimize=True))]}):
        simple = compiler.lower(*_double(), simple_mode=True)
        assert log == []
        assert "vectorized" in str(simple["main"].body)
        compiler.lower(*_double())
    assert log == [("opt", "main")]


def test_disabled_pass_is_skipped():
    with PassContext(disabled_pass=["vectorize_loops"]):
        mod = compiler.lower(*_double())
    assert "vectorized" in str(mod["main"].body)
    assert "vectorized" not in str(compiler.lower(*_double())["main"].body)


def test_a_disabled_unroll_still_leaves_the_function_simplified():
    """unroll_loops simplifies as it copies; disabled, a plain simplify takes its place, so that
    what loop partitioning leaves (``4 * 8 + i.inner < 37``) is still simplified."""
    A = te.placeholder((37, 19), name="A")
    B = te.compute((37, 19), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=8)
    jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].reorder(io, jo, ii, ji)
    s[B].vectorize(ji)
    s[B].unroll(ii)
    with PassContext(disabled_pass=["unroll_loops"]):
        names = [p.name for p in passes.LOWER.passes()]
        text = str(compiler.lower(s, [A, B])["main"].body)
        f = compiler.build(s, [A, B])
    assert "unroll_loops" not in names and names.count("simplify") == 2
    assert "unrolled" in text and "4 * 8" not in text
    with PassContext(disabled_pass=["unroll_loops", "simplify"]):
        assert "simplify" not in [p.name for p in passes.LOWER.passes()]
    with pytest.raises(TypeError, match="when_disabled must be a Pass"):
        Pass("mine", lambda f: f, when_disabled="simplify")
    a = random_array(np.random.default_rng(3), (37, 19), "float32")
    out = poisoned((37, 19), "float32")
    f(a, out)
    assert_written(out, a * 2 + 1, rtol=1e-6)


def test_bad_pass_context_configuration_is_refused():
    with pytest.raises(LoweringError, match="unknown config key 'tir.no_such_option'"):
        PassContext(config={"tir.no_such_option": True})
    with pytest.raises(LoweringError, match="a phase is an int >= 0"):
        PassContext(config={"tir.add_lower_pass": [(-1, lambda f: f)]})
    with pytest.raises(LoweringError, match="expected a Pass or a function"):
        PassContext(config={"tir.add_lower_pass": [(1, "not a pass")]})
    with PassContext(config={"tir.add_lower_pass": [(1, lambda f: "oops")]}), \
            pytest.raises(LoweringError, match="returned str, not a PrimFunc"):
        compiler.lower(*_double())


def test_instruments_see_every_pass_in_order():
    class Recorder(PassInstrument):
        def __init__(self):
            self.events = []

        def run_before_pass(self, mod, info):
            self.events.append(("before", info.pipeline, info.name))

        def run_after_pass(self, mod, info):
            self.events.append(("after", info.pipeline, info.name))

    rec = Recorder()
    with PassContext(instruments=[rec]):
        compiler.build(*_double(), target="llvm")
    ran = [(p, n) for kind, p, n in rec.events if kind == "after"]
    expected = [("lower", p.name) for p in passes.LOWER.passes()] + \
        [("llvm", p.name) for p in backends.get("llvm").pipeline.passes()]
    assert ran == expected
    assert [e for e in rec.events if e[0] == "before"] == [("before", p, n) for p, n in expected]


def test_lower_cuda_runs_host_then_kernel_passes():
    log: list = []
    config = {"tir.add_lower_pass": [(3, _recording(log, "lowered"))]}
    cuda = backends.get("cuda").pipeline
    s, args = vector_add_schedule()
    with PassContext(config=config):
        mod = compiler.lower(s, args, name="vadd")
    (gf,) = lower_cuda(mod)
    assert log == [("lowered", "vadd")]
    assert [k.attrs["calling_conv"] for k in gf.kernels] == ["kernel"]
    assert gf.host.name == "vadd" and gf.launches[0].kernel == gf.kernels[0].name
    # The run goes through the pipeline: a kernel pass sees each kernel, a function pass the host.
    seen: list = []
    probes = (_recording(seen, "host"), _recording(seen, "kernel", scope="kernel"))
    Pipeline("probe", (*cuda.steps, *probes)).run(mod)
    assert seen == [("host", "vadd"), ("kernel", gf.kernels[0].name)]


def test_llvm_build_computes(rng):
    mod = compiler.build(*_double(), target="llvm", name="double")
    a = random_array(rng, 64, "float32")
    b = poisoned(64, "float32")
    mod(a, b)
    assert_written(b, a * 2)


def test_build_refuses_an_unknown_backend_and_an_empty_module():
    with pytest.raises(CompilerError, match="no backend builds target kind 'opencl'"):
        backends.get("opencl")
    with pytest.raises(CompilerError, match="empty IRModule"):
        compiler.build(IRModule({}), target="llvm")


def test_pipeline_runs_passes_in_order_and_returns_what_it_was_given():
    func = compiler.lower(*_double(), simple_mode=True)["main"]
    order = []
    steps = tuple(Pass(str(i), (lambda f, i=i: order.append(i) or f)) for i in range(3))
    assert Pipeline("p", steps).run(func) is func
    assert order == [0, 1, 2]
    mod = IRModule({"main": func})
    out = Pipeline("p", steps).run(mod)
    assert isinstance(out, IRModule) and out["main"] is func


def test_dump_ir_writes_each_named_pass(tmp_path, monkeypatch):
    monkeypatch.setenv(DUMP_IR_ENV, str(tmp_path))
    compiler.build(*_double(), target="llvm", name="dumped")
    names = sorted(p.name for p in tmp_path.iterdir())
    labels = [n.split("-", 1)[1] for n in names]
    lower = [p.name for p in passes.LOWER.passes()]
    assert labels[0] == "lower-00-input.tir"
    assert labels[1:1 + len(lower)] == [f"lower-{i:02d}-{n}.tir" for i, n in enumerate(lower)]
    assert "llvm-00-lower_intrin.tir" in labels
    assert labels[-2:] == ["llvm-codegen.ll", "llvm-optimize.ll"]
    assert "def dumped(" in (tmp_path / names[1]).read_text()
    assert "define" in (tmp_path / names[-1]).read_text()


def test_dump_ir_of_a_cuda_build_ends_in_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv(DUMP_IR_ENV, str(tmp_path))
    s, args = vector_add_schedule()
    compiler.build(s, args, target="cuda -arch=sm_80", name="vadd")
    labels = [p.name.split("-", 1)[1] for p in sorted(tmp_path.iterdir())]
    assert "cuda-04-split_host_device.tir" in labels and "cuda-05-insert_thread_sync.tir" in labels
    assert labels[-1] == "cuda-ptx.ptx"


def test_verifier_names_the_pass_that_broke_the_ir(monkeypatch):
    def forget_loops(func):
        # Drops every loop but keeps its body: the loop variables are then used but defined nowhere.
        class Unloop(IRMutator):
            def visit_For(self, s):
                return self.visit(s.body)

        return func.with_body(Unloop().visit(func.body))

    config = {"tir.add_lower_pass": [(1, Pass("forget_loops", forget_loops))]}
    with PassContext(config=config, instruments=[VerifyIR()]), \
            pytest.raises(LoweringError, match="(?s)after pass 'forget_loops'.*used but defined nowhere"):
        compiler.lower(*_double())
    monkeypatch.setenv(VERIFY_IR_ENV, "1")
    with PassContext(config=config), pytest.raises(LoweringError, match="forget_loops"):
        compiler.lower(*_double())


def test_verifier_accepts_what_lowering_makes_and_refuses_a_redefined_loop():
    func = compiler.lower(*_double())["main"]
    assert verify_ir(func) == []
    loop = next(iter(_loops(func.body)))
    again = S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, loop)
    assert any("defines" in p and "again" in p for p in verify_ir(func.with_body(again)))


def _loops(stmt):
    return collect(stmt, lambda n: isinstance(n, S.For))


def test_cuda_build_runs_the_cuda_pipeline():
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda", name="vadd")
    assert mod.get_source("ptx")
    assert np.all([k.startswith("vadd_kernel") for k in mod.imported_modules[0].kernel_names])
