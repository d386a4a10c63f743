"""Lowering for CUDA: thread bindings, launch dimensions, shared/local memory, virtual
threads, barriers (exact counts) and every bind error. Runs without a GPU: kernels are
checked structurally and executed on the CPU simulator (:mod:`compiler.tir.gpu_interpreter`),
which gives wrong results when a barrier is missing."""

from __future__ import annotations

import pytest
from cuda_helpers import gpu_function, matmul_schedule, simulate, vector_add_schedule
from helpers import assert_written, poisoned

import compiler
from compiler import te
from compiler.errors import LoweringError, ScheduleError
from compiler.runtime.cuda import evaluate_size
from compiler.tir import stmt as S
from compiler.tir.analysis import collect
from compiler.tir.builtin import is_sync


def _syncs(kernel) -> int:
    return len(collect(kernel.body, is_sync))


def _flat(s) -> list:
    """The statements of a sequence, looking through allocations and nested sequences."""
    if isinstance(s, S.SeqStmt):
        return [x for c in s.seq for x in _flat(c)]
    if isinstance(s, S.Allocate):
        return _flat(s.body)
    return [s]


def _allocs(kernel, scope):
    return [a.buffer for a in collect(kernel.body, lambda n: isinstance(n, S.Allocate))
            if a.buffer.scope == scope]


def test_lower_prints_thread_bindings():
    s, args = vector_add_schedule()
    text = str(compiler.lower(s, args))
    assert "thread_binding 'blockIdx.x'" in text and "thread_binding 'threadIdx.x'" in text


def test_vector_add_launch_dims_are_symbolic(rng):
    s, args = vector_add_schedule()
    gf = gpu_function(s, args)
    assert len(gf.kernels) == 1 and len(gf.launches) == 1
    launch = gf.launches[0]
    assert launch.block == [64, 1, 1]
    assert [evaluate_size(g, {"n": 1000}) for g in launch.grid] == [16, 1, 1]
    assert [evaluate_size(g, {"n": 64}) for g in launch.grid] == [1, 1, 1]
    kernel = gf.kernels[0]
    assert [a.key for a in collect(kernel.body, lambda n: isinstance(n, S.AttrStmt))] == ["thread_extent"] * 2
    assert not collect(kernel.body, lambda n: isinstance(n, S.For))
    assert _syncs(kernel) == 0
    assert "cuda_launch" in str(gf.host)
    a, b = (rng.standard_normal(200).astype("float32") for _ in range(2))
    c = poisoned(200, "float32")
    simulate(s, args, [a, b, c])
    assert_written(c, a + b)


def test_matmul_shared_tiles_registers_and_two_barriers(rng):
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    gf = gpu_function(s, args)
    (kernel,) = gf.kernels
    launch = gf.launches[0]
    assert launch.block == [4, 4, 1] and [evaluate_size(g, {}) for g in launch.grid] == [2, 2, 1]
    shared = _allocs(kernel, "shared")
    assert sorted(b.name for b in shared) == ["A.shared", "B.shared"]
    assert [b.shape[0].value for b in shared] == [16 * 4, 4 * 16]  # block tile x k tile
    assert launch.shared_bytes == 2 * 64 * 4
    local = {b.name: b.shape[0].value for b in _allocs(kernel, "local")}
    assert local["C.local"] == 16  # 2x2 per virtual thread, 2x2 virtual threads
    # one barrier after the cooperative loads, one at the end of the k loop: no others
    assert _syncs(kernel) == 2
    (ko,) = [f for f in collect(kernel.body, lambda n: isinstance(n, S.For)) if f.loop_var.name == "k.outer"]
    seq = _flat(ko.body)
    kinds = ["sync" if is_sync(x) else type(x).__name__ for x in seq]
    assert kinds == ["For", "For", "sync", "For", "sync"]  # load A, load B, sync, compute, sync
    a, b = rng.standard_normal((32, 16)).astype("float32"), rng.standard_normal((16, 32)).astype("float32")
    c = poisoned((32, 32), "float32")
    simulate(s, args, [a, b, c])
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)


def _double_buffered_matmul():
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    for st in s.stages:
        if st.op.name in ("A.shared", "B.shared"):
            st.double_buffer()
    return s, args


def test_double_buffered_matmul_loads_ahead_with_one_barrier_per_step(rng):
    s, args = _double_buffered_matmul()
    gf = gpu_function(s, args)
    (kernel,) = gf.kernels
    shared = _allocs(kernel, "shared")
    assert sorted(b.name for b in shared) == ["A.shared", "B.shared"]
    assert [b.shape[0].value for b in shared] == [2 * 64, 2 * 64]  # two halves each
    assert gf.launches[0].shared_bytes == 2 * 2 * 64 * 4
    (ko,) = [f for f in collect(kernel.body, lambda n: isinstance(n, S.For)) if f.loop_var.name == "k.outer"]
    # before the loop: the first tile, then a barrier; in it: the next tile, the arithmetic, a barrier
    (parent,) = collect(kernel.body, lambda n: isinstance(n, S.SeqStmt) and any(c is ko for c in n.seq))
    seq = _flat(parent)
    at = next(k for k, x in enumerate(seq) if x is ko)
    assert [type(x).__name__ for x in seq[at - 3:at]] == ["For", "For", "Evaluate"] and is_sync(seq[at - 1])
    body = _flat(ko.body)
    assert isinstance(body[0], S.AttrStmt) and body[0].key == "double_buffer_write"
    assert isinstance(body[0].body, S.IfThenElse)
    assert is_sync(body[-1]) and _syncs(kernel) == 2
    a, b = rng.standard_normal((32, 16)).astype("float32"), rng.standard_normal((16, 32)).astype("float32")
    c = poisoned((32, 32), "float32")
    s, args = _double_buffered_matmul()
    simulate(s, args, [a, b, c])
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)


def test_double_buffer_errors():
    s, _ = matmul_schedule()
    with pytest.raises(ScheduleError, match="'A.shared.local'.*double_buffer needs a shared-memory stage"):
        next(st for st in s.stages if st.op.name == "A.shared.local").double_buffer()
    n = 128
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)  # at a thread-bound loop, not a serial one
    s[AA].bind(s[AA].op.axis[0], te.thread_axis("threadIdx.x"))
    s[AA].double_buffer()
    with pytest.raises(LoweringError, match="double_buffer of A.shared: the loop .* must be serial"):
        gpu_function(s, [A, B])


def test_same_thread_shared_access_needs_no_barrier(rng):
    n = 128
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)
    s[AA].bind(s[AA].op.axis[0], te.thread_axis("threadIdx.x"))
    (kernel,) = gpu_function(s, [A, B]).kernels
    assert _syncs(kernel) == 0
    a, b = rng.standard_normal(n).astype("float32"), poisoned(n, "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a * 2)


def test_stencil_through_shared_needs_one_barrier(rng):
    n = 128
    A = te.placeholder((n + 1,), name="A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)
    _, t = s[AA].split(s[AA].op.axis[0], factor=32)
    s[AA].bind(t, te.thread_axis("threadIdx.x"))
    (kernel,) = gpu_function(s, [A, B]).kernels
    assert _syncs(kernel) == 1
    assert _allocs(kernel, "shared")[0].shape[0].value == 33
    a, b = rng.standard_normal(n + 1).astype("float32"), poisoned(n, "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a[:-1] + a[1:], rtol=1e-6)


def test_two_kernels_and_a_workspace(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    for T in (B, C):
        o, i = s[T].split(T.op.axis[0], factor=32)
        s[T].bind(o, te.thread_axis("blockIdx.x"))
        s[T].bind(i, te.thread_axis("threadIdx.x"))
    gf = gpu_function(s, [A, C])
    assert [x.kernel for x in gf.launches] == ["main_kernel0", "main_kernel1"]
    assert [(w["name"], w["dtype"]) for w in gf.workspaces] == [("B", "float32")]
    assert evaluate_size(gf.workspaces[0]["size"], {"n": 70}) == 70
    assert gf.launches[0].args[-2:] == [["workspace", 0], ["scalar", "n"]]
    a, c = rng.standard_normal(70).astype("float32"), poisoned(70, "float32")
    simulate(s, [A, C], [a, c])
    assert_written(c, a * 3 + 1, rtol=1e-6)


def test_row_sum_through_shared_memory(rng):
    N, K = 8, 64
    A = te.placeholder((N, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    B = te.compute((N,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    s[BF].set_scope("shared")
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[BF].compute_at(s[B], B.op.axis[0])
    s[BF].bind(s[BF].op.axis[1], te.thread_axis("threadIdx.x"))
    (kernel,) = gpu_function(s, [A, B]).kernels
    assert _syncs(kernel) == 1
    a, b = rng.standard_normal((N, K)).astype("float32"), poisoned(N, "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- errors


def _build(s, args):
    return compiler.build(s, args, target="cuda -arch=sm_80")


def test_unbound_output_is_an_error():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(LoweringError, match="'B'.*not bound to GPU threads"):
        _build(s, [A, B])


def test_unbound_second_stage_is_an_error():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((64,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(s[C].op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="'B'.*not bound"):
        _build(s, [A, C])


def test_loop_outside_bindings_is_an_error():
    A = te.placeholder((4, 64), name="A")
    B = te.compute((4, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="outside the thread bindings"):
        _build(s, [A, B])


def test_too_many_threads_is_an_error():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.y"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="4096 threads exceeds the device limit of 1024"):
        _build(s, [A, B])


def test_too_much_shared_memory_is_an_error():
    A = te.placeholder((64, 256), name="A")
    B = te.compute((64, 256), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, _ = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    tx, _ = s[B].split(B.op.axis[1], factor=2)
    s[B].reorder(bx, tx)
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)  # a 64 x 256 float tile: 64 KiB
    o, _ = s[AA].split(s[AA].op.axis[1], factor=2)
    s[AA].bind(o, te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="65536 bytes of shared memory"):
        _build(s, [A, B])


def test_same_thread_axis_with_different_extents_is_an_error():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)
    _, t = s[AA].split(s[AA].op.axis[0], factor=16)
    s[AA].bind(t, te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="threadIdx.x is bound with extents (16 and 32|32 and 16)"):
        _build(s, [A, B])


def test_symbolic_block_size_is_an_error():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="extent of threadIdx.x must be a constant"):
        _build(s, [A, B])


def test_bind_primitive_errors():
    A = te.placeholder((64,), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(compiler.errors.ScheduleError, match="reduction axis to blockIdx.x"):
        s[B].bind(k, te.thread_axis("blockIdx.x"))
    with pytest.raises(compiler.errors.ScheduleError, match="thread axis"):
        s[B].bind(B.op.axis[0], k)
    with pytest.raises(compiler.errors.ScheduleError, match="to threadIdx.z.*only implemented"):
        s[B].bind(k, te.thread_axis("threadIdx.z"))
    with pytest.raises(compiler.errors.ScheduleError, match="reduction axis to vthread"):
        s[B].bind(k, te.thread_axis("vthread"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))  # a cross-thread reduction (see test_cuda_reduction.py)
    C = te.compute((8, 8), lambda i, j: A[i * 8 + j], name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(compiler.errors.ScheduleError, match="already bound"):
        s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
