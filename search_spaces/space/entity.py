"""Entities: one choice of one knob, and how it applies itself to a schedule."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from compiler.schedule import Stage
from search_spaces.errors import SearchSpaceError

__all__ = ["Entity", "SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity", "Values"]


class Values(tuple):
    """An entity's values (split sizes, a permutation, annotations): a tuple that also equals
    the list of the same values, as AutoTVM's entities hold lists (``cfg["t"].size == [4, 8]``)."""

    __slots__ = ()

    def __eq__(self, other) -> bool:
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __getitem__(self, k):
        got = tuple.__getitem__(self, k)
        return Values(got) if isinstance(k, slice) else got  # size[1:] == [8, 4] too


def _stage(s, op):
    """The stage of ``op`` in schedule ``s``; ``op`` may be a tensor, an operation or a stage."""
    return op if isinstance(op, Stage) else s[op]


class Entity:
    """One choice of one knob; :meth:`value` is its JSON form."""

    __slots__ = ()

    def value(self):
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.value() == other.value()

    def __hash__(self) -> int:
        return hash((type(self).__name__, json.dumps(self.value())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value()!r})"


class SplitEntity(Entity):
    """Split sizes, outermost first: ``size[0]`` is ``ceil(extent / prod(size[1:]))``."""

    __slots__ = ("size",)

    def __init__(self, size: Sequence[int]):
        self.size = Values(int(x) for x in size)

    def value(self) -> list[int]:
        return list(self.size)

    def apply(self, s, op, axis) -> list:
        """Split ``axis`` of ``op``'s stage into ``len(size)`` axes, outermost first."""
        stage = _stage(s, op)
        axes = []
        for i in range(1, len(self.size)):
            outer, axis = stage.split(axis, factor=math.prod(self.size[i:]))
            axes.append(outer)
        return axes + [axis]


class ReorderEntity(Entity):
    """A permutation: the new order is ``[axes[i] for i in perm]``."""

    __slots__ = ("perm",)

    def __init__(self, perm: Sequence[int]):
        self.perm = Values(int(x) for x in perm)

    def value(self) -> list[int]:
        return list(self.perm)

    def apply(self, s, op, axes: Sequence) -> list:
        """Reorder ``axes`` of ``op``'s stage; returns them in their new order."""
        ordered = [axes[i] for i in self.perm]
        _stage(s, op).reorder(*ordered)
        return ordered


class AnnotateEntity(Entity):
    """One annotation per axis (``"none"``, ``"unroll"`` or ``"vec"``), or, for a
    ``locate_cache`` knob, the positions of the axes that caches are attached at."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence):
        self.anns = Values(a if isinstance(a, int) and not isinstance(a, bool) else str(a) for a in anns)

    def value(self) -> list:
        return list(self.anns)

    def apply(self, s, op, axes: Sequence, axis_lens: Sequence[int] | None = None,
              max_unroll: int | None = None, vec_size: Sequence[int] | None = None, cfg=None,
              source: Sequence | None = None) -> list:
        """Annotate ``axes`` of ``op``'s stage, as AutoTVM's ``AnnotateEntity.apply``.

        With ``axis_lens`` and ``max_unroll``, an ``"unroll"`` of an axis longer than
        ``max_unroll`` is an error of the config when ``cfg`` is given
        (``cfg.raise_error``), and is skipped otherwise (code size); with ``vec_size``, so is
        a ``"vec"`` of an axis whose length is not in it. ``source`` (a ``locate_cache``
        knob): ``source[k]`` lists the tensors computed at axis ``axes[anns[k]]``.
        """
        stage = _stage(s, op)
        if source is not None:
            for tensors, at in zip(source, self.anns, strict=True):
                for t in tensors:
                    s[t].compute_at(stage, axes[at])
            return list(axes)
        for k, (ax, ann) in enumerate(zip(axes, self.anns, strict=True)):
            if ann == "unroll":
                if axis_lens is not None and max_unroll is not None and axis_lens[k] > max_unroll:
                    if cfg is None:
                        continue
                    cfg.raise_error("Too large factor for unrolling")
                stage.unroll(ax)
            elif ann == "vec":
                if vec_size is not None and axis_lens is not None and axis_lens[k] not in vec_size:
                    if cfg is None:
                        continue
                    cfg.raise_error("Wrong size of lanes in vectorization")
                stage.vectorize(ax)
            elif ann != "none":
                raise SearchSpaceError(f"annotation {ann!r} cannot be applied to an axis")
        return list(axes)


class OtherOptionEntity(Entity):
    """A plain value chosen from a list of candidates (``define_knob``)."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def value(self):
        return self.val

