"""Intrinsic operators and their per-target lowering rules (``compiler.tir.op``), extern calls
in CPU and CUDA kernels (fast-math forms and libdevice), and ``indexdiv``/``indexmod``.

CPU kernels run against numpy; CUDA kernels are assembled with ptxas (the test is reported
skipped, with the reason, where ptxas is missing) and, where their math is the compiler's
own, run on the GPU simulator; tests marked ``cuda`` run on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assemble, build_ptx, gpu_function, simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.codegen import libdevice
from compiler.codegen.cuda_source import cuda_source
from compiler.errors import CodegenError, LoweringError
from compiler.tir import Op

CUDA = "cuda -arch=sm_80"


@pytest.fixture(autouse=True)
def _registry():
    """Every test registers operators and rules in a registry restored afterwards."""
    with tir.isolated_registry():
        yield


def _unary(fn, n=None, dtype="float32", threads=None):
    """``B[i] = fn(A[i])`` over ``n`` points (a symbolic size if None), optionally thread-bound."""
    A = te.placeholder((n if n is not None else te.var("n"),), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: fn(A[i]), name="B")
    s = te.create_schedule(B.op)
    if threads:
        bx, tx = s[B].split(B.op.axis[0], factor=threads)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def _run_cpu(s, args, a, want, rtol=1e-6):
    f = compiler.build(s, args, target="llvm")
    b = poisoned(a.shape, a.dtype)
    f(a, b)
    assert_written(b, want, rtol=rtol)
    return f


def _positive(rng, n, dtype="float32"):
    return np.abs(random_array(rng, n, dtype))


def _extern_rule(fmt):
    """A rule calling the C function ``fmt % short_name`` for float32 calls, declining others."""
    def rule(call):
        assert isinstance(call, tir.Call) and call.op.name.startswith("tir.")
        if call.dtype != "float32":
            return call
        return tir.call_pure_extern("float32", fmt % call.op.name[4:], *call.args)
    return rule


def _register_mylog():
    tir.register_op_attr("tir.mylog", "TCallEffectKind", tir.CallEffectKind.Pure)
    return lambda x: tir.call_intrin(x.dtype, "tir.mylog", x)


# ----------------------------------------------------------------------------- the registry


def test_calls_name_their_operator_as_tvm_does():
    x = te.var("x", dtype="float32")
    assert te.exp(x).op.name == "tir.exp" and te.exp(x).op == "exp"
    assert tir.call_intrin("float32", "tir.exp", x).op == Op.get("tir.exp") == "exp"
    ext = te.call_pure_extern("float32", "expf", x)
    assert ext.op.name == "tir.call_pure_extern" and ext.args[0].value == "expf"
    assert Op.get("tir.exp").get_attr("TCallEffectKind") == tir.CallEffectKind.Pure
    assert "tir.exp" in tir.list_op_names() == Op.list_op_names()
    assert tir.CallEffectKind.Opaque is tir.CallEffectKind.UpdateState == 3
    assert Op.get("tir.call_extern").get_attr("TCallEffectKind") == tir.CallEffectKind.Opaque


def test_unknown_operators_are_refused_by_name():
    x = te.var("x", dtype="float32")
    with pytest.raises(ValueError, match="'tir.mylog' is not registered"):
        tir.call_intrin("float32", "tir.mylog", x)
    with pytest.raises(ValueError, match="did you mean 'tir.exp'"):
        Op.get("exp")
    mylog = _register_mylog()
    assert mylog(x).op.name == "tir.mylog"
    with pytest.raises(ValueError, match="dotted identifier"):
        tir.register_op_attr("tir.my log", "TCallEffectKind", tir.CallEffectKind.Pure)
    with pytest.raises(ValueError, match="C identifier"):
        te.call_pure_extern("float32", "not a name", x)


def test_higher_level_wins_lower_is_ignored_same_is_an_error():
    _register_mylog()
    rules = [lambda c, k=k: c for k in range(4)]
    tir.register_intrin_lowering("tir.mylog", "cuda", f=rules[0], level=20)
    tir.register_intrin_lowering("tir.mylog", "cuda", f=rules[1], level=15)
    assert Op.get("tir.mylog").get_attr("cuda.FLowerIntrinsic") is rules[0]
    tir.register_intrin_lowering("tir.mylog", "cuda", f=rules[2], level=30)
    assert Op.get("tir.mylog").get_attr("cuda.FLowerIntrinsic") is rules[2]
    with pytest.raises(ValueError, match="already registered at level 30"):
        tir.register_intrin_lowering("tir.mylog", "cuda", f=rules[3], level=30)
    # The decorator form registers too.
    tir.register_intrin_lowering("tir.mylog", "llvm", level=11)(rules[3])
    assert Op.get("tir.mylog").get_attr("llvm.FLowerIntrinsic") is rules[3]


def test_builtin_lowering_is_level_10():
    with pytest.raises(ValueError, match="already registered at level 10"):
        tir.register_intrin_lowering("tir.exp", "llvm", f=_extern_rule("%sf"))
    tir.register_intrin_lowering("tir.exp", "llvm", f=_extern_rule("%sf"), level=5)  # ignored
    s, args = _unary(te.exp, 16)
    assert "@expf" not in compiler.build(s, args, target="llvm").get_source("ll")
    Op.get("tir.exp").reset_attr("llvm.FLowerIntrinsic")  # now any level registers
    tir.register_intrin_lowering("tir.exp", "llvm", f=_extern_rule("%sf"), level=5)
    assert "@expf" in compiler.build(s, args, target="llvm").get_source("ll")


def test_register_intrin_rule_needs_override_over_an_existing_rule(rng):
    with pytest.raises(ValueError, match="override=True"):
        tir.register_intrin_rule("llvm", "exp", _extern_rule("%sf"))
    tir.register_intrin_rule("llvm", "exp", _extern_rule("%sf"), override=True)
    s, args = _unary(te.exp, 33)
    a = random_array(rng, 33, "float32")
    f = _run_cpu(s, args, a, np.exp(a))
    assert "@expf" in f.get_source("ll")
    tir.register_intrin_rule("llvm", "myexp", _extern_rule("%sf"))  # a new operator: no override needed
    assert Op.get("tir.myexp").get_attr("llvm.FLowerIntrinsic") is not None


def test_isolated_registry_forgets_what_was_registered_inside():
    with tir.isolated_registry():
        _register_mylog()
        tir.register_intrin_lowering("tir.exp", "llvm", f=_extern_rule("%sf"), level=99)
    with pytest.raises(ValueError, match="not registered"):
        Op.get("tir.mylog")
    s, args = _unary(te.exp, 16)
    assert "@expf" not in compiler.build(s, args, target="llvm").get_source("ll")


def test_bad_registrations_are_refused():
    with pytest.raises(TypeError, match="must be a function"):
        tir.register_intrin_lowering("tir.exp", "llvm", f="expf", level=99)
    with pytest.raises(TypeError, match="level"):
        tir.register_op_attr("tir.exp", "X", 1, level="high")
    with pytest.raises(ValueError, match="target kind"):
        tir.register_intrin_lowering("tir.exp", "not a target", f=_extern_rule("%sf"), level=99)


# ----------------------------------------------------------------------------- CPU path


@pytest.mark.parametrize("vector", [False, True])
def test_cpu_rule_calls_libm(rng, vector):
    tir.register_intrin_lowering("tir.exp", "llvm", f=_extern_rule("%sf"), level=99)
    s, args = _unary(te.exp, 64)
    if vector:
        _, xi = s[args[1]].split(args[1].op.axis[0], factor=8)
        s[args[1]].vectorize(xi)
    a = random_array(rng, 64, "float32")
    f = _run_cpu(s, args, a, np.exp(a))
    assert "@expf" in f.get_source("ll")


@pytest.mark.parametrize("dtype,cname", [("float32", "logf"), ("float64", "log")])
def test_cpu_user_operator(rng, dtype, cname):
    mylog = _register_mylog()
    tir.register_intrin_lowering(
        "tir.mylog", "llvm", level=99,
        f=lambda c: tir.call_pure_extern(c.dtype, "logf" if c.dtype == "float32" else "log", *c.args))
    s, args = _unary(mylog, 40, dtype)
    a = _positive(rng, 40, dtype)
    f = _run_cpu(s, args, a, np.log(a), rtol=1e-6 if dtype == "float32" else 1e-12)
    assert f"@{cname}(" in f.get_source("ll")


def test_declining_rule_passes_to_the_next_target_key(rng):
    mylog = _register_mylog()
    tir.register_intrin_lowering("tir.mylog", "llvm", f=lambda c: c, level=99)  # declines
    tir.register_intrin_lowering("tir.mylog", "default", f=lambda c: te.log(c.args[0]), level=99)
    s, args = _unary(mylog, 24)
    a = _positive(rng, 24)
    _run_cpu(s, args, a, np.log(a), rtol=1e-6)


def test_replacements_are_lowered_again(rng):
    mylog = _register_mylog()
    tir.register_op_attr("tir.mylog2", "TCallEffectKind", tir.CallEffectKind.Pure)
    tir.register_intrin_lowering("tir.mylog", "llvm", level=99,
                                 f=lambda c: tir.call_intrin(c.dtype, "tir.mylog2", *c.args))
    tir.register_intrin_lowering("tir.mylog2", "llvm", level=99,
                                 f=lambda c: tir.call_pure_extern(c.dtype, "logf", *c.args))
    s, args = _unary(mylog, 24)
    a = _positive(rng, 24)
    _run_cpu(s, args, a, np.log(a))


def test_user_operator_without_a_rule_for_the_target_is_a_lowering_error():
    mylog = _register_mylog()
    tir.register_intrin_lowering("tir.mylog", "cuda", f=lambda c: te.log(c.args[0]), level=99)
    s, args = _unary(mylog, 16)
    with pytest.raises(LoweringError, match=r"no lowering of intrinsic 'tir.mylog' for target 'llvm'"):
        compiler.build(s, args, target="llvm")


def test_cpu_call_of_a_function_the_process_lacks_is_a_codegen_error():
    """It used to compile into a jump to address 0."""
    s, args = _unary(lambda x: te.call_pure_extern("float32", "__expf", x), 8)
    with pytest.raises(CodegenError, match="no function '__expf' is loaded in this process"):
        compiler.build(s, args, target="llvm")


@pytest.mark.parametrize("rule,message", [
    (lambda c: tir.call_pure_extern("float64", "log", c.args[0].astype("float64")), "float64 expression"),
    (lambda c: "logf", "not an expression"),
    (lambda c: tir.call_intrin(c.dtype, "tir.mylog", c.args[0] + 1), "keeps producing calls"),
])
def test_bad_rules_are_lowering_errors(rule, message):
    mylog = _register_mylog()
    tir.register_intrin_lowering("tir.mylog", "llvm", f=rule, level=99)
    s, args = _unary(mylog, 16)
    with pytest.raises(LoweringError, match=message):
        compiler.build(s, args, target="llvm")


# ----------------------------------------------------------------------------- CUDA path


def test_cuda_rule_order_cuda_then_nvptx_then_default():
    mylog = _register_mylog()
    for key, fn in (("default", "default_log"), ("nvptx", "nvptx_log"), ("cuda", "cuda_log")):
        tir.register_intrin_lowering("tir.mylog", key, level=99,
                                     f=lambda c, fn=fn: tir.call_pure_extern(c.dtype, fn, *c.args))
        s, args = _unary(mylog, 64, threads=32)
        assert f"{fn}(" in cuda_source(gpu_function(s, args).kernels)


def test_cuda_user_operator_on_the_gpu_simulator(rng):
    mylog = _register_mylog()
    tir.register_intrin_lowering("tir.mylog", "cuda", f=lambda c: te.log(c.args[0]), level=99)
    s, args = _unary(mylog, 100, threads=32)
    a = _positive(rng, 100)
    b = poisoned(100, "float32")
    simulate(s, args, [a, b])
    assert_written(b, np.log(a), rtol=1e-6)
    build_ptx(s, args)


@pytest.mark.parametrize("name,nargs,ref", [
    ("__expf", 1, np.exp), ("expf", 1, np.exp), ("__nv_expf", 1, np.exp), ("__logf", 1, np.log),
    ("logf", 1, np.log), ("__powf", 2, np.power), ("__fdividef", 2, np.divide),
])
def test_cuda_extern_math_on_the_gpu_simulator(rng, name, nargs, ref):
    """The simulator evaluates the C and CUDA spellings of math calls as the math they name."""
    s, args = _unary(lambda x: te.call_pure_extern("float32", name, *([x] * nargs)), 100, threads=32)
    a = _positive(rng, 100) + np.float32(0.5)
    b = poisoned(100, "float32")
    simulate(s, args, [a, b])
    assert_written(b, ref(*([a] * nargs)), rtol=1e-6)


def test_gpu_simulator_refuses_an_unknown_extern_call_by_name(rng):
    s, args = _unary(lambda x: te.call_pure_extern("float32", "mystery", x), 100, threads=32)
    with pytest.raises(NotImplementedError, match="'mystery'"):
        simulate(s, args, [_positive(rng, 100), poisoned(100, "float32")])


@pytest.mark.parametrize("name,nargs,instruction", [
    ("__expf", 1, "ex2.approx.f32"), ("__exp10f", 1, "ex2.approx.f32"), ("__logf", 1, "lg2.approx.f32"),
    ("__log2f", 1, "lg2.approx.f32"), ("__log10f", 1, "lg2.approx.f32"), ("__sinf", 1, "sin.approx.f32"),
    ("__cosf", 1, "cos.approx.f32"), ("__tanf", 1, "div.approx.f32"), ("__powf", 2, "ex2.approx.f32"),
    ("__fdividef", 2, "div.approx.f32"),
])
def test_cuda_fast_math_forms_are_ptx_instructions(name, nargs, instruction, monkeypatch):
    monkeypatch.setenv(libdevice.ENV_VAR, "/nonexistent/libdevice.10.bc")  # they need no libdevice
    s, args = _unary(lambda x: te.call_pure_extern("float32", name, *([x] * nargs)), threads=64)
    ptx = build_ptx(s, args).get_source("ptx")
    assert instruction in ptx and "__nv_" not in ptx


def _libdevice_or_skip():
    try:
        return libdevice.find_libdevice()
    except CodegenError as err:
        pytest.skip(str(err))


@pytest.mark.parametrize("dtype,name,nargs", [("float32", "expf", 1), ("float32", "__nv_expf", 1),
                                              ("float32", "erff", 1), ("float32", "powf", 2),
                                              ("float64", "exp", 1), ("float32", "__fmaf_rn", 3)])
def test_cuda_libdevice_functions_are_linked(dtype, name, nargs):
    _libdevice_or_skip()
    s, args = _unary(lambda x: te.call_pure_extern(dtype, name, *([x] * nargs)), dtype=dtype, threads=64)
    mod = build_ptx(s, args)
    ptx = mod.get_source("ptx")
    assert ".extern" not in ptx and "__nv_sinf" not in ptx  # resolved, and only what is called
    assert f"{name}(" in mod.get_source("cuda")


def _calls(kernels) -> list[str]:
    """The intrinsics that ``kernels`` call, extern functions by their names."""
    found = []

    def visit(node):
        if isinstance(node, tir.Call):
            found.append(node.args[0].value if node.op in tir.EXTERN_OPS else node.op.name)

    for k in kernels:
        tir.post_order_visit(k.body, visit)
    return found


def test_cuda_exp_rule_calls_expf_instead_of_the_builtin():
    _libdevice_or_skip()
    s, args = _unary(te.exp, threads=64)
    assert "tir.exp" in _calls(gpu_function(s, args).kernels)
    tir.register_intrin_lowering("tir.exp", "cuda", f=_extern_rule("%sf"), level=99)
    assert _calls(gpu_function(s, args).kernels) == ["expf"]
    build_ptx(s, args)


def test_cuda_libdevice_errors_name_the_problem(monkeypatch):
    _libdevice_or_skip()
    s, args = _unary(lambda x: te.call_pure_extern("float32", "nosuchfn", x), threads=64)
    with pytest.raises(CodegenError, match="no CUDA device function '__nv_nosuchfn'"):
        compiler.build(s, args, target=CUDA)
    s, args = _unary(lambda x: te.call_pure_extern("float64", "expf", x), threads=64)
    with pytest.raises(CodegenError, match=r"has type float \(float\), but the kernel calls it as double"):
        compiler.build(s, args, target=CUDA)
    s, args = _unary(lambda x: te.call_pure_extern("float64", "__expf", x), threads=64)
    with pytest.raises(CodegenError, match="__expf takes 1 float32"):
        compiler.build(s, args, target=CUDA)


def test_missing_libdevice_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(libdevice.ENV_VAR, str(tmp_path))
    s, args = _unary(lambda x: te.call_pure_extern("float32", "expf", x), threads=64)
    missing = rf"libdevice \(libdevice.10.bc\) was not found.*set {libdevice.ENV_VAR}"
    with pytest.raises(CodegenError, match=missing):
        compiler.build(s, args, target=CUDA)


@pytest.mark.parametrize("target", ["llvm", "cuda"], ids=["cpu", "gpu"])
def test_every_native_operator_builds(target):
    """The built-in (level-10) lowerings name math that the target's code generator knows."""
    for op in sorted(tir.NATIVE_MATH[target]):
        fn = (lambda x, op=op: tir.call_intrin("bool" if op == "isnan" else "float32", f"tir.{op}",
                                                *([x] * (2 if op in ("pow", "fmod") else 1))))
        s, args = _unary(fn, 64, threads=32 if target == "cuda" else None)
        if target == "cuda":
            assemble(compiler.build(s, args, target=CUDA).get_source("ptx"))
        else:
            compiler.build(s, args, target="llvm")


@pytest.mark.cuda
def test_cuda_fast_exp_on_the_gpu(rng):
    s, args = _unary(lambda x: te.call_pure_extern("float32", "__expf", x), threads=64)
    f = compiler.build(s, args, target="cuda")
    a = random_array(rng, 1000, "float32")
    b = poisoned(1000, "float32")
    f(a, b)
    assert_written(b, np.exp(a), rtol=1e-5)


# ----------------------------------------------------------------------------- index division


def test_indexdiv_and_indexmod_round_towards_minus_infinity():
    assert te.indexdiv is tir.indexdiv and te.indexmod is tir.indexmod
    A = te.placeholder((24,), name="A", dtype="int32")
    D = te.compute((24,), lambda i: te.indexdiv(A[i] - 12, 5) * 10 + te.indexmod(A[i] - 12, 5), name="D")
    s = te.create_schedule(D.op)
    f = compiler.build(s, [A, D], target="llvm")
    a = np.arange(24, dtype="int32")[::-1].copy()
    d = poisoned(24, "int32")
    f(a, d)
    assert_written(d, np.floor_divide(a - 12, 5) * 10 + np.mod(a - 12, 5))


def test_indexdiv_in_an_index_expression(rng):
    A = te.placeholder((6, 4), name="A")
    B = te.compute((24,), lambda i: A[te.indexdiv(i, 4), te.indexmod(i, 4)] * 2, name="B")
    s = te.create_schedule(B.op)
    a = random_array(rng, (6, 4), "float32")
    f = compiler.build(s, [A, B], target="llvm")
    b = poisoned(24, "float32")
    f(a, b)
    assert_written(b, (a * 2).reshape(24))
