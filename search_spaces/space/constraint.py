"""Constraint analysis: which knobs each constraint ties together, and how many points survive.

Knobs read by a common constraint form one *part* (union-find over the knobs each
constraint declares; a constraint without ``knobs=`` ties every knob). A part of up to
:data:`EXACT_SIZE_LIMIT` raw points is enumerated, so its valid points are known
exactly; a larger one is estimated by sampling. A knob that no constraint reads is a
part of its own whose every choice is valid, never materialised. The valid points of
the whole space are the product of the parts' valid points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from search_spaces.errors import SearchSpaceError
from search_spaces.space.entity import Entity
from search_spaces.space.knob import KnobSpace

__all__ = ["EXACT_SIZE_LIMIT", "Constraint", "ConstraintView", "Part", "analyse", "choice_table",
           "part_choices", "part_ok", "violated"]

# Constrained parts of a space up to this many raw points are enumerated to count (and
# sample) their valid points exactly; larger parts are estimated by sampling.
EXACT_SIZE_LIMIT = 1_000_000
# Raw points drawn to estimate the valid fraction of a part too large to enumerate.
ESTIMATE_SAMPLES = 4096


@dataclass(frozen=True)
class Constraint:
    """A whole-config predicate and the knobs it reads (``None``: any knob)."""

    predicate: Callable
    knobs: tuple[str, ...] | None  # None: may read any knob
    name: str


class ConstraintView:
    """What a constraint predicate sees: ``view[knob]`` is that knob's entity."""

    __slots__ = ("_entities", "_allowed")

    def __init__(self, entities: dict, allowed: str):
        self._entities = entities
        self._allowed = allowed

    def __getitem__(self, name: str) -> Entity:
        try:
            return self._entities[name]
        except KeyError:
            raise SearchSpaceError(f"constraint {self._allowed}: reads knob {name!r}, which it did "
                                   "not declare in knobs= (or which does not exist)") from None

    def get(self, name: str, default=None):
        """The entity of knob ``name``, or ``default`` if the constraint cannot see it."""
        return self._entities.get(name, default)


@dataclass
class Part:
    """A set of knobs tied together by constraints, with what is known of its valid points.

    A sub-index of a part is the mixed-radix index over the part's knobs alone (its
    first knob varies fastest).
    """

    knobs: list[int]              # positions in the space, definition order
    constraints: list[Constraint]
    raw: int                      # product of the knobs' sizes
    valid: np.ndarray | range | None = None  # sorted valid sub-indices, when enumerated
    estimate: float = 0.0         # estimated number of valid points, when not enumerated
    table: np.ndarray | None = None  # choices of the valid points, one row each (see choice_table)


def violated(constraints: Sequence[Constraint], entities: dict[str, Entity]) -> Constraint | None:
    """The first constraint that ``entities`` (one per knob) violate, or None."""
    for c in constraints:
        # A constraint sees only the knobs it declared, here as when counting.
        seen = entities if c.knobs is None else {k: entities[k] for k in c.knobs}
        if not c.predicate(ConstraintView(seen, c.name)):
            return c
    return None


def part_choices(part: Part, knobs: list[KnobSpace], sub: int) -> list[int]:
    """The choice of each of ``part``'s knobs at sub-index ``sub``."""
    out = []
    for k in part.knobs:
        sub, r = divmod(sub, len(knobs[k]))
        out.append(r)
    return out


def choice_table(part: Part, knobs: list[KnobSpace]) -> np.ndarray:
    """The choices of an enumerated ``part``'s valid points: one row per point (in sub-index
    order), one column per knob of the part; computed once and kept on the part."""
    if part.table is None:
        subs = np.asarray(part.valid, dtype=np.int64)
        table = np.empty((len(subs), len(part.knobs)), dtype=np.int64)
        for col, k in enumerate(part.knobs):
            subs, table[:, col] = np.divmod(subs, len(knobs[k]))
        part.table = table
    return part.table


def part_ok(part: Part, knobs: list[KnobSpace], sub: int) -> bool:
    """Whether sub-index ``sub`` satisfies every constraint of ``part``."""
    choices = part_choices(part, knobs, sub)
    entities = {knobs[k].name: knobs[k].entities[c] for k, c in zip(part.knobs, choices)}
    return all(c.predicate(ConstraintView(entities, c.name)) for c in part.constraints)


def analyse(knobs: list[KnobSpace], constraints: list[Constraint]) -> list[Part]:
    """Group ``knobs`` tied by ``constraints`` into parts; count each part's valid points."""
    names = [k.name for k in knobs]
    pos = {n: k for k, n in enumerate(names)}
    parent = list(range(len(names)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    groups_of: list[list[int]] = []
    for c in constraints:
        members = [pos[n] for n in (c.knobs if c.knobs is not None else names)]
        groups_of.append(members)
        for m in members[1:]:
            parent[find(m)] = find(members[0])
    by_root: dict[int, list[int]] = {}
    for k in range(len(names)):
        by_root.setdefault(find(k), []).append(k)
    parts = []
    for members in by_root.values():
        cons = [c for c, g in zip(constraints, groups_of) if g and find(g[0]) == find(members[0])]
        raw = math.prod(len(knobs[k]) for k in members)
        parts.append(Part(members, cons, raw))
    # A constraint with no knobs at all (knobs=()) belongs to every part once; put it on the first.
    empty = [c for c, g in zip(constraints, groups_of) if not g]
    if empty:
        if parts:
            parts[0].constraints += empty
        else:
            parts.append(Part([], empty, 1))
    for part in parts:
        if not part.constraints:
            part.valid = range(part.raw)  # every point is valid; never materialised
        elif part.raw <= EXACT_SIZE_LIMIT:
            part.valid = np.array([i for i in range(part.raw) if part_ok(part, knobs, i)], dtype=np.int64)
        else:
            rng = np.random.default_rng(0)  # deterministic estimate
            hits = sum(part_ok(part, knobs, int(rng.integers(part.raw))) for _ in range(ESTIMATE_SAMPLES))
            part.estimate = part.raw * hits / ESTIMATE_SAMPLES
    return parts
