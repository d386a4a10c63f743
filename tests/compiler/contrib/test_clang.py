"""contrib.clang.create_llvm: C source compiled to LLVM IR, linked into a kernel by the
``import_llvm`` pragma (TVM's tensorize tutorial path)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import poisoned, random_array

import compiler
from compiler import te, tir
from compiler.contrib import clang
from compiler.errors import CompilerError

needs_clang = pytest.mark.skipif(not clang.find_clang(required=False),
                                 reason="clang is not installed (Debian package 'clang')")

_AXPY_C = """
extern "C" int axpy_row(float *out, const float *x, const float *y, float alpha, int n) {
  for (int i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];
  return 0;
}
"""


def _axpy_intrin(n: int, alpha: float):
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    out = te.compute((n,), lambda i: alpha * x[i] + y[i], name="out")
    binds = {t: tir.decl_buffer(t.shape, t.dtype, name=t.op.name, offset_factor=1) for t in (x, y, out)}

    def body(ins, outs):
        ib = tir.ir_builder.create()
        ib.emit(tir.call_extern("int32", "axpy_row", outs[0].access_ptr("w"), ins[0].access_ptr("r"),
                                ins[1].access_ptr("r"), alpha, n))
        return ib.get()

    return te.decl_tensor_intrin(out.op, body, binds=binds)


@needs_clang
def test_c_compiled_by_clang_runs_inside_a_tensorized_kernel(rng):
    rows, cols, alpha = 6, 16, 1.5
    X = te.placeholder((rows, cols), name="X")
    Y = te.placeholder((rows, cols), name="Y")
    Z = te.compute((rows, cols), lambda i, j: alpha * X[i, j] + Y[i, j], name="Z")
    s = te.create_schedule(Z.op)
    i, j = Z.op.axis
    s[Z].tensorize(j, _axpy_intrin(cols, alpha))
    ll_code = clang.create_llvm(_AXPY_C, options=["-O2"])
    assert "define" in ll_code and "axpy_row" in ll_code
    s[Z].pragma(i, "import_llvm", ll_code)
    f = compiler.build(s, [X, Y, Z], target="llvm")
    x, y = random_array(rng, (rows, cols), "float32"), random_array(rng, (rows, cols), "float32")
    z = poisoned((rows, cols), "float32")
    f(x, y, z)
    np.testing.assert_allclose(z, alpha * x + y, rtol=1e-6)


@needs_clang
def test_a_source_path_and_an_output_file(tmp_path):
    src = tmp_path / "axpy.cc"
    src.write_text(_AXPY_C)
    out = tmp_path / "axpy.ll"
    text = clang.create_llvm([str(src)], output=str(out))
    assert out.read_text() == text and "axpy_row" in text


@needs_clang
def test_a_compile_error_carries_clangs_message():
    with pytest.raises(CompilerError, match="(?s)clang failed.*undeclared identifier .undeclared_name."):
        clang.create_llvm('extern "C" int f() { return undeclared_name; }')


def test_without_clang_the_error_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", os.fspath(tmp_path))
    assert clang.find_clang(required=False) == []
    with pytest.raises(CompilerError, match=r"apt-get install clang"):
        clang.create_llvm(_AXPY_C)
