"""``Stage.tensorize`` with ``te.decl_tensor_intrin``: loop nests replaced by tensor intrinsics.

The microkernel tests tensorize the MxNxK tile of a matmul into BLAS's ``sgemm`` called with
``call_extern`` on the tile's addresses and leading dimensions (``access_ptr`` and the bound
``strides``), as TVM reaches BLAS speed on new instructions; other intrinsics are written in
the loop IR with ``ir_builder`` (``vload``/``vstore`` on the bound, strided buffers). The
errors name the stage, the axis and what does not match.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

import llvmlite.binding as llvm
import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.errors import CodegenError, CompilerError, ScheduleError

_ROW_MAJOR, _NO_TRANS = 101, 111


@pytest.fixture(scope="module")
def sgemm():
    """The name of the BLAS ``cblas_sgemm`` that numpy ships and the dtype of its integers,
    with the library made visible to compiled code (as a user does with a BLAS of their own)."""
    here = os.path.dirname(os.path.dirname(np.__file__))
    paths = sorted(glob.glob(os.path.join(here, "numpy.libs", "*openblas*")))
    paths += [p for p in (ctypes.util.find_library(n) for n in ("openblas", "cblas")) if p]
    assert paths, "no BLAS library found next to numpy or on the system"
    lib = ctypes.CDLL(paths[0])
    llvm.load_library_permanently(paths[0])
    for name, dtype in (("scipy_cblas_sgemm64_", "int64"), ("cblas_sgemm64_", "int64"),
                        ("scipy_cblas_sgemm", "int32"), ("cblas_sgemm", "int32")):
        if hasattr(lib, name):
            return name, dtype
    raise AssertionError(f"{paths[0]} has no cblas_sgemm")


def intrin_gemm(sgemm, mt: int, nt: int, kt: int, reset: str = "none"):
    """``c[mt, nt] = sum_k a[mt, k] * b[k, nt]`` as ``sgemm`` on the bound tiles.

    ``reset``: "none" gives (body, None, update): beta=0 at the first outer reduction
    iteration, beta=1 at the others; "zeros" gives a reset that stores zeros with
    ``ir_builder`` loops and ``vstore``; "missing" gives only a body."""
    name, itype = sgemm
    a = te.placeholder((mt, kt), name="a")
    b = te.placeholder((kt, nt), name="b")
    k = te.reduce_axis((0, kt), name="k")
    c = te.compute((mt, nt), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    bufs = {t: tir.decl_buffer(t.shape, t.dtype, t.op.name.upper(), offset_factor=1,
                               strides=[te.var(f"ld{t.op.name}"), 1]) for t in (a, b, c)}

    def gemm(aa, bb, cc, beta: float):
        def i(x):
            return tir.const(x, itype) if isinstance(x, int) else x.astype(itype)

        return tir.call_extern("int32", name, tir.const(_ROW_MAJOR, "int32"), tir.const(_NO_TRANS, "int32"),
                               tir.const(_NO_TRANS, "int32"), i(mt), i(nt), i(kt), tir.const(1.0, "float32"),
                               aa.access_ptr("r"), i(aa.strides[0]), bb.access_ptr("r"), i(bb.strides[0]),
                               tir.const(beta, "float32"), cc.access_ptr("w"), i(cc.strides[0]))

    def fcompute(ins, outs):
        (aa, bb), (cc,) = ins, outs
        if reset == "missing":
            return gemm(aa, bb, cc, 0.0)
        if reset == "none":
            return gemm(aa, bb, cc, 0.0), None, gemm(aa, bb, cc, 1.0)
        ib = tir.ir_builder.create()
        with ib.for_range(0, mt, name="x") as x, ib.for_range(0, nt, name="y") as y:
            ib.emit(cc.vstore((x, y), tir.const(0.0, "float32")))
        return None, ib.get(), gemm(aa, bb, cc, 1.0)

    return te.decl_tensor_intrin(c.op, fcompute, name="gemm", binds=bufs)


def matmul(M: int, N: int, K: int):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def run_matmul(rng, s, A, B, C):
    f = compiler.build(s, [A, B, C], target="llvm")
    a, b = random_array(rng, A.shape, "float32"), random_array(rng, B.shape, "float32")
    for x in (a, b):  # the intrinsic only reads them (access_ptr "r"): read-only arrays are fine
        x.setflags(write=False)
    c = poisoned(tuple(int(d) for d in C.shape), "float32")
    f(a, b, c)
    assert_written(c, a @ b, rtol=1e-4, atol=1e-4)
    return f


@pytest.mark.parametrize("reset", ["none", "zeros"])
def test_matmul_tile_is_an_sgemm_microkernel(rng, sgemm, reset):
    A, B, C = matmul(64, 48, 80)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(k, factor=16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].tensorize(ii, intrin_gemm(sgemm, 16, 16, 16, reset))
    s[C].parallel(io)
    text = str(compiler.lower(s, [A, B, C], simple_mode=True))
    assert text.count(sgemm[0]) == (2 if reset == "none" else 1)
    assert "C[" in text if reset == "zeros" else "C[" not in text  # only the reset stores elements
    run_matmul(rng, s, A, B, C)


def test_whole_reduction_inside_the_intrinsic(rng, sgemm):
    A, B, C = matmul(32, 32, 24)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 16)
    s[C].tensorize(ii, intrin_gemm(sgemm, 8, 16, 24, "missing"))
    run_matmul(rng, s, A, B, C)


def test_reduction_split_outside_needs_an_update(sgemm):
    A, B, C = matmul(32, 32, 32)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 16, 16)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].tensorize(ii, intrin_gemm(sgemm, 16, 16, 16, "missing"))
    with pytest.raises(ScheduleError, match=r"stage 'C', axis 'i.inner'.*k.outer.*no reduce_update"):
        compiler.lower(s, [A, B, C])


def _tile_view(addr: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The float32 (rows, cols) tile at ``addr`` of a row-major array with leading dimension ``ld``."""
    flat = np.frombuffer((ctypes.c_float * ((rows - 1) * ld + cols)).from_address(addr), dtype=np.float32)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (ld * 4, 4))


@pytest.fixture
def packed_gemm():
    """A GEMM kernel registered as a packed function: ``c (+)= a @ b`` on the tiles at the addresses."""
    def gemm(c, a, b, mt, nt, kt, lda, ldb, ldc, accumulate):
        prod = _tile_view(a, mt, kt, lda) @ _tile_view(b, kt, nt, ldb)
        out = _tile_view(c, mt, nt, ldc)
        out[...] = out + prod if accumulate else prod

    compiler.register_func("test.tensorize.gemm", gemm)
    yield "test.tensorize.gemm"
    compiler.runtime.packed.remove_global_func("test.tensorize.gemm")


def test_tensorized_tile_calls_a_packed_function(rng, packed_gemm):
    """The body of an intrinsic may be a ``call_packed``; the tiles go as addresses and strides."""
    mt, nt, kt = 8, 16, 12
    a = te.placeholder((mt, kt), name="a")
    b = te.placeholder((kt, nt), name="b")
    k = te.reduce_axis((0, kt), name="k")
    c = te.compute((mt, nt), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    bufs = {t: tir.decl_buffer(t.shape, "float32", t.op.name, offset_factor=1, strides=[te.var("ld"), 1])
            for t in (a, b, c)}

    def fcompute(ins, outs):
        (aa, bb), (cc,) = ins, outs

        def call(accumulate):
            return tir.call_packed(packed_gemm, cc.access_ptr("w"), aa.access_ptr("r"), bb.access_ptr("r"),
                                   mt, nt, kt, aa.strides[0], bb.strides[0], cc.strides[0], accumulate)

        return call(False), None, call(True)

    A, B, C = matmul(32, 48, 36)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, mt, nt)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=kt)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].tensorize(ii, te.decl_tensor_intrin(c.op, fcompute, name="gemm", binds=bufs))
    run_matmul(rng, s, A, B, C)


def intrin_add_tile(rows: int, cols: int, op=lambda x, y: x + y, strided: bool = True):
    """``z = x + y`` over a (rows, cols) tile, written in the loop IR."""
    x = te.placeholder((rows, cols), name="x")
    y = te.placeholder((rows, cols), name="y")
    z = te.compute((rows, cols), lambda i, j: op(x[i, j], y[i, j]), name="z")

    def buf(t):
        strides = [te.var(f"s{t.op.name}"), 1] if strided else None
        return tir.decl_buffer(t.shape, t.dtype, t.op.name, offset_factor=1, strides=strides)

    def fcompute(ins, outs):
        (xx, yy), (zz,) = ins, outs
        ib = tir.ir_builder.create()
        with ib.for_range(0, rows, name="r") as r, ib.for_range(0, cols, name="q") as q:
            ib.emit(zz.vstore((r, q), xx.vload((r, q)) + yy.vload((r, q))))
        return ib.get()

    return te.decl_tensor_intrin(z.op, fcompute, name="add_tile", binds={x: buf(x), y: buf(y), z: buf(z)})


def add_stage(shape=(12, 20), dtype="float32"):
    X = te.placeholder(shape, name="X", dtype=dtype)
    Y = te.placeholder(shape, name="Y", dtype=dtype)
    Z = te.compute(shape, lambda i, j: X[i, j] + Y[i, j], name="Z")
    return X, Y, Z


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_elementwise_intrinsic_in_loop_ir(rng, dtype):
    X, Y, Z = add_stage(dtype=dtype)
    s = te.create_schedule(Z.op)
    io, jo, ii, ji = s[Z].tile(*Z.op.axis, 4, 5)
    x = te.placeholder((4, 5), name="x", dtype=dtype)
    y = te.placeholder((4, 5), name="y", dtype=dtype)
    z = te.compute((4, 5), lambda i, j: x[i, j] + y[i, j], name="z")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        with ib.for_range(0, 4, name="r") as r, ib.for_range(0, 5, name="q") as q:
            ib.emit(outs[0].vstore((r, q), ins[0].vload((r, q)) + ins[1].vload((r, q))))
        return ib.get()

    bufs = {t: tir.decl_buffer(t.shape, dtype, t.op.name, offset_factor=1, strides=[te.var("s"), 1])
            for t in (x, y, z)}
    s[Z].tensorize(ii, te.decl_tensor_intrin(z.op, fcompute, binds=bufs))
    f = compiler.build(s, [X, Y, Z], target="llvm")
    xa, ya = random_array(rng, (12, 20), dtype), random_array(rng, (12, 20), dtype)
    out = poisoned((12, 20), dtype)
    f(xa, ya, out)
    assert_written(out, xa + ya)


def test_leading_unit_dimensions_match_a_smaller_intrinsic(rng):
    """TVM's fuzzy matching: a (1, n) region of a 2-d stage matches a 1-d intrinsic."""
    X, Y, Z = add_stage()
    s = te.create_schedule(Z.op)
    jo, ji = s[Z].split(Z.op.axis[1], factor=10)
    x = te.placeholder((10,), name="x")
    y = te.placeholder((10,), name="y")
    z = te.compute((10,), lambda i: x[i] + y[i], name="z")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        with ib.for_range(0, 10, name="q") as q:
            ib.emit(outs[0].vstore(q, ins[0].vload(q) + ins[1].vload(q)))
        return ib.get()

    bufs = {t: tir.decl_buffer(t.shape, "float32", t.op.name, offset_factor=1) for t in (x, y, z)}
    s[Z].tensorize(ji, te.decl_tensor_intrin(z.op, fcompute, binds=bufs))
    f = compiler.build(s, [X, Y, Z], target="llvm")
    xa, ya = random_array(rng, (12, 20), "float32"), random_array(rng, (12, 20), "float32")
    out = poisoned((12, 20), "float32")
    f(xa, ya, out)
    assert_written(out, xa + ya)


# ---------------------------------------------------------------------------- mismatches


def tensorized_add(intrin, factors=(4, 5)):
    X, Y, Z = add_stage()
    s = te.create_schedule(Z.op)
    io, jo, ii, ji = s[Z].tile(*Z.op.axis, *factors)
    s[Z].tensorize(ii, intrin)
    return s, [X, Y, Z]


@pytest.mark.parametrize("intrin, factors, message", [
    (lambda: intrin_add_tile(4, 5, op=lambda a, b: a * b), (4, 5),
     r"does not compute what the intrinsic declares: the stage computes x\[i, j\] \+ y\[i, j\], "
     r"the intrinsic x\[i, j\] \* y\[i, j\]"),
    (lambda: intrin_add_tile(4, 5, op=lambda a, b: a + b * 2.0), (4, 5),
     r"the stage computes x\[i, j\] \+ y\[i, j\], the intrinsic x\[i, j\] \+ y\[i, j\] \* 2.0f"),
    (lambda: intrin_add_tile(4, 10), (4, 5), r"axis 'j' covers 5 values .*extent 10"),
    (lambda: intrin_add_tile(4, 5, strided=False), (4, 5), r"compact .*stride 20 .*strides=\[te.var"),
])
def test_mismatch_is_a_schedule_error_naming_stage_and_axis(intrin, factors, message):
    s, args = tensorized_add(intrin(), factors)
    prefix = r"stage 'Z', axis 'i.inner': tensorize with 'add_tile': .*"
    with pytest.raises(ScheduleError, match=prefix + message):
        compiler.lower(s, args)


def test_buffer_without_offset_factor_must_start_at_zero():
    x = te.placeholder((4, 5), name="x")
    y = te.placeholder((4, 5), name="y")
    z = te.compute((4, 5), lambda i, j: x[i, j] + y[i, j], name="z")
    intrin = te.decl_tensor_intrin(
        z.op, lambda ins, outs: outs[0].vstore((0, 0), ins[0].vload((0, 0))), name="add_tile",
        default_buffer_params={"strides": [te.var("s"), 1]})
    s, args = tensorized_add(intrin)
    with pytest.raises(ScheduleError, match=r"starts at offset 0, but the region starts at element .*"
                                            r"offset_factor=1"):
        compiler.lower(s, args)


def test_split_that_does_not_divide_inside_the_intrinsic_is_refused():
    s, args = tensorized_add(intrin_add_tile(5, 5), factors=(5, 5))  # 12 rows in tiles of 5
    with pytest.raises(ScheduleError, match=r"axis 'i.inner'.*splits below the axis must divide"):
        compiler.lower(s, args)


def test_tensorize_checks_its_arguments():
    X, Y, Z = add_stage()
    s = te.create_schedule(Z.op)
    i, j = Z.op.axis
    with pytest.raises(ScheduleError, match=r"stage 'Z', axis 'i': tensorize needs a tensor intrinsic"):
        s[Z].tensorize(i, "gemv")
    s[Z].tensorize(j, intrin_add_tile(1, 20))
    with pytest.raises(ScheduleError, match=r"axis 'j' is already tensorized"):
        s[Z].tensorize(i, intrin_add_tile(12, 20))
    with pytest.raises(ScheduleError, match=r"split an axis before annotating it"):
        s[Z].split(j, factor=2)
    with pytest.raises(CompilerError, match=r"op must be a te.compute"):
        te.decl_tensor_intrin(X.op, lambda ins, outs: None)
    W = te.compute((12, 20), lambda a, b: Z[a, b] * 2.0, name="W")
    with pytest.raises(CompilerError, match=r"input 'Z' is computed by 'Z'.*only read placeholders"):
        te.decl_tensor_intrin(W.op, lambda ins, outs: None)


# ---------------------------------------------------------------------------- import_llvm


_SCALE_LL = """
define i32 @scale_tile(ptr %out, ptr %in, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %body ]
  %more = icmp slt i32 %i, %n
  br i1 %more, label %body, label %done
body:
  %src = getelementptr inbounds float, ptr %in, i32 %i
  %v = load float, ptr %src
  %w = fmul float %v, 3.0
  %dst = getelementptr inbounds float, ptr %out, i32 %i
  store float %w, ptr %dst
  %next = add i32 %i, 1
  br label %loop
done:
  ret i32 0
}
"""


def scale_schedule(code=_SCALE_LL, at_tensorized_axis=False):
    A = te.placeholder((6, 8), name="A")
    B = te.compute((6, 8), lambda i, j: A[i, j] * 3.0, name="B")
    a = te.placeholder((8,), name="a")
    b = te.compute((8,), lambda j: a[j] * 3.0, name="b")
    bufs = {t: tir.decl_buffer(t.shape, "float32", t.op.name, offset_factor=1) for t in (a, b)}
    intrin = te.decl_tensor_intrin(
        b.op, lambda ins, outs: tir.call_extern("int32", "scale_tile", outs[0].access_ptr("w"),
                                                ins[0].access_ptr("r"), 8), binds=bufs, name="scale")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].tensorize(j, intrin)
    s[B].pragma(j if at_tensorized_axis else i, "import_llvm", code)
    return s, [A, B]


def test_import_llvm_links_the_kernel_an_intrinsic_calls(rng, tmp_path):
    s, args = scale_schedule()
    f = compiler.build(s, args, target="llvm")
    a = random_array(rng, (6, 8), "float32")
    out = poisoned((6, 8), "float32")
    f(a, out)
    assert_written(out, a * np.float32(3.0))
    s, args = scale_schedule(at_tensorized_axis=True)  # the import stays with the intrinsic's call
    out = poisoned((6, 8), "float32")
    compiler.build(s, args, target="llvm")(a, out)
    assert_written(out, a * np.float32(3.0))
    path = tmp_path / "scale.ll"  # a path works as well as the text
    path.write_text(_SCALE_LL)
    s, args = scale_schedule(str(path))
    out = poisoned((6, 8), "float32")
    compiler.build(s, args, target="llvm")(a, out)
    assert_written(out, a * np.float32(3.0))


def test_without_the_import_the_kernel_is_missing():
    s, args = scale_schedule()
    s[args[1]].iter_attrs[args[1].op.axis[0]].pragmas.clear()
    with pytest.raises(CodegenError, match=r"no function 'scale_tile' is loaded"):
        compiler.build(s, args, target="llvm")


def test_import_llvm_errors():
    s, args = scale_schedule("define i32 @scale_tile( this is not IR")
    with pytest.raises(CodegenError, match=r"import_llvm: cannot read the LLVM code"):
        compiler.build(s, args, target="llvm")
    s, args = scale_schedule(_SCALE_LL + _SCALE_LL.replace("@scale_tile", "@default_function"))
    with pytest.raises(CodegenError, match=r"defines 'default_function', which the generated code defines"):
        compiler.build(s, args, target="llvm")
    with pytest.raises(ScheduleError, match=r"pragma 'import_llvm' needs LLVM IR text"):
        s[args[1]].pragma(args[1].op.axis[0], "import_llvm", 3)


def test_inputs_cached_per_tile_bind_to_the_cache(rng):
    """An input copied per tile (cache_read computed at the tile loop) holds only the tile:
    the intrinsic's buffer binds to the cache, at the tile's offset there (0) and stride (5)."""
    X, Y, Z = add_stage()
    s = te.create_schedule(Z.op)
    XL = s.cache_read(X, "global", [Z])
    io, jo, ii, ji = s[Z].tile(*Z.op.axis, 4, 5)
    s[XL].compute_at(s[Z], jo)
    s[Z].tensorize(ii, intrin_add_tile(4, 5))
    text = str(compiler.lower(s, [X, Y, Z], simple_mode=True))
    assert "X.global[r * 5 + q]" in text
    f = compiler.build(s, [X, Y, Z], target="llvm")
    xa, ya = random_array(rng, (12, 20), "float32"), random_array(rng, (12, 20), "float32")
    out = poisoned((12, 20), "float32")
    f(xa, ya, out)
    assert_written(out, xa + ya)


def test_symbolic_intrinsic_size_is_bound_to_the_tile(rng):
    """An intrinsic declared over ``te.var`` sizes applies to any tile; the size is bound to it."""
    A = te.placeholder((6, 8), name="A")
    B = te.compute((6, 8), lambda i, j: A[i, j] * 3.0, name="B")
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    b = te.compute((n,), lambda j: a[j] * 3.0, name="b")
    bufs = {t: tir.decl_buffer(t.shape, "float32", t.op.name, offset_factor=1) for t in (a, b)}
    intrin = te.decl_tensor_intrin(
        b.op, lambda ins, outs: tir.call_extern("int32", "scale_tile", outs[0].access_ptr("w"),
                                                ins[0].access_ptr("r"), outs[0].shape[0]), binds=bufs)
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    jo, ji = s[B].split(j, factor=4)
    s[B].tensorize(ji, intrin)
    s[B].pragma(i, "import_llvm", _SCALE_LL)
    assert "'r'), 4)" in str(compiler.lower(s, [A, B], simple_mode=True))
    x = random_array(rng, (6, 8), "float32")
    out = poisoned((6, 8), "float32")
    compiler.build(s, [A, B], target="llvm")(x, out)
    assert_written(out, x * np.float32(3.0))


def test_ir_builder_branches_in_an_intrinsic(rng):
    """``ir_builder`` loops with ``if_scope``/``else_scope``: a ReLU tile."""
    X = te.placeholder((6, 8), name="X")
    Z = te.compute((6, 8), lambda i, j: te.max(X[i, j], tir.const(0.0, "float32")), name="Z")
    x = te.placeholder((4,), name="x")
    z = te.compute((4,), lambda j: te.max(x[j], tir.const(0.0, "float32")), name="z")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        with ib.for_range(0, 4, name="q") as q:
            with ib.if_scope(ins[0].vload(q) > 0.0):
                ib.emit(outs[0].vstore(q, ins[0].vload(q)))
            with ib.else_scope():
                ib.emit(outs[0].vstore(q, tir.const(0.0, "float32")))
        return ib.get()

    bufs = {t: tir.decl_buffer(t.shape, "float32", t.op.name, offset_factor=1) for t in (x, z)}
    s = te.create_schedule(Z.op)
    jo, ji = s[Z].split(Z.op.axis[1], factor=4)
    s[Z].tensorize(ji, te.decl_tensor_intrin(z.op, fcompute, binds=bufs))
    xa = random_array(rng, (6, 8), "float32")
    out = poisoned((6, 8), "float32")
    compiler.build(s, [X, Z], target="llvm")(xa, out)
    assert_written(out, np.maximum(xa, 0))
    with pytest.raises(CompilerError, match="else_scope must directly follow an if_scope"):
        with tir.ir_builder.create().else_scope():
            pass
