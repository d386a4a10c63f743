"""Helpers for the CUDA tests: schedules, PTX checks with ptxas, and runs on the CPU simulator."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import numpy as np

import compiler
from compiler import te
from compiler.backends.cuda import lower_cuda
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
    """Lower for CUDA: the first function split into its ``kernels`` and a launch plan."""
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
    tx_ = bind_virtual_threads(s[C], yi, xi, vt, nt, ty, tx)[3]
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


def bind_virtual_threads(stage, y, x, vt, nt, ty, tx):
    """Split the innermost two axes ``y`` and ``x`` of ``stage`` into ``vt`` x ``vt`` virtual
    threads, then into ``nt`` x ``nt`` threads bound to the thread axes ``ty`` and ``tx`` (the
    virtual threads outermost). Returns ``(vy, vx, ty, tx, yi, xi)``, the new loops."""
    vy, y = stage.split(y, nparts=vt)
    vx, x = stage.split(x, nparts=vt)
    ty_, y = stage.split(y, nparts=nt)
    tx_, x = stage.split(x, nparts=nt)
    stage.reorder(vy, vx, ty_, tx_, y, x)
    stage.bind(vy, te.thread_axis((0, vt), "vthread", name="vy"))
    stage.bind(vx, te.thread_axis((0, vt), "vthread", name="vx"))
    stage.bind(ty_, ty)
    stage.bind(tx_, tx)
    return vy, vx, ty_, tx_, y, x


def bind_thread_tiles(stage, block, threads):
    """Tile the two axes of ``stage``: ``block`` x ``block`` per block (blockIdx.y/x), split
    among ``threads`` x ``threads`` threads (threadIdx.y/x). Returns the new loops
    ``(by, bx, ty, tx, yi, xi)``."""
    i, j = stage.op.axis
    by, yi = stage.split(i, factor=block)
    bx, xi = stage.split(j, factor=block)
    ty, yi = stage.split(yi, nparts=threads)
    tx, xi = stage.split(xi, nparts=threads)
    stage.reorder(by, bx, ty, tx, yi, xi)
    stage.bind(by, te.thread_axis("blockIdx.y"))
    stage.bind(bx, te.thread_axis("blockIdx.x"))
    stage.bind(ty, te.thread_axis("threadIdx.y"))
    stage.bind(tx, te.thread_axis("threadIdx.x"))
    return by, bx, ty, tx, yi, xi


def bind_cross_thread_rfactor(s, B):
    """The GPU part of TVM's reduction tutorial on the row sum ``B``: rfactor the reduction
    by 16, rows over blockIdx.x / threadIdx.y (32 a block), the factored axis bound to
    threadIdx.x with the partial sums computed at it. Returns ``(BF, tx)``."""
    _, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    return BF, tx


def square_matmul(N, K):
    """``C = A @ B`` with ``A`` of shape ``(N, K)`` and ``B`` of shape ``(K, N)``."""
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


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
           "PTXAS", "np", "gpu_function", "bind_virtual_threads", "bind_thread_tiles",
           "bind_cross_thread_rfactor", "square_matmul"]
