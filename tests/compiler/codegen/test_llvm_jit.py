"""Loading CPU code into the process (compiler.codegen.llvm_jit): where the JIT places an object's
sections must not depend on what else the process has mapped."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest
from helpers import assert_written, poisoned

import compiler
from compiler import te
from compiler.codegen import llvm_jit
from compiler.codegen.llvm_jit import ObjectCode, global_symbols
from compiler.codegen.llvm_machine import object_machine, parse
from compiler.errors import CodegenError
from compiler.target import Target

# Runs in a fresh interpreter: a load that places the code and its constants more than 2 GB
# apart fails an assertion in LLVM's linker and aborts the process. The script builds a kernel
# whose code reads constants from its read-only data (32-bit PC-relative references), then leaves
# the address space so that the highest free pages are a single page above an 8 GB reservation
# and a single page below it: memory for each section mapped on its own would put the code in
# the first and the constants 8 GB away in the second.
_FAR_APART_PAGES = textwrap.dedent("""
    import ctypes, mmap
    import numpy as np
    from helpers import assert_written, poisoned
    from compiler import te
    from compiler.driver import build_artifact, load_artifact

    n = 16
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 0.37 + 1.25, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    artifact = build_artifact(s, [A, B], target="llvm")

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    PAGE = mmap.PAGESIZE
    NONE, NORESERVE = 0, 0x4000  # PROT_NONE and Linux's MAP_NORESERVE

    def reserve(size):
        got = libc.mmap(None, size, NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | NORESERVE, -1, 0)
        assert got not in (None, 2**64 - 1), f"mmap(None, {size}) failed"
        return got

    size = 8 << 30
    low = reserve(size)
    high = low + size
    # Fill every free gap above the reservation, halving the request size down to a page: the
    # kernel places each request in the highest gap it fits, so the gaps fill from the top and
    # only the space below the reservation stays free. Read off the kernel's own placement, not
    # /proc/self/maps, which a sandboxed kernel may not report whole.
    chunk = size
    while chunk >= PAGE:
        got = reserve(chunk)
        if got < high:
            libc.munmap(got, chunk)
            chunk //= 2
    libc.munmap(high - PAGE, PAGE)
    libc.munmap(low, PAGE)
    probe = reserve(PAGE)
    libc.munmap(probe, PAGE)
    if probe != high - PAGE:
        print("unlaid: this kernel does not place a page in the highest free gap")
        raise SystemExit(0)

    module = load_artifact(artifact)
    a = np.random.default_rng(7).standard_normal(n).astype("float32")
    b = poisoned(n, "float32")
    module(a, b)
    assert_written(b, a * np.float32(0.37) + np.float32(1.25), rtol=1e-6)
    print("computed")
""")


@pytest.mark.skipif(sys.platform != "linux", reason="lays out the address space with Linux's mmap")
def test_code_and_its_constants_load_together_wherever_free_memory_lies(tmp_path):
    tests = Path(__file__).parents[2]
    script = tmp_path / "far_apart.py"
    script.write_text(_FAR_APART_PAGES)
    path = os.pathsep.join(p for p in (str(tests.parent), str(tests), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path})
    if done.returncode == 0 and done.stdout.startswith("unlaid"):
        pytest.skip(done.stdout.strip())  # the layout needs the usual top-down placement of mmap
    assert done.returncode == 0 and "computed" in done.stdout, done.stdout + done.stderr[-3000:]


def test_code_calling_a_function_the_process_lacks_is_refused_naming_it():
    module = parse("declare void @no_such_function()\n"
                   "define void @f() {\n  call void @no_such_function()\n  ret void\n}\n")
    module.triple = llvm.get_process_triple()
    target = Target("llvm")
    with pytest.raises(CodegenError, match=r"calls what this process does not have: no_such_function;"):
        ObjectCode(object_machine(target).emit_object(module), target)


def test_an_object_s_global_symbols_are_read_from_its_symbol_table():
    module = parse("@table = global [4 x i32] zeroinitializer\n@hidden = internal global i32 0\n"
                   "declare void @elsewhere()\n"
                   "define void @f() {\n  call void @elsewhere()\n  ret void\n}\n"
                   "define internal void @g() {\n  ret void\n}\n")
    module.triple = llvm.get_process_triple()
    defined, undefined = global_symbols(object_machine(Target("llvm")).emit_object(module))
    assert sorted(defined) == ["f", "table"] and undefined == ["elsewhere"]
    with pytest.raises(CodegenError, match="not a 64-bit little-endian ELF object file"):
        global_symbols(b"\xcf\xfa\xed\xfe" + bytes(60))  # a Mach-O header


def test_code_runs_after_the_jit_that_linked_it_gave_way_to_a_fresh_one(monkeypatch):
    monkeypatch.setattr(llvm_jit, "_LINKS_PER_JIT", 2)
    n = 33
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 3.0 - 0.5, name="B")
    schedule = te.create_schedule(b.op)
    modules, jits = [], []
    for _ in range(5):
        modules.append(compiler.build(schedule, [a, b], target="llvm"))
        if not jits or jits[-1]() is not llvm_jit._jit_state["jit"]:
            jits.append(weakref.ref(llvm_jit._jit_state["jit"]))
    gc.collect()
    # two libraries each; the JITs given way to are gone from Python, their code still loaded
    assert len(jits) == 3 and jits[0]() is None and jits[1]() is None
    x = np.random.default_rng(3).standard_normal(n).astype("float32")
    for module in modules:
        out = poisoned(n, "float32")
        module(x, out)
        assert_written(out, x * np.float32(3.0) - np.float32(0.5), rtol=1e-6)
