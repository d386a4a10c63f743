"""A built kernel exported as a shared object gives the same results in a new process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import poisoned, random_array

import compiler
from compiler import te
from compiler.errors import CompilerError


def test_export_library_then_load_in_new_process(tmp_path, rng):
    N = 40
    A = te.placeholder((N, N), name="A")
    B = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].parallel(io)
    s[C].vectorize(ji)
    f = compiler.build(s, [A, B, C], name="mm")
    a, b = random_array(rng, (N, N), "float32"), random_array(rng, (N, N), "float32")
    c = np.full((N, N), np.nan, "float32")
    f(a, b, c)
    lib = tmp_path / "mm.so"
    f.export_library(str(lib))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import compiler.runtime
        g = compiler.runtime.load_module({str(lib)!r})
        a = np.load({str(tmp_path / 'a.npy')!r}); b = np.load({str(tmp_path / 'b.npy')!r})
        c = np.full(({N}, {N}), np.nan, 'float32')
        g(a, b, c)
        np.save({str(tmp_path / 'c.npy')!r}, c)
        assert 'llvmlite' not in sys.modules, 'loading a library must not need the JIT'
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=str(tmp_path))
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ reloading and damaged files


def _unary(name: str, fcompute, n: int = 64):
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: fcompute(A[i]), name="B")
    return compiler.build(te.create_schedule(B.op), [A, B], name=name)


def _run(mod, a):
    out = poisoned(a.shape, a.dtype)
    mod(a, out)
    return out


def test_each_load_runs_what_the_file_holds(tmp_path, rng):
    a = random_array(rng, 64, "float32")
    path = tmp_path / "kernel.so"
    _unary("kernel", lambda x: x * 2.0).export_library(path)
    first = compiler.runtime.load_module(path)
    np.testing.assert_array_equal(_run(first, a), a * 2)
    _unary("kernel", lambda x: x + 10.0).export_library(path)
    second = compiler.runtime.load_module(path)
    np.testing.assert_array_equal(_run(second, a), a + 10)
    np.testing.assert_array_equal(_run(first, a), a * 2)  # the first load keeps its own code
    # Re-exporting a loaded module writes what it loaded, not what the path holds now.
    first.export_library(tmp_path / "again.so")
    np.testing.assert_array_equal(_run(compiler.runtime.load_module(tmp_path / "again.so"), a), a * 2)


def _load_in_child(paths) -> list[str]:
    """load_module of each path in a fresh interpreter (a crash there is a failed test, not a
    dead pytest): one line per path, "loaded" or the CompilerError's message."""
    code = textwrap.dedent(f"""
        from compiler.errors import CompilerError
        from compiler.runtime import load_module
        for path in {[str(p) for p in paths]!r}:
            try:
                load_module(path)
            except CompilerError as e:
                print("CompilerError:", str(e).replace("\\n", " "))
            else:
                print("loaded")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"load_module died: {proc.stderr[-2000:]}"
    lines = proc.stdout.splitlines()
    assert len(lines) == len(paths), proc.stdout
    return lines


def _exported(tmp_path) -> bytes:
    path = tmp_path / "good.so"
    _unary("kernel", lambda x: x * 2.0).export_library(path)
    return path.read_bytes()


def test_a_truncated_library_is_a_clear_error(tmp_path):
    data = _exported(tmp_path)
    paths = []
    for keep in (len(data) // 2, len(data) - 64, 100, 40):
        paths.append(tmp_path / f"cut{keep}.so")
        paths[-1].write_bytes(data[:keep])
    not_elf = tmp_path / "text.so"
    not_elf.write_text("not a library")
    lines = _load_in_child([*paths, not_elf])
    for line in lines:
        assert line.startswith("CompilerError:") and "not a usable shared library" in line, line
    assert "does not start with an ELF header" in lines[-1]


def test_a_library_with_bytes_added_or_cut_is_a_clear_error(tmp_path):
    """Bytes added or cut inside the file move what its headers point to: refused, never a
    crash of the interpreter in the dynamic loader."""
    data = _exported(tmp_path)
    meta = data.index(b'"functions"')
    paths = []
    for name, changed in (("added", data[:meta] + b"12345678" + data[meta:]),
                          ("cut", data[:meta] + data[meta + 8:]),
                          ("added_early", data[:4096] + bytes(64) + data[4096:])):
        paths.append(tmp_path / f"{name}.so")
        paths[-1].write_bytes(changed)
    appended = tmp_path / "appended.so"  # past the end of everything: harmless, still loads
    appended.write_bytes(data + bytes(100))
    lines = _load_in_child([*paths, appended])
    for line in lines[:-1]:
        assert line.startswith("CompilerError:") and "is not a usable shared library" in line, line
    assert "bytes cut or added" in lines[0] and "bytes cut or added" in lines[2]
    assert lines[-1] == "loaded"


# (bytes in the exported file, what they become, what the error names)
_CORRUPTIONS = [
    (b'"functions"', b'"functionz"', "'functions' list"),
    (b'"entry": "kernel"', b'"entry": "kernex"', "entry 'kernex'"),
    (b'"dtype": "float32"', b'"dtype": "float99"', "'dtype' should be one of"),
    (b'"shape": [64]', b'"shape": "64"', "'shape' should be a list of sizes"),
    (b'"name": "kernel"', b'"name": "kerne!"', "function name should be"),
    (b'"version": 1', b'"version": 7', "metadata version 7"),
    (b'{"version"', b'["version"', "not JSON text"),
]


def test_corrupt_metadata_is_a_clear_error(tmp_path):
    data = _exported(tmp_path)
    # Without the checksum (as in libraries exported before it existed), each field is checked.
    unsummed = data.replace(b"__autotune_metadata_sha256", b"__autotune_metadata_xxxxxx")
    paths = []
    for k, (old, new, _) in enumerate(_CORRUPTIONS):
        assert old in data and len(old) == len(new)
        paths.append(tmp_path / f"summed{k}.so")
        paths[-1].write_bytes(data.replace(old, new, 1))
        paths.append(tmp_path / f"unsummed{k}.so")
        paths[-1].write_bytes(unsummed.replace(old, new, 1))
    # A change that leaves valid metadata is caught by the checksum alone.
    resized = tmp_path / "resized.so"
    resized.write_bytes(data.replace(b'"shape": [64]', b'"shape": [99]'))
    intact = tmp_path / "intact.so"
    intact.write_bytes(unsummed)
    lines = _load_in_child([*paths, resized, intact])
    for k, (_, _, said) in enumerate(_CORRUPTIONS):
        summed, unsummed_line = lines[2 * k], lines[2 * k + 1]
        assert summed.startswith("CompilerError:") and "does not match its checksum" in summed, summed
        assert unsummed_line.startswith("CompilerError:") and said in unsummed_line, unsummed_line
    assert "does not match its checksum" in lines[-2]
    assert lines[-1] == "loaded"


# ------------------------------------------------------------------ the CPU a library needs


def test_a_library_records_the_vector_extensions_its_code_may_use(tmp_path, rng):
    """Built for this machine: every checked extension this CPU reports, no other (what the
    loader checks is what the compiler used); loaded and exported again, the record stays."""
    from compiler.runtime import cpu

    mod = _unary("kernel", lambda x: x * 2.0)
    recorded = json.loads(mod.metadata_json()).get("vector_features", [])
    assert set(recorded) == {name for name in cpu.VECTOR_EXTENSIONS if not cpu.missing_extensions([name])}
    assert cpu._cpu_flags() is None or {"avx2", "fma"} <= set(recorded)  # every x86 host of ours has them
    path = tmp_path / "kernel.so"
    mod.export_library(path)
    loaded = compiler.runtime.load_module(path)
    a = random_array(rng, 64, "float32")
    np.testing.assert_array_equal(_run(loaded, a), a * 2)
    assert json.loads(loaded.metadata_json()).get("vector_features", []) == recorded


_X86 = "llvm -mtriple=x86_64-unknown-linux-gnu"


@pytest.mark.parametrize("options, has, lacks", [
    ("-mcpu=znver3", {"sse4.2", "avx", "avx2", "fma", "f16c"}, {"avx512f"}),
    ("-mcpu=skylake-avx512", {"avx2", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
     {"avx512vnni", "avx512vbmi", "avx512ifma"}),
    ("-mcpu=cascadelake", {"avx512f", "avx512vnni"}, {"avx512vbmi"}),
    ("-mcpu=sandybridge", {"sse4.2", "avx"}, {"avx2", "fma", "avx512f"}),
    ("-mcpu=znver4 -mattr=-avx512f", {"avx2", "fma"}, {"avx512f", "avx512bw", "avx512vl", "avx512vnni"}),
    ("-mcpu=haswell -mattr=+avx512f", {"avx2", "avx512f"}, {"avx512bw", "avx512vnni"}),
])
def test_a_cpu_named_by_mcpu_brings_its_own_extensions(options, has, lacks):
    """What a target naming its CPU may use is that CPU's extensions with what -mattr adds or
    takes away, whatever this machine has."""
    from compiler.codegen.llvm_machine import vector_features

    features = set(vector_features(compiler.Target(f"{_X86} {options}")))
    assert has <= features and not lacks & features, features
    assert vector_features(compiler.Target(f"{_X86} -mcpu=x86-64")) == []  # SSE2 only: nothing checked


def test_a_library_built_for_a_named_cpu_is_refused_by_a_cpu_without_its_extensions(tmp_path, monkeypatch):
    from compiler.runtime import cpu

    A = te.placeholder((64,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    mod = compiler.build(te.create_schedule(B.op), [A, B], target=f"{_X86} -mcpu=skylake-avx512")
    recorded = json.loads(mod.metadata_json())["vector_features"]
    assert {"avx2", "avx512f", "avx512bw"} <= set(recorded) and "avx512vnni" not in recorded
    path = tmp_path / "skylake.so"
    mod.export_library(path)
    avx2_only = frozenset({"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c"})
    monkeypatch.setattr(cpu, "_cpu_flags", lambda: avx2_only)
    with pytest.raises(CompilerError, match=r"skylake\.so was compiled for a CPU with avx512bw, avx512cd, "
                                            r"avx512dq, avx512f, avx512vl, which this machine's CPU lacks"):
        compiler.runtime.load_module(path)


def test_a_library_for_a_cpu_this_machine_is_not_is_refused_before_it_runs(tmp_path, monkeypatch):
    from compiler.runtime import cpu

    # A library whose code needs an extension no CPU here has (its metadata edited, checksum off).
    data = _exported(tmp_path).replace(b"__autotune_metadata_sha256", b"__autotune_metadata_xxxxxx")
    foreign = tmp_path / "foreign.so"  # (the same length: the metadata is a sized array in the file)
    foreign.write_bytes(data.replace(b'"sse4.1"', b'"sse9.1"', 1))
    (line,) = _load_in_child([foreign])
    if cpu._cpu_flags() is None:  # not Linux on x86: nothing recorded, nothing to check
        assert b'"sse4.1"' not in data and line == "loaded", line
    else:
        assert line.startswith("CompilerError:") and "was compiled for a CPU with sse9.1, which this " \
            "machine's CPU lacks" in line, line
    # A CPU without AVX-512 refuses a library built on one with it, naming what it lacks.
    avx2_only = frozenset({"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c"})
    monkeypatch.setattr(cpu, "_cpu_flags", lambda: avx2_only)
    assert cpu.missing_extensions(["avx2", "avx512f", "avx512vnni", "fma"]) == ["avx512f", "avx512vnni"]
    with pytest.raises(CompilerError, match=r"lib\.so was compiled for a CPU with avx512f, avx512vnni, which "
                                            r"this machine's CPU lacks .* -mcpu="):
        cpu.check_cpu("lib.so", ["avx2", "avx512f", "avx512vnni"])
    cpu.check_cpu("lib.so", ["avx2", "fma"])  # what it has: nothing said
