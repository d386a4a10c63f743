"""``dense`` and ``matmul`` (TVM's ``topi.nn.dense`` and ``topi.nn.matmul``)."""

from __future__ import annotations

from ... import te
from ..utils import get_const_tuple
from .utils import check_tensor

__all__ = ["dense", "matmul"]


def _bias_of(bias, n, what: str):
    if bias is None:
        return None
    (size,) = check_tensor(bias, 1, f"{what}: bias", "(out_dim,)")
    if isinstance(size, int) and isinstance(n, int) and size != n:
        raise ValueError(f"{what}: the bias has {size} elements but the output has {n} columns")
    return bias


def _same_k(ka, kb, what: str) -> None:
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise ValueError(f"{what}: the reduction lengths differ ({ka} and {kb})")


def matmul(tensor_a, tensor_b, bias=None, out_dtype=None, transpose_a: bool = False,
           transpose_b: bool = False):
    """``op(A) @ op(B) (+ bias)``, ``op`` transposing where ``transpose_a``/``transpose_b``.

    ``A`` is ``[M, K]`` (``[K, M]`` transposed), ``B`` ``[K, N]`` (``[N, K]`` transposed),
    ``bias`` ``[N]``; the result ``[M, N]`` in ``out_dtype`` (``A``'s dtype by default).
    With a bias the product is the stage ``Output.op.input_tensors[0]``.
    """
    out_dtype = tensor_a.dtype if out_dtype is None else out_dtype
    a0, a1 = check_tensor(tensor_a, 2, "matmul: tensor_a", "[M, K] or [K, M]")
    b0, b1 = check_tensor(tensor_b, 2, "matmul: tensor_b", "[K, N] or [N, K]")
    (K, M) = (a0, a1) if transpose_a else (a1, a0)
    (N, KB) = (b0, b1) if transpose_b else (b1, b0)
    _same_k(K, KB, "matmul")
    bias = _bias_of(bias, N, "matmul")
    k = te.reduce_axis((0, K), name="k")

    def a_at(i):
        return tensor_a[k, i] if transpose_a else tensor_a[i, k]

    def b_at(j):
        return tensor_b[j, k] if transpose_b else tensor_b[k, j]

    name = f"T_matmul_{'T' if transpose_a else 'N'}{'T' if transpose_b else 'N'}"
    out = te.compute((M, N), lambda i, j: te.sum(a_at(i).astype(out_dtype) * b_at(j).astype(out_dtype),
                                                  axis=k), name=name, tag="matmul")
    return _add_bias(out, bias, out_dtype)


def _add_bias(out, bias, out_dtype):
    if bias is None:
        return out
    return te.compute(get_const_tuple(out.shape), lambda i, j: out[i, j] + bias[j].astype(out_dtype),
                      name=f"{out.op.name}_bias", tag="broadcast")


def dense(data, weight, bias=None, out_dtype=None):
    """``data @ weight.T (+ bias)``: ``data`` ``[batch, in_dim]``, ``weight``
    ``[out_dim, in_dim]``, ``bias`` ``[out_dim]``; the result ``[batch, out_dim]``.

    With a bias the product is the stage ``Output.op.input_tensors[0]``.
    """
    out_dtype = data.dtype if out_dtype is None else out_dtype
    batch, in_dim = check_tensor(data, 2, "dense: data", "[batch, in_dim]")
    out_dim, w_in = check_tensor(weight, 2, "dense: weight", "[out_dim, in_dim]")
    _same_k(in_dim, w_in, "dense")
    bias = _bias_of(bias, out_dim, "dense")
    k = te.reduce_axis((0, in_dim), name="k")
    out = te.compute((batch, out_dim), lambda i, j: te.sum(
        data[i, k].astype(out_dtype) * weight[j, k].astype(out_dtype), axis=k), name="T_dense", tag="dense")
    return _add_bias(out, bias, out_dtype)
