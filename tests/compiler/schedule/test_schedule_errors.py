"""Every illegal schedule raises ScheduleError naming the stage, the axis and the problem."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned

import compiler
from compiler import te
from compiler.errors import CompilerError, LoweringError, RuntimeArgumentError, ScheduleError


def _graph():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16,), lambda i: te.sum(B[i, k], axis=k), name="C")
    return A, B, C


def test_axis_of_another_stage():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage 'C'.*axis 'i'.*belongs to stage 'B'"):
        s[C].split(B.op.axis[0], factor=2)


def test_split_already_split_axis():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    i = B.op.axis[0]
    s[B].split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"stage 'B', axis 'i'.*already split"):
        s[B].split(i, factor=2)


@pytest.mark.parametrize("factor", [0, -3])
def test_factor_below_one(factor):
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage 'B', axis 'i'.*>= 1"):
        s[B].split(B.op.axis[0], factor=factor)


def test_split_needs_exactly_one_of_factor_nparts():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="exactly one"):
        s[B].split(B.op.axis[0], factor=2, nparts=2)
    with pytest.raises(ScheduleError, match="positive int"):
        s[B].split(B.op.axis[0], factor=2.5)


def test_vectorize_or_parallel_reduction_axis():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage 'C', axis 'k'.*vectorize a reduction"):
        s[C].vectorize(C.op.reduce_axis[0])
    with pytest.raises(ScheduleError, match=r"stage 'C', axis 'k'.*parallelize a reduction"):
        s[C].parallel(C.op.reduce_axis[0])


def test_compute_at_cycle():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="stage 'C'"):
        s[C].compute_at(s[B], B.op.axis[0])


def test_compute_at_non_consumer_and_self():
    A, B, C = _graph()
    D = te.compute((16,), lambda i: A[i, 0] + 1.0, name="D")
    s = te.create_schedule([C.op, D.op])
    with pytest.raises(ScheduleError, match=r"stage 'D'.*does not read"):
        s[B].compute_at(s[D], D.op.axis[0])
    with pytest.raises(ScheduleError, match="inside itself"):
        s[B].compute_at(s[B], B.op.axis[0])


def test_inline_reduction_and_output():
    A, B, C = _graph()
    E = te.compute((16,), lambda i: C[i] + 1.0, name="E")
    s = te.create_schedule(E.op)
    with pytest.raises(ScheduleError, match=r"stage 'C'.*cannot inline a reduction"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match=r"stage 'E'.*output"):
        s[E].compute_inline()
    with pytest.raises(ScheduleError, match=r"stage 'A'.*placeholder"):
        s[A].compute_inline()


def test_fuse_errors():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    i, j = B.op.axis
    with pytest.raises(ScheduleError, match="adjacent"):
        s[B].fuse(j, i)
    with pytest.raises(ScheduleError, match="reduction axis with a data-parallel"):
        s[C].fuse(C.op.axis[0], C.op.reduce_axis[0])


def test_reorder_duplicates_and_foreign_axes():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    i, j = B.op.axis
    with pytest.raises(ScheduleError, match="same axis twice"):
        s[B].reorder(i, i)
    with pytest.raises(ScheduleError, match="belongs to stage 'B'"):
        s[C].reorder(j, C.op.axis[0])


def test_annotation_conflicts_and_bind():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    i, j = B.op.axis
    s[B].vectorize(j)
    with pytest.raises(ScheduleError, match="already marked vectorized"):
        s[B].parallel(j)
    with pytest.raises(ScheduleError, match="thread axis"):
        s[B].bind(i, i)
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))  # another stage may bind the same tag
    s2 = te.create_schedule(C.op)
    bi, bj = B.op.axis
    s2[B].bind(bi, te.thread_axis("blockIdx.x"))
    with pytest.raises(ScheduleError, match="blockIdx.x is already bound"):
        s2[B].bind(bj, te.thread_axis("blockIdx.x"))


def test_bind_reduction_axis_to_threads():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    # threadIdx.x: a cross-thread reduction; the other thread axes and blocks stay errors.
    with pytest.raises(ScheduleError, match=r"stage 'C', axis 'k'.*reduction axis to threadIdx.y.*only "
                                            r"implemented for threadIdx.x.*rfactor"):
        s[C].bind(C.op.reduce_axis[0], te.thread_axis("threadIdx.y"))
    with pytest.raises(ScheduleError, match=r"stage 'C', axis 'k'.*reduction axis to blockIdx.x.*rfactor"):
        s[C].bind(C.op.reduce_axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.reduce_axis[0], te.thread_axis("threadIdx.x"))


def test_rfactor_errors():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"rfactor of 'B'.*not a reduction"):
        s.rfactor(B, B.op.axis[0])
    with pytest.raises(ScheduleError, match=r"not a reduction axis"):
        s.rfactor(C, C.op.axis[0])


def test_cache_errors():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="unknown scope"):
        s.cache_read(A, "texture", [B])
    with pytest.raises(ScheduleError, match="does not read it"):
        s.cache_read(A, "local", [C])
    s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="before splitting"):
        s.cache_write(B, "local")


def test_compute_at_axis_split_afterwards_fails_at_lowering():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    i = C.op.axis[0]
    s[B].compute_at(s[C], i)
    s[C].split(i, factor=4)
    with pytest.raises(ScheduleError, match="no longer a loop"):
        compiler.lower(s, [A, C])


def test_storage_align_errors():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="storage_align"):
        s[B].storage_align(C.op.axis[0], 8, 1)
    with pytest.raises(ScheduleError, match="offset"):
        s[B].storage_align(B.op.axis[0], 8, 9)


def test_lowering_errors():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(LoweringError, match="argument list"):
        compiler.lower(s, None)
    with pytest.raises(LoweringError, match="'A'.*neither an argument"):
        compiler.lower(s, [C])
    with pytest.raises(LoweringError, match="twice"):
        compiler.lower(s, [A, C, C])


def test_wrong_call_arguments_never_crash(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = compiler.build(s, [A, B], name="inc")
    a = np.ones(8, "float32")
    with pytest.raises(RuntimeArgumentError, match="argument"):
        f(a)
    with pytest.raises(RuntimeArgumentError, match="dtype"):
        f(a, np.zeros(8, "float64"))
    with pytest.raises(RuntimeArgumentError):
        f(a, np.zeros(9, "float32"))  # n bound to 8 by A, 9 by B
    with pytest.raises(RuntimeArgumentError):
        f(a, np.zeros((8, 1), "float32"))
    with pytest.raises(RuntimeArgumentError):
        f(a, np.zeros(16, "float32")[::2])
    with pytest.raises(RuntimeArgumentError):
        f("not an array", np.zeros(8, "float32"))
    b = poisoned(8, "float32")
    f(a, b)
    assert_written(b, a + 1)


def test_errors_share_one_hierarchy():
    assert issubclass(ScheduleError, CompilerError)
    assert issubclass(LoweringError, CompilerError)
    assert issubclass(RuntimeArgumentError, CompilerError)
