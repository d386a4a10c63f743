"""Helpers for the CUDA tests: schedules, PTX checks with ptxas, and runs on the CPU simulator."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import numpy as np

import compiler
from compiler import te
from compiler.codegen.cuda import lower_cuda
from compiler.tir.gpu_interpreter import run_gpu_function

PTXAS = shutil.which("ptxas")

#: Why PTX of the running test went unassembled; ``tests/conftest.py`` empties it before each
#: test and reports a test that passed with it non-empty as skipped, with this reason.
UNASSEMBLED: list[str] = []


def assemble(ptx: str, arch: str = "sm_80") -> None:
    """Assemble ``ptx`` with ptxas (raises on errors).

    Without ptxas the PTX is not checked, but the test goes on, so its other checks still
    run; if they pass, the test is reported as skipped, naming the missing ptxas.
    """
    if PTXAS is None:
        UNASSEMBLED.append(f"ptxas is not on PATH, so the {arch} PTX was not assembled "
                           f"(the test's other checks passed)")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
        path = f.name
    try:
        proc = subprocess.run([PTXAS, f"-arch={arch}", path, "-o", os.devnull], capture_output=True,
                              text=True, timeout=120)
    finally:
        os.unlink(path)
    assert proc.returncode == 0, f"ptxas failed:\n{proc.stderr}"


def build_ptx(s, args, name="main", arch="sm_80"):
    """Build for CUDA, assemble the PTX (see :func:`assemble`), return the module."""
    mod = compiler.build(s, args, target=f"cuda -arch={arch}", name=name)
    assemble(mod.get_source("ptx"), arch)
    return mod


def simulate(s, args, arrays, scalars=None):
    """Lower for CUDA and run every kernel on the CPU simulator (barriers included)."""
    gf = lower_cuda(compiler.lower(s, args))[0]
    run_gpu_function(gf, arrays, scalars)
    return arrays


def gpu_function(s, args):
    return lower_cuda(compiler.lower(s, args))[0]


def matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4):
    """TVM's classic shared-memory matmul: block tiles in shared memory, register tiles in
    local memory, virtual threads."""
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    tx, ty = te.thread_axis("threadIdx.x"), te.thread_axis("threadIdx.y")
    i, j = s[C].op.axis
    by, yi = s[C].split(i, factor=bn)
    bx, xi = s[C].split(j, factor=bn)
    s[C].reorder(by, bx, yi, xi)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    tyz, yi = s[C].split(yi, nparts=vt)
    txz, xi = s[C].split(xi, nparts=vt)
    ty_, yi = s[C].split(yi, nparts=nt)
    tx_, xi = s[C].split(xi, nparts=nt)
    s[C].reorder(tyz, txz, ty_, tx_, yi, xi)
    s[C].bind(tyz, te.thread_axis((0, vt), "vthread", name="vy"))
    s[C].bind(txz, te.thread_axis((0, vt), "vthread", name="vx"))
    s[C].bind(ty_, ty)
    s[C].bind(tx_, tx)
    s[CC].compute_at(s[C], tx_)
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=kf)
    s[CC].reorder(ko, ki, *CC.op.axis)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[AL].compute_at(s[CC], ki)
    s[BL].compute_at(s[CC], ki)
    for T in (AA, BB):
        fused = s[T].fuse(*s[T].op.axis)
        o, t1 = s[T].split(fused, factor=nt)
        o, t2 = s[T].split(o, factor=nt)
        s[T].bind(t1, tx)
        s[T].bind(t2, ty)
    return s, [A, B, C]


def random(shape, rng, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def vector_add_schedule(n=None, factor=64):
    n = te.var("n") if n is None else n
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=factor)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


__all__ = ["assemble", "build_ptx", "simulate", "matmul_schedule", "vector_add_schedule", "random",
           "PTXAS", "np", "gpu_function"]
