"""Kernels reuse their heap blocks from one call to the next (compiler.runtime.heap)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from compiler.runtime import heap

# A kernel with two 4 MiB intermediate stages (heap blocks: larger than MAX_STACK_BYTES), called
# again and again in a fresh process; it prints the minor page faults per call and the result's check.
_SCRIPT = textwrap.dedent("""
    import json, resource
    import numpy as np
    import compiler
    from compiler import te
    n = 1 << 20
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((n,), lambda i: C[i] * 3.0, name="D")
    s = te.create_schedule(D.op)
    f = compiler.build(s, [A, D], target="llvm")
    a = np.random.default_rng(0).random(n, dtype="float32")
    d = np.full(n, np.nan, dtype="float32")
    for _ in range(3):
        f(a, d)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    calls = 20
    for _ in range(calls):
        f(a, d)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls
    ok = bool(np.allclose(d, (a * 2 + 1) * 3, rtol=1e-6))
    print(json.dumps({"faults_per_call": faults, "correct": ok, "kept": compiler.runtime.heap._kept}))
""")


def _run(keep: str) -> dict:
    env = {**os.environ, "COMPILER_KEEP_HEAP": keep}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the heap thresholds are glibc's")
def test_a_kernels_heap_blocks_are_reused_between_calls():
    kept, plain = _run("1"), _run("0")
    assert kept["kept"] and kept["correct"]
    assert not plain["kept"] and plain["correct"]
    # glibc's own thresholds give the 8 MiB (2048 pages) back after each call, and the next call
    # faults them in again: the cost the runtime avoids
    assert plain["faults_per_call"] > 1024, plain
    assert kept["faults_per_call"] < plain["faults_per_call"] / 8, (kept, plain)


def test_keep_heap_is_idempotent_and_can_be_turned_off(monkeypatch):
    assert heap.keep_heap() == heap.keep_heap()
    monkeypatch.setattr(heap, "_kept", False)
    monkeypatch.setenv("COMPILER_KEEP_HEAP", "0")
    assert heap.keep_heap() is False
