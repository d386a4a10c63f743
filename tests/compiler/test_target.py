"""Targets are checked against LLVM when they are made: a CPU or feature LLVM does not know
is a TargetError naming the close matches, never a warning followed by an aborted process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from compiler.errors import CompilerError, TargetError
from compiler.target import Target, llvm_cpus, llvm_features

AARCH64 = "aarch64-unknown-linux-gnu"


def test_the_cpus_and_features_llvm_knows_are_listed():
    cpus, features = llvm_cpus(), llvm_features()
    assert {"znver4", "skylake-avx512", "haswell", "x86-64-v3"} <= set(cpus)
    assert {"avx512f", "avx2", "fma"} <= set(features)
    assert "neoverse-v2" in llvm_cpus(AARCH64) and "znver4" not in llvm_cpus(AARCH64)


@pytest.mark.parametrize("spec", ["llvm -mcpu=znver4", "llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell",
                                  "llvm -mcpu=x86-64-v3 -mattr=+avx2,-avx512f",
                                  f"llvm -mcpu=neoverse-v2 -mtriple={AARCH64} -mattr=+sve"])
def test_known_cpus_and_features_are_accepted(spec):
    assert str(Target(spec)) == spec


def test_an_unknown_cpu_names_the_close_matches():
    with pytest.raises(TargetError) as info:
        Target("llvm -mcpu=zen4")
    msg = str(info.value)
    assert isinstance(info.value, CompilerError)
    assert "unknown CPU 'zen4'" in msg and "znver4" in msg and "compiler.target.llvm_cpus()" in msg


def test_an_unknown_cpu_for_another_triple():
    with pytest.raises(TargetError, match=r"unknown CPU 'znver4'.*llvm_cpus\('aarch64"):
        Target(f"llvm -mtriple={AARCH64} -mcpu=znver4")


def test_an_unknown_feature_names_the_close_matches():
    with pytest.raises(TargetError) as info:
        Target("llvm -mcpu=znver4 -mattr=+fma,+avx512")
    msg = str(info.value)
    assert "unknown feature '+avx512'" in msg and "avx512f" in msg and "llvm_features()" in msg


@pytest.mark.parametrize("spec, said", [
    ("llvm -mcpu=i686", "64-bit code requested"),  # a CPU LLVM knows, but 32-bit only
    ("llvm -mtriple=nonsense-triple", "does not know the triple"),
])
def test_targets_llvm_cannot_compile_for_are_errors(spec, said):
    with pytest.raises(TargetError, match=said):
        Target(spec)


def test_asking_llvm_for_help_points_to_the_lists():
    with pytest.raises(TargetError, match="llvm_cpus"):
        Target("llvm -mcpu=help")


def test_building_for_a_misspelt_cpu_raises_and_the_interpreter_lives():
    # In a child: before the check, LLVM aborted the whole process here.
    code = textwrap.dedent("""
        import compiler
        from compiler import te
        from compiler.errors import TargetError
        A = te.placeholder((16,), name="A")
        B = te.compute(A.shape, lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        try:
            compiler.build(s, [A, B], target="llvm -mcpu=zen4")
        except TargetError as e:
            print("raised:", e)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "raised: unknown CPU 'zen4'" in proc.stdout


def test_importing_the_target_module_does_not_load_llvm():
    code = "import sys, compiler.target; print('llvmlite' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_a_cuda_target_is_keyed_by_the_architecture_it_builds_for():
    from compiler.runtime.cuda import attached_arch

    assert Target("cuda -arch=sm_80").model == "sm_80"
    assert Target("cuda").model == (attached_arch() or "unknown")


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason="asks the attached GPU for its architecture")
def test_a_cuda_target_on_a_gpu_is_keyed_by_that_gpu():
    from compiler.runtime.cuda import attached_arch

    arch = attached_arch()
    assert arch is not None and arch.startswith("sm_") and Target("cuda").model == arch


def test_a_pinned_target_names_the_hardware_the_machine_would_pick():
    from compiler.runtime.cuda import attached_arch
    from compiler.target import host_cpu_name

    host = host_cpu_name()
    assert Target("llvm").pinned() == Target(f"llvm -mcpu={host}")
    assert str(Target("llvm -fast-math").pinned()) == f"llvm -mcpu={host} -fast-math"
    assert Target("llvm -mcpu=haswell").pinned() == Target("llvm -mcpu=haswell")
    assert Target("cuda -arch=sm_80").pinned() == Target("cuda -arch=sm_80")
    arch = attached_arch()  # without a GPU the machine cannot tell, and the target stays as it is
    assert str(Target("cuda").pinned()) == (f"cuda -arch={arch}" if arch else "cuda")
    assert Target("cuda").pinned().host == Target("llvm")
    for spec in ("llvm", "cuda"):
        assert Target(spec).pinned().model == Target(spec).model


def test_keyword_form_with_a_host():
    tgt = Target(target="llvm", host="llvm")
    assert tgt == Target("llvm") and tgt.host == Target("llvm")
    assert tgt.kind.name == "llvm" and tgt.kind == "llvm"


def test_host_defaults_to_llvm_for_cuda_only():
    assert Target("cuda").host == Target("llvm")
    assert Target("llvm").host is None
    assert Target(Target("cuda", host="llvm -fast-math")).host == Target("llvm -fast-math")


def test_target_given_twice_or_a_non_llvm_host_is_refused():
    with pytest.raises(TargetError, match="give the target once"):
        Target("llvm", target="llvm")
    with pytest.raises(TargetError, match="host target must be an llvm"):
        Target("llvm", host="cuda")


def test_targets_have_tvms_keys_attrs_and_current():
    import compiler as tvm

    llvm = tvm.target.Target("llvm -mcpu=haswell -mattr=+avx2,+fma")
    assert llvm.keys == ("cpu",) and llvm.mcpu == "haswell" and llvm.mattr == ["+avx2", "+fma"]
    assert llvm.libs == [] and llvm.kind.name == "llvm"
    assert llvm.attrs == {"keys": ["cpu"], "mcpu": "haswell", "mattr": ["+avx2", "+fma"]}
    cuda = tvm.target.Target("cuda -arch=sm_80")
    assert cuda.keys == ("cuda", "gpu") and cuda.attrs["keys"] == ["cuda", "gpu"]
    assert cuda.attrs["arch"] == "sm_80"
    assert cuda.model == "sm_80"
    assert tvm.target.Target.current() is None
    with pytest.raises(TargetError, match="no target is current"):
        tvm.target.Target.current(allow_none=False)
    with llvm:
        assert tvm.target.Target.current() is llvm and tvm.target.Target.current(allow_none=False) is llvm
        with cuda as inner:
            assert inner is cuda and tvm.target.Target.current() is cuda
        assert tvm.target.Target.current() is llvm
    assert tvm.target.Target.current() is None
