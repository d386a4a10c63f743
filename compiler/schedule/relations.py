"""Relations between iteration variables: how a stage's loops derive from its root axes.

A schedule primitive that reshapes a loop nest (``Stage.split``, ``Stage.fuse``) appends
one :class:`Relation` to ``Stage.relations``; everything that later reads the loop nest
(bound inference, ``Stage``'s static extents, ``rfactor``) walks the relations in order
and calls their methods, so that a new relation is one class here plus the ``Stage``
method that appends it:

- :meth:`Relation.defines`: whether an iter var is one this relation creates;
- :meth:`Relation.static_extent`: the extent of such an iter var from the schedule alone
  (``Stage._static_extent``, used to pick the dtype of a fused axis);
- :meth:`Relation.derive_extents`: bound inference's forward pass, from the extents of the
  iter vars it reads to those it creates;
- :meth:`Relation.derive_offsets`: bound inference's backward pass, from the positions of
  the iter vars it creates to those it reads, with the guards the loops need;
- :meth:`Relation.reduce_root` and :meth:`Relation.factor_reduction`: how ``rfactor`` turns
  one iter var it creates from a root reduction axis into a data-parallel axis (by default a
  relation does not support that).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..arith import Analyzer, simplify
from ..tir.expr import (
    Cast,
    FloorDiv,
    FloorMod,
    IterType,
    IterVar,
    PrimExpr,
    Range,
    Var,
    const,
    convert,
    is_const_int,
)
from ..tir.indexing import widen

if TYPE_CHECKING:  # bound.py imports schedule.py, which imports this module
    from .bound import StageBounds

__all__ = ["Relation", "Split", "Fuse", "Singleton"]


class Relation(ABC):
    """One step from a stage's root axes to its loops; see the module's docstring."""

    @abstractmethod
    def defines(self, iv: IterVar) -> bool:
        """Whether ``iv`` is one of the iter vars this relation creates."""

    @abstractmethod
    def static_extent(self, iv: IterVar, extent_of: Callable[[IterVar], PrimExpr | None]) -> PrimExpr | None:
        """The extent of ``iv`` (one this relation creates) over its whole domain, given
        ``extent_of`` for the iter vars it reads (None if unknown)."""

    @abstractmethod
    def derive_extents(self, info: StageBounds, analyzer: Analyzer, on_threads: bool) -> None:
        """Set ``info.extent`` of the iter vars this relation creates from those it reads
        (``on_threads``: some loop of the stage is bound to a GPU thread axis)."""

    @abstractmethod
    def derive_offsets(self, info: StageBounds) -> None:
        """Set ``info.offset`` of the iter vars this relation reads from those it creates,
        appending to ``info.guards`` the conditions its loops need to stay in range."""

    def reduce_root(self, roots: Sequence[IterVar]) -> IterVar | None:
        """The root reduction axis (one of ``roots``) that ``rfactor`` can factor through
        this relation, or None where it cannot."""
        return None

    def factor_reduction(self, axis: IterVar, v: Var,
                         extent_k: PrimExpr) -> tuple[PrimExpr, list[IterVar], PrimExpr, PrimExpr]:
        """For ``rfactor`` of ``axis`` (created by this relation from :meth:`reduce_root`'s
        axis, of extent ``extent_k``), which becomes the data-parallel ``v``: ``v``'s extent,
        the reduction axes that remain, the root axis' position (from its min) in terms of
        ``v`` and those, and the condition under which that position is in range."""
        raise NotImplementedError(f"{type(self).__name__} does not support rfactor")


@dataclass(eq=False)
class Split(Relation):
    """``parent`` = ``outer * factor + inner`` (``factor`` or ``nparts`` given: a positive
    int, or an integer expression such as a ``te.var`` that the function takes)."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | PrimExpr | None
    nparts: int | PrimExpr | None

    def defines(self, iv: IterVar) -> bool:
        return self.outer is iv or self.inner is iv

    def static_extent(self, iv: IterVar, extent_of: Callable[[IterVar], PrimExpr | None]) -> PrimExpr | None:
        ext = extent_of(self.parent)
        if ext is None:
            return None
        given, part = (self.factor, self.inner) if self.factor is not None else (self.nparts, self.outer)
        if part is iv:
            return convert(given)
        return simplify((ext + (given - 1)) // given)

    def derive_extents(self, info: StageBounds, analyzer: Analyzer, on_threads: bool) -> None:
        ext = info.extent[self.parent]
        if self.factor is not None and not isinstance(self.factor, int):  # a symbolic factor
            f = _as_dtype(self.factor, ext.dtype)
            info.extent[self.inner] = f
            info.extent[self.outer] = _ceil_div(ext, f, analyzer)
        elif self.factor is not None:
            f = self.factor
            if is_const_int(ext) and f >= ext.value and not on_threads:
                # One outer iteration: the inner loop runs over the parent's range alone,
                # with no guard and no iterations past its end. (Loops bound to GPU
                # threads keep the factor: every stage of a kernel binds one extent.)
                f = ext.value
            info.extent[self.inner] = const(f, ext.dtype)
            info.extent[self.outer] = _ceil_div(ext, f, analyzer)
        else:
            # Over a symbolic extent the inner extent is symbolic too: ceil(extent / nparts).
            info.extent[self.outer] = _as_dtype(self.nparts, ext.dtype)
            f = _ceil_div(ext, self.nparts, analyzer)
            info.extent[self.inner] = f
            if is_const_int(f):
                f = f.value
        info.factor[self] = f

    def derive_offsets(self, info: StageBounds) -> None:
        f = info.factor[self]
        inner = info.offset[self.inner]
        f_typed = f if isinstance(f, int) else _as_dtype(f, inner.dtype)
        info.offset[self.parent] = info.offset[self.outer] * f_typed + inner
        ext = info.extent[self.parent]
        # The loops cover outer * inner iterations: with nparts=4 over 9, inner is 3 and
        # 4 * 3 = 12 > 9 although 3 divides 9.
        outer_ext = info.extent[self.outer]
        divisible = (is_const_int(ext) and isinstance(f, int) and is_const_int(outer_ext)
                     and outer_ext.value * f == ext.value)
        if not divisible:
            info.guards.append((info.offset[self.parent] < ext,
                                self.parent.iter_type is IterType.COMM_REDUCE))

    def reduce_root(self, roots: Sequence[IterVar]) -> IterVar | None:
        return self.parent if any(r is self.parent for r in roots) else None

    def factor_reduction(self, axis: IterVar, v: Var,
                         extent_k: PrimExpr) -> tuple[PrimExpr, list[IterVar], PrimExpr, PrimExpr]:
        dtype = v.dtype
        if self.factor is not None:
            f = _as_dtype(self.factor, dtype)
        else:
            f = _ceil_div_expr(extent_k, self.nparts)
        n_outer = _ceil_div_expr(extent_k, f)
        if axis is self.inner:
            v_extent = f
            other = IterVar(Range(const(0, dtype), n_outer), Var(self.outer.var.name, dtype),
                            IterType.COMM_REDUCE)
            offset = other.var * f + v
        else:
            v_extent = n_outer
            other = IterVar(Range(const(0, dtype), f), Var(self.inner.var.name, dtype),
                            IterType.COMM_REDUCE)
            offset = v * f + other.var
        divisible = is_const_int(extent_k) and is_const_int(f) and extent_k.value % f.value == 0
        cond = const(True) if divisible else offset < extent_k
        return v_extent, [other], offset, cond


@dataclass(eq=False)
class Fuse(Relation):
    """``fused`` enumerates ``outer`` (slow) x ``inner`` (fast)."""

    outer: IterVar
    inner: IterVar
    fused: IterVar

    def defines(self, iv: IterVar) -> bool:
        return self.fused is iv

    def static_extent(self, iv: IterVar, extent_of: Callable[[IterVar], PrimExpr | None]) -> PrimExpr | None:
        a, b = extent_of(self.outer), extent_of(self.inner)
        return None if a is None or b is None else a * b

    def derive_extents(self, info: StageBounds, analyzer: Analyzer, on_threads: bool) -> None:
        dt = self.fused.var.dtype  # wide enough for the product (Stage.fuse chose it)
        info.extent[self.fused] = analyzer.simplify(
            widen(info.extent[self.outer], dt) * widen(info.extent[self.inner], dt))

    def derive_offsets(self, info: StageBounds) -> None:
        fused = info.offset[self.fused]
        inner_ext = widen(info.extent[self.inner], fused.dtype)
        outer = FloorDiv(fused, inner_ext, fused.dtype) if not is_const_int(inner_ext, 1) else fused
        inner = FloorMod(fused, inner_ext, fused.dtype) if not is_const_int(inner_ext, 1) \
            else const(0, fused.dtype)
        # Each part counts in its own dtype again (narrower where the fused one was widened).
        info.offset[self.outer] = _narrow(outer, self.outer.var.dtype)
        info.offset[self.inner] = _narrow(inner, self.inner.var.dtype)


@dataclass(eq=False)
class Singleton(Relation):
    """``iv`` is a loop of one iteration that derives from no axis: what ``fuse()`` of no
    axes gives a stage without axes (a rank-0 compute), as TVM's ``Singleton``."""

    iv: IterVar

    def defines(self, iv: IterVar) -> bool:
        return self.iv is iv

    def static_extent(self, iv: IterVar, extent_of: Callable[[IterVar], PrimExpr | None]) -> PrimExpr | None:
        return const(1, iv.var.dtype)

    def derive_extents(self, info: StageBounds, analyzer: Analyzer, on_threads: bool) -> None:
        info.extent[self.iv] = const(1, self.iv.var.dtype)

    def derive_offsets(self, info: StageBounds) -> None:
        pass  # no root axis reads it


def _ceil_div(a: PrimExpr, b: int | PrimExpr, analyzer: Analyzer) -> PrimExpr:
    if is_const_int(a) and isinstance(b, int):
        return const(-(-a.value // b), a.dtype)
    b = _as_dtype(b, a.dtype)
    return analyzer.simplify(FloorDiv(a + (b - 1), b, a.dtype))


def _as_dtype(value: int | PrimExpr, dtype: str) -> PrimExpr:
    """A split's factor (an int or an integer expression) as an expression of ``dtype``."""
    if isinstance(value, int):
        return const(value, dtype)
    return value if value.dtype == dtype else Cast(dtype, value)


def _ceil_div_expr(a: PrimExpr, b) -> PrimExpr:
    """``ceil(a / b)`` for a positive ``b``, folded where both are constant."""
    b = _as_dtype(b, a.dtype)
    if is_const_int(a) and is_const_int(b):
        return const(-(-a.value // b.value), a.dtype)
    return simplify((a + b - 1) // b)


def _narrow(e: PrimExpr, dtype: str) -> PrimExpr:
    if e.dtype == dtype:
        return e
    return const(e.value, dtype) if is_const_int(e) else Cast(dtype, e)
