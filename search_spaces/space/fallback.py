"""The fallback config: what a template gets when no log has a config for its workload.

:class:`FallbackConfigEntity` is AutoTVM's: ``cfg.is_fallback`` is true, and a template (or a
schedule's ``_fallback_schedule``) may overwrite its knobs with a good default of its own,
``cfg["tile_x"] = SplitEntity([-1, 8])``, ``cfg.fallback_split("tile_x", [-1, 8])`` or
``cfg.fallback_with_reference_log(records)``. Those values need not be points of the space
(a split of 64 by 3 is a valid fallback); :attr:`FallbackConfigEntity.index` is then -1.

The dispatch fallback (:class:`search_spaces.dispatch.FallbackContext`) hands out one per
workload, made from the space's default config, and keeps it, so what a template sets on it
holds for later calls. Built on its own, ``FallbackConfigEntity()`` has no knobs yet: its
``define_*`` record them (each at its knob's default) as a :class:`ConfigSpace` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from search_spaces.errors import SearchSpaceError
from search_spaces.space.axis import Axis, knob_outputs
from search_spaces.space.config import ConfigEntity
from search_spaces.space.config_space import ConfigSpace
from search_spaces.space.entity import Entity, SplitEntity
from search_spaces.space.knob import KnobSpace, SplitSpace

__all__ = ["FallbackConfigEntity", "get_factors"]

_ENTITY_OF_KIND = {"split": "SplitEntity", "reorder": "ReorderEntity", "annotate": "AnnotateEntity",
                   "knob": "OtherOptionEntity"}


def get_factors(n: int) -> list[int]:
    """The divisors of ``n``, ascending (AutoTVM's ``get_factors``)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class FallbackConfigEntity(ConfigEntity):
    """A config whose knobs a template may set (AutoTVM's ``FallbackConfigEntity``).

    ``space`` is the config space it belongs to (a new, empty one by default) and
    ``entities`` its starting values (each knob's default when not given).
    """

    def __init__(self, space: ConfigSpace | None = None, entities: dict[str, Entity] | None = None):
        self.space = ConfigSpace() if space is None else space
        if entities is None:
            entities = {name: knob.entities[knob.default] for name, knob in self.space.space_map.items()}
        super().__init__(-1, entities, is_fallback=True)
        self._reindex()

    # ------------------------------------------------------------------ defining knobs

    def _define(self, name: str, make, outputs: int) -> list[Axis]:
        """Define knob ``name`` with ``make(space)`` unless the space already has it; a value
        set before the knob was defined is kept."""
        if name not in self.space.space_map:
            make(self.space)
            knob = self.space.space_map[name]
            if name in self._entities:
                self._entities[name] = self._checked(name, self._entities[name])
            else:
                self._entities[name] = knob.entities[knob.default]
            self._reindex()
            return knob_outputs(knob, outputs)
        return knob_outputs(None, outputs)

    def define_split(self, name: str, axis, policy: str = "factors", num_outputs: int = 2,
                     **kwargs) -> list[Axis]:
        """Define split knob ``name`` (see :meth:`ConfigSpace.define_split`) if it is new."""
        return self._define(name, lambda sp: sp.define_split(name, axis, policy, num_outputs, **kwargs),
                            num_outputs)

    def define_reorder(self, name: str, axes: Sequence, policy: str = "all", **kwargs) -> list[Axis]:
        """Define reorder knob ``name`` (see :meth:`ConfigSpace.define_reorder`) if it is new."""
        return self._define(name, lambda sp: sp.define_reorder(name, axes, policy, **kwargs), len(axes))

    def define_annotate(self, name: str, axes: Sequence, policy: str = "try_unroll", **kwargs) -> list[Axis]:
        """Define annotate knob ``name`` (see :meth:`ConfigSpace.define_annotate`) if it is new."""
        return self._define(name, lambda sp: sp.define_annotate(name, axes, policy, **kwargs), len(axes))

    def define_knob(self, name: str, candidate: Sequence = (), default=None, absent=None) -> list[Axis]:
        """Define knob ``name`` (see :meth:`ConfigSpace.define_knob`) if it is new."""
        return self._define(name, lambda sp: sp.define_knob(name, candidate, default, absent), 0)

    def add_flop(self, flop) -> None:
        """Adds to the space's FLOPs (a config built on its own defines its space)."""
        self.space.add_flop(flop)

    # ------------------------------------------------------------------ setting knobs

    def __setitem__(self, name: str, entity: Entity) -> None:
        """Use ``entity`` for knob ``name``. A split's outermost size may be -1 ("the rest"):
        it is stored as ``ceil(extent / prod(size[1:]))``, as every split entity here is."""
        if not isinstance(entity, Entity):
            raise SearchSpaceError(f"cfg[{name!r}] takes an entity (SplitEntity, ReorderEntity, "
                                   f"AnnotateEntity, OtherOptionEntity), got {entity!r}")
        self._entities[name] = self._checked(name, entity) if name in self.space.space_map else entity
        self._reindex()

    def _checked(self, name: str, entity: Entity) -> Entity:
        """``entity`` made a value of knob ``name``: of the knob's kind, a split of its extent."""
        knob = self.space.space_map[name]
        want = _ENTITY_OF_KIND.get(knob.kind)
        if want is not None and type(entity).__name__ != want:
            raise SearchSpaceError(f"cfg[{name!r}]: knob {name!r} is a {knob.kind} knob and takes a {want}, "
                                   f"got {entity!r}")
        if isinstance(knob, SplitSpace):
            return _resolved_split(name, knob, entity.size)
        return entity

    def fallback_split(self, name: str, constraints: Sequence[int]) -> None:
        """Set split knob ``name`` to the largest sizes, innermost first, that divide what is
        left of the extent and are at most ``constraints[i]`` (-1: no bound), as AutoTVM:
        ``fallback_split("t", [-1, 8, 4])`` on an extent of 128 gives ``[4, 8, 4]``, on 49
        ``[7, 7, 1]``."""
        knob = self.space.space_map.get(name)
        if not isinstance(knob, SplitSpace):
            raise SearchSpaceError(f"fallback_split: {name!r} is not a split knob of this config")
        if len(constraints) != knob.num_outputs:
            raise SearchSpaceError(f"fallback_split: knob {name!r} splits into {knob.num_outputs} axes, "
                                   f"got {len(constraints)} constraints {list(constraints)!r}")
        left = knob.extent
        sizes = [0] * knob.num_outputs
        for i in reversed(range(knob.num_outputs)):
            bound = math.inf if constraints[i] == -1 else constraints[i]
            fits = [f for f in get_factors(left) if f <= bound]
            if not fits:
                raise SearchSpaceError(f"fallback_split: no size of knob {name!r} at position {i} is at most "
                                       f"{constraints[i]}")
            sizes[i] = fits[-1]
            left //= fits[-1]
        self._entities[name] = SplitEntity(sizes)
        self._reindex()

    def fallback_with_reference_log(self, ref_log: Iterable) -> None:
        """Copy the knobs of the reference config whose split extents share the most divisors
        with this config's (AutoTVM's data-driven fallback): its splits' inner sizes become
        :meth:`fallback_split` bounds, its other knobs are copied. ``ref_log`` holds
        ``(MeasureInput, MeasureResult)`` pairs; nothing changes when it is empty."""
        splits = [n for n, k in self.space.space_map.items() if isinstance(k, SplitSpace)]
        own = [set(get_factors(self.space.space_map[n].extent)) for n in splits]
        best, best_score = None, 0.0
        for inp, _ in ref_log:
            score = sum(len(own[i] & set(get_factors(math.prod(inp.config[n].size)))) / len(own[i])
                        for i, n in enumerate(splits))
            if score > best_score:
                best, best_score = inp.config, score
        if best is None:
            return
        for n in splits:
            self.fallback_split(n, [-1, *best[n].size[1:]])
        for n in self.space.space_map:
            if n not in splits:
                self[n] = best[n]

    def _reindex(self) -> None:
        """``index``: the config's index in its space when every knob holds one of its choices,
        else -1 (a fallback value outside the space)."""
        knobs = self.space.space_map
        if list(knobs) != list(self._entities):
            self.index = -1
            return
        try:
            self.index = self.space.choices_to_index([k.index_of(self._entities[n].value())
                                                      for n, k in knobs.items()])
        except SearchSpaceError:
            self.index = -1

    def knob_kinds_match(self, space: ConfigSpace) -> bool:
        """Whether this config has exactly ``space``'s knobs, each of its kind (a template may give
        a fallback config values outside the space, not other knobs)."""
        if list(space.space_map) != list(self._entities):
            return False
        kinds = {n: _ENTITY_OF_KIND.get(k.kind) for n, k in space.space_map.items()}
        return all(want is None or type(self._entities[n]).__name__ == want for n, want in kinds.items())

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={e.value()!r}" for k, e in self._entities.items())
        return f"FallbackConfigEntity({body})"


def _resolved_split(name: str, knob: KnobSpace, size: Sequence[int]) -> SplitEntity:
    """A split of ``knob``'s extent with sizes ``size``; an outermost -1 becomes the rest."""
    size = [int(x) for x in size]
    if len(size) != knob.num_outputs:
        raise SearchSpaceError(f"cfg[{name!r}]: knob {name!r} splits into {knob.num_outputs} axes, "
                               f"got sizes {size!r}")
    if any(x < 1 for x in size[1:]) or (size[0] < 1 and size[0] != -1):
        raise SearchSpaceError(f"cfg[{name!r}]: split sizes are >= 1 (the outermost may be -1), got {size!r}")
    inner = math.prod(size[1:])
    outer = -(-knob.extent // inner)
    if size[0] not in (-1, outer):
        raise SearchSpaceError(f"cfg[{name!r}]: the outermost size of a split of {knob.extent} with inner "
                               f"sizes {size[1:]!r} is {outer} (or -1), got {size[0]}")
    return SplitEntity([outer, *size[1:]])
