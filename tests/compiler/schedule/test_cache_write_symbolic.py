"""``cache_write`` of a reduction whose sizes are symbolic (``te.var``): the cache stage's
reduce axis keeps the symbolic extent, its buffer is sized from the region it is computed
over, and one built function serves every size given at call time."""

from __future__ import annotations

import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te


def symbolic_matmul(two_sizes: bool):
    n = te.var("n")
    m = te.var("m") if two_sizes else n
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m, n), name="B")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def at_root(s, C, CC):
    pass


def at_outer_rows(s, C, CC):
    xo, _ = s[C].split(C.op.axis[0], factor=4)
    s[CC].compute_at(s[C], xo)


def tiled_as_in_tvm_tutorial(s, C, CC):
    xo, yo, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 3)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=2)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[C].parallel(xo)


def reduce_split_by_nparts(s, C, CC):
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], nparts=3)
    s[CC].reorder(ko, *s[CC].op.axis, ki)


def at_fused_outer(s, C, CC):
    """The rows and columns a fused, split tile needs cannot be bounded when the row length is
    symbolic (``(f * 4 + fi) // n``): the cache covers the whole result, as in TVM."""
    fused = s[C].fuse(*C.op.axis)
    fo, _ = s[C].split(fused, factor=4)
    s[C].parallel(fo)
    s[CC].compute_at(s[C], fo)


@pytest.mark.parametrize("scope", ["global", "local"])
@pytest.mark.parametrize("two_sizes", [False, True])
@pytest.mark.parametrize("schedule", [at_root, at_outer_rows, tiled_as_in_tvm_tutorial,
                                      reduce_split_by_nparts, at_fused_outer])
def test_cache_write_of_symbolic_reduction(rng, scope, two_sizes, schedule):
    A, B, C = symbolic_matmul(two_sizes)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, scope)
    assert len(CC.op.reduce_axis) == 1
    schedule(s, C, CC)
    f = compiler.build(s, [A, B, C], target="llvm")
    for n, m in ((5, 7), (9, 2)):
        m = m if two_sizes else n
        a = random_array(rng, (n, m), "float32")
        b = random_array(rng, (m, n), "float32")
        c = poisoned((n, n), "float32")
        f(a, b, c)
        assert_written(c, a @ b, rtol=1e-5)


def test_cache_write_with_sizes_as_scalar_arguments(rng):
    """The sizes passed as arguments too, as ``tvm.build(s, [A, B, C, n])`` does."""
    A, B, C = symbolic_matmul(False)
    n = C.shape[0]
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    at_outer_rows(s, C, CC)
    f = compiler.build(s, [A, B, C, n])
    a, b = random_array(rng, (6, 6), "float32"), random_array(rng, (6, 6), "float32")
    c = poisoned((6, 6), "float32")
    f(a, b, c, 6)
    assert_written(c, a @ b, rtol=1e-5)
