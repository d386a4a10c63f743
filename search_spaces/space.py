"""Knobs and config spaces.

A template declares *knobs* (``cfg.define_split``, ``define_reorder``,
``define_annotate``, ``define_knob``); each knob is a small space of *entities*, and
an entity knows how to apply itself to a schedule (``cfg["tile_y"].apply(s, C, y)``).
The config space is the product of its knobs, filtered by whole-config constraints.

A point of the space is a mixed-radix index: knob ``k`` contributes
``choice_k * stride_k`` with ``stride_0 = 1`` (the first knob varies fastest), so a
space of 10**12 points is never enumerated: :meth:`ConfigSpace.get`,
:meth:`ConfigSpace.sample`, :meth:`ConfigSpace.neighbors` and
:meth:`ConfigSpace.encode` all work on indices. Only constraints need evaluation,
and a constraint that names the knobs it reads (``add_constraint(pred, knobs=...)``)
is checked on the product of those knobs alone, which keeps exact sizes and uniform
sampling cheap.

While a template runs to *define* its space, ``get_config()`` returns the
:class:`ConfigSpace` (``define_*`` record knobs and ``cfg[name]`` is the knob's
default entity); when it runs to *apply* a point, it returns a
:class:`ConfigEntity` (``define_*`` do nothing, ``cfg[name]`` is the chosen entity).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from search_spaces.errors import SearchSpaceError

__all__ = [
    "KnobSpace", "SplitSpace", "ReorderSpace", "AnnotateSpace", "OtherOptionSpace",
    "Entity", "SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity",
    "ConfigSpace", "ConfigEntity", "EXACT_SIZE_LIMIT",
]

# Constrained parts of a space up to this many raw points are enumerated to count (and
# sample) their valid points exactly; larger parts are estimated by sampling.
EXACT_SIZE_LIMIT = 1_000_000
# Raw points drawn to estimate the valid fraction of a part too large to enumerate.
_ESTIMATE_SAMPLES = 4096
# The vector width (in elements) that split defaults aim their innermost factor at.
_DEFAULT_INNER = 16
_DEFAULT_MIDDLE = 4


def _stage(s, op):
    """The stage of ``op`` in schedule ``s``; ``op`` may be a tensor, an operation or a stage."""
    from compiler.schedule import Stage

    return op if isinstance(op, Stage) else s[op]


# ---------------------------------------------------------------------------- entities


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
        self.size = tuple(int(x) for x in size)

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
        self.perm = tuple(int(x) for x in perm)

    def value(self) -> list[int]:
        return list(self.perm)

    def apply(self, s, op, axes: Sequence) -> list:
        """Reorder ``axes`` of ``op``'s stage; returns them in their new order."""
        ordered = [axes[i] for i in self.perm]
        _stage(s, op).reorder(*ordered)
        return ordered


class AnnotateEntity(Entity):
    """One annotation per axis: ``"none"``, ``"unroll"`` or ``"vec"``."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence[str]):
        self.anns = tuple(str(a) for a in anns)

    def value(self) -> list[str]:
        return list(self.anns)

    def apply(self, s, op, axes: Sequence, axis_lens: Sequence[int] | None = None,
              max_unroll: int | None = None) -> list:
        """Annotate ``axes`` of ``op``'s stage. With ``axis_lens`` and ``max_unroll``,
        an ``"unroll"`` on an axis longer than ``max_unroll`` is skipped (code size)."""
        stage = _stage(s, op)
        for k, (ax, ann) in enumerate(zip(axes, self.anns, strict=True)):
            if ann == "unroll":
                if axis_lens is not None and max_unroll is not None and axis_lens[k] > max_unroll:
                    continue
                stage.unroll(ax)
            elif ann == "vec":
                stage.vectorize(ax)
        return list(axes)


class OtherOptionEntity(Entity):
    """A plain value chosen from a list of candidates (``define_knob``)."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def value(self):
        return self.val


# ---------------------------------------------------------------------------- knob spaces


class KnobSpace:
    """The entities one knob can take, in a fixed order; ``default`` indexes one of them."""

    kind = "knob"

    def __init__(self, name: str, entities: list[Entity], default: int = 0):
        if not entities:
            raise SearchSpaceError(f"knob {name!r} has no choices (check its filter or candidates)")
        self.name = name
        self.entities = entities
        self.default = default
        self._index = {json.dumps(e.value()): k for k, e in enumerate(entities)}
        if len(self._index) != len(entities):
            raise SearchSpaceError(f"knob {name!r} lists the same choice twice")

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, k: int) -> Entity:
        return self.entities[k]

    def index_of(self, value) -> int:
        """The position of the entity whose JSON value is ``value``."""
        key = json.dumps(_jsonable(value))
        if key not in self._index:
            raise SearchSpaceError(f"knob {self.name!r}: value {value!r} is not in its space "
                                   f"({len(self)} choices, e.g. {self.entities[0].value()!r})")
        return self._index[key]

    def features(self, entity: Entity) -> list[float]:
        """A numeric encoding of ``entity`` for cost models."""
        return [float(self.entities.index(entity))]

    def preference(self) -> list[int]:
        """Choice positions from most to least preferred: the default, then nearest to it."""
        return sorted(range(len(self)), key=lambda k: (abs(k - self.default), k))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self)} choices)"


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class SplitSpace(KnobSpace):
    """Ways to split an axis of ``extent`` into ``num_outputs`` nested axes.

    Policies: ``"factors"`` (inner sizes divide the extent exactly), ``"power2"``
    (inner sizes are powers of two; the outer loop is guarded where they overshoot)
    and ``"verbose"`` (divisors and powers of two). ``max_factor`` bounds each inner
    size; ``filter(entity) -> bool`` drops choices.
    """

    kind = "split"

    def __init__(self, name: str, extent: int, policy: str = "factors", num_outputs: int = 2,
                 max_factor: int | None = None, filter: Callable | None = None,
                 default: Sequence[int] | None = None):
        if not isinstance(extent, int) or isinstance(extent, bool) or extent < 1:
            raise SearchSpaceError(f"split knob {name!r}: the axis extent must be a positive "
                                   f"constant int, got {extent!r}")
        if not isinstance(num_outputs, int) or not 2 <= num_outputs <= 4:
            raise SearchSpaceError(f"split knob {name!r}: num_outputs must be 2, 3 or 4, got {num_outputs!r}")
        if policy not in ("factors", "power2", "verbose"):
            raise SearchSpaceError(f"split knob {name!r}: unknown policy {policy!r}; "
                                   "use 'factors', 'power2' or 'verbose'")
        self.extent, self.policy, self.num_outputs = extent, policy, num_outputs
        limit = extent if max_factor is None else min(extent, int(max_factor))
        pow2 = [1 << k for k in range(extent.bit_length()) if (1 << k) <= limit]
        divs = [d for d in _divisors(extent) if d <= limit]
        cands = {"factors": divs, "power2": pow2, "verbose": sorted(set(divs) | set(pow2))}[policy]
        entities = []
        for inner in itertools.product(cands, repeat=num_outputs - 1):
            prod = math.prod(inner)
            if policy == "factors" and extent % prod:
                continue
            if prod > extent:
                continue
            e = SplitEntity((-(-extent // prod),) + inner)
            if filter is None or filter(e):
                entities.append(e)
        super().__init__(name, entities)
        self.default = self._closest(default)

    def _closest(self, hint: Sequence[int] | None) -> int:
        """The entity nearest (in log2 distance of the inner sizes) to ``hint``.

        Without a hint, the innermost size aims at a vector width and middle sizes at a
        small register tile; ties go to the larger innermost size, then the first entity.
        """
        n = self.num_outputs
        if hint is None:
            hint = [-1] + [_DEFAULT_MIDDLE] * (n - 2) + [_DEFAULT_INNER]
        hint = list(hint)
        if len(hint) != n:
            raise SearchSpaceError(f"split knob {self.name!r}: default {hint!r} needs {n} sizes")
        self._hint = hint
        return min(range(len(self.entities)), key=self._cost)

    def preference(self) -> list[int]:
        return sorted(range(len(self)), key=self._cost)

    def _cost(self, k: int) -> tuple:
        size = self.entities[k].size
        d = 0.0
        for want, got in zip(self._hint, size):
            if want is not None and want > 0:
                d += abs(math.log2(want) - math.log2(got))
        # An innermost size that is no multiple nor divisor of the wanted one (a vector
        # width) leaves partial vectors: prefer 8 over 20 when 16 is wanted.
        want = self._hint[-1]
        if want is not None and want > 0 and size[-1] % want and want % size[-1]:
            d += 2.0
        # Prefer exact divisions (no guarded tail), then larger inner tiles.
        waste = size[0] * math.prod(size[1:]) - self.extent
        return (d, waste > 0, tuple(-x for x in reversed(size[1:])))

    def features(self, entity: Entity) -> list[float]:
        return [math.log2(x) for x in entity.size]


class ReorderSpace(KnobSpace):
    """Orders of ``n`` axes: ``"all"`` permutations, permutations of an ``interval``
    ``(lo, hi)`` only, or a ``"candidate"`` list of orders."""

    kind = "reorder"

    def __init__(self, name: str, axes: Sequence, policy: str = "all", candidate=None,
                 interval: tuple[int, int] | None = None, default: Sequence[int] | None = None):
        n = len(axes)
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "interval":
            lo, hi = interval if interval is not None else (0, n)
            if not 0 <= lo <= hi <= n:
                raise SearchSpaceError(f"reorder knob {name!r}: interval {interval!r} is not within 0..{n}")
            perms = [tuple(range(lo)) + p + tuple(range(hi, n))
                     for p in itertools.permutations(range(lo, hi))]
        elif policy == "candidate":
            if not candidate:
                raise SearchSpaceError(f"reorder knob {name!r}: policy 'candidate' needs candidate orders")
            perms = []
            for order in candidate:
                perm = []
                for ax in order:
                    hits = [k for k, a in enumerate(axes) if a is ax or (isinstance(ax, int) and ax == k)]
                    if len(hits) != 1:
                        raise SearchSpaceError(f"reorder knob {name!r}: candidate {order!r} names an axis "
                                               "that is not among the knob's axes")
                    perm.append(hits[0])
                if sorted(perm) != list(range(n)):
                    raise SearchSpaceError(f"reorder knob {name!r}: candidate {order!r} is not a "
                                           f"permutation of the {n} axes")
                perms.append(tuple(perm))
        else:
            raise SearchSpaceError(f"reorder knob {name!r}: unknown policy {policy!r}; "
                                   "use 'all', 'interval' or 'candidate'")
        super().__init__(name, [ReorderEntity(p) for p in perms])
        if default is not None:
            self.default = self.index_of(list(default))

    def features(self, entity: Entity) -> list[float]:
        return [float(p) for p in entity.perm]


_ANN_CODES = {"none": 0.0, "unroll": 1.0, "vec": 2.0}


class AnnotateSpace(KnobSpace):
    """Annotations of ``n`` axes.

    ``"try_unroll"``: each axis unrolled or not. ``"try_vec"``: the last (innermost)
    axis vectorized or not. ``"try_unroll_vec"``: both. Only the last axis is ever
    vectorized, because only an innermost loop can be.
    """

    kind = "annotate"

    def __init__(self, name: str, axes: Sequence, policy: str = "try_unroll",
                 default: Sequence[str] | None = None):
        n = len(axes)
        if n < 1:
            raise SearchSpaceError(f"annotate knob {name!r} needs at least one axis")
        unroll = ["none", "unroll"]
        if policy == "try_unroll":
            options = [unroll] * n
        elif policy == "try_vec":
            options = [["none"]] * (n - 1) + [["none", "vec"]]
        elif policy == "try_unroll_vec":
            options = [unroll] * (n - 1) + [["none", "unroll", "vec"]]
        else:
            raise SearchSpaceError(f"annotate knob {name!r}: unknown policy {policy!r}; "
                                   "use 'try_unroll', 'try_vec' or 'try_unroll_vec'")
        super().__init__(name, [AnnotateEntity(a) for a in itertools.product(*options)])
        if default is None:  # vectorize what may be vectorized, unroll nothing
            default = ["none"] * (n - 1) + ["vec" if "vec" in options[-1] else "none"]
        self.default = self.index_of(list(default))

    def features(self, entity: Entity) -> list[float]:
        return [_ANN_CODES[a] for a in entity.anns]


class OtherOptionSpace(KnobSpace):
    """A list of candidate values (``define_knob``); JSON-serialisable values only."""

    kind = "knob"

    def __init__(self, name: str, candidates: Sequence, default=None):
        candidates = list(candidates)
        for c in candidates:
            try:
                json.dumps(c)
            except TypeError:
                raise SearchSpaceError(f"knob {name!r}: candidate {c!r} is not JSON-serialisable") from None
        super().__init__(name, [OtherOptionEntity(c) for c in candidates])
        if default is not None:
            self.default = self.index_of(default)

    def features(self, entity: Entity) -> list[float]:
        v = entity.val
        if isinstance(v, (bool, int, float)):
            return [float(v)]
        return [float(self.entities.index(entity))]


def _jsonable(value):
    """``value`` as JSON would give it back (tuples become lists)."""
    return json.loads(json.dumps(value))


# ---------------------------------------------------------------------------- constraints


@dataclass(frozen=True)
class _Constraint:
    predicate: Callable
    knobs: tuple[str, ...] | None  # None: may read any knob
    name: str


class _View:
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
        return self._entities.get(name, default)


@dataclass
class _Part:
    """A set of knobs tied together by constraints, with what is known of its valid points."""

    knobs: list[int]              # positions in the space, definition order
    constraints: list[_Constraint]
    raw: int                      # product of the knobs' sizes
    valid: np.ndarray | list | None = None  # sorted valid sub-indices, when enumerated
    estimate: float = 0.0         # estimated number of valid points, when not enumerated


# ---------------------------------------------------------------------------- config space


class ConfigSpace:
    """The space a template defines: ordered knobs and whole-config constraints.

    In *define* mode (while a template runs to build the space) ``define_*`` record
    knobs and ``cfg[name]`` gives the knob's default entity. Afterwards the space
    answers questions by mixed-radix index: :meth:`get`, :meth:`sample`,
    :meth:`neighbors`, :meth:`encode`, :attr:`default_config`, :meth:`from_json`.
    """

    is_fallback = False

    def __init__(self):
        self.space_map: dict[str, KnobSpace] = {}
        self._constraints: list[_Constraint] = []
        self._parts: list[_Part] | None = None
        self._default: ConfigEntity | None = None

    # ------------------------------------------------------------------ defining

    def _add(self, knob: KnobSpace) -> None:
        if not isinstance(knob.name, str) or not knob.name:
            raise SearchSpaceError(f"a knob name must be a non-empty string, got {knob.name!r}")
        if knob.name in self.space_map:
            raise SearchSpaceError(f"knob {knob.name!r} is defined twice")
        self.space_map[knob.name] = knob
        self._invalidate()

    def define_split(self, name: str, axis, policy: str = "factors", num_outputs: int = 2,
                     max_factor: int | None = None, filter: Callable | None = None,
                     default: Sequence[int] | None = None) -> None:
        """A knob splitting ``axis`` (an IterVar of constant extent, or the extent).

        ``default`` gives preferred sizes (outermost first, -1 for "the rest"); the
        closest choice becomes the default, which otherwise aims the innermost size at
        a vector width.
        """
        self._add(SplitSpace(name, _extent(axis, name), policy, num_outputs, max_factor, filter, default))

    def define_reorder(self, name: str, axes: Sequence, policy: str = "all", candidate=None,
                       interval: tuple[int, int] | None = None, default: Sequence[int] | None = None) -> None:
        """A knob choosing the order of ``axes`` (identity order by default)."""
        self._add(ReorderSpace(name, axes, policy, candidate, interval, default))

    def define_annotate(self, name: str, axes: Sequence, policy: str = "try_unroll",
                        default: Sequence[str] | None = None) -> None:
        """A knob choosing unroll/vectorize annotations of ``axes``."""
        self._add(AnnotateSpace(name, axes, policy, default))

    def define_knob(self, name: str, candidates: Sequence, default=None) -> None:
        """A knob choosing one of ``candidates`` (the first by default)."""
        self._add(OtherOptionSpace(name, candidates, default))

    def add_constraint(self, predicate: Callable, knobs: Sequence[str] | None = None,
                       name: str | None = None) -> None:
        """Keep only configs where ``predicate(cfg)`` is true.

        ``predicate`` reads knobs as ``cfg["tile_x"].size``. Naming the knobs it reads
        in ``knobs`` lets the space count and sample it on those knobs alone (exactly
        and quickly); without it the predicate is assumed to read every knob.
        """
        if not callable(predicate):
            raise SearchSpaceError(f"add_constraint needs a callable, got {predicate!r}")
        if knobs is not None:
            knobs = tuple(knobs)
            for k in knobs:
                if k not in self.space_map:
                    raise SearchSpaceError(f"add_constraint: unknown knob {k!r}; define it first "
                                           f"(known: {', '.join(self.space_map) or 'none'})")
        label = name or getattr(predicate, "__name__", "constraint")
        self._constraints.append(_Constraint(predicate, knobs, f"{label!r}"))
        self._invalidate()

    def __getitem__(self, name: str) -> Entity:
        """The default entity of knob ``name`` (what a template sees in define mode)."""
        knob = self._knob(name)
        return knob.entities[knob.default]

    def _knob(self, name: str) -> KnobSpace:
        try:
            return self.space_map[name]
        except KeyError:
            raise SearchSpaceError(f"unknown knob {name!r}; known: {', '.join(self.space_map) or 'none'}") \
                from None

    def _invalidate(self) -> None:
        self._parts = None
        self._default = None

    # ------------------------------------------------------------------ sizes

    @property
    def knobs(self) -> list[KnobSpace]:
        return list(self.space_map.values())

    @property
    def raw_size(self) -> int:
        """The product of the knob sizes (constraints not applied)."""
        return math.prod(len(k) for k in self.space_map.values())

    @property
    def size(self) -> int:
        """The number of configs satisfying the constraints (see :attr:`size_is_exact`)."""
        total = 1.0
        exact = 1
        for part in self._analysis():
            if part.valid is not None:
                exact *= len(part.valid)
                total *= len(part.valid)
            else:
                total *= part.estimate
        return exact if self.size_is_exact else max(1, int(round(total)))

    @property
    def size_is_exact(self) -> bool:
        """Whether :attr:`size` is a count (True) or an estimate by sampling (False)."""
        return all(p.valid is not None for p in self._analysis())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        lines = [f"ConfigSpace({self.size}{'' if self.size_is_exact else ' (estimated)'} configs, "
                 f"{len(self.space_map)} knobs, {len(self._constraints)} constraints)"]
        for k in self.space_map.values():
            lines.append(f"  {k.name}: {k.kind}, {len(k)} choices, default {k[k.default].value()!r}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ indices

    def _strides(self) -> list[int]:
        out, acc = [], 1
        for k in self.space_map.values():
            out.append(acc)
            acc *= len(k)
        return out

    def index_to_choices(self, index: int) -> list[int]:
        """The choice of each knob (definition order) at mixed-radix ``index``."""
        index = self._check_index(index)
        out = []
        for k in self.space_map.values():
            index, r = divmod(index, len(k))
            out.append(r)
        return out

    def choices_to_index(self, choices: Sequence[int]) -> int:
        """The mixed-radix index of one choice per knob (definition order)."""
        return sum(int(c) * st for c, st in zip(choices, self._strides(), strict=True))

    def _check_index(self, index) -> int:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise SearchSpaceError(f"a config index is an int, got {index!r}")
        index = int(index)
        if not 0 <= index < self.raw_size:
            raise SearchSpaceError(f"config index {index} is outside the space [0, {self.raw_size})")
        return index

    def _entities(self, choices: Sequence[int]) -> dict[str, Entity]:
        return {k.name: k.entities[c] for k, c in zip(self.space_map.values(), choices)}

    def _violated(self, entities: dict[str, Entity]) -> _Constraint | None:
        for c in self._constraints:
            # A constraint sees only the knobs it declared, here as when counting.
            seen = entities if c.knobs is None else {k: entities[k] for k in c.knobs}
            if not c.predicate(_View(seen, c.name)):
                return c
        return None

    def is_valid(self, index: int) -> bool:
        """Whether the config at ``index`` satisfies every constraint."""
        return self._violated(self._entities(self.index_to_choices(index))) is None

    def get(self, index: int, check: bool = True) -> ConfigEntity:
        """The config at mixed-radix ``index``; with ``check``, one violating a
        constraint raises :class:`SearchSpaceError`."""
        entities = self._entities(self.index_to_choices(index))
        if check:
            bad = self._violated(entities)
            if bad is not None:
                raise SearchSpaceError(f"config index {index} violates constraint {bad.name}")
        return ConfigEntity(int(index), entities)

    def __iter__(self) -> Iterator[ConfigEntity]:
        """Every valid config in index order (meant for small spaces: grid search)."""
        for index in range(self.raw_size):
            entities = self._entities(self.index_to_choices(index))
            if self._violated(entities) is None:
                yield ConfigEntity(index, entities)

    # ------------------------------------------------------------------ constraint analysis

    def _analysis(self) -> list[_Part]:
        """Group knobs tied by constraints into parts; count each part's valid points."""
        if self._parts is not None:
            return self._parts
        names = list(self.space_map)
        pos = {n: k for k, n in enumerate(names)}
        parent = list(range(len(names)))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        groups_of: list[list[int]] = []
        for c in self._constraints:
            members = [pos[n] for n in (c.knobs if c.knobs is not None else names)]
            groups_of.append(members)
            for m in members[1:]:
                parent[find(m)] = find(members[0])
        by_root: dict[int, list[int]] = {}
        for k in range(len(names)):
            by_root.setdefault(find(k), []).append(k)
        parts = []
        for members in by_root.values():
            cons = [c for c, g in zip(self._constraints, groups_of) if g and find(g[0]) == find(members[0])]
            # A constraint with no knobs at all (knobs=()) belongs to every part once; put it on the first.
            raw = math.prod(len(self.space_map[names[k]]) for k in members)
            parts.append(_Part(members, cons, raw))
        empty = [c for c, g in zip(self._constraints, groups_of) if not g]
        if empty:
            if parts:
                parts[0].constraints += empty
            else:
                parts.append(_Part([], empty, 1))
        knobs = list(self.space_map.values())
        for part in parts:
            if not part.constraints:
                part.valid = range(part.raw)  # every point is valid; never materialised
            elif part.raw <= EXACT_SIZE_LIMIT:
                part.valid = np.array([i for i in range(part.raw) if self._part_ok(part, knobs, i)],
                                      dtype=np.int64)
            else:
                rng = np.random.default_rng(0)  # deterministic estimate
                hits = sum(self._part_ok(part, knobs, int(rng.integers(part.raw)))
                           for _ in range(_ESTIMATE_SAMPLES))
                part.estimate = part.raw * hits / _ESTIMATE_SAMPLES
        self._parts = parts
        return parts

    def _part_choices(self, part: _Part, knobs: list[KnobSpace], sub: int) -> list[int]:
        out = []
        for k in part.knobs:
            sub, r = divmod(sub, len(knobs[k]))
            out.append(r)
        return out

    def _part_ok(self, part: _Part, knobs: list[KnobSpace], sub: int) -> bool:
        choices = self._part_choices(part, knobs, sub)
        entities = {knobs[k].name: knobs[k].entities[c] for k, c in zip(part.knobs, choices)}
        return all(c.predicate(_View(entities, c.name)) for c in part.constraints)

    # ------------------------------------------------------------------ sampling

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> list[ConfigEntity]:
        """``n`` distinct valid configs drawn uniformly (fewer if the space is smaller).

        ``rng`` is a numpy Generator or a seed. Raises :class:`SearchSpaceError` when no
        valid config can be found (constraints that leave the space empty).
        """
        rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
        return [self.get(i, check=False) for i in self.sample_indices(n, rng)]

    def sample_indices(self, n: int, rng: np.random.Generator | int | None = None,
                       exclude: set[int] | None = None) -> list[int]:
        """Like :meth:`sample`, but indices; ``exclude`` lists indices not to return."""
        rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
        exclude = set() if exclude is None else exclude
        parts = self._analysis()
        if self.size_is_exact and self.size == 0:
            raise SearchSpaceError(f"the constraints leave no valid config ({self._describe_constraints()})")
        if self.size_is_exact and self.size <= max(4 * n, 4096):
            # Small enough to list: a permutation of the valid points.
            everything = [i for i in self._all_valid() if i not in exclude]
            order = rng.permutation(len(everything))[:n]
            return [everything[k] for k in order]
        knobs = list(self.space_map.values())
        strides = self._strides()
        seen: set[int] = set()
        out: list[int] = []
        misses = 0
        while len(out) < n:
            index = 0
            for part in parts:
                sub = self._draw(part, knobs, rng)
                for k, c in zip(part.knobs, self._part_choices(part, knobs, sub)):
                    index += c * strides[k]
            if index in seen or index in exclude:
                misses += 1
                if misses > 100 * n + 1000:  # the space is (nearly) exhausted
                    break
                continue
            seen.add(index)
            out.append(index)
        return out

    def _draw(self, part: _Part, knobs: list[KnobSpace], rng: np.random.Generator) -> int:
        if part.valid is not None:
            if len(part.valid) == 0:
                raise SearchSpaceError(
                    f"the constraints leave no valid config ({self._describe_constraints()})")
            return int(part.valid[int(rng.integers(len(part.valid)))])
        for _ in range(100 * _ESTIMATE_SAMPLES):
            sub = int(rng.integers(part.raw))
            if self._part_ok(part, knobs, sub):
                return sub
        raise SearchSpaceError("no config satisfying the constraints was found in "
                               f"{100 * _ESTIMATE_SAMPLES} draws ({self._describe_constraints()})")

    def _all_valid(self) -> list[int]:
        """Every valid index, sorted (only for exactly counted spaces)."""
        knobs = list(self.space_map.values())
        strides = self._strides()
        totals = [0]
        for part in self._analysis():
            offsets = []
            for sub in part.valid:
                offsets.append(sum(c * strides[k] for k, c in
                                   zip(part.knobs, self._part_choices(part, knobs, int(sub)))))
            totals = [t + o for t in totals for o in offsets]
        return sorted(totals)

    def _describe_constraints(self) -> str:
        return "constraints: " + ", ".join(c.name for c in self._constraints)

    # ------------------------------------------------------------------ local search, features

    def neighbors(self, config: ConfigEntity | int) -> list[ConfigEntity]:
        """Valid configs that differ from ``config`` in exactly one knob."""
        index = config.index if isinstance(config, ConfigEntity) else int(config)
        choices = self.index_to_choices(index)
        strides = self._strides()
        out = []
        for k, knob in enumerate(self.space_map.values()):
            for c in range(len(knob)):
                if c == choices[k]:
                    continue
                j = index + (c - choices[k]) * strides[k]
                if self.is_valid(j):
                    out.append(self.get(j, check=False))
        return out

    def encode(self, config: ConfigEntity | int) -> np.ndarray:
        """A numeric vector of ``config`` for cost models (same length for every point)."""
        index = config.index if isinstance(config, ConfigEntity) else int(config)
        feats: list[float] = []
        for knob, c in zip(self.space_map.values(), self.index_to_choices(index)):
            feats += knob.features(knob.entities[c])
        return np.asarray(feats, dtype=np.float64)

    def feature_names(self) -> list[str]:
        """Names of the entries of :meth:`encode`."""
        names = []
        for knob in self.space_map.values():
            width = len(knob.features(knob.entities[0]))
            names += [knob.name] if width == 1 else [f"{knob.name}.{i}" for i in range(width)]
        return names

    # ------------------------------------------------------------------ defaults, JSON

    @property
    def default_config(self) -> ConfigEntity:
        """A deterministic, valid config built from each knob's default (see each knob).

        When the knob defaults violate a constraint, the nearest valid config is taken:
        the first valid one in a breadth-first walk over one-knob changes.
        """
        if self._default is not None:
            return self._default
        knobs = list(self.space_map.values())
        start = self.choices_to_index([k.default for k in knobs])
        if self.is_valid(start):
            found = start
        else:
            found = self._nearest_valid(start)
        self._default = self.get(found, check=False)
        return self._default

    def _nearest_valid(self, start: int) -> int:
        """A valid config near ``start``: breadth-first over one-knob changes, preferring at each
        distance the change whose choice ranks best in its knob's preference order."""
        knobs = list(self.space_map.values())
        prefs = [k.preference() for k in knobs]
        rank = [{c: r for r, c in enumerate(p)} for p in prefs]
        strides = self._strides()
        seen = {start}
        frontier = [start]
        for _ in range(3):  # up to three knobs away from the defaults
            candidates = []
            for index in frontier:
                choices = self.index_to_choices(index)
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
                if self.is_valid(j):
                    return j
            frontier = [j for _, j in candidates]
        return self.sample_indices(1, np.random.default_rng(0))[0]

    def from_json(self, data: dict | str) -> ConfigEntity:
        """Read back a config written by :meth:`ConfigEntity.to_json`, validated against this space."""
        return ConfigEntity.from_json(self, data)


def _extent(axis, name: str) -> int:
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        return int(axis)
    dom = getattr(axis, "dom", None)
    extent = getattr(dom, "extent", None)
    value = getattr(extent, "value", None)
    if isinstance(value, int):
        return value
    raise SearchSpaceError(f"split knob {name!r}: needs an axis of constant extent (an original axis "
                           f"of a compute with a constant shape) or the extent as an int, got {axis!r}")


# ---------------------------------------------------------------------------- config entity


class ConfigEntity:
    """One point of a config space: an entity per knob, and its mixed-radix index.

    Inside a template (apply mode) ``cfg[name]`` is the chosen entity and the
    ``define_*`` calls do nothing. :meth:`to_json` / :meth:`from_json` round-trip it.
    """

    def __init__(self, index: int, entities: dict[str, Entity], is_fallback: bool = False):
        self.index = int(index)
        self._entities = dict(entities)
        self.is_fallback = is_fallback

    def __getitem__(self, name: str) -> Entity:
        try:
            return self._entities[name]
        except KeyError:
            raise SearchSpaceError(f"unknown knob {name!r}; this config has "
                                   f"{', '.join(self._entities) or 'no knobs'}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entities

    def keys(self) -> list[str]:
        return list(self._entities)

    def items(self):
        return self._entities.items()

    def knob_values(self) -> dict:
        """``{knob name: JSON value}``, in definition order."""
        return {k: e.value() for k, e in self._entities.items()}

    # Templates call these in apply mode too: the space is already defined, so they only
    # check that the knob belongs to this config.
    def _defined(self, name: str, *args, **kwargs) -> None:
        if name not in self._entities:
            raise SearchSpaceError(f"the template defines knob {name!r}, which this config lacks "
                                   f"(it has {', '.join(self._entities) or 'no knobs'}); "
                                   "the config belongs to another space")

    define_split = define_reorder = define_annotate = define_knob = _defined

    def add_constraint(self, predicate: Callable, knobs: Sequence[str] | None = None,
                       name: str | None = None) -> None:
        """No-op in apply mode (the space already applied its constraints)."""

    def to_json(self) -> dict:
        """``{"index": int, "knobs": {name: value}}``; plain JSON data."""
        return {"index": self.index, "knobs": self.knob_values()}

    @classmethod
    def from_json(cls, space: ConfigSpace, data: dict | str) -> ConfigEntity:
        """The config described by ``data`` in ``space``; unknown or missing knobs, values
        outside the space, a wrong index and violated constraints raise :class:`SearchSpaceError`."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise SearchSpaceError(f"config JSON does not parse: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("knobs"), dict):
            raise SearchSpaceError(f"a config is {{'index': int, 'knobs': {{...}}}}, got {data!r}")
        knobs = data["knobs"]
        unknown = [k for k in knobs if k not in space.space_map]
        if unknown:
            raise SearchSpaceError(f"unknown knob {unknown[0]!r} in config; the space has "
                                   f"{', '.join(space.space_map) or 'no knobs'}")
        missing = [k for k in space.space_map if k not in knobs]
        if missing:
            raise SearchSpaceError(f"config lacks knob {missing[0]!r}")
        choices = [knob.index_of(knobs[name]) for name, knob in space.space_map.items()]
        index = space.choices_to_index(choices)
        if "index" in data and data["index"] is not None and data["index"] != index:
            raise SearchSpaceError(f"config index {data['index']!r} does not match its knob values "
                                   f"(which give index {index})")
        entities = space._entities(choices)
        bad = space._violated(entities)
        if bad is not None:
            raise SearchSpaceError(f"config {knobs!r} violates constraint {bad.name}")
        return cls(index, entities)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ConfigEntity) and self.index == other.index
                and self.knob_values() == other.knob_values())

    def __hash__(self) -> int:
        return hash((self.index, json.dumps(self.knob_values())))

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={e.value()!r}" for k, e in self._entities.items())
        return f"ConfigEntity(index={self.index}, {body})"
