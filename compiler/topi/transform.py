"""Operators that pick or place elements by index, under TVM's ``topi`` names: ``take``, ``gather``,
``trilu``, ``one_hot``, ``gather_nd``, ``scatter_elements`` and ``scatter_nd``.

Index tensors hold int32 or int64. An index read from a tensor follows ``take``'s rule: a negative
one counts from the end of its axis, others out of range clip to the axis, so that the generated
code never reads or writes outside a buffer whatever the indices hold (``one_hot`` reads no
data through its indices: there an index out of range gives a row of ``off_value``).

The scatters are written as pure tensor expressions: each output element is a reduction over
the updates that may land on it, keeping those whose index hits it. That costs O(outputs x
updates) work (O(outputs x the updates' scattered axis) for ``scatter_elements``), not the
O(outputs + updates) of a sequential scatter, but it needs no atomic writes and fits every
schedule.
"""

from __future__ import annotations

import math

from .. import te
from ..dtypes import check
from .utils import get_const_tuple

__all__ = ["take", "gather", "trilu", "one_hot", "gather_nd", "scatter_elements", "scatter_nd",
           "SCATTER_REDUCTIONS"]

#: How a scatter combines an update with what is there: ``"update"`` replaces it (where several
#: updates hit one element, the last one in the updates' row-major order wins), the others
#: combine the element with every update that hits it.
SCATTER_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _shape(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in get_const_tuple(t.shape))


def _within(j, n: int):
    """Index expression ``j`` on an axis of ``n`` elements by ``take``'s rule (see the module)."""
    size, zero, one = (te.const(v, j.dtype) for v in (n, 0, 1))
    j = te.if_then_else(j < zero, j + size, j)
    return te.min(te.max(j, zero), size - one).astype("int32")


def _check_indices(op: str, indices: te.Tensor) -> None:
    if indices.dtype not in ("int32", "int64"):
        raise ValueError(f"{op}: indices must be int32 or int64, got {indices.dtype}")


def _scalar(value, dtype: str):
    """``value`` (a number or a scalar expression) as an expression of ``dtype``."""
    if hasattr(value, "astype"):
        return value.astype(dtype)
    return te.const(value, dtype)


# ---------------------------------------------------------------------------- take, gather


def take(a: te.Tensor, indices: te.Tensor, axis: int = 0) -> te.Tensor:
    """``numpy.take(a, indices, axis)``: the indices' shape replaces ``axis`` of ``a``'s."""
    _check_indices("take", indices)
    shape, ishape = _shape(a), _shape(indices)
    axis %= len(shape)
    out = shape[:axis] + ishape + shape[axis + 1:]

    def body(*i):
        j = _within(indices[i[axis:axis + len(ishape)]], shape[axis])
        return a[(*i[:axis], j, *i[axis + len(ishape):])]

    return te.compute(out, body, name="T_take", tag="injective")


def gather(data: te.Tensor, axis: int, indices: te.Tensor) -> te.Tensor:
    """Each index picks along ``axis`` at its own position (ONNX's GatherElements): output
    ``(.., i_axis, ..)`` is ``data[.., indices[.., i_axis, ..], ..]``, of the indices' shape."""
    _check_indices("gather", indices)
    shape = _shape(data)
    axis %= len(shape)

    def body(*i):
        return data[(*i[:axis], _within(indices[i], shape[axis]), *i[axis + 1:])]

    return te.compute(_shape(indices), body, name="T_gather", tag="injective")


# ---------------------------------------------------------------------------- trilu


def trilu(data: te.Tensor, k: int = 0, upper: bool = True) -> te.Tensor:
    """The upper (``upper``) or lower triangle of each matrix in the last two axes of ``data``,
    zeros elsewhere: element ``(i, j)`` is kept where ``j - i >= k`` (upper) or ``j - i <= k``
    (lower)."""
    if len(data.shape) < 2:
        raise ValueError(f"trilu: data must have at least 2 dimensions, got shape {_shape(data)}")
    zero = te.const(0, data.dtype)

    def body(*i):
        diagonal = i[-1] - i[-2]
        keep = diagonal >= k if upper else diagonal <= k
        return te.if_then_else(keep, data[i], zero)

    return te.compute(data.shape, body, name="T_trilu", tag="injective")


# ---------------------------------------------------------------------------- one_hot


def one_hot(indices: te.Tensor, on_value, off_value, depth: int, axis: int = -1,
            dtype: str | None = None) -> te.Tensor:
    """``on_value`` at each index's position along a new axis ``axis`` of ``depth`` elements,
    ``off_value`` elsewhere (TVM's ``topi.one_hot``).

    ``on_value`` and ``off_value`` are numbers or scalar expressions (a 0-d tensor's element),
    cast to ``dtype`` (default: ``on_value``'s dtype, float32 for a number). A negative index
    counts from the end (ONNX OneHot's reading; TVM's own leaves it off); one outside
    ``[-depth, depth)`` gives a row of ``off_value``.
    """
    _check_indices("one_hot", indices)
    ishape = _shape(indices)
    rank = len(ishape) + 1
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"one_hot: depth must be a positive int, got {depth!r}")
    if not -rank <= axis < rank:
        raise ValueError(f"one_hot: axis {axis} is out of range for {rank} output dimensions")
    axis %= rank
    dtype = check(dtype or getattr(on_value, "dtype", "float32"))
    on, off = _scalar(on_value, dtype), _scalar(off_value, dtype)

    def body(*i):
        j = indices[i[:axis] + i[axis + 1:]]
        j = te.if_then_else(j < te.const(0, j.dtype), j + te.const(depth, j.dtype), j)
        return te.if_then_else(j == i[axis].astype(j.dtype), on, off)

    return te.compute((*ishape[:axis], depth, *ishape[axis:]), body, name="T_one_hot", tag="injective")


# ---------------------------------------------------------------------------- gather_nd


def gather_nd(a: te.Tensor, indices: te.Tensor, batch_dims: int = 0) -> te.Tensor:
    """Slices of ``a`` picked by index tuples (TVM's ``topi.gather_nd``).

    ``indices`` has shape ``(M, Y_0, ..., Y_{K-1})``: each column ``indices[:, y]`` indexes the
    ``M`` axes of ``a`` after its first ``batch_dims``, which run along ``Y_0 .. Y_{batch_dims-1}``.
    The output has shape ``(Y_0, ..., Y_{K-1}, X_{batch_dims+M}, ..., X_{N-1})`` for ``a`` of shape
    ``(X_0, ..., X_{N-1})``::

        out[y, x] = a[y_0, ..., y_{batch_dims-1}, indices[0, y], ..., indices[M-1, y], x]
    """
    _check_indices("gather_nd", indices)
    dshape, ishape = _shape(a), _shape(indices)
    m, ys, b = (ishape[0], ishape[1:], batch_dims) if ishape else (0, (), batch_dims)
    if m < 1 or b < 0 or b + m > len(dshape) or len(ys) < b or ys[:b] != dshape[:b]:
        raise ValueError(f"gather_nd: indices {ishape} with batch_dims={batch_dims} do not index data "
                         f"{dshape}: they need shape (M, *data.shape[:batch_dims], ...), "
                         f"1 <= M <= {len(dshape) - b}")

    def body(*i):
        y, x = i[:len(ys)], i[len(ys):]
        picks = [_within(indices[(k, *y)], dshape[b + k]) for k in range(m)]
        return a[(*y[:b], *picks, *x)]

    return te.compute((*ys, *dshape[b + m:]), body, name="T_gather_nd", tag="injective")


# ---------------------------------------------------------------------------- scatters


def _keep_later(x, y):
    later = x[0] > y[0]
    return te.if_then_else(later, x[0], y[0]), te.if_then_else(later, x[1], y[1])


# (position, value) pairs reduced to the pair of the largest position: "the last update wins"
# whatever order a schedule combines them in.
_last = te.comm_reducer(_keep_later, lambda ti, tv: (te.const(-1, ti), te.const(0, tv)), name="last")
_prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")


def _scattered(reduction: str, position, value, hit, current, axes):
    """The reduction of the updates ``value`` (at ``position`` in the updates' row-major order)
    over ``axes`` where ``hit`` holds, starting from the element's ``current`` value. For
    ``"update"``, a pair: the winning position and value (see :func:`_value`)."""
    if reduction == "update":
        return _last((position, value), axis=axes, where=hit, init=(te.const(-1, position.dtype), current))
    reducer = {"add": te.sum, "mul": _prod, "min": te.min, "max": te.max}[reduction]
    return reducer(value, axis=axes, where=hit, init=current)


def _value(out) -> te.Tensor:
    """The scattered values of a scatter's ``te.compute``: the second of the (position, value)
    outputs of ``"update"``."""
    return out[1] if isinstance(out, (list, tuple)) else out


def _combined(reduction: str, current, value):
    """``current`` with one update ``value`` applied."""
    if reduction == "update":
        return value
    return {"add": lambda: current + value, "mul": lambda: current * value,
            "min": lambda: te.min(current, value), "max": lambda: te.max(current, value)}[reduction]()


def _check_scatter(op: str, data: te.Tensor, indices: te.Tensor, updates: te.Tensor, reduction: str) -> None:
    _check_indices(op, indices)
    if reduction not in SCATTER_REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(SCATTER_REDUCTIONS)}, got {reduction!r}")
    if updates.dtype != data.dtype:
        raise ValueError(f"{op}: updates ({updates.dtype}) must have the data's dtype ({data.dtype})")


def _copy(data: te.Tensor, name: str) -> te.Tensor:
    return te.compute(data.shape, lambda *i: data[i], name=name, tag="injective")


def scatter_elements(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, axis: int = 0,
                     reduction: str = "update") -> te.Tensor:
    """``data`` with each ``updates[u]`` applied at ``u`` with its coordinate on ``axis``
    replaced by ``indices[u]`` (TVM's ``topi.scatter_elements``, ONNX ScatterElements).

    ``indices`` and ``updates`` share a shape of ``data``'s rank, no longer than ``data`` off
    ``axis``; ``reduction`` is one of :data:`SCATTER_REDUCTIONS`. Each output element reduces
    over the updates' ``axis`` (O(outputs x updates.shape[axis]) work).
    """
    op = "scatter_elements"
    _check_scatter(op, data, indices, updates, reduction)
    dshape, ushape = _shape(data), _shape(indices)
    rank = len(dshape)
    if not -rank <= axis < rank:
        raise ValueError(f"{op}: axis {axis} is out of range for {rank} dimensions")
    axis %= rank
    if _shape(updates) != ushape or len(ushape) != rank or any(
            u > d for k, (u, d) in enumerate(zip(ushape, dshape)) if k != axis):
        raise ValueError(f"{op}: indices {ushape} and updates {_shape(updates)} must share one shape of the "
                         f"data's rank, within the data {dshape} off axis {axis}")
    if 0 in ushape:
        return _copy(data, "T_scatter_elements")
    short = [k for k in range(rank) if k != axis and ushape[k] < dshape[k]]  # off-axis rows no update reaches

    def body(*i):
        r = te.reduce_axis((0, ushape[axis]), name="r")
        # the update that may land on i from row r; clamped so that the read stays in bounds
        u = tuple(r if k == axis else te.min(i[k], ushape[k] - 1) if k in short else i[k]
                  for k in range(rank))
        hit = te.all(*(i[k] < ushape[k] for k in short), _within(indices[u], dshape[axis]) == i[axis])
        return _scattered(reduction, r.var.astype("int32"), updates[u], hit, data[i], r)

    return _value(te.compute(dshape, body, name="T_scatter_elements", tag="scatter_elements"))


def scatter_nd(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, mode: str = "update") -> te.Tensor:
    """``data`` with slices of ``updates`` applied at index tuples (TVM's ``topi.scatter_nd``).

    ``indices`` has shape ``(M, Y_0, ..., Y_{K-1})`` and ``updates`` ``(Y_0, ..., Y_{K-1}, X_M, ...,
    X_{N-1})`` for ``data`` of shape ``(X_0, ..., X_{N-1})``::

        out[indices[0, y], ..., indices[M-1, y], x] = f(out[...], updates[y, x])

    where ``f`` is ``mode``, one of :data:`SCATTER_REDUCTIONS`. Each output element reduces over
    every ``y`` (O(outputs x prod(Y)) work).
    """
    op = "scatter_nd"
    _check_scatter(op, data, indices, updates, mode)
    dshape, ishape, ushape = _shape(data), _shape(indices), _shape(updates)
    m, ys = (ishape[0], ishape[1:]) if ishape else (0, ())
    if not 1 <= m <= len(dshape) or ushape != (*ys, *dshape[m:]):
        raise ValueError(f"{op}: indices {ishape} and updates {ushape} do not fit data {dshape}: they "
                         f"need shapes (M, *Y) and (*Y, *data.shape[M:]), 1 <= M <= {len(dshape)}")
    if 0 in ys:
        return _copy(data, "T_scatter_nd")

    def hits(i, y):
        return te.all(*(_within(indices[(k, *y)], dshape[k]) == i[k] for k in range(m)))

    if not ys:  # one slice of updates: no reduction
        def body(*i):
            return te.if_then_else(hits(i, ()), _combined(mode, data[i], updates[i[m:]]), data[i])
    else:
        strides = [math.prod(ys[j + 1:]) for j in range(len(ys))]

        def body(*i):
            y = [te.reduce_axis((0, n), name=f"y{j}") for j, n in enumerate(ys)]
            position = sum(v.var.astype("int32") * s for v, s in zip(y, strides))
            return _scattered(mode, position, updates[(*y, *i[m:])], hits(i, y), data[i], y)

    return _value(te.compute(dshape, body, name="T_scatter_nd", tag="scatter_nd"))
