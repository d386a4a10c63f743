"""``pad``: a tensor with a border of constant values (TVM's ``topi.nn.pad``)."""

from __future__ import annotations

from ... import te
from ...arith import simplify
from ..utils import get_const_int

__all__ = ["pad"]


def _widths(widths, ndim: int, what: str) -> list:
    if not isinstance(widths, (tuple, list)) or len(widths) != ndim:
        raise ValueError(f"pad: {what} must list one width per dimension ({ndim}), got {widths!r}")
    out = []
    for w in widths:
        try:
            value = get_const_int(w)
        except (ValueError, TypeError):
            out.append(w)  # a symbolic width
            continue
        if value < 0:
            raise ValueError(f"pad: {what} must not be negative, got {widths!r}")
        out.append(value)
    return out


def _is_zero(w) -> bool:
    return isinstance(w, int) and w == 0


def pad(data, pad_before, pad_after=None, pad_value=0.0, name: str = "PadInput", attrs=None):
    """``data`` with ``pad_before[i]`` elements of ``pad_value`` before and ``pad_after[i]``
    after it on each axis ``i`` (``pad_after`` defaults to ``pad_before``).

    As in TVM the result is always a new stage, even without any padding, so that a
    schedule can rely on it (and inline it).
    """
    ndim = len(data.shape)
    before = _widths(pad_before, ndim, "pad_before")
    after = _widths(pad_after if pad_after is not None else pad_before, ndim, "pad_after")
    shape = tuple(simplify(data.shape[i] + before[i] + after[i]) for i in range(ndim))
    fill = pad_value.astype(data.dtype) if hasattr(pad_value, "astype") else te.const(pad_value, data.dtype)

    def body(*idx):
        src, inside = [], []
        for i in range(ndim):
            if _is_zero(before[i]) and _is_zero(after[i]):
                src.append(idx[i])
                continue
            src.append(idx[i] - before[i])
            inside += [idx[i] >= before[i], idx[i] < data.shape[i] + before[i]]
        if not inside:
            return data[tuple(src)]
        return te.if_then_else(te.all(*inside), data[tuple(src)], fill)

    return te.compute(shape, body, name=name, tag="injective,pad", attrs=attrs)
