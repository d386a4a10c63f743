"""compiler.transform passes and the reference interpreter, on hand-built loop IR."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import poisoned

from compiler import tir, transform
from compiler.tir.interpreter import InterpreterError, run
from compiler.tir.stmt import ForKind

SERIAL, UNROLLED, VECTORIZED = ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED
c = tir.const


def loop(var, extent, body, kind=SERIAL, start=0):
    return tir.For(var, tir.convert(start), tir.convert(extent), kind, body)


def load(buf, *idx):
    return tir.BufferLoad(buf, tuple(tir.convert(i) for i in idx), buf.dtype)


def store(buf, value, *idx):
    return tir.BufferStore(buf, tir.convert(value), tuple(tir.convert(i) for i in idx))


def text(f) -> str:
    """The printed body, without the signature line."""
    return "\n".join(line[2:] for line in str(f).splitlines()[1:])


def same_results(f, g, arrays: dict, scalars: dict | None = None) -> None:
    """Run ``f`` and ``g`` on copies of ``arrays`` and check they write the same values.

    Give outputs :func:`poisoned`: an element ``g`` fails to write then differs from ``f``'s.
    Elements ``f`` leaves poisoned (NaN included) must stay so in ``g``.
    """
    out_f = run(f, {k: v.copy() for k, v in arrays.items()}, scalars)
    out_g = run(g, {k: v.copy() for k, v in arrays.items()}, scalars)
    for k in arrays:
        np.testing.assert_array_equal(out_f[k], out_g[k], err_msg=k)


# ----------------------------------------------------------------------------- interpreter


def test_interpreter_runs_loops_lets_ifs_and_allocations():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    T = tir.decl_buffer((1,), "float32", "T")
    i, t = tir.Var("i"), tir.Var("t")
    body = tir.Allocate(T, loop(i, n, tir.LetStmt(t, i * 2, tir.seq(
        store(T, load(A, i) + 1.0, 0),
        tir.IfThenElse(t < 6, store(B, load(T, 0), i), store(B, c(-1.0), i))))))
    f = tir.PrimFunc((A, B), body)
    a = np.arange(5, dtype="float32")
    out = run(f, {"A": a, "B": poisoned(5, "float32")})
    np.testing.assert_array_equal(out["B"], [1, 2, 3, -1, -1])


def test_interpreter_rejects_out_of_bounds_access():
    A = tir.decl_buffer((4,), "float32", "A")
    i = tir.Var("i")
    f = tir.PrimFunc((A,), loop(i, 5, store(A, c(1.0), i)))
    with pytest.raises(InterpreterError, match="out of bounds"):
        run(f, {"A": np.zeros(4, "float32")})


def test_interpreter_vector_ramp_access_and_2d_buffers():
    A = tir.decl_buffer((2, 4), "int32", "A")
    i = tir.Var("i")
    ramp = tir.Ramp(c(0), c(1), 4, "int32")
    vec = tir.BufferLoad(A, (c(0), ramp), "int32", 4)
    f = tir.PrimFunc((A,), loop(i, 1, tir.BufferStore(A, vec, (c(1), ramp))))
    a = np.array([[1, 2, 3, 4], [0, 0, 0, 0]], dtype="int32")
    run(f, {"A": a})
    np.testing.assert_array_equal(a[1], [1, 2, 3, 4])


# ----------------------------------------------------------------------------- simplify


def test_simplify_uses_loop_ranges_and_removes_dead_branches():
    A = tir.decl_buffer((64,), "float32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    body = loop(i, 8, loop(j, 8, tir.IfThenElse(
        i * 8 + j < 64,
        store(A, load(A, (i * 8 + j) // 8 * 8 + (i * 8 + j) % 8) + 1.0, i * 8 + j),
        store(A, c(0.0), 0))))
    f = tir.PrimFunc((A,), body)
    g = transform.simplify(f)
    assert text(g) == ("for i in range(8):\n"
                       "  for j in range(8):\n"
                       "    A[i * 8 + j] = A[i * 8 + j] + 1.0f")
    same_results(f, g, {"A": np.arange(64, dtype="float32")})


def test_simplify_folds_unit_loops_drops_empty_ones_and_inlines_lets():
    A = tir.decl_buffer((16,), "int32", "A")
    i, j, k, t = tir.Var("i"), tir.Var("j"), tir.Var("k"), tir.Var("t")
    body = tir.seq(
        loop(i, 1, store(A, i + 3, i + 1), start=2),
        loop(j, 0, store(A, c(7), j)),
        tir.LetStmt(t, c(5), loop(k, 4, store(A, k * t, k + t))),
        tir.IfThenElse(c(1) > c(2), store(A, c(9), 0)),
    )
    f = tir.PrimFunc((A,), body)
    g = transform.simplify(f)
    assert text(g) == ("A[3] = 5\n"
                       "for k in range(4):\n"
                       "  A[k + 5] = k * 5")
    same_results(f, g, {"A": poisoned(16, "int32")})


def test_simplify_keeps_unprovable_guards_and_uses_branch_facts():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "int32", "A")
    i = tir.Var("i")
    inner = tir.IfThenElse(i < 10, tir.IfThenElse(i < 12, store(A, c(1), i)))
    f = tir.PrimFunc((A,), loop(i, n, inner))
    g = transform.simplify(f)
    assert text(g) == ("for i in range(n):\n"
                       "  if i < 10:\n"
                       "    A[i] = 1")
    same_results(f, g, {"A": poisoned(20, "int32")})


def test_simplify_accepts_a_bare_statement():
    i = tir.Var("i")
    A = tir.decl_buffer((4,), "int32", "A")
    s = transform.simplify(loop(i, 4, store(A, i * 1 + 0, i)))
    assert str(s) == "for i in range(4):\n  A[i] = i"


# ----------------------------------------------------------------------------- remove_no_op


def test_remove_no_op():
    A = tir.decl_buffer((8,), "float32", "A")
    T = tir.decl_buffer((8,), "float32", "T", scope="local")
    U = tir.decl_buffer((8,), "float32", "U", scope="local")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.seq(
        tir.Evaluate(c(0)),
        loop(i, 8, tir.Evaluate(c(1))),
        loop(j, 8, store(A, load(A, j), j)),
        tir.Allocate(T, loop(i, 8, store(A, c(2.0), i))),
        tir.Allocate(U, tir.seq(store(U, c(1.0), 0), store(A, load(U, 0), 0))),
        tir.IfThenElse(load(A, 0) > 0.0, tir.Evaluate(c(0))),
        tir.SeqStmt((tir.Evaluate(c(0)), tir.Evaluate(c(0)))),
    )
    f = tir.PrimFunc((A,), body)
    g = transform.remove_no_op(f)
    assert text(g) == ("for i in range(8):\n"
                       "  A[i] = 2.0f\n"
                       "allocate U[float32 * 8], local\n"
                       "U[0] = 1.0f\n"
                       "A[0] = U[0]")
    same_results(f, g, {"A": np.arange(8, dtype="float32")})


def test_remove_no_op_of_everything_is_a_no_op():
    i = tir.Var("i")
    g = transform.remove_no_op(loop(i, 4, tir.SeqStmt((tir.Evaluate(c(0)), tir.Evaluate(c(1))))))
    assert str(g) == "0"


# ----------------------------------------------------------------------------- unroll_loops


def test_unroll_constant_loop():
    A = tir.decl_buffer((8,), "int32", "A")
    i = tir.Var("i")
    f = tir.PrimFunc((A,), loop(i, 4, store(A, i * 2, i * 2 + 1), kind=UNROLLED))
    g = transform.unroll_loops(f)
    assert text(g) == "A[1] = 0\nA[3] = 2\nA[5] = 4\nA[7] = 6"
    same_results(f, g, {"A": poisoned(8, "int32")})


def test_unroll_inner_loop_with_symbolic_min_and_symbolic_extent_becomes_serial():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "int32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    f = tir.PrimFunc((A,), loop(i, n // 2, loop(j, 2, store(A, j, i * 2 + j), kind=UNROLLED),
                                kind=UNROLLED))
    g = transform.unroll_loops(f)
    assert text(g) == ("for i in range(n // 2):\n"
                       "  A[i * 2] = 0\n"
                       "  A[i * 2 + 1] = 1")
    same_results(f, g, {"A": np.full(7, -1, "int32")})


def test_unroll_refuses_huge_loops():
    A = tir.decl_buffer((8192,), "int32", "A")
    i = tir.Var("i")
    f = tir.PrimFunc((A,), loop(i, 8192, store(A, i, i), kind=UNROLLED))
    g = transform.unroll_loops(f)
    assert text(g) == "for i in range(8192):\n  A[i] = i"


def test_auto_unroll_small_innermost_serial_loops():
    A = tir.decl_buffer((12,), "int32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    f = tir.PrimFunc((A,), loop(i, 4, loop(j, 3, store(A, i + j, i * 3 + j))))
    assert transform.unroll_loops(f) is f or text(transform.unroll_loops(f)) == text(f)
    g = transform.unroll_loops(f, auto_max_step=3)
    assert text(g) == ("for i in range(4):\n"
                       "  A[i * 3] = i\n"
                       "  A[i * 3 + 1] = i + 1\n"
                       "  A[i * 3 + 2] = i + 2")
    same_results(f, g, {"A": poisoned(12, "int32")})


def test_unrolling_leaves_the_whole_function_simplified():
    """The walk that copies the unrolled bodies simplifies the rest too (the lowering pipeline
    runs no simplify of its own after unrolling)."""
    A = tir.decl_buffer((6,), "int32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    f = tir.PrimFunc((A,), tir.SeqStmt((loop(i, 4, store(A, i * 6 - i * 5, (i * 4) // 4)),
                                        loop(j, 2, store(A, (j * 3) % 3 + j, j + 4), kind=UNROLLED))))
    g = transform.unroll_loops(f)
    assert text(g) == "for i in range(4):\n  A[i] = i\nA[4] = 0\nA[5] = 1"
    same_results(f, g, {"A": poisoned(6, "int32")})


# ----------------------------------------------------------------------------- loop_partition


def _guarded_1d(n_expr, outer_kind=SERIAL, inner_kind=SERIAL, nbuf=None):
    A = tir.decl_buffer((nbuf if nbuf is not None else n_expr,), "float32", "A")
    B = tir.decl_buffer((nbuf if nbuf is not None else n_expr,), "float32", "B")
    xo, xi = tir.Var("xo"), tir.Var("xi")
    idx = xo * 8 + xi
    body = tir.IfThenElse(idx < n_expr, store(B, load(A, idx) * 2.0, idx))
    return tir.PrimFunc((A, B), loop(xo, (n_expr + 7) // 8, loop(xi, 8, body, inner_kind),
                                     outer_kind))


def test_partition_constant_bounds():
    # The last block, one constant iteration, gets a body of its own: a vector loop keeps its
    # guard, a serial one is partitioned in turn (its dead tail simplified away)
    f = _guarded_1d(c(100), inner_kind=VECTORIZED)
    g = transform.loop_partition(transform.simplify(f))
    assert text(g) == ("for xo in range(12):\n"
                       "  for xi in range(8) vectorized:\n"
                       "    B[xo * 8 + xi] = A[xo * 8 + xi] * 2.0f\n"
                       "for xi in range(8) vectorized:\n"
                       "  if 12 * 8 + xi < 100:\n"
                       "    B[12 * 8 + xi] = A[12 * 8 + xi] * 2.0f")
    a = np.arange(100, dtype="float32")
    same_results(f, g, {"A": a, "B": poisoned(100, "float32")})
    f = _guarded_1d(c(100))
    g = transform.remove_no_op(transform.simplify(transform.loop_partition(transform.simplify(f))))
    assert text(g) == ("for xo in range(12):\n"
                       "  for xi in range(8):\n"
                       "    B[xo * 8 + xi] = A[xo * 8 + xi] * 2.0f\n"
                       "for xi in range(4):\n"
                       "  B[xi + 96] = A[xi + 96] * 2.0f")
    same_results(f, g, {"A": a, "B": poisoned(100, "float32")})


def _tiles_and_taps():
    # A row of 14 output columns in register tiles of 6 (the last one 2 columns), each tile
    # reading three taps dilated by 12, a tap skipped where the tile reads only padding: the
    # taps' guard holds for all three taps of no tile (tile 0 skips tap 0, tile 2 tap 2), the
    # columns' for tiles 0 to 1, so the two never all hold for one range of tiles.
    In = tir.decl_buffer((38,), "float32", "In")  # 14 columns padded by 12 on both sides
    Out = tir.decl_buffer((14,), "float32", "Out")
    xo, r, xi = tir.Var("xo"), tir.Var("r"), tir.Var("xi")
    x = xo * 6 + xi
    column = tir.IfThenElse(x < 14, store(Out, load(Out, x) + load(In, x + r * 12), x))
    taps = tir.IfThenElse((xo * 6 + r * 12 - 12 < 14) & (xo * 6 + 5 + r * 12 - 12 >= 0),
                          loop(xi, 6, column, UNROLLED))
    return tir.PrimFunc((In, Out), loop(xo, 3, loop(r, 3, taps)))


def test_partition_on_one_guard_where_the_guards_never_all_hold():
    f = _tiles_and_taps()
    g = transform.simplify(transform.loop_partition(transform.simplify(f)))
    lines = text(g).splitlines()
    # the whole tiles unguarded, the last tile alone with its two columns
    assert lines[0] == "for xo in range(2):"
    assert not any("xo * 6 + xi < 14" in line for line in lines), text(g)
    assert sum(line.lstrip().startswith("for xo") for line in lines) == 1, text(g)
    rng = np.random.default_rng(3)
    same_results(f, g, {"In": rng.random(38, dtype="float32"), "Out": rng.random(14, dtype="float32")})


def test_partition_leaves_an_unrolled_loop_whole_where_its_pieces_are_symbolic():
    # xi is to be unrolled (a register tile's rows): cut at n, its pieces would have no
    # constant extent and stay loops; unrolled whole, each row keeps a guard of its own
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    xi = tir.Var("xi")
    f = tir.PrimFunc((A,), loop(xi, 4, tir.IfThenElse(xi < n, store(A, c(1.0), xi)), UNROLLED))
    g = transform.loop_partition(f)
    assert text(g) == text(f)
    assert text(transform.loop_partition(tir.PrimFunc((A,), loop(xi, 4, tir.IfThenElse(
        xi < 3, store(A, c(1.0), xi)), UNROLLED)))).startswith("for xi in range(3) unrolled:")


def test_partition_keeps_a_parallel_loop_whole():
    # Peeled off, the tail block would run on one thread after the parallel loop. In place,
    # the threads share it; its few iterations get bodies of their own, partitioned further.
    f = _guarded_1d(c(100), outer_kind=ForKind.PARALLEL)
    g = transform.remove_no_op(transform.simplify(transform.loop_partition(transform.simplify(f))))
    assert text(g) == ("for xo in range(13) parallel:\n"
                       "  if xo == 12:\n"
                       "    for xi in range(4):\n"
                       "      B[xi + 96] = A[xi + 96] * 2.0f\n"
                       "  else:\n"
                       "    for xi in range(8):\n"
                       "      B[xo * 8 + xi] = A[xo * 8 + xi] * 2.0f")
    rng = np.random.default_rng(5)
    same_results(f, g, {"A": rng.random(100, dtype="float32") + 0.5, "B": poisoned(100, "float32")})
    # Symbolic bounds: the guarded iterations keep one body, its inner loop partitioned.
    n = tir.Var("n")
    f = _guarded_1d(n, outer_kind=ForKind.PARALLEL)
    g = transform.loop_partition(f)
    lines = text(g).splitlines()
    assert lines[:3] == ["for xo in range((n + 7) // 8) parallel:", "  if xo >= n // 8:",
                         "    for xi in range(n - xo * 8):"]
    assert sum(line.lstrip().startswith("for xo") for line in lines) == 1
    for size in (0, 1, 7, 8, 9, 16, 23):
        a = rng.random(size, dtype="float32") + 0.5
        same_results(f, g, {"A": a, "B": poisoned(size, "float32")})


def test_partition_symbolic_bounds():
    n = tir.Var("n")
    f = _guarded_1d(n)
    g = transform.loop_partition(f)
    lines = text(g).splitlines()
    assert lines[0] == "for xo in range(n // 8):"
    assert lines[2] == "    B[xo * 8 + xi] = A[xo * 8 + xi] * 2.0f"
    assert lines[3].startswith("for xo in range(n // 8, ")
    assert "if xo * 8 + xi < n:" in lines[5]
    for size in (0, 1, 7, 8, 9, 16, 23):
        a = np.arange(size, dtype="float32")
        same_results(f, g, {"A": a, "B": poisoned(size, "float32")})


def test_partition_uses_affine_conjuncts_only():
    # Only the affine conjunct of the guard is used; the data-dependent one stays.
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    M = tir.decl_buffer((n,), "int32", "M")
    ii = tir.Var("ii")
    cond = (ii < n - 3) & (load(M, ii) > 0)
    f = tir.PrimFunc((A, M), loop(ii, n, tir.IfThenElse(cond, store(A, c(1.0), ii))))
    g = transform.loop_partition(f)
    # (a negative extent runs no iterations; the tail starts no earlier than 0)
    assert text(g) == ("for ii in range(n - 3):\n"
                       "  if M[ii] > 0:\n"
                       "    A[ii] = 1.0f\n"
                       "for ii in range(max(n - 3, 0), n):\n"
                       "  if ii < n - 3 && M[ii] > 0:\n"
                       "    A[ii] = 1.0f")
    m = np.array([1, 0, 1, 1, 1, 0, 1, 1], "int32")
    for size in (0, 2, 3, 4, 8):
        same_results(f, g, {"A": poisoned(size, "float32"), "M": m[:size].copy()})


def test_partition_lower_and_upper_guards_padding():
    # out[i] = in[i - 1] if 1 <= i < 9 (a padded copy): three pieces, guards only at the ends
    In = tir.decl_buffer((8,), "float32", "In")
    Out = tir.decl_buffer((10,), "float32", "Out")
    i = tir.Var("i")
    cond = (i - 1 >= 0) & (i - 1 < 8)
    body = tir.IfThenElse(cond, store(Out, load(In, i - 1), i), store(Out, c(0.0), i))
    f = tir.PrimFunc((In, Out), loop(i, 10, body))
    g = transform.simplify(transform.loop_partition(f))
    assert text(g) == ("Out[0] = 0.0f\n"
                       "for i in range(1, 9):\n"
                       "  Out[i] = In[i - 1]\n"
                       "Out[9] = 0.0f")
    same_results(f, g, {"In": np.arange(1, 9, dtype="float32"), "Out": np.full(10, 5, "float32")})


def test_partition_2d_guards():
    n, m = tir.Var("n"), tir.Var("m")
    A = tir.decl_buffer((n, m), "float32", "A")
    yo, yi, xo, xi = (tir.Var(s) for s in ("yo", "yi", "xo", "xi"))
    y, x = yo * 4 + yi, xo * 4 + xi
    body = tir.IfThenElse((y < n) & (x < m), store(A, tir.Cast("float32", y * 100 + x), y, x))
    nest = loop(yo, (n + 3) // 4, loop(xo, (m + 3) // 4, loop(yi, 4, loop(xi, 4, body))))
    f = tir.PrimFunc((A,), nest)
    g = transform.loop_partition(f)
    printed = text(g)
    assert printed.startswith("for yo in range(n // 4):\n  for xo in range(m // 4):\n"
                              "    for yi in range(4):\n      for xi in range(4):\n"
                              "        A[yo * 4 + yi, xo * 4 + xi] = ")
    for shape in ((5, 7), (8, 8), (3, 9), (0, 4)):
        same_results(f, g, {"A": poisoned(shape, "float32")})


def test_partition_leaves_non_affine_and_always_false_guards():
    A = tir.decl_buffer((16,), "float32", "A")
    i = tir.Var("i")
    never = tir.PrimFunc((A,), loop(i, 8, tir.IfThenElse(i > 20, store(A, c(1.0), i))))
    assert text(transform.loop_partition(never)) == text(never)
    square = tir.PrimFunc((A,), loop(i, 8, tir.IfThenElse(i * i < 10, store(A, c(1.0), i))))
    assert text(transform.loop_partition(square)) == text(square)
    always = tir.PrimFunc((A,), loop(i, 8, tir.IfThenElse(i < 20, store(A, c(1.0), i))))
    assert text(transform.loop_partition(always)) == "for i in range(8):\n  A[i] = 1.0f"


def test_partition_keeps_else_branch_in_tail_and_negative_coefficient():
    A = tir.decl_buffer((10,), "int32", "A")
    i = tir.Var("i")
    f = tir.PrimFunc((A,), loop(i, 10, tir.IfThenElse(9 - i * 2 > 0, store(A, i, i),
                                                      store(A, -i, i))))
    g = transform.loop_partition(f)
    assert text(g).startswith("for i in range(5):\n  A[i] = i\nfor i in range(5, 10):\n  if ")
    same_results(f, g, {"A": poisoned(10, "int32")})


def test_hoist_if_moves_a_branch_out_of_the_loops_it_does_not_read():
    # for i: for j: for k (vectorized): if i + 2 < n: B[i, j, k] = A[i, j, k]
    n = tir.Var("n")
    A = tir.decl_buffer((8, 3, 4), "float32", "A")
    B = tir.decl_buffer((8, 3, 4), "float32", "B")
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    body = tir.IfThenElse(i + 2 < n, store(B, load(A, i, j, k), i, j, k))
    f = tir.PrimFunc((A, B, n), loop(i, 8, loop(j, 3, loop(k, 4, body, VECTORIZED))))
    g = transform.hoist_if(f)
    assert text(g) == ("for i in range(8):\n"
                       "  if i + 2 < n:\n"
                       "    for j in range(3):\n"
                       "      for k in range(4) vectorized:\n"
                       "        B[i, j, k] = A[i, j, k]")
    a = np.random.default_rng(1).random((8, 3, 4), dtype="float32") + 0.5
    for size in (0, 5, 11):
        same_results(f, g, {"A": a, "B": poisoned((8, 3, 4), "float32")}, {"n": size})


def test_hoist_if_reads_a_loop_counted_from_its_start():
    # The tile of columns x in [4 * xo, 4 * xo + 4) tests its first column, x // 4 == xo: the
    # same at every x, so the branch leaves the x loop.
    A = tir.decl_buffer((16,), "float32", "A")
    xo, x = tir.Var("xo"), tir.Var("x")
    body = tir.IfThenElse(x // 4 < 2, store(A, c(1.0), x))
    f = tir.PrimFunc((A,), loop(xo, 4, tir.For(x, xo * 4, c(4), SERIAL, body)))
    g = transform.hoist_if(f)
    assert text(g) == ("for xo in range(4):\n"
                       "  if xo < 2:\n"
                       "    for x in range(xo * 4, xo * 4 + 4):\n"
                       "      A[x] = 1.0f")
    same_results(f, g, {"A": poisoned(16, "float32")})


def test_hoist_if_leaves_branches_that_must_stay():
    A = tir.decl_buffer((8,), "float32", "A")
    M = tir.decl_buffer((8,), "int32", "M")
    i, j = tir.Var("i"), tir.Var("j")
    reads_the_loop = tir.PrimFunc((A,), loop(i, 8, tir.IfThenElse(i < 5, store(A, c(1.0), i))))
    with_else = tir.PrimFunc((A,), loop(i, 8, loop(j, 2, tir.IfThenElse(
        i < 5, store(A, c(1.0), i), store(A, c(2.0), i)))))
    loads = tir.PrimFunc((A, M), loop(i, 8, loop(j, 2, tir.IfThenElse(
        load(M, i) > 0, store(A, c(1.0), i)))))
    beside = tir.PrimFunc((A,), loop(i, 8, loop(j, 2, tir.seq(
        tir.IfThenElse(i < 5, store(A, c(1.0), i)), store(A, c(3.0), i)))))
    for f in (reads_the_loop, with_else, loads, beside):
        assert text(transform.hoist_if(f)) == text(f)


def test_passes_compose_like_lowering():
    n = tir.Var("n")
    f = _guarded_1d(n)
    g = transform.remove_no_op(transform.simplify(transform.unroll_loops(
        transform.loop_partition(transform.simplify(f)))))
    for size in (0, 5, 8, 21):
        same_results(f, g, {"A": np.arange(size, dtype="float32"),
                            "B": poisoned(size, "float32")})
