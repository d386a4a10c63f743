"""BLAS matrix products as ``te.extern`` operations (TVM's ``tvm.contrib.cblas``).

The product runs in the BLAS that numpy ships (OpenBLAS, found next to numpy, or a
system ``libopenblas``/``libcblas``), called through ctypes from the packed function
registered as ``"compiler.contrib.cblas.matmul"`` (and under TVM's name,
``"tvm.contrib.cblas.matmul"``, so that ported code finds it):
``matmul(A, B, C, transa, transb)`` sets ``C = op(A) @ op(B)`` for float32 (sgemm)
and float64 (dgemm) matrices.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os

import numpy as np

from ..errors import CompilerError
from ..runtime.packed import register_func
from ..te.operation import extern
from ..tir.packed import call_packed

__all__ = ["matmul", "FUNC_NAME"]

FUNC_NAME = "compiler.contrib.cblas.matmul"
_TVM_NAME = "tvm.contrib.cblas.matmul"
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def matmul(lhs, rhs, transa: bool = False, transb: bool = False, **kwargs):
    """``op(lhs) @ op(rhs)`` computed by BLAS, where ``op`` transposes when asked.

    ``kwargs`` go to :func:`compiler.te.extern` (``name``, ``tag``, ...)."""
    if lhs.ndim != 2 or rhs.ndim != 2:
        raise CompilerError(f"cblas.matmul needs two matrices, got {lhs.ndim} and {rhs.ndim} dimensions")
    n = lhs.shape[1] if transa else lhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    kwargs.setdefault("name", "C")
    return extern((n, m), [lhs, rhs],
                  lambda ins, outs: call_packed(FUNC_NAME, ins[0], ins[1], outs[0], transa, transb),
                  **kwargs)


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    here = os.path.dirname(os.path.dirname(np.__file__))
    candidates = sorted(glob.glob(os.path.join(here, "numpy.libs", "*openblas*")))
    candidates += sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*")))
    candidates += [p for p in (ctypes.util.find_library(n) for n in ("openblas", "cblas", "blas")) if p]
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise CompilerError("cblas.matmul: found no BLAS library (looked next to numpy and for "
                        "libopenblas/libcblas/libblas)")


@functools.lru_cache(maxsize=2)
def _gemm(prefix: str):
    """The ``cblas_?gemm`` of the library and the ctypes type of its integers."""
    lib = _library()
    for name, int_type in ((f"scipy_cblas_{prefix}gemm64_", ctypes.c_int64),
                           (f"cblas_{prefix}gemm64_", ctypes.c_int64),
                           (f"scipy_cblas_{prefix}gemm", ctypes.c_int32),
                           (f"cblas_{prefix}gemm", ctypes.c_int32)):
        func = getattr(lib, name, None)
        if func is not None:
            real = ctypes.c_float if prefix == "s" else ctypes.c_double
            func.restype = None
            func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_type, int_type, int_type, real,
                             ctypes.c_void_p, int_type, ctypes.c_void_p, int_type, real,
                             ctypes.c_void_p, int_type]
            return func
    raise CompilerError(f"cblas.matmul: the BLAS library {lib._name} has no cblas_{prefix}gemm")


def _matmul(a, b, c, transa=False, transb=False) -> None:
    """``c = op(a) @ op(b)`` in BLAS; ``a``, ``b``, ``c`` are CPU arrays (NDArray views)."""
    a, b, c = (x.host_array if hasattr(x, "host_array") else np.asarray(x) for x in (a, b, c))
    if not (a.dtype == b.dtype == c.dtype) or a.dtype.name not in ("float32", "float64"):
        raise CompilerError(f"cblas.matmul: needs float32 or float64 matrices of one dtype, got "
                            f"{a.dtype}, {b.dtype} and {c.dtype}")
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        raise CompilerError("cblas.matmul: needs matrices (2 dimensions)")
    if not all(x.flags.c_contiguous for x in (a, b, c)):
        raise CompilerError("cblas.matmul: needs C-contiguous matrices")
    m, k = (a.shape[1], a.shape[0]) if transa else a.shape
    k2, n = (b.shape[1], b.shape[0]) if transb else b.shape
    if k != k2 or c.shape != (m, n):
        raise CompilerError(f"cblas.matmul: shapes {a.shape}{'^T' * transa} @ {b.shape}{'^T' * transb} "
                            f"do not give {c.shape}")
    if m == 0 or n == 0:
        return
    if k == 0:
        c[...] = 0
        return
    gemm = _gemm("s" if a.dtype == np.float32 else "d")
    gemm(_ROW_MAJOR, _TRANS if transa else _NO_TRANS, _TRANS if transb else _NO_TRANS, m, n, k, 1.0,
         a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], 0.0, c.ctypes.data, c.shape[1])


register_func(FUNC_NAME, _matmul, override=True)
register_func(_TVM_NAME, _matmul, override=True)
