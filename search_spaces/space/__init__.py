"""Knobs and config spaces.

A template declares *knobs* (``cfg.define_split``, ``define_reorder``,
``define_annotate``, ``define_knob``); each knob is a small space of *entities*, and
an entity knows how to apply itself to a schedule (``cfg["tile_y"].apply(s, C, y)``).
The config space is the product of its knobs, filtered by whole-config constraints.

A point of the space is a mixed-radix index: knob ``k`` contributes
``choice_k * stride_k`` with ``stride_0 = 1`` (the first knob varies fastest), and each
knob lists its choices in AutoTVM's order, so an index names the same config as in
AutoTVM. Stored configs are named by their knob values, not their index (a log
written before a knob's choices changed still reads back). A space of 10**12 points is
never enumerated: :meth:`ConfigSpace.from_index`,
:meth:`ConfigSpace.sample`, :meth:`ConfigSpace.neighbors` and
:meth:`ConfigSpace.encode` all work on indices. Only constraints need evaluation,
and a constraint that names the knobs it reads (``add_constraint(pred, knobs=...)``)
is checked on the product of those knobs alone, which keeps exact sizes and uniform
sampling cheap. ``len(space)`` counts the valid configs, and ``space.get(i)`` is the
``i``-th of them in index order.

While a template runs to *define* its space, ``get_config()`` returns the
:class:`ConfigSpace` (``define_*`` record knobs and ``cfg[name]`` is the knob's
default entity); when it runs to *apply* a point, it returns a
:class:`ConfigEntity` (``define_*`` do nothing, ``cfg[name]`` is the chosen entity).

One concept per module:

- :mod:`.axis`: virtual axes (``cfg.axis(n)``) that knobs can be defined on;
- :mod:`.entity`: one choice of one knob and how it applies to a schedule;
- :mod:`.knob`: knob spaces (the entities of one knob, default, numeric encoding);
- :mod:`.constraint`: constraints, and the analysis that counts valid points;
- :mod:`.config`: :class:`ConfigEntity`, one point of a space, and its JSON;
- :mod:`.config_space`: :class:`ConfigSpace`, defining a space and indexing it;
- :mod:`.fallback`: :class:`FallbackConfigEntity`, the config of an untuned workload,
  whose knobs a template may set;
- :mod:`.sampling`: uniform sampling, enumeration and one-knob neighbourhoods.
"""

from search_spaces.space.axis import Axis, VirtualAxis
from search_spaces.space.config import ConfigEntity
from search_spaces.space.config_space import ConfigSpace
from search_spaces.space.constraint import EXACT_SIZE_LIMIT
from search_spaces.space.entity import (
    AnnotateEntity,
    Entity,
    OtherOptionEntity,
    ReorderEntity,
    SplitEntity,
)
from search_spaces.space.fallback import FallbackConfigEntity, get_factors
from search_spaces.space.knob import (
    AnnotateSpace,
    KnobSpace,
    OtherOptionSpace,
    ReorderSpace,
    SplitSpace,
)

__all__ = [
    "KnobSpace", "SplitSpace", "ReorderSpace", "AnnotateSpace", "OtherOptionSpace",
    "Entity", "SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity",
    "ConfigSpace", "ConfigEntity", "FallbackConfigEntity", "VirtualAxis", "Axis", "EXACT_SIZE_LIMIT",
    "get_factors",
]
