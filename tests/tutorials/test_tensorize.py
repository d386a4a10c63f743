"""TVM's ``tensorize`` tutorial (v0.8-v0.12), step by step, with TVM's names mapped to ours:

    tvm.te, tvm.tir, tvm.lower, tvm.build -> compiler.te, compiler.tir, compiler.lower, compiler.build
    tvm.tir.ir_builder, tvm.tir.call_extern -> compiler.tir.ir_builder, compiler.tir.call_extern
    tvm.device, tvm.nd.array              -> compiler.device, compiler.nd.array
    tvm.topi.utils.get_const_tuple        -> compiler.topi.utils.get_const_tuple
    tvm.testing.assert_allclose           -> numpy.testing.assert_allclose

The tutorial compiles its C ``gemv_update``/``gemv_reset`` to LLVM IR with clang
(``compiler.contrib.clang.create_llvm``) and links them in with ``s[C].pragma(x,
"import_llvm", ll_code)``; so does this test where clang is installed (CI installs it). On a
machine without clang, ``gemv_impl`` returns the LLVM IR of those C functions written by
hand (the same loops); the pragma is the real one either way.

The first GEMV only accumulates (``cc[i] += ...``), so its output starts at zero as in the
tutorial; the reduce-update section resets the output itself, so there it starts poisoned
(NaN) to catch an element the intrinsics never wrote.
"""

from __future__ import annotations

import numpy as np
from helpers import poisoned

import compiler
from compiler import te
from compiler.contrib import clang, utils
from compiler.topi.utils import get_const_tuple

_GEMV_UPDATE_LL = """
define i32 @gemv_update(ptr %cc, ptr %aa, ptr %bb, i32 %m, i32 %l, i32 %stride) {
entry:
  br label %for.i
for.i:
  %i = phi i32 [ 0, %entry ], [ %i.next, %for.i.end ]
  %i.cond = icmp slt i32 %i, %m
  br i1 %i.cond, label %for.j.pre, label %exit
for.j.pre:
  %row = mul nsw i32 %i, %stride
  %c.ptr = getelementptr inbounds float, ptr %cc, i32 %i
  br label %for.j
for.j:
  %j = phi i32 [ 0, %for.j.pre ], [ %j.next, %for.j.body ]
  %j.cond = icmp slt i32 %j, %l
  br i1 %j.cond, label %for.j.body, label %for.i.end
for.j.body:
  %a.ptr = getelementptr inbounds float, ptr %aa, i32 %j
  %a = load float, ptr %a.ptr, align 4
  %b.idx = add nsw i32 %row, %j
  %b.ptr = getelementptr inbounds float, ptr %bb, i32 %b.idx
  %b = load float, ptr %b.ptr, align 4
  %prod = fmul float %a, %b
  %c = load float, ptr %c.ptr, align 4
  %sum = fadd float %c, %prod
  store float %sum, ptr %c.ptr, align 4
  %j.next = add nsw i32 %j, 1
  br label %for.j
for.i.end:
  %i.next = add nsw i32 %i, 1
  br label %for.i
exit:
  ret i32 0
}
"""

_GEMV_RESET_LL = """
define i32 @gemv_reset(ptr %cc, i32 %m) {
entry:
  br label %for.i
for.i:
  %i = phi i32 [ 0, %entry ], [ %i.next, %for.i.body ]
  %i.cond = icmp slt i32 %i, %m
  br i1 %i.cond, label %for.i.body, label %exit
for.i.body:
  %c.ptr = getelementptr inbounds float, ptr %cc, i32 %i
  store float 0.000000e+00, ptr %c.ptr, align 4
  %i.next = add nsw i32 %i, 1
  br label %for.i
exit:
  ret i32 0
}
"""

_GEMV_UPDATE_CC = """
extern "C" int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) {
      cc[i] += aa[j] * bb[i * stride + j];
    }
  }
  return 0;
}
"""

_GEMV_RESET_CC = """
extern "C" int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) {
    cc[i] = 0.0;
  }
  return 0;
}
"""


def _compiled(cc_code: str, handwritten_ll: str) -> str:
    """The tutorial's ``clang.create_llvm(cc_code, output=ll_path)``, where clang is installed."""
    if not clang.find_clang(required=False):
        return handwritten_ll
    temp = utils.tempdir()
    return clang.create_llvm(cc_code, output=temp.relpath("temp.ll"))


def test_tensorize_tutorial():
    # Define Matrix Multiplication
    N, M, L = 1024, 512, 64
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    print(compiler.lower(s, [A, B, C], simple_mode=True))

    # Schedule the Matmul
    factor = 16
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    print(compiler.lower(s, [A, B, C], simple_mode=True))

    # Define GEMV Tensorization Intrinsic
    def intrin_gemv(m, l):  # noqa: E741  (the tutorial's names)
        a = te.placeholder((l,), name="a")
        b = te.placeholder((m, l), name="b")
        k = te.reduce_axis((0, l), name="k")
        c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
        Ab = compiler.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
        Bb = compiler.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
        Cb = compiler.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

        def intrin_func(ins, outs):
            ib = compiler.tir.ir_builder.create()
            aa, bb = ins
            cc = outs[0]
            ib.emit(
                compiler.tir.call_extern(
                    "int32",
                    "gemv_update",
                    cc.access_ptr("w"),
                    aa.access_ptr("r"),
                    bb.access_ptr("r"),
                    m,
                    l,
                    bb.strides[0],
                )
            )
            return ib.get()

        return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})

    gemv = intrin_gemv(factor, L)
    s[C].tensorize(yi, gemv)
    lowered = str(compiler.lower(s, [A, B, C], simple_mode=True))
    print(lowered)
    # Beyond the tutorial: the two inner loops are gone, B's stride (L) was bound for s1.
    assert "gemv_update" in lowered and "j.inner" not in lowered and "range(64)" not in lowered
    assert "s1" not in lowered and lowered.splitlines()[-1].endswith("16, 64, 64)")

    def gemv_impl():
        return _compiled(_GEMV_UPDATE_CC, _GEMV_UPDATE_LL)

    s[C].pragma(x, "import_llvm", gemv_impl())
    print(compiler.lower(s, [A, B, C], simple_mode=True))

    func = compiler.build(s, [A, B, C], target="llvm", name="gemv")

    dtype = A.dtype
    dev = compiler.device("cpu", 0)
    a = np.random.uniform(size=get_const_tuple(A.shape)).astype(dtype)
    b = np.random.uniform(size=get_const_tuple(B.shape)).astype(dtype)
    c = compiler.nd.array(np.zeros(get_const_tuple(C.shape), dtype=dtype), dev)
    func(compiler.nd.array(a, dev), compiler.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.dot(a, b.T), rtol=1e-3)

    # Reduce-update for Tensorize
    zo, zi = s[C].split(z, factor=factor)
    s[C].reorder(x, yo, zo, yi, zi)

    def gemv_impl():  # noqa: F811  (the tutorial redefines it)
        return _compiled(_GEMV_UPDATE_CC + _GEMV_RESET_CC, _GEMV_UPDATE_LL + _GEMV_RESET_LL)

    def intrin_gemv(m, l):  # noqa: E741, F811
        a = te.placeholder((l,), name="a")
        b = te.placeholder((m, l), name="b")
        k = te.reduce_axis((0, l), name="k")
        c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
        Ab = compiler.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
        Bb = compiler.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
        Cb = compiler.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

        def intrin_func(ins, outs):
            aa, bb = ins
            cc = outs[0]

            def _body():
                ib = compiler.tir.ir_builder.create()
                ib.emit(
                    compiler.tir.call_extern(
                        "int32",
                        "gemv_update",
                        cc.access_ptr("w"),
                        aa.access_ptr("r"),
                        bb.access_ptr("r"),
                        m,
                        l,
                        bb.strides[0],
                    )
                )
                return ib.get()

            def _reduce_reset():
                ib = compiler.tir.ir_builder.create()
                ib.emit(compiler.tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
                return ib.get()

            def _reduce_update():
                return _body()

            return _body(), _reduce_reset(), _reduce_update()

        return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})

    gemv = intrin_gemv(factor, factor)
    s[C].tensorize(yi, gemv)
    s[C].pragma(yo, "import_llvm", gemv_impl())

    lowered = str(compiler.lower(s, [A, B, C], simple_mode=True))
    # Beyond the tutorial: the reset runs once per output tile, before the k.outer loop of updates.
    assert lowered.index("gemv_reset") < lowered.index("for k.outer") < lowered.rindex("gemv_update")

    func = compiler.build(s, [A, B, C], target="llvm", name="gemv")
    a = np.random.uniform(size=get_const_tuple(A.shape)).astype(dtype)
    b = np.random.uniform(size=get_const_tuple(B.shape)).astype(dtype)
    c = compiler.nd.array(poisoned(get_const_tuple(C.shape), dtype), dev)  # the tutorial: np.zeros
    func(compiler.nd.array(a, dev), compiler.nd.array(b, dev), c)
    assert np.isfinite(c.numpy()).all()
    np.testing.assert_allclose(c.numpy(), np.dot(a, b.T), rtol=1e-3)
