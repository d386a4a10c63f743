"""TVM's ``tensor_expr_get_started`` tutorial (v0.8-v0.12), section by section, with TVM's names
mapped to ours:

    tvm.te, tvm.lower, tvm.build, tvm.device, tvm.nd -> compiler.te, compiler.lower, compiler.build, ...
    tvm.testing.assert_allclose                       -> compiler.testing.assert_allclose
    tvm.tir.indexmod                                  -> compiler.tir.indexmod
    tvm.runtime.load_module, Module.export_library    -> compiler.runtime.load_module, the same method
    Module.save, tvm.contrib.cc, tvm.contrib.utils    -> the same method, compiler.contrib.cc, .utils

Changes to the tutorial's code, each for the check's sake or the machine's:

- every output array it fills with ``np.zeros`` starts poisoned (NaN) instead, and is poisoned
  again before each call that reuses it, so an element a kernel never writes fails the check;
- the matrix multiplication is 128x128x128 instead of 1024x1024x1024 (the same schedules:
  32x32 blocks, the reduction split by 4, ``B`` packed as ``(N / bn, K, bn)``);
- the CUDA vector addition (``run_cuda = True`` in the tutorial) is built, its PTX goes through
  ptxas and its numerical check runs on the GPU simulator; the GPU run is the test marked ``cuda``;
- the timings are taken as the tutorial takes them, but only printed (no assertion on speed).

Left out: the OpenCL section (there is no OpenCL target here) and the ROCm/Metal branches.
"""

from __future__ import annotations

import timeit

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import poisoned

import compiler as tvm
import compiler.testing
from compiler import te


def vector_add():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def evaluate_addition(func, target, optimization, log, A, B, C):
    """The tutorial's timing helper (outputs poisoned, the sum checked as well)."""
    dev = tvm.device(target, 0)
    n = 32768
    a = tvm.nd.array(np.random.uniform(size=n).astype(A.dtype), dev)
    b = tvm.nd.array(np.random.uniform(size=n).astype(B.dtype), dev)
    c = tvm.nd.array(poisoned(n, C.dtype), dev)

    evaluator = func.time_evaluator(func.entry_name, dev, number=10)
    mean_time = evaluator(a, b, c).mean
    compiler.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    print(f"{optimization}: {mean_time:f}")
    log.append((optimization, mean_time))


def test_vector_addition_on_the_cpu():
    tgt = tvm.target.Target("llvm")
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], tgt, name="myadd")

    dev = tvm.device(tgt.kind, 0)
    n = 1024
    a = tvm.nd.array(np.random.uniform(size=n).astype(A.dtype), dev)
    b = tvm.nd.array(np.random.uniform(size=n).astype(B.dtype), dev)
    c = tvm.nd.array(poisoned(n, C.dtype), dev)
    fadd(a, b, c)
    compiler.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())

    np_repeat = 100
    np_running_time = timeit.timeit(
        setup="import numpy\nn = 32768\ndtype = 'float32'\n"
        "a = numpy.random.rand(n, 1).astype(dtype)\nb = numpy.random.rand(n, 1).astype(dtype)\n",
        stmt="answer = a + b",
        number=np_repeat,
    )
    log = [("numpy", np_running_time / np_repeat)]
    evaluate_addition(fadd, tgt.kind, "naive", log, A, B, C)

    # Updating the schedule to use parallelism
    s[C].parallel(C.op.axis[0])
    print(tvm.lower(s, [A, B, C], simple_mode=True))
    fadd_parallel = tvm.build(s, [A, B, C], tgt, name="myadd_parallel")
    c = tvm.nd.array(poisoned(n, C.dtype), dev)  # the tutorial reuses c, already holding the sum
    fadd_parallel(a, b, c)
    compiler.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    evaluate_addition(fadd_parallel, tgt.kind, "parallel", log, A, B, C)

    # Updating the schedule to use vectorization
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    factor = 4
    outer, inner = s[C].split(C.op.axis[0], factor=factor)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    fadd_vector = tvm.build(s, [A, B, C], tgt, name="myadd_parallel")
    evaluate_addition(fadd_vector, tgt.kind, "vector", log, A, B, C)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    baseline = log[0][1]
    for name, t in log:
        print(f"{name:>20}\t{t:>20}\t{t / baseline:>20}")


def test_target_with_a_host():
    tgt = tvm.target.Target(target="llvm", host="llvm")
    assert tvm.device(tgt.kind.name, 0) == tvm.cpu(0)


def vector_add_on_cuda():
    """The tutorial's GPU section up to its build: 64 threads a block."""
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_vector_addition_builds_for_cuda():
    s, args = vector_add_on_cuda()
    fadd = tvm.build(s, args, target="cuda", name="myadd")
    dev_module = fadd.imported_modules[0]
    print("-----GPU code-----")
    print(dev_module.get_source())
    assemble(fadd.get_source("ptx"), dev_module.arch)


def test_vector_addition_check_on_the_simulator():
    s, args = vector_add_on_cuda()
    n = 1000  # not a multiple of the 64 threads of a block: the last block is partly idle
    a = np.random.uniform(size=n).astype("float32")
    b = np.random.uniform(size=n).astype("float32")
    c = poisoned(n, "float32")
    simulate(s, args, [a, b, c])
    compiler.testing.assert_allclose(c, a + b)


@pytest.mark.cuda
def test_vector_addition_runs_on_a_gpu():
    s, args = vector_add_on_cuda()
    fadd = tvm.build(s, args, target="cuda", name="myadd")
    dev = tvm.device("cuda", 0)
    n = 1024
    a = tvm.nd.array(np.random.uniform(size=n).astype("float32"), dev)
    b = tvm.nd.array(np.random.uniform(size=n).astype("float32"), dev)
    c = tvm.nd.array(poisoned(n, "float32"), dev)
    fadd(a, b, c)
    compiler.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())


def test_save_object_file_and_link():
    from compiler.contrib import cc, utils

    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], "llvm", name="myadd")
    temp = utils.tempdir()
    fadd.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    print(temp.listdir())
    fadd1 = tvm.runtime.load_module(temp.relpath("myadd.so"))

    n = 1024
    a = np.random.uniform(size=n).astype("float32")
    b = np.random.uniform(size=n).astype("float32")
    c = tvm.nd.array(poisoned(n, "float32"))
    fadd1(tvm.nd.array(a), tvm.nd.array(b), c)
    compiler.testing.assert_allclose(c.numpy(), a + b)


def test_export_library_and_load_module(tmp_path):
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], "llvm", name="myadd")
    n = 1024
    a = np.random.uniform(size=n).astype("float32")
    b = np.random.uniform(size=n).astype("float32")
    fadd.export_library(str(tmp_path / "myadd_pack.so"))
    fadd2 = tvm.runtime.load_module(str(tmp_path / "myadd_pack.so"))
    c = tvm.nd.array(poisoned(n, "float32"))
    fadd2(tvm.nd.array(a), tvm.nd.array(b), c)
    compiler.testing.assert_allclose(c.numpy(), a + b)


def test_matrix_multiplication_step_by_step():
    M = K = N = 128  # 1024 in the tutorial
    dtype = "float32"
    target = tvm.target.Target("llvm")
    dev = tvm.device(target.kind, 0)
    a = tvm.nd.array(np.random.rand(M, K).astype(dtype), dev)
    b = tvm.nd.array(np.random.rand(K, N).astype(dtype), dev)
    answer = np.dot(a.numpy(), b.numpy())

    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")

    s = te.create_schedule(C.op)
    func = tvm.build(s, [A, B, C], target=target, name="mmult")
    c = tvm.nd.array(poisoned((M, N), dtype), dev)
    func(a, b, c)
    compiler.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)

    log = []

    def evaluate_operation(s, vars, target, name, optimization, log):
        func = tvm.build(s, vars, target=target, name="mmult")
        assert func
        c = tvm.nd.array(poisoned((M, N), dtype), dev)
        func(a, b, c)
        compiler.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)
        evaluator = func.time_evaluator(func.entry_name, dev, number=10)
        mean_time = evaluator(a, b, c).mean
        print(f"{optimization}: {mean_time:f}")
        log.append((optimization, mean_time))

    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="none", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 1: blocking
    bn = 32
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="blocking", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 2: vectorization
    s[C].vectorize(yi)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="vectorization", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 3: loop permutation
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="loop permutation", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 4: array packing (a float shape entry, N / bn, as in the tutorial)
    packedB = te.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute(
        (M, N),
        lambda x, y: te.sum(A[x, k] * packedB[y // bn, k, tvm.tir.indexmod(y, bn)], axis=k),
        name="C",
    )
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="array packing", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 5: block writing through a write cache
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="block caching", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    # Optimization 6: parallelization
    s[C].parallel(xo)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    evaluate_operation(s, [A, B, C], target=target, name="mmult", optimization="parallelization", log=log)
    print(tvm.lower(s, [A, B, C], simple_mode=True))

    assert [name for name, _ in log] == ["none", "blocking", "vectorization", "loop permutation",
                                         "array packing", "block caching", "parallelization"]
