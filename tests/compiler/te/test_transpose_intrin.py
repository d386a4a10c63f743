"""``te.transpose_intrin``: tiles copied transposed in vector registers, tensorized into copies
whose source and destination are contiguous along different loops, on pinned AVX-512 and AVX2
CPUs, for square, oblong and odd tiles anywhere in larger arrays."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CPUS, assert_written, for_each_cpu, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.codegen.llvm_transpose import TRANSPOSE, transpose_call
from compiler.errors import CodegenError, CompilerError

TILES = [(16, 16), (8, 16), (16, 8), (14, 16), (7, 16), (16, 4), (3, 5), (2, 2)]


def _transposed_copy(rows: int, cols: int, dtype: str = "float32"):
    """``B[j, i] = A[i, j]`` over a 3-row-by-2-column grid of ``rows x cols`` tiles of ``A``,
    each tensorized."""
    A = te.placeholder((3 * rows, 2 * cols), name="A", dtype=dtype)
    B = te.compute((2 * cols, 3 * rows), lambda j, i: A[i, j], name="B")
    s = te.create_schedule(B.op)
    j, i = s[B].op.axis
    jo, ji = s[B].split(j, factor=cols)
    io, ii = s[B].split(i, factor=rows)
    s[B].reorder(jo, io, ji, ii)
    s[B].tensorize(ji, te.transpose_intrin(rows, cols, dtype))
    return s, [A, B]


@for_each_cpu
@pytest.mark.parametrize("rows, cols", TILES, ids=[f"{r}x{c}" for r, c in TILES])
def test_tiles_are_copied_transposed(cpu, rows, cols):
    s, args = _transposed_copy(rows, cols)
    f = compiler.build(s, args, target=cpu.target)
    asm = f.get_source("asm")
    assert "autotune_transpose" not in f.get_source("ll")  # emitted inline, never called
    assert "gather" not in asm
    if not cpu.runs_here():
        return
    a = random_array(np.random.default_rng(rows * 100 + cols), (3 * rows, 2 * cols), "float32")
    b = poisoned((2 * cols, 3 * rows), "float32")
    f(a, b)
    assert_written(b, a.T)


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8"])
def test_other_dtypes(dtype):
    s, args = _transposed_copy(8, 16, dtype)
    f = compiler.build(s, args, target=CPUS[2].target)  # AVX2, which every x86-64 machine here has
    a = random_array(np.random.default_rng(1), (24, 32), dtype)
    b = poisoned((32, 24), dtype)
    f(a, b)
    assert_written(b, a.T)


def test_unit_dimensions_between_rows_and_columns_of_the_output():
    # NCHW output from channel-blocked rows: the channels and columns of a tile are not adjacent
    # dimensions of the output, and the image row between them is a loop outside the tile
    C, H, W = 20, 3, 12  # blocks of 20 channels, tiles of 4 channels by 6 columns
    Y = te.placeholder((H, W, C), name="Y")
    out = te.compute((C, H, W), lambda c, y, x: Y[y, x, c], name="out")
    s = te.create_schedule(out.op)
    c, y, x = s[out].op.axis
    co, ci = s[out].split(c, factor=4)
    xo, xi = s[out].split(x, factor=6)
    s[out].reorder(y, co, xo, ci, xi)
    s[out].tensorize(ci, te.transpose_intrin(6, 4, out_ndim=3))
    f = compiler.build(s, [Y, out], target=CPUS[2].target)
    assert "autotune_transpose" in str(compiler.lower(s, [Y, out]))
    y_in = random_array(np.random.default_rng(2), (H, W, C), "float32")
    got = poisoned((C, H, W), "float32")
    f(y_in, got)
    assert_written(got, y_in.transpose(2, 0, 1))


def test_unit_dimensions_between_rows_and_columns_of_the_input():
    # Channel blocks from an NCHW input: the channels and columns of a tile are not adjacent
    # dimensions of the input, and the image row between them is a loop outside the tile
    C, H, W, B = 16, 3, 12, 8  # blocks of 8 channels, tiles of 8 channels by 6 columns
    X = te.placeholder((C, H, W), name="X")
    out = te.compute((C // B, H, W, B), lambda c, y, x, b: X[c * B + b, y, x], name="out")
    s = te.create_schedule(out.op)
    c, y, x, b = s[out].op.axis
    xo, xi = s[out].split(x, factor=6)
    s[out].reorder(y, c, xo, xi, b)
    s[out].tensorize(xi, te.transpose_intrin(B, 6, in_ndim=3))
    f = compiler.build(s, [X, out], target=CPUS[2].target)
    assert "autotune_transpose" in str(compiler.lower(s, [X, out]))
    x_in = random_array(np.random.default_rng(3), (C, H, W), "float32")
    got = poisoned((C // B, H, W, B), "float32")
    f(x_in, got)
    assert_written(got, x_in.reshape(C // B, B, H, W).transpose(0, 2, 3, 1))


def test_tile_indices_are_matched_within_the_loops_outside():
    # channel f of blocks of 20 is (f.outer * 4 + f.inner) % 20 within its block: only the outer
    # loop's range shows that this is f.outer * 4 + f.inner
    F, W = 40, 8
    Y = te.placeholder((F // 20, W, 20), name="Y")
    out = te.compute((F, W), lambda f, x: Y[f // 20, x, f % 20], name="out")
    s = te.create_schedule(out.op)
    f, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=20)
    fio, fii = s[out].split(fi, factor=4)
    s[out].reorder(fo, fio, fii, x)
    s[out].tensorize(fii, te.transpose_intrin(8, 4))
    fn = compiler.build(s, [Y, out], target=CPUS[2].target)
    y_in = random_array(np.random.default_rng(4), (F // 20, W, 20), "float32")
    got = poisoned((F, W), "float32")
    fn(y_in, got)
    assert_written(got, y_in.transpose(0, 2, 1).reshape(F, W))


@pytest.mark.parametrize("rows, cols, ndims, message", [
    (1, 16, {}, "rows must be an int from 2 to 64"),
    (16, 65, {}, "cols must be an int from 2 to 64"),
    (16, 16.0, {}, "cols must be an int"),
    (16, 16, {"out_ndim": 5}, "out_ndim must be 2, 3 or 4"),
    (16, 16, {"in_ndim": 1}, "in_ndim must be 2, 3 or 4"),
])
def test_bad_tiles_are_refused(rows, cols, ndims, message):
    with pytest.raises(CompilerError, match=message):
        te.transpose_intrin(rows, cols, **ndims)


def test_a_tile_of_another_shape_does_not_match():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda j, i: A[i, j], name="B")
    s = te.create_schedule(B.op)
    j, _ = s[B].op.axis
    with pytest.raises(compiler.errors.ScheduleError, match="transpose_8x16"):
        s[B].tensorize(j, te.transpose_intrin(8, 16))
        compiler.lower(s, [A, B])


def _extern_copy(make_call, dtypes=("float32", "float32")):
    """An extern stage whose body is ``make_call(out, in)``: a transpose call written by hand."""
    A = te.placeholder((16, 16), name="A", dtype=dtypes[1])
    B = te.extern((16, 16), [A], lambda ins, outs: make_call(outs[0], ins[0]), name="B", dtype=dtypes[0])
    return te.create_schedule(B.op), [A, B]


@pytest.mark.parametrize("make_call, dtypes, message", [
    (lambda o, i: transpose_call(o.access_ptr("w"), 16, i.access_ptr("r"), 16, 16, 65), None,
     "cols must be a constant from 1 to 64"),
    (lambda o, i: tir.call_extern("int32", TRANSPOSE, o.access_ptr("w"), 16, i.access_ptr("r"), 16, 16), None,
     "takes \\(dst, dst_stride, src, src_stride, rows, cols\\)"),
    (lambda o, i: tir.call_extern("int32", TRANSPOSE, o.data, 16, i.access_ptr("r"), 16, 16, 16), None,
     "dst must be a buffer's access_ptr"),
    (lambda o, i: transpose_call(o.access_ptr("w"), 16, i.access_ptr("r"), 16, 16, 16), ("float32", "int32"),
     "dst is float32, src int32"),
])
def test_a_bad_transpose_call_is_refused_when_compiled(make_call, dtypes, message):
    s, args = _extern_copy(make_call, dtypes or ("float32", "float32"))
    with pytest.raises(CodegenError, match=message):
        compiler.build(s, args, target=CPUS[2].target)
