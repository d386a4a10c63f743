"""Walking a config space by index: uniform sampling, enumeration, one-knob neighbourhoods.

Every function takes a :class:`~search_spaces.space.config_space.ConfigSpace` and
works on mixed-radix indices; the space's own methods (``sample_indices``,
``neighbors``, ``default_config``) call them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from search_spaces.errors import SearchSpaceError
from search_spaces.space.constraint import ESTIMATE_SAMPLES, Part, choice_table, part_choices, part_ok
from search_spaces.space.knob import KnobSpace

if TYPE_CHECKING:
    from search_spaces.space.config_space import ConfigSpace

__all__ = ["as_rng", "sample_indices", "all_valid", "valid_index_at", "neighbor_indices", "nearest_valid"]


def as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """``rng`` itself if it is a Generator, else a Generator seeded with it."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def sample_indices(space: ConfigSpace, n: int, rng: np.random.Generator,
                   exclude: set[int] | None = None) -> list[int]:
    """Up to ``n`` distinct valid indices drawn uniformly, none in ``exclude``."""
    exclude = set() if exclude is None else exclude
    parts = space.parts()
    if space.size_is_exact and space.size == 0:
        raise SearchSpaceError(f"the constraints leave no valid config ({space.describe_constraints()})")
    if space.size_is_exact and space.size <= max(4 * n, 4096):
        # Small enough to list: a permutation of the valid points.
        everything = [i for i in all_valid(space) if i not in exclude]
        order = rng.permutation(len(everything))[:n]
        return [everything[k] for k in order]
    knobs = space.knobs
    strides = space.strides()
    seen: set[int] = set()
    out: list[int] = []
    misses = 0
    while len(out) < n:
        index = 0
        for part in parts:
            sub = _draw(space, part, knobs, rng)
            for k, c in zip(part.knobs, part_choices(part, knobs, sub)):
                index += c * strides[k]
        if index in seen or index in exclude:
            misses += 1
            if misses > 100 * n + 1000:  # the space is (nearly) exhausted
                break
            continue
        seen.add(index)
        out.append(index)
    return out


def _draw(space: ConfigSpace, part: Part, knobs: list[KnobSpace], rng: np.random.Generator) -> int:
    """A uniformly drawn valid sub-index of ``part``."""
    if part.valid is not None:
        if len(part.valid) == 0:
            raise SearchSpaceError(
                f"the constraints leave no valid config ({space.describe_constraints()})")
        return int(part.valid[int(rng.integers(len(part.valid)))])
    for _ in range(100 * ESTIMATE_SAMPLES):
        sub = int(rng.integers(part.raw))
        if part_ok(part, knobs, sub):
            return sub
    raise SearchSpaceError("no config satisfying the constraints was found in "
                           f"{100 * ESTIMATE_SAMPLES} draws ({space.describe_constraints()})")


def all_valid(space: ConfigSpace) -> list[int]:
    """Every valid index, sorted (only for exactly counted spaces)."""
    knobs = space.knobs
    strides = space.strides()
    totals = [0]
    for part in space.parts():
        offsets = []
        for sub in part.valid:
            offsets.append(sum(c * strides[k] for k, c in
                               zip(part.knobs, part_choices(part, knobs, int(sub)))))
        totals = [t + o for t in totals for o in offsets]
    return sorted(totals)


def valid_index_at(space: ConfigSpace, position: int) -> int:
    """The index of the ``position``-th valid config in index order (``all_valid(space)[position]``),
    for an exactly counted space and ``0 <= position < space.size``, without listing them all.

    Knobs are fixed from the most significant (the last defined) down. A choice of a
    knob is followed by as many valid configs as its part has valid points with the
    choices fixed so far times the valid points of every other part, so the choice
    that holds ``position`` is found by counting, and only the part's rows that agree
    with it are kept.
    """
    knobs = space.knobs
    parts = space.parts()
    owner: dict[int, tuple[int, int]] = {}   # knob position -> (part, column in the part)
    rows: list[np.ndarray | None] = []       # valid choices left per part; None: an unconstrained knob
    left: list[int] = []                     # valid points left per part
    for p, part in enumerate(parts):
        for col, k in enumerate(part.knobs):
            owner[k] = (p, col)
        rows.append(choice_table(part, knobs) if part.constraints else None)
        left.append(len(part.valid))
    strides = space.strides()
    index = 0
    for k in reversed(range(len(knobs))):
        p, col = owner[k]
        others = math.prod(n for q, n in enumerate(left) if q != p)
        if rows[p] is None:  # every choice is valid and followed by `others` configs
            choice, position = divmod(position, others)
            left[p] = 1
        else:
            column = rows[p][:, col]
            counts = np.bincount(column, minlength=len(knobs[k])).tolist()
            choice = 0
            while position >= counts[choice] * others:
                position -= counts[choice] * others
                choice += 1
            rows[p] = rows[p][column == choice]
            left[p] = len(rows[p])
        index += choice * strides[k]
    return index


def neighbor_indices(space: ConfigSpace, index: int) -> list[int]:
    """Valid indices that differ from ``index`` in exactly one knob."""
    choices = space.index_to_choices(index)
    strides = space.strides()
    out = []
    for k, knob in enumerate(space.knobs):
        for c in range(len(knob)):
            if c == choices[k]:
                continue
            j = index + (c - choices[k]) * strides[k]
            if space.is_valid(j):
                out.append(j)
    return out


def nearest_valid(space: ConfigSpace, start: int) -> int:
    """A valid config near ``start``: breadth-first over one-knob changes, preferring at each
    distance the change whose choice ranks best in its knob's preference order."""
    knobs = space.knobs
    prefs = [k.preference() for k in knobs]
    rank = [{c: r for r, c in enumerate(p)} for p in prefs]
    strides = space.strides()
    seen = {start}
    frontier = [start]
    for _ in range(3):  # up to three knobs away from the defaults
        candidates = []
        for index in frontier:
            choices = space.index_to_choices(index)
            for k in range(len(knobs)):
                for c in prefs[k]:
                    j = index + (c - choices[k]) * strides[k]
                    if j not in seen:
                        seen.add(j)
                        candidates.append((rank[k][c], j))
                if len(seen) > 100_000:
                    break
        candidates.sort()
        for _, j in candidates:
            if space.is_valid(j):
                return j
        frontier = [j for _, j in candidates]
    return sample_indices(space, 1, np.random.default_rng(0))[0]
