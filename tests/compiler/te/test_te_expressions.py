"""Tensor-expression semantics that TVM code relies on, written as TVM code writes them:
calling a tensor (``A(i, j)``), partial indexing (``A[i][j]``, TVM's ``TensorSlice``),
``lambda *i`` computes and computes that return a slice, reductions with ``init=``, and
operation tags (``tag=``, ``te.tag_scope``).

Every kernel runs against numpy on random data, into poisoned outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import build_ptx, simulate
from helpers import assert_written, build_and_check, poisoned, random_array

import compiler as tvm
from compiler import te, tir
from compiler.errors import CompilerError, LoweringError


def _matrix(m=6, n=7, name="A"):
    return te.placeholder((m, n), name=name)


# ---------------------------------------------------------------------------- call syntax and slices


def test_calling_a_tensor_is_indexing_it(rng):
    A = _matrix()
    B = te.compute(A.shape, lambda i, j: A(i, j) * 2 + A[i, j], name="B")
    s = te.create_schedule(B.op)
    a = random_array(rng, (6, 7), "float32")
    build_and_check(s, [A, B], [a], [a * 3])


def test_calling_a_tensor_with_the_wrong_number_of_indices_is_refused():
    A = _matrix()
    with pytest.raises(IndexError, match="2 dimensions, indexed with 1"):
        A(0)
    with pytest.raises(IndexError, match="2 dimensions, indexed with 3"):
        A[0, 1, 2]


def test_partial_indexing_gives_a_slice_that_indexing_completes(rng):
    A = _matrix()
    row = A[1]
    assert isinstance(row, te.TensorSlice)
    assert row.tensor is A and row.dtype == "float32"
    assert isinstance(row[2], tir.ProducerLoad)
    with pytest.raises(IndexError, match="indexed with 1"):
        row.asobject()  # a slice stands for an element only once every dimension is indexed
    assert isinstance(A[1][2], tir.ProducerLoad)
    B = te.compute(A.shape, lambda i, j: A[i][j] + A[i][j] * A[i][j], name="B")
    s = te.create_schedule(B.op)
    a = random_array(rng, (6, 7), "float32")
    build_and_check(s, [A, B], [a], [a + a * a])


def test_a_complete_slice_works_where_an_expression_does(rng):
    A = te.placeholder((3, 4, 5), name="A")
    assert isinstance(A[0][1][2], tir.ProducerLoad)
    assert A[0, 1][2].dtype == "float32"
    k = te.reduce_axis((0, 5), "k")
    # A slice completed by the reduction's index; arithmetic, casts and comparisons on it.
    B = te.compute((3, 4), lambda i, j: te.sum(A[i][j][k].astype("float64") * 2, axis=k), name="B")
    C = te.compute((3, 4), lambda i, j: te.if_then_else(A[i][j][0] > 0, A[i, j][1], -A[i][j][2]), name="C")
    s = te.create_schedule([B.op, C.op])
    a = random_array(rng, (3, 4, 5), "float32")
    want_c = np.where(a[:, :, 0] > 0, a[:, :, 1], -a[:, :, 2])
    build_and_check(s, [A, B, C], [a], [(a.astype("float64") * 2).sum(axis=2), want_c])


def test_varargs_compute_takes_one_index_per_dimension(rng):
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute(A.shape, lambda *i: A(*i) + A[i], name="B")
    assert [iv.var.name for iv in B.op.axis] == ["i0", "i1", "i2"]
    C = te.compute(A.shape, lambda n, *rest: A[(n, *rest)] * n.astype("float32"), name="C")
    assert [iv.var.name for iv in C.op.axis] == ["n", "i0", "i1"]
    D = te.compute(A.shape, lambda *i: A[i] - 1, name="D", varargs_names=["x", "y", "z"])
    assert [iv.var.name for iv in D.op.axis] == ["x", "y", "z"]
    s = te.create_schedule([B.op, C.op, D.op])
    a = random_array(rng, (2, 3, 4), "float32")
    build_and_check(s, [A, B, C, D], [a], [2 * a, a * np.arange(2, dtype="float32")[:, None, None], a - 1])


def test_a_compute_returning_a_slice_covers_the_remaining_dimensions(rng):
    A = te.placeholder((4, 5, 3), name="A")
    B = te.compute((4, 5, 3), lambda i: A[i], name="B")
    C = te.compute((4, 5, 3), lambda i, j: A[3 - i][j], name="C")
    assert len(B.op.axis) == 3 and B.shape == A.shape
    s = te.create_schedule([B.op, C.op])
    a = random_array(rng, (4, 5, 3), "float32")
    build_and_check(s, [A, B, C], [a], [a, a[::-1]])


def test_a_compute_with_too_few_indices_and_no_slice_is_refused():
    A = _matrix()
    with pytest.raises(CompilerError, match="takes 1 indices but the shape has 2"):
        te.compute((6, 7), lambda i: A[i, 0], name="B")
    with pytest.raises(CompilerError, match="takes 3 indices but the shape has 2"):
        te.compute((6, 7), lambda i, j, k: A[i, j], name="B")
    with pytest.raises(CompilerError, match="varargs_names"):
        te.compute((6, 7), lambda *i: A[i], varargs_names=["x"])


# ---------------------------------------------------------------------------- reductions with init=


def _row_sum_with_init(m=6, n=16, reducer=te.sum):
    A = _matrix(m, n)
    C0 = te.placeholder((m,), name="C0")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((m,), lambda i: reducer(A[i, k], axis=k, init=C0[i]), name="B")
    return A, C0, B


@pytest.mark.parametrize("reducer, ref", [(te.sum, np.sum), (te.max, np.max), (te.min, np.min)])
def test_a_reduction_starts_from_its_init(rng, reducer, ref):
    A, C0, B = _row_sum_with_init(reducer=reducer)
    s = te.create_schedule(B.op)
    a, c0 = random_array(rng, (6, 16), "float32"), random_array(rng, (6,), "float32") * 3
    want = c0 + a.sum(axis=1) if ref is np.sum else ref(np.concatenate([a, c0[:, None]], axis=1), axis=1)
    build_and_check(s, [A, C0, B], [a, c0], [want])


def test_init_of_a_matmul_from_a_tensor_of_the_output_indices_with_split_and_reorder(rng):
    """TVM's test_reduce_init: C = C0 + A @ B, with the reduction split and moved outward."""
    n, m, l = 8, 12, 16
    A = te.placeholder((n, l), name="A")
    Bm = te.placeholder((l, m), name="B")
    C0 = te.placeholder((n, m), name="C0")
    k = te.reduce_axis((0, l), "k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * Bm[k, j], axis=k, init=C0[i, j]), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    ko, ki = s[C].split(k, factor=4)
    jo, ji = s[C].split(j, factor=4)
    s[C].reorder(i, ko, jo, ki, ji)
    s[C].vectorize(ji)
    a, b, c0 = (random_array(rng, sh, "float32") for sh in ((n, l), (l, m), (n, m)))
    build_and_check(s, [A, Bm, C0, C], [a, b, c0], [c0 + a @ b], rtol=1e-5)
    assert str(C.op.body[0]).endswith("init=(C0[i, j]))")
    assert C0 in C.op.input_tensors


def test_init_may_be_a_constant_and_survives_a_condition(rng):
    A = _matrix(5, 9)
    k = te.reduce_axis((0, 9), "k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], k, k % 2 == 0, 10.0), name="B")  # TVM's positions
    s = te.create_schedule(B.op)
    a = random_array(rng, (5, 9), "float32")
    build_and_check(s, [A, B], [a], [10 + a[:, ::2].sum(axis=1)], rtol=1e-5)


def test_init_of_a_comm_reducer_and_of_a_tuple_reduction(rng):
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, dtype=t), name="prod")

    def fcombine(x, y):  # argmax over (index, value)
        keep = x[1] >= y[1]
        return tir.Select(keep, x[0], y[0]), tir.Select(keep, x[1], y[1])

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), te.min_value(t1)), name="argmax")
    m, n = 4, 6
    A = _matrix(m, n)
    S = te.placeholder((m,), name="S")
    k = te.reduce_axis((0, n), "k")
    P = te.compute((m,), lambda i: prod(A[i, k], axis=k, init=S[i]), name="P")
    k2 = te.reduce_axis((0, n), "k2")
    I0, V0 = te.compute((m,), lambda i: argmax((k2, A[i, k2]), axis=k2, init=(n, S[i])), name="T")
    s = te.create_schedule([P.op, I0.op])
    a = rng.uniform(0.8, 1.25, size=(m, n)).astype("float32")
    sv = np.array([0.0, 5.0, 1.1, 0.0], dtype="float32")  # rows 1 and 2: the init wins
    full = np.concatenate([a, sv[:, None]], axis=1)
    best = np.argmax(full, axis=1)
    idx = np.where(best == n, n, best).astype("int32")
    build_and_check(s, [A, S, P, I0, V0], [a, sv], [sv * a.prod(axis=1), idx, full.max(axis=1)], rtol=1e-5)


def test_init_of_a_reduction_computed_at_a_consumer(rng):
    A, C0, B = _row_sum_with_init(8, 8)
    D = te.compute((8,), lambda i: B[i] * 2, name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=4)
    s[B].compute_at(s[D], io)
    a, c0 = random_array(rng, (8, 8), "float32"), random_array(rng, (8,), "float32")
    build_and_check(s, [A, C0, D], [a, c0], [2 * (c0 + a.sum(axis=1))], rtol=1e-5)


@pytest.mark.parametrize("place", ["inline", "compute_at", "cache_write"])
def test_the_init_may_read_a_computed_stage(rng, place):
    A = _matrix(8, 8)
    X = te.placeholder((8,), name="X")
    C0 = te.compute((8,), lambda i: X[i] * 3, name="C0")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k, init=C0[i]), name="B")
    s = te.create_schedule(B.op)
    if place == "inline":
        s[C0].compute_inline()
    elif place == "compute_at":
        io, _ = s[B].split(B.op.axis[0], factor=4)
        s[C0].compute_at(s[B], io)
    else:
        s.cache_write(B, "local")
    a, x = random_array(rng, (8, 8), "float32"), random_array(rng, (8,), "float32")
    build_and_check(s, [A, X, B], [a, x], [3 * x + a.sum(axis=1)], rtol=1e-5)


def test_init_on_the_gpu_in_a_group_computed_at_a_thread_loop(rng):
    """A reduction with init= under bound thread loops, on the GPU simulator, with the PTX
    assembled; the reduction is a group computed at the consumer's thread loop."""
    m, n = 16, 8
    A, C0, B = _row_sum_with_init(m, n)
    D = te.compute((m,), lambda i: B[i] * 2, name="D")
    s = te.create_schedule(D.op)
    bx, tx = s[D].split(D.op.axis[0], factor=4)
    s[D].bind(bx, te.thread_axis("blockIdx.x"))
    s[D].bind(tx, te.thread_axis("threadIdx.x"))
    g = s.create_group(outputs=B, inputs=[A, C0])
    g.compute_at(s[D], tx)
    a, c0 = random_array(rng, (m, n), "float32"), random_array(rng, (m,), "float32")
    d = poisoned((m,), "float32")
    simulate(s, [A, C0, D], [a, c0, d])
    assert_written(d, 2 * (c0 + a.sum(axis=1)), rtol=1e-5)
    build_ptx(s, [A, C0, D])


def test_init_using_a_reduction_axis_is_refused():
    A = _matrix()
    k = te.reduce_axis((0, 7), "k")
    with pytest.raises(ValueError, match="reduction axis 'k'"):
        te.compute((6,), lambda i: te.sum(A[i, k], axis=k, init=A[i, k]))


@pytest.mark.parametrize("reducer, ref", [(te.sum, np.sum), (te.max, np.max)])
def test_rfactor_of_a_reduction_with_init_starts_the_final_reduction_from_it(rng, reducer, ref):
    """As TVM: the partial results start from the identity, the final reduction from init."""
    A, C0, B = _row_sum_with_init(6, 16, reducer)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=4)
    BF = s.rfactor(B, ki)
    assert not BF.op.body[0].init and B.op.body[0].init
    s[BF].compute_at(s[B], B.op.axis[0])
    a, c0 = random_array(rng, (6, 16), "float32"), random_array(rng, (6,), "float32") * 3
    want = c0 + a.sum(axis=1) if ref is np.sum else ref(np.concatenate([a, c0[:, None]], axis=1), axis=1)
    build_and_check(s, [A, C0, B], [a, c0], [want], rtol=1e-5)


def test_a_reduction_with_init_across_threads_is_refused():
    A, C0, B = _row_sum_with_init()
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match="init"):
        tvm.lower(s, [A, C0, B])


# ---------------------------------------------------------------------------- tags


def test_compute_tag_and_attrs_are_on_the_operation():
    A = _matrix()
    B = te.compute(A.shape, lambda i, j: A[i, j], name="B", tag="elemwise", attrs={"layout": "NC"})
    assert B.op.tag == "elemwise" and B.op.attrs["layout"] == "NC"
    assert te.compute(A.shape, lambda i, j: A[i, j]).op.tag == ""


def test_tag_scope_as_context_manager_and_decorator():
    A = _matrix()
    with te.tag_scope(tag="injective"):
        B = te.compute(A.shape, lambda i, j: A[i, j] + 1)
        k = te.reduce_axis((0, 7), "k")
        C = te.compute((6,), lambda i: te.sum(A[i, k], axis=k))
    assert B.op.tag == "injective" and C.op.tag == "injective"

    @te.tag_scope(tag="broadcast")
    def add_one(x):
        return te.compute(x.shape, lambda *i: x(*i) + 1)

    assert add_one(A).op.tag == "broadcast"
    assert add_one.__name__ == "add_one"
    assert te.compute(A.shape, lambda i, j: A[i, j]).op.tag == ""  # the scope ended
    assert isinstance(te.tag.TagScope.get_current(), type(None))


def test_tag_scopes_do_not_nest_and_an_explicit_tag_inside_one_is_refused():
    A = _matrix()
    with te.tag_scope("outer"):
        with pytest.raises(CompilerError, match="cannot be nested"):
            with te.tag_scope("inner"):
                pass
        with pytest.raises(CompilerError, match="tag='elemwise'"):
            te.compute(A.shape, lambda i, j: A[i, j], tag="elemwise")
        te.compute(A.shape, lambda i, j: A[i, j])
    assert te.compute(A.shape, lambda i, j: A[i, j]).op.tag == ""


def test_an_unused_tag_scope_warns():
    with pytest.warns(UserWarning, match="'unused'"):
        with te.tag_scope("unused"):
            pass
