"""Tensor-expression semantics that TVM code relies on, written as TVM code writes them:
calling a tensor (``A(i, j)``), partial indexing (``A[i][j]``, TVM's ``TensorSlice``),
``lambda *i`` computes and computes that return a slice, and
operation tags (``tag=``, ``te.tag_scope``).

Every kernel runs against numpy on random data, into poisoned outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import build_and_check, random_array

from compiler import te, tir
from compiler.errors import CompilerError


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
