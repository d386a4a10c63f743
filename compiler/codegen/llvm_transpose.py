"""Tile transposes in vector registers for the LLVM backend.

``call_extern("int32", "autotune_transpose", dst, dst_stride, src, src_stride, rows, cols)``
copies the ``rows x cols`` tile at ``src`` (row ``i`` at ``src + i * src_stride``) transposed
to ``dst`` (row ``j`` at ``dst + j * dst_stride``: ``dst[j][i] = src[i][j]``). ``dst`` and
``src`` are ``access_ptr`` of buffers of one dtype; ``rows`` and ``cols`` are constants of at
most :data:`MAX_TILE`. The code generator emits it inline, as no C library has it:

* ``rows`` vector loads of ``cols`` lanes, widened to ``n x n`` (``n`` the power of two at
  least both);
* ``log2(n)`` stages of two-source shuffles, each exchanging the off-diagonal blocks of the
  blocks of the stage before (half the matrix, then quarters, ... then single elements);
* ``cols`` vector stores of ``rows`` lanes.

A scalar copy does a load and a store per element, a vectorized one a gather lane per element;
this does ``(rows + cols) / (rows * cols)`` memory operations and ``log2(n) / n`` shuffles per
element (for 16 x 16 floats: 32 vector memory operations and 64 shuffles for 256 elements).
:func:`transpose_call` makes the call and ``compiler.te.transpose_intrin`` declares it for
``tensorize`` (both in :mod:`compiler.te.tensor_intrin`).
"""

from __future__ import annotations

from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError
from ..te.tensor_intrin import MAX_TILE, TRANSPOSE, transpose_call
from ..tir import expr as E
from ..tir.buffer import ACCESS_PTR
from .llvm_types import memory_type, shuffle_mask

# The call and its limits are declared with the intrinsic, in compiler.te (which must not
# import the code generators); they stay importable from here.
__all__ = ["TRANSPOSE", "MAX_TILE", "transpose_call", "emit_transpose"]

_I32, _I64 = ir.IntType(32), ir.IntType(64)


def _const(e, what: str) -> int:
    if not isinstance(e, E.IntImm) or not 1 <= e.value <= MAX_TILE:
        raise CodegenError(f"{TRANSPOSE}: {what} must be a constant from 1 to {MAX_TILE}, got {e}")
    return e.value


def _dtype_of(ptr, what: str) -> str:
    if not (isinstance(ptr, E.Call) and ptr.op == ACCESS_PTR):
        raise CodegenError(f"{TRANSPOSE}: {what} must be a buffer's access_ptr, got {ptr}")
    return ptr.args[0].value


def _exchange(a: ir.Value, b: ir.Value, n: int, block: int,
              builder: ir.IRBuilder) -> tuple[ir.Value, ir.Value]:
    """Rows ``a`` and ``b`` (``block`` rows apart) after a stage: in each run of ``2 * block``
    lanes, ``a`` keeps its first half and takes ``b``'s first half; ``b`` gets both second halves."""
    low, high = [], []
    for start in range(0, n, 2 * block):
        low += [start + t for t in range(block)] + [n + start + t for t in range(block)]
        high += [start + block + t for t in range(block)] + [n + start + block + t for t in range(block)]
    return (builder.shuffle_vector(a, b, shuffle_mask(low)),
            builder.shuffle_vector(a, b, shuffle_mask(high)))


def _resized(value: ir.Value, n: int, builder: ir.IRBuilder) -> ir.Value:
    """Vector ``value`` with ``n`` lanes: its own first, undefined ones after (or the first ``n``)."""
    width = value.type.count
    if n == width:
        return value
    lanes = [t if t < width else width for t in range(n)]  # lane ``width`` is the undefined operand's
    undefined = ir.Constant(value.type, ir.Undefined)
    return builder.shuffle_vector(value, undefined, shuffle_mask(lanes))


def _as_i64(value: ir.Value, builder: ir.IRBuilder) -> ir.Value:
    return builder.sext(value, _I64) if value.type.width < 64 else value


def emit_transpose(gen, e: E.Call) -> ir.Value:
    """Emit the transpose that ``e`` (a ``call_extern`` of :data:`TRANSPOSE`) asks for; 0."""
    if len(e.args) != 7:
        raise CodegenError(f"{TRANSPOSE} takes (dst, dst_stride, src, src_stride, rows, cols), "
                           f"got {len(e.args) - 1} arguments")
    _, dst, dst_stride, src, src_stride, rows, cols = e.args
    rows, cols = _const(rows, "rows"), _const(cols, "cols")
    dtype, src_dtype = _dtype_of(dst, "dst"), _dtype_of(src, "src")
    if src_dtype != dtype:
        raise CodegenError(f"{TRANSPOSE}: dst is {dtype}, src {src_dtype}")
    b = gen.b
    elem = memory_type(dtype)
    align = max(1, dtypes.bits(dtype) // 8)  # the arrays are only element-aligned
    dst_ptr, src_ptr = gen.expr(dst), gen.expr(src)
    dst_step, src_step = _as_i64(gen.expr(dst_stride), b), _as_i64(gen.expr(src_stride), b)
    n = 1
    while n < max(rows, cols):
        n *= 2
    row_t = ir.VectorType(elem, cols)
    loaded = []
    for i in range(rows):
        at = b.gep(src_ptr, [b.mul(src_step, _I64(i))]) if i else src_ptr
        load = b.load(b.bitcast(at, row_t.as_pointer()), align=align)
        loaded.append(_resized(load, n, b))
    undefined = ir.Constant(ir.VectorType(elem, n), ir.Undefined)
    matrix = loaded + [undefined] * (n - rows)
    block = n // 2
    while block:
        for i in range(n):
            if i & block:
                continue
            matrix[i], matrix[i + block] = _exchange(matrix[i], matrix[i + block], n, block, b)
        block //= 2
    out_t = ir.VectorType(elem, rows)
    for j in range(cols):
        at = b.gep(dst_ptr, [b.mul(dst_step, _I64(j))]) if j else dst_ptr
        value = matrix[j]
        if rows != n:
            value = b.shuffle_vector(value, undefined, shuffle_mask(range(rows)))
        b.store(value, b.bitcast(at, out_t.as_pointer()), align=align)
    return _I32(0)
