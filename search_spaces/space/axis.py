"""Virtual axes: placeholders of a known length that knobs are defined on (AutoTVM's VirtualAxis).

``cfg.axis(64)`` or ``cfg.axis(iter_var)`` names an axis before (or without) a schedule:
a split knob reads its length, and a reorder or annotate knob lists such axes and
names them in its candidates.
"""

from __future__ import annotations

import itertools
import numbers
from typing import NamedTuple

from search_spaces.errors import SearchSpaceError

__all__ = ["VirtualAxis", "Axis", "axis_length", "knob_outputs"]

_names = itertools.count()


class VirtualAxis:
    """An axis placeholder: ``length`` (an int; -1 for an IterVar without a domain) and ``name``.

    ``var`` is an int (the length), an IterVar (its constant extent and its variable's
    name) or another VirtualAxis (its length).
    """

    __slots__ = ("length", "name")

    def __init__(self, var, name: str | None = None):
        self.name = name if name is not None else f"axis_{next(_names)}"
        if isinstance(var, numbers.Integral) and not isinstance(var, bool):
            self.length = int(var)
        elif isinstance(var, VirtualAxis):
            self.length = var.length
        elif hasattr(var, "var") and hasattr(var, "dom"):  # an IterVar
            self.name = var.var.name
            self.length = -1 if var.dom is None else axis_length(var, self.name)
        else:
            raise SearchSpaceError(f"a virtual axis is made of an int, an IterVar or a virtual axis, "
                                   f"got {type(var).__name__}")

    def __repr__(self) -> str:
        return f"vaxis({self.name})"


class Axis(NamedTuple):
    """One output axis of a knob, what ``define_split``/``define_reorder``/``define_annotate``
    return (AutoTVM's ``Axis``): ``space`` is the knob (None in a config, which defines no
    knobs) and ``index`` the position of the output axis."""

    space: object
    index: int


def knob_outputs(space, count: int) -> list[Axis]:
    """``count`` :class:`Axis` of knob ``space``: what AutoTVM's ``define_*`` return."""
    return [Axis(space, i) for i in range(count)]


def axis_length(axis, name: str) -> int:
    """The constant length of ``axis`` (an int, an IterVar of constant extent or a
    :class:`VirtualAxis`) for knob ``name``; SearchSpaceError otherwise."""
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return int(axis)
    if isinstance(axis, VirtualAxis):
        if axis.length >= 1:
            return axis.length
    else:
        extent = getattr(getattr(axis, "dom", None), "extent", None)
        value = getattr(extent, "value", None)
        if isinstance(value, int):
            return value
    raise SearchSpaceError(f"split knob {name!r}: needs an axis of constant extent (an original axis "
                           f"of a compute with a constant shape, a cfg.axis(n)) or the extent as an int, "
                           f"got {axis!r}")
