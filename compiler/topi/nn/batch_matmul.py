"""``batch_matmul`` (TVM's ``topi.nn.batch_matmul``)."""

from __future__ import annotations

from ... import te
from .utils import check_tensor

__all__ = ["batch_matmul"]


def batch_matmul(tensor_a, tensor_b, oshape=None, out_dtype=None, transpose_a: bool = False,
                 transpose_b: bool = True):
    """``op(A[b]) @ op(B[b])`` for every batch ``b``; by default ``B`` is transposed, as in TVM.

    ``A`` is ``[batch, M, K]`` (``[batch, K, M]`` with ``transpose_a``), ``B``
    ``[batch, N, K]`` (``[batch, K, N]`` without ``transpose_b``); a batch of 1 is
    broadcast against the other's. The result is ``[batch, M, N]`` in ``out_dtype``
    (``A``'s dtype by default); ``oshape``, if given, must be that shape.
    """
    out_dtype = tensor_a.dtype if out_dtype is None else out_dtype
    XB, a1, a2 = check_tensor(tensor_a, 3, "batch_matmul: tensor_a", "[batch, M, K]")
    YB, b1, b2 = check_tensor(tensor_b, 3, "batch_matmul: tensor_b", "[batch, N, K]")
    K, M = (a1, a2) if transpose_a else (a2, a1)
    N, KB = (b1, b2) if transpose_b else (b2, b1)
    if isinstance(K, int) and isinstance(KB, int) and K != KB:
        raise ValueError(f"batch_matmul: the reduction lengths differ ({K} and {KB})")
    if isinstance(XB, int) and isinstance(YB, int) and XB != YB and 1 not in (XB, YB):
        raise ValueError(f"batch_matmul: batch sizes {XB} and {YB} differ and neither is 1")
    batch = YB if XB == 1 else XB
    if oshape is not None and tuple(oshape) != (batch, M, N):
        raise ValueError(f"batch_matmul: oshape {tuple(oshape)} is not the result's shape {(batch, M, N)}")
    k = te.reduce_axis((0, K), name="k")

    def body(b, i, j):
        ba = 0 if XB == 1 and batch != 1 else b
        bb = 0 if YB == 1 and batch != 1 else b
        a = tensor_a[ba, k, i] if transpose_a else tensor_a[ba, i, k]
        v = tensor_b[bb, j, k] if transpose_b else tensor_b[bb, k, j]
        return te.sum(a.astype(out_dtype) * v.astype(out_dtype), axis=k)

    return te.compute((batch, M, N), body, name="T_batch_matmul", tag="batch_matmul")
