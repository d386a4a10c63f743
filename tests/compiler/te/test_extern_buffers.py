"""Buffers with strides and offsets, declared by the user (``tir.decl_buffer(..., strides=,
elem_offset=, offset_factor=)``) and bound to the actual memory of a tensor: as the
``in_buffers``/``out_buffers`` of ``te.extern`` and as the ``binds`` of a tensor intrinsic.
Symbolic strides and offsets take the values of the memory they are bound to; the bodies read
them back (``buffer.strides``, ``buffer.elem_offset``, ``access_ptr(offset=)``, ``vload``) or
pass them to Python functions (``call_packed``), which receive strided views."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.errors import LoweringError


def strided(shape, name, offset=False):
    """A buffer with a symbolic row stride (and a symbolic offset), as TVM code declares one."""
    return tir.decl_buffer(shape, "float32", name, strides=[te.var(f"{name}_s0"), 1],
                           elem_offset=te.var(f"{name}_off") if offset else None,
                           offset_factor=1 if offset else 0)


def rowwise_memcpy(rows: int, cols: int):
    """An extern body that copies row by row with ``memcpy``: the source rows lie ``strides[0]``
    elements apart, the destination is compact."""

    def fcompute(ins, outs):
        src, dst = ins[0], outs[0]
        ib = tir.ir_builder.create()
        with ib.for_range(0, rows, name="r") as r:
            ib.emit(tir.call_extern("handle", "memcpy", dst.access_ptr("w", offset=r * cols),
                                    src.access_ptr("r", offset=r * src.strides[0]),
                                    tir.const(cols * 4, "int64")))
        return ib.get()

    return fcompute


def test_extern_reads_a_column_slice_of_a_wider_array(rng):
    """The argument is a column slice (rows 9 elements apart, starting at column 2); the extern
    op's input buffer declares a symbolic stride and offset, bound to the argument's."""
    rows, cols = 4, 5
    A = te.placeholder((rows, cols), name="A")
    C = te.extern((rows, cols), [A], rowwise_memcpy(rows, cols),
                  in_buffers=[strided((rows, cols), "Ain", offset=True)], name="C")
    s = te.create_schedule(C.op)
    f = compiler.build(s, [A, C], binds={A: strided((rows, cols), "A", offset=True)})
    wide = random_array(rng, (rows + 1, 9), "float32")
    view = wide[1:, 2:2 + cols]
    c = poisoned((rows, cols), "float32")
    f(view, c)
    assert_written(c, view)


def test_extern_reads_padded_rows_of_an_intermediate(rng):
    """A stage padded by ``storage_align`` (rows 8 elements apart) read by an extern op whose
    input buffer has a symbolic stride, through ``vload``/``vstore`` and ``ir_builder`` indexing."""
    rows, cols = 3, 5
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] + 1.0, name="B")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        b, c = ins[0], ib.buffer_ptr(outs[0])
        with ib.for_range(0, rows, name="i") as i:
            with ib.for_range(0, cols, name="j") as j:
                c[i, j] = b.vload([i, j]) * 3.0 + b.strides[0].astype("float32")
        return ib.get()

    C = te.extern((rows, cols), [B], fcompute, in_buffers=[strided((rows, cols), "Bin")], name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 8, 0)
    f = compiler.build(s, [A, C])
    a = random_array(rng, (rows, cols), "float32")
    c = poisoned((rows, cols), "float32")
    f(a, c)
    assert_written(c, (a + 1) * 3 + 8)


def test_extern_writes_a_strided_output(rng):
    """The output is a column slice of a wider array; the extern op's output buffer has a
    symbolic stride, its input is compact; the columns outside the slice stay untouched."""
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), outs[0]
        with ib.for_range(0, n, name="i") as i:
            with ib.for_range(0, 4, name="j", kind="unroll") as j:
                ib.emit(c.vstore([i, j], a[i * 4 + j] - 1.0))  # a flat index into a 2-d buffer
        return ib.get()

    C = te.extern((n, 4), [A], fcompute, out_buffers=[strided((n, 4), "Cout")], name="C")
    s = te.create_schedule(C.op)
    f = compiler.build(s, [A, C], binds={C: strided((n, 4), "C")})
    a = random_array(rng, (6, 4), "float32")
    wide = poisoned((6, 7), "float32")
    f(a, wide[:, 1:5])
    assert_written(wide[:, 1:5], a - 1)
    assert np.isnan(wide[:, [0, 5, 6]]).all()


def test_extern_offset_buffer_reads_elem_offset(rng):
    """A one-dimensional input bound to an array that starts inside a larger one: the declared
    ``elem_offset`` takes the argument's, and ``access_ptr`` points at the first element."""
    A = te.placeholder((8,), name="A")

    def fcompute(ins, outs):
        a, c = ins[0], outs[0]
        ib = tir.ir_builder.create()
        ib.emit(tir.call_extern("handle", "memcpy", c.access_ptr("w"), a.access_ptr("r"),
                                tir.const(8 * 4, "int64")))
        with ib.for_range(0, 8, name="i") as i:
            ib.emit(c.vstore([i], c.vload([i]) + a.elem_offset.astype("float32") * 0.0 + 1.0))
        return ib.get()

    Ain = tir.decl_buffer((8,), "float32", "Ain", elem_offset=te.var("a_off"), offset_factor=1)
    C = te.extern((8,), [A], fcompute, in_buffers=[Ain], name="C")
    Ab = tir.decl_buffer((8,), "float32", "A", elem_offset=te.var("off"), offset_factor=1)
    f = compiler.build(te.create_schedule(C.op), [A, C], binds={A: Ab})
    whole = random_array(rng, 11, "float32")
    c = poisoned(8, "float32")
    f(whole[3:], c)
    assert_written(c, whole[3:] + 1)


def copy_body(ins, outs):
    ib = tir.ir_builder.create()
    a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    with ib.for_range(0, 20, name="i") as i:
        c[i] = a[i]
    return ib.get()


def test_compact_extern_buffer_refuses_a_strided_argument():
    A = te.placeholder((4, 5), name="A")
    C = te.extern((4, 5), [A], copy_body, name="C")  # compact in_buffers by default
    s = te.create_schedule(C.op)
    with pytest.raises(LoweringError, match=r"extern 'C': buffer .* is compact .*strides=\[te.var"):
        compiler.lower(s, [A, C], binds={A: strided((4, 5), "A")})


def test_extern_buffer_with_a_wrong_constant_stride_is_refused():
    A = te.placeholder((4, 5), name="A")
    Ain = tir.decl_buffer((4, 5), "float32", "Ain", strides=[6, 1])
    C = te.extern((4, 5), [A], copy_body, in_buffers=[Ain], name="C")
    with pytest.raises(LoweringError, match="dimension 0 has stride 6 in the declaration, 5 in the region"):
        compiler.lower(te.create_schedule(C.op), [A, C])


def test_decl_buffer_takes_tvm_defaults(rng):
    """``scope=""`` is global and ``dtype=None`` float32, as in TVM; unsupported kinds of buffer
    are refused by name."""
    buf = tir.decl_buffer((6,), None, "Ain", scope="")
    assert (buf.dtype, buf.scope) == ("float32", "global")
    A = te.placeholder((6,), name="A")
    C = te.extern((6,), [A], copy_body_1d, in_buffers=[buf], name="C")
    f = compiler.build(te.create_schedule(C.op), [A, C])
    a = random_array(rng, 6, "float32")
    c = poisoned(6, "float32")
    f(a, c)
    assert_written(c, a)
    with pytest.raises(LoweringError, match="buffer_type='auto_broadcast' is not supported"):
        tir.decl_buffer((6,), buffer_type="auto_broadcast")


def copy_body_1d(ins, outs):
    ib = tir.ir_builder.create()
    a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    with ib.for_range(0, ins[0].shape[0], name="i") as i:
        c[i] = a[i]
    return ib.get()


@pytest.fixture
def registered():
    """Register Python functions for one test: ``registered(name, f)``; removed afterwards."""
    names = []

    def register(name, f):
        compiler.register_func(name, f)
        names.append(name)

    yield register
    for name in names:
        compiler.runtime.packed.remove_global_func(name)


def test_packed_function_gets_strided_and_offset_views(rng, registered):
    """``call_packed`` of strided and offset buffers: the function sees views of exactly the
    bound elements (TVM passes DLTensors with strides and a byte offset)."""
    seen = {}

    def scale(x, y):
        seen["x"] = (x.shape, x.host_array.strides)
        y.copyfrom(x.numpy() * 2.0)

    registered("test.extern_buffers.scale", scale)
    rows, cols = 3, 4
    A = te.placeholder((rows, cols), name="A")
    C = te.extern((rows, cols), [A], lambda ins, outs: tir.call_packed("test.extern_buffers.scale", ins[0],
                                                                        outs[0]),
                  in_buffers=[strided((rows, cols), "Ain", offset=True)],
                  out_buffers=[strided((rows, cols), "Cout", offset=True)], name="C")
    s = te.create_schedule(C.op)
    f = compiler.build(s, [A, C], binds={A: strided((rows, cols), "A", offset=True),
                                         C: strided((rows, cols), "C", offset=True)})
    wide = random_array(rng, (rows + 2, 10), "float32")
    out = poisoned((rows + 1, 7), "float32")
    f(wide[2:, 3:3 + cols], out[1:, 2:2 + cols])
    assert seen["x"] == ((rows, cols), (40, 4))
    assert_written(out[1:, 2:2 + cols], wide[2:, 3:3 + cols] * 2)
    assert np.isnan(out[0]).all() and np.isnan(out[:, [0, 1, 6]]).all()


def test_tensorized_tile_as_packed_function_arguments(rng, registered):
    """A tensor intrinsic whose body hands its bound, strided tiles to a Python function."""
    def tile_add(a, b, c):
        c.copyfrom(a.numpy() + b.numpy())

    registered("test.extern_buffers.tile_add", tile_add)
    a = te.placeholder((2, 3), name="a")
    b = te.placeholder((2, 3), name="b")
    c = te.compute((2, 3), lambda i, j: a[i, j] + b[i, j], name="c")
    binds = {t: tir.decl_buffer(t.shape, t.dtype, t.op.name, offset_factor=1, strides=[te.var("s"), 1])
             for t in (a, b, c)}
    intrin = te.decl_tensor_intrin(c.op, lambda ins, outs: tir.call_packed("test.extern_buffers.tile_add",
                                                                           *ins, *outs), binds=binds)
    A = te.placeholder((6, 9), name="A")
    B = te.placeholder((6, 9), name="B")
    C = te.compute((6, 9), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(*C.op.axis, 2, 3)
    s[C].tensorize(xi, intrin)
    f = compiler.build(s, [A, B, C])
    x, y = random_array(rng, (6, 9), "float32"), random_array(rng, (6, 9), "float32")
    z = poisoned((6, 9), "float32")
    f(x, y, z)
    assert_written(z, x + y)


def test_tensorize_binds_elem_offset_and_strides_of_each_tile(registered):
    """The intrinsic's body reads ``elem_offset`` and ``strides[0]`` of its bound buffers: each
    call sees where its tile starts in the whole array and how far apart its rows are."""
    calls = []
    registered("test.extern_buffers.record", lambda *args: calls.append(args))
    a = te.placeholder((2, 2), name="a")
    c = te.compute((2, 2), lambda i, j: a[i, j] * 2.0, name="c")
    binds = {t: tir.decl_buffer(t.shape, t.dtype, t.op.name, offset_factor=2, strides=[te.var("s"), 1],
                                elem_offset=te.var(f"{t.op.name}_off")) for t in (a, c)}

    def body(ins, outs):
        (aa,), (cc,) = ins, outs
        return tir.call_packed("test.extern_buffers.record", aa.elem_offset, aa.strides[0], cc.elem_offset)

    intrin = te.decl_tensor_intrin(c.op, body, binds=binds)
    A = te.placeholder((4, 6), name="A")
    C = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(*C.op.axis, 2, 2)
    s[C].tensorize(xi, intrin)
    f = compiler.build(s, [A, C])
    f(np.zeros((4, 6), "float32"), np.zeros((4, 6), "float32"))
    want = [(r * 6 + col, 6, r * 6 + col) for r in (0, 2) for col in (0, 2, 4)]
    assert calls == want


def intrin_gemv(m: int, length: int):
    """TVM's tutorial intrinsic: ``c[i] = sum_k a[k] * b[i, k]`` over a tile of ``b`` whose
    rows lie ``s1`` apart, written with ``ir_builder`` and ``vload``/``vstore``."""
    a = te.placeholder((length,), name="a")
    b = te.placeholder((m, length), name="b")
    k = te.reduce_axis((0, length), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    binds = {a: tir.decl_buffer(a.shape, a.dtype, "A", offset_factor=1, strides=[1]),
             b: tir.decl_buffer(b.shape, b.dtype, "B", offset_factor=1, strides=[te.var("s1"), 1]),
             c: tir.decl_buffer(c.shape, c.dtype, "C", offset_factor=1, strides=[1])}

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]
        ib = tir.ir_builder.create()
        with ib.for_range(0, m, name="ii") as ii:
            acc = ib.allocate("float32", (1,), name="acc", scope="local")
            acc[0] = 0.0
            with ib.for_range(0, length, name="kk") as kk:
                acc[0] = acc[0] + aa.vload([kk]) * bb.vload([ii, kk])
            ib.emit(cc.vstore([ii], acc[0]))
        return ib.get()

    return te.decl_tensor_intrin(c.op, intrin_func, binds=binds)


@pytest.mark.parametrize("factor", [4, 8])
def test_tensorize_gemv_with_symbolic_strides_and_offset(rng, factor):
    N, M, L = 3, 16, 6
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(factor, L))
    # A whole row of B's tile at a time: the tile starts at row yo * factor, rows L apart.
    f = compiler.build(s, [A, B, C])
    a = random_array(rng, (N, L), "float32")
    b = random_array(rng, (M, L), "float32")
    c = poisoned((N, M), "float32")
    f(a, b, c)
    assert_written(c, a @ b.T, rtol=1e-5)
