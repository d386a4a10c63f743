"""The GPU simulator's race detection: two threads touching one element with no barrier
between them, at least one writing, raise DataRaceError naming the buffer, the element,
both threads and the kind of race; kernels whose barriers order every such pair run.

Hand-written kernels make each race explicit; a lowered matmul shows that the barriers
inserted by lowering are what keeps it race-free."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cuda_helpers import gpu_function, matmul_schedule
from helpers import assert_written, poisoned, random_array

from compiler.tir import expr as E
from compiler.tir import stmt as S
from compiler.tir.buffer import decl_buffer
from compiler.tir.builtin import is_sync, sync_stmt
from compiler.tir.function import PrimFunc
from compiler.tir.functor import IRMutator
from compiler.tir.gpu_interpreter import DataRaceError, run_gpu_function, run_kernel

N = 8  # threads per block
TX = E.Var("threadIdx.x", "int32")
BX = E.Var("blockIdx.x", "int32")


def _kernel(body: S.Stmt, *params, blocks: int = 1, shared=()) -> PrimFunc:
    """A device function of ``blocks`` x ``N`` threads around ``body``, with ``shared``
    buffers allocated in it."""
    for buf in shared:
        body = S.Allocate(buf, body)
    body = S.AttrStmt(TX, "thread_extent", E.const(N), body)
    if blocks > 1:
        body = S.AttrStmt(BX, "thread_extent", E.const(blocks), body)
    return PrimFunc(tuple(params), body, "k", {"calling_conv": "kernel"})


def _load(buf, i) -> E.BufferLoad:
    return E.BufferLoad(buf, (E.convert(i),), buf.dtype)


def _store(buf, value, i) -> S.BufferStore:
    return S.BufferStore(buf, value, (E.convert(i),))


def _io(n: int = N):
    return decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")


def _shift_kernel(with_barrier: bool) -> PrimFunc:
    """``S[tx] = A[tx]; B[tx] = S[(tx + 1) % N]``: each thread reads what its neighbour wrote."""
    A, B = _io()
    sh = decl_buffer((N,), "float32", "S", scope="shared")
    steps = [_store(sh, _load(A, TX), TX)]
    if with_barrier:
        steps.append(sync_stmt())
    steps.append(_store(B, _load(sh, E.FloorMod(TX + 1, E.const(N), "int32")), TX))
    return _kernel(S.seq(*steps), A, B, shared=[sh])


def test_missing_barrier_between_write_and_read_of_shared_is_flagged(rng):
    a = random_array(rng, N, "float32")
    with pytest.raises(DataRaceError) as err:
        run_kernel(_shift_kernel(with_barrier=False), {"A": a, "B": poisoned(N, "float32")})
    msg = str(err.value)
    # The threads run in lockstep: every thread has stored S[tx] when thread 7 reads S[0],
    # which thread 0 wrote.
    assert "(read/write)" in msg and "shared buffer 'S'" in msg and "element 0" in msg
    assert "thread (0, 0, 0) of block (0, 0, 0) wrote it" in msg
    assert "thread (7, 0, 0) of block (0, 0, 0) reads it" in msg


def test_the_same_kernel_with_its_barrier_runs_and_computes(rng):
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_shift_kernel(with_barrier=True), {"A": a, "B": b})
    assert_written(b, np.roll(a, -1))


def test_race_is_flagged_whichever_thread_runs_first(rng):
    """A thread reading what an earlier-run thread wrote (a write, then a read)."""
    A, B = _io()
    sh = decl_buffer((N,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, TX), TX),
                 _store(B, _load(sh, E.FloorMod(TX + N - 1, E.const(N), "int32")), TX))
    with pytest.raises(DataRaceError, match=r"\(read/write\).*element 0: thread \(0, 0, 0\) of block "
                                            r"\(0, 0, 0\) wrote it, and thread \(1, 0, 0\)"):
        run_kernel(_kernel(body, A, B, shared=[sh]), {"A": random_array(rng, N, "float32"),
                                                      "B": poisoned(N, "float32")})


def test_two_threads_writing_different_values_to_one_shared_element(rng):
    A, B = _io()
    sh = decl_buffer((1,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, TX), 0), sync_stmt(), _store(B, _load(sh, 0), TX))
    a = random_array(rng, N, "float32")
    with pytest.raises(DataRaceError) as err:
        run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": poisoned(N, "float32")})
    msg = str(err.value)
    assert "(write/write)" in msg and "shared buffer 'S', element 0" in msg
    assert f"thread (0, 0, 0) of block (0, 0, 0) wrote {a[0]}" in msg
    assert f"thread (1, 0, 0) of block (0, 0, 0) writes {a[1]}" in msg


def test_every_thread_storing_the_same_value_is_not_a_race(rng):
    """A broadcast: all threads store A[0] into S[0], then (after a barrier) read it."""
    A, B = _io()
    sh = decl_buffer((1,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, 0), 0), sync_stmt(), _store(B, _load(sh, 0) + _load(A, TX), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": b})
    assert_written(b, a[0] + a)


def test_reading_what_one_thread_stored_without_a_barrier_is_a_race(rng):
    """Thread 0 stores S[0]; the others read it with no barrier in between."""
    A, B = _io()
    sh = decl_buffer((1,), "float32", "S", scope="shared")
    body = S.seq(S.IfThenElse(E.EQ(TX, E.const(0), "bool"), _store(sh, _load(A, 0), 0)),
                 _store(B, _load(sh, 0), TX))
    with pytest.raises(DataRaceError, match=r"\(read/write\).*'S', element 0: thread \(0, 0, 0\) of block "
                                            r"\(0, 0, 0\) wrote it, and thread \(1, 0, 0\)"):
        run_kernel(_kernel(body, A, B, shared=[sh]), {"A": random_array(rng, N, "float32"),
                                                      "B": poisoned(N, "float32")})


def test_reading_back_ones_own_copy_of_a_common_value_is_not_a_race(rng):
    """Every thread stores A[0] into S[0] and reads it back with no barrier (as each thread
    does with the result of a cross-thread reduction): it reads what it stored itself."""
    A, B = _io()
    sh = decl_buffer((1,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, 0), 0), _store(B, _load(sh, 0) * _load(A, TX), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": b})
    assert_written(b, a[0] * a)


def test_a_thread_updating_its_own_shared_element_is_not_a_race(rng):
    A, B = _io()
    sh = decl_buffer((N,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, TX), TX),
                 _store(sh, _load(sh, TX) * _load(A, TX), TX),
                 _store(B, _load(sh, TX), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": b})
    assert_written(b, a * a)


def test_a_store_that_changes_nothing_is_not_a_race_with_readers(rng):
    """After a barrier, thread 0 reads S[1] while thread 1 stores into S[1] the value it
    already holds: no thread can tell."""
    A, B = _io()
    sh = decl_buffer((N,), "float32", "S", scope="shared")
    body = S.seq(_store(sh, _load(A, TX), TX), sync_stmt(),
                 _store(B, _load(sh, E.FloorMod(TX + 1, E.const(N), "int32")), TX),
                 _store(sh, _load(A, TX), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": b})
    assert_written(b, np.roll(a, -1))
    # The same store of a new value is a race.
    changed = S.seq(*body.seq[:-1], _store(sh, _load(A, TX) + E.const(1.0, "float32"), TX))
    with pytest.raises(DataRaceError, match=r"\(read/write\).*element 1: thread \(0, 0, 0\) of block "
                                            r"\(0, 0, 0\) read it, and thread \(1, 0, 0\)"):
        run_kernel(_kernel(changed, A, B, shared=[sh]), {"A": a, "B": poisoned(N, "float32")})


def test_a_barrier_separates_epochs_of_the_same_element(rng):
    """Each thread rewrites S[tx + 1] after a barrier that follows everybody's reads of it."""
    A, B = _io()
    sh = decl_buffer((N + 1,), "float32", "S", scope="shared")
    next_ = TX + 1
    body = S.seq(_store(sh, _load(A, TX), TX), sync_stmt(),
                 _store(B, _load(sh, TX), TX), sync_stmt(),
                 _store(sh, _load(A, TX) * E.const(2.0, "float32"), next_), sync_stmt(),
                 _store(B, _load(B, TX) + _load(sh, next_), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B, shared=[sh]), {"A": a, "B": b})
    assert_written(b, a + 2 * a)


def test_shared_memory_is_private_to_each_block(rng):
    """Blocks have their own shared memory: the same element in two blocks is no race."""
    A = decl_buffer((2 * N,), "float32", "A")
    B = decl_buffer((2 * N,), "float32", "B")
    sh = decl_buffer((N,), "float32", "S", scope="shared")
    g = BX * N + TX
    body = S.seq(_store(sh, _load(A, g), TX), sync_stmt(),
                 _store(B, _load(sh, E.FloorMod(TX + 1, E.const(N), "int32")), g))
    a = random_array(rng, 2 * N, "float32")
    b = poisoned(2 * N, "float32")
    run_kernel(_kernel(body, A, B, blocks=2, shared=[sh]), {"A": a, "B": b})
    assert_written(b, np.concatenate([np.roll(a[:N], -1), np.roll(a[N:], -1)]))


def test_global_write_write_across_blocks_is_flagged(rng):
    A = decl_buffer((2 * N,), "float32", "A")
    B = decl_buffer((N,), "float32", "B")
    body = _store(B, _load(A, BX * N + TX), TX)  # both blocks write B[0..N)
    with pytest.raises(DataRaceError) as err:
        run_kernel(_kernel(body, A, B, blocks=2), {"A": random_array(rng, 2 * N, "float32"),
                                                   "B": poisoned(N, "float32")})
    msg = str(err.value)
    assert "(write/write) on global buffer 'B', element 0" in msg
    assert "thread (0, 0, 0) of block (0, 0, 0) wrote" in msg
    assert "thread (0, 0, 0) of block (1, 0, 0) writes" in msg


def test_global_stores_of_one_value_from_every_block_are_not_a_race(rng):
    A = decl_buffer((N,), "float32", "A")
    B = decl_buffer((1,), "float32", "B")
    a = random_array(rng, N, "float32")
    b = poisoned(1, "float32")
    run_kernel(_kernel(_store(B, _load(A, 0), 0), A, B, blocks=2), {"A": a, "B": b})
    assert_written(b, a[:1])


def test_global_read_of_another_threads_write_is_flagged(rng):
    A, B = _io()
    body = S.seq(_store(B, _load(A, TX), TX),
                 S.IfThenElse(E.GT(TX, E.const(0), "bool"),
                              _store(A, _load(B, TX - 1), TX)))
    with pytest.raises(DataRaceError, match=r"\(read/write\) on global buffer 'B', element 0: "
                                            r"thread \(0, 0, 0\) of block \(0, 0, 0\) wrote it, "
                                            r"and thread \(1, 0, 0\) of block \(0, 0, 0\) reads it"):
        run_kernel(_kernel(body, A, B), {"A": random_array(rng, N, "float32"),
                                         "B": poisoned(N, "float32")})


def test_global_accesses_ordered_by_a_barrier_in_one_block(rng):
    A, B = _io()
    body = S.seq(_store(B, _load(A, TX), TX), sync_stmt(),
                 _store(A, _load(B, E.FloorMod(TX + 1, E.const(N), "int32")), TX))
    a = random_array(rng, N, "float32")
    want = np.roll(a, -1)
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B), {"A": a, "B": b})
    assert_written(a, want)


def test_race_checks_can_be_turned_off(rng):
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_shift_kernel(with_barrier=False), {"A": a, "B": b}, check_races=False)
    assert np.isfinite(b[-1])  # the last thread ran after the others had written S


def _matmul_data(rng):
    a = random_array(rng, (32, 16), "float32")
    b = random_array(rng, (16, 32), "float32")
    return a, b


def test_lowered_matmul_with_its_barriers_has_no_race(rng):
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    gf = gpu_function(s, args)
    a, b = _matmul_data(rng)
    c = poisoned((32, 32), "float32")
    run_gpu_function(gf, [a, b, c])
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keep", [0, 1])
def test_lowered_matmul_missing_a_barrier_is_flagged(rng, keep):
    """Without the barrier after the cooperative loads (keep=1) threads read tiles others have
    not loaded; without the one at the end of the k loop (keep=0) they overwrite tiles others
    still read."""
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    gf = gpu_function(s, args)
    (kernel,) = gf.kernels
    syncs = []

    class _DropOne(IRMutator):
        def visit_SeqStmt(self, st: S.SeqStmt):
            out = []
            for c in st.seq:
                if is_sync(c):
                    syncs.append(c)
                    if len(syncs) - 1 != keep:
                        continue
                out.append(self.visit(c))
            return S.seq(*out)

    gf.kernels = [kernel.with_body(_DropOne().visit(kernel.body))]
    assert len(syncs) == 2
    a, b = _matmul_data(rng)
    with pytest.raises(DataRaceError) as err:
        run_gpu_function(gf, [a, b, poisoned((32, 32), "float32")])
    msg = str(err.value)
    assert re.search(r"data race \((read/write|write/write)\) on shared buffer '[AB]\.shared', element \d+: "
                     r"thread \(\d, \d, 0\) of block \(\d, \d, 0\) (wrote|read)", msg), msg


def test_global_read_then_write_by_another_block_is_flagged(rng):
    """Each block reads the other block's half of A, then overwrites its own half: in lockstep
    every read comes before every write, and the write still races with the read."""
    A = decl_buffer((2 * N,), "float32", "A")
    B = decl_buffer((2 * N,), "float32", "B")
    g = BX * N + TX
    other = E.FloorMod(g + N, E.const(2 * N), "int32")
    body = S.seq(_store(B, _load(A, other), g), _store(A, _load(A, g) * E.const(2.0, "float32"), g))
    with pytest.raises(DataRaceError, match=r"\(read/write\) on global buffer 'A', element 8: "
                                            r"thread \(0, 0, 0\) of block \(0, 0, 0\) read it, "
                                            r"and thread \(0, 0, 0\) of block \(1, 0, 0\) writes it"):
        run_kernel(_kernel(body, A, B, blocks=2), {"A": random_array(rng, 2 * N, "float32"),
                                                   "B": poisoned(2 * N, "float32")})


def test_global_read_then_write_ordered_by_a_barrier_in_one_block(rng):
    A, B = _io()
    body = S.seq(_store(B, _load(A, E.FloorMod(TX + 1, E.const(N), "int32")), TX), sync_stmt(),
                 _store(A, _load(A, TX) * E.const(2.0, "float32"), TX))
    a = random_array(rng, N, "float32")
    b = poisoned(N, "float32")
    run_kernel(_kernel(body, A, B), {"A": a.copy(), "B": b})
    assert_written(b, np.roll(a, -1))
    with pytest.raises(DataRaceError, match=r"\(read/write\) on global buffer 'A'.*read it.*writes it"):
        run_kernel(_kernel(S.seq(body.seq[0], body.seq[2]), A, B),
                   {"A": a.copy(), "B": poisoned(N, "float32")})
