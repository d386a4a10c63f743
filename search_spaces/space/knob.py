"""Knob spaces: the entities one knob can take, their default and their numeric encoding."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence

from search_spaces.errors import SearchSpaceError
from search_spaces.space.entity import (
    AnnotateEntity,
    Entity,
    OtherOptionEntity,
    ReorderEntity,
    SplitEntity,
)

__all__ = ["KnobSpace", "SplitSpace", "ReorderSpace", "AnnotateSpace", "OtherOptionSpace"]

# The vector width (in elements) that split defaults aim their innermost factor at.
_DEFAULT_INNER = 16
_DEFAULT_MIDDLE = 4


class KnobSpace:
    """The entities one knob can take, in a fixed order; ``default`` indexes one of them."""

    kind = "knob"

    def __init__(self, name: str, entities: list[Entity], default: int = 0):
        if not entities:
            raise SearchSpaceError(f"knob {name!r} has no choices (check its filter or candidates)")
        self.name = name
        self.entities = entities
        self.default = default
        # The choice a config recorded before the knob existed stands for (None: such a config
        # does not fit the space).
        self.absent: int | None = None
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


def _candidates(name: str, candidate) -> list:
    """The candidate sizes of a ``policy="candidate"`` split, checked to be a list of lists."""
    if not candidate or isinstance(candidate, (str, bytes)):
        raise SearchSpaceError(f"split knob {name!r}: policy 'candidate' needs candidate=[[sizes], ...]")
    out = []
    for size in candidate:
        if isinstance(size, (str, bytes)) or not isinstance(size, Sequence):
            raise SearchSpaceError(f"split knob {name!r}: candidate {size!r} is not a list of sizes")
        out.append(size)
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class SplitSpace(KnobSpace):
    """Ways to split an axis of ``extent`` into ``num_outputs`` nested axes, in AutoTVM's order.

    Policies (AutoTVM's): ``"factors"`` (inner sizes divide the extent exactly),
    ``"power2"`` (inner sizes are powers of two; the outer loop is guarded where they
    overshoot), ``"verbose"`` (divisors and powers of two) and ``"candidate"`` (the sizes
    listed in ``candidate``, outermost first; an outermost ``-1`` means "the rest").
    ``max_factor`` bounds each inner size; ``filter(entity) -> bool`` drops choices;
    ``no_tail`` (default: only for ``"factors"``) keeps only splits whose sizes multiply to
    the extent.

    The choices are listed as AutoTVM lists them, so that a config index means the same
    config as in AutoTVM: inner sizes from the candidate factors, the innermost size varying
    slowest and the second outermost fastest; ``"verbose"`` takes its factors in the order of
    AutoTVM's set of them. An entity's ``size`` is complete (``size[0]`` is
    ``ceil(extent / prod(size[1:]))``, where AutoTVM writes -1).
    """

    kind = "split"
    POLICIES = ("factors", "power2", "verbose", "candidate")

    def __init__(self, name: str, extent: int, policy: str = "factors", num_outputs: int = 2,
                 max_factor: int | None = None, filter: Callable | None = None,
                 default: Sequence[int] | None = None, candidate: Sequence[Sequence[int]] | None = None,
                 no_tail: bool | None = None):
        if not isinstance(extent, int) or isinstance(extent, bool) or extent < 1:
            raise SearchSpaceError(f"split knob {name!r}: the axis extent must be a positive "
                                   f"constant int, got {extent!r}")
        if not isinstance(num_outputs, int) or not 2 <= num_outputs <= 4:
            raise SearchSpaceError(f"split knob {name!r}: num_outputs must be 2, 3 or 4, got {num_outputs!r}")
        if policy not in self.POLICIES:
            raise SearchSpaceError(f"split knob {name!r}: unknown policy {policy!r}; "
                                   f"use one of {', '.join(map(repr, self.POLICIES))}")
        self.extent, self.policy, self.num_outputs = extent, policy, num_outputs
        if policy == "candidate":
            entities = [self._candidate(name, size) for size in _candidates(name, candidate)]
        else:
            if candidate is not None:
                raise SearchSpaceError(f"split knob {name!r}: candidate= needs policy='candidate'")
            no_tail = policy == "factors" if no_tail is None else no_tail
            entities = self._enumerate(policy, max_factor, no_tail)
        if filter is not None:
            entities = [e for e in entities if filter(e)]
        super().__init__(name, entities)
        self.default = self._closest(default)

    def _enumerate(self, policy: str, max_factor: int | None, no_tail: bool) -> list[SplitEntity]:
        extent = self.extent
        limit = extent if max_factor is None else min(extent, int(max_factor))
        divs = _divisors(extent)
        pow2 = [1 << k for k in range(extent.bit_length())]
        if policy == "verbose":
            # AutoTVM lists the union of the two sets as the set iterates; for ints that order
            # is fixed, and the config index depends on it.
            factors = list(set(divs) | set(pow2))
        else:
            factors = divs if policy == "factors" else pow2
        factors = [f for f in factors if f <= limit]
        entities = []
        # AutoTVM's depth-first walk picks the innermost size in its outermost loop.
        for picked in itertools.product(factors, repeat=self.num_outputs - 1):
            inner = picked[::-1]
            prod = math.prod(inner)
            if prod > extent or (no_tail and extent % prod):
                continue
            entities.append(SplitEntity((-(-extent // prod),) + inner))
        return entities

    def _candidate(self, name: str, size) -> SplitEntity:
        size = list(size)
        if len(size) != self.num_outputs:
            raise SearchSpaceError(f"split knob {name!r}: candidate {size!r} has {len(size)} sizes, "
                                   f"num_outputs is {self.num_outputs}")
        inner = size[1:]
        if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in inner):
            raise SearchSpaceError(f"split knob {name!r}: candidate {size!r} needs positive int inner sizes")
        outer = -(-self.extent // math.prod(inner))
        if size[0] != -1 and size[0] != outer:
            raise SearchSpaceError(f"split knob {name!r}: candidate {size!r} splits an axis of "
                                   f"{self.extent}, so its outermost size is {outer} (or -1)")
        return SplitEntity([outer] + inner)

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
    """Orders of ``n`` axes (AutoTVM's policies): ``"all"`` permutations, ``"identity"`` only,
    permutations of an ``interval=(lo, hi)`` only (``"interval_all"``, or ``"interval"``), or
    a ``"candidate"`` list of orders (each a list of the knob's axes, or their positions)."""

    kind = "reorder"

    def __init__(self, name: str, axes: Sequence, policy: str = "all", candidate=None,
                 interval: tuple[int, int] | None = None, default: Sequence[int] | None = None):
        n = len(axes)
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy in ("interval", "interval_all"):
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
                                   "use 'all', 'identity', 'interval_all' or 'candidate' "
                                   "('interleave' is not supported)")
        super().__init__(name, [ReorderEntity(p) for p in perms])
        if default is not None:
            self.default = self.index_of(list(default))

    def features(self, entity: Entity) -> list[float]:
        return [float(p) for p in entity.perm]


_ANN_CODES = {"none": 0.0, "unroll": 1.0, "vec": 2.0}
_ANNOTATIONS = ("none", "unroll", "vec")


class AnnotateSpace(KnobSpace):
    """Annotations of ``n`` axes, listed in AutoTVM's order.

    A policy is a ``_``-separated list of annotations, ``try`` meaning "or none":
    ``"try_unroll"`` (each axis unrolled or not), ``"try_vec"`` (at most one axis
    vectorized), ``"try_unroll_vec"`` (each axis none, unrolled or vectorized, at most one
    vectorized), ``"unroll"``, ``"vec"``... as AutoTVM enumerates them (the first axis varies
    slowest). ``"locate_cache"`` chooses ``num_anchor`` of the axes (increasing positions)
    to attach caches at (``entity.apply(s, op, axes, source=[[cache, ...], ...])``).
    The default vectorizes the last axis where the policy may, and annotates nothing else.
    """

    kind = "annotate"

    def __init__(self, name: str, axes: Sequence, policy: str = "try_unroll",
                 default: Sequence[str] | None = None, num_anchor: int | None = None):
        n = len(axes)
        if n < 1:
            raise SearchSpaceError(f"annotate knob {name!r} needs at least one axis")
        self.policy = policy
        if policy == "locate_cache":
            if not isinstance(num_anchor, int) or not 1 <= num_anchor <= n:
                raise SearchSpaceError(f"annotate knob {name!r}: 'locate_cache' needs num_anchor, "
                                       f"an int in 1..{n}, got {num_anchor!r}")
            super().__init__(name, [AnnotateEntity(c) for c in itertools.combinations(range(n), num_anchor)])
            if default is not None:
                self.default = self.index_of(list(default))
            return
        options = policy.replace("try", "none").split("_") if isinstance(policy, str) else [None]
        if any(o not in _ANNOTATIONS for o in options):
            raise SearchSpaceError(f"annotate knob {name!r}: unknown policy {policy!r}; use 'try_unroll', "
                                   "'try_vec', 'try_unroll_vec', 'unroll', 'vec' or 'locate_cache' "
                                   "('bind_gpu' is not supported)")
        # Every combination with at most one vectorized axis, the first axis varying slowest.
        anns = [a for a in itertools.product(options, repeat=n) if a.count("vec") <= 1]
        super().__init__(name, [AnnotateEntity(a) for a in anns])
        if default is None:  # vectorize the last axis where it may be, annotate little else
            self.default = max(range(len(anns)),
                               key=lambda k: (anns[k][-1] == "vec", anns[k].count("none"), -k))
        else:
            self.default = self.index_of(list(default))

    def features(self, entity: Entity) -> list[float]:
        return [_ANN_CODES[a] if isinstance(a, str) else float(a) for a in entity.anns]


class OtherOptionSpace(KnobSpace):
    """A list of candidate values (``define_knob``); JSON-serialisable values only."""

    kind = "knob"

    def __init__(self, name: str, candidates: Sequence, default=None, absent=None):
        candidates = list(candidates)
        for c in candidates:
            try:
                json.dumps(c)
            except TypeError:
                raise SearchSpaceError(f"knob {name!r}: candidate {c!r} is not JSON-serialisable") from None
        super().__init__(name, [OtherOptionEntity(c) for c in candidates])
        if default is not None:
            self.default = self.index_of(default)
        if absent is not None:
            self.absent = self.index_of(absent)

    def features(self, entity: Entity) -> list[float]:
        v = entity.val
        if isinstance(v, (bool, int, float)):
            return [float(v)]
        return [float(self.entities.index(entity))]


def _jsonable(value):
    """``value`` as JSON would give it back (tuples become lists)."""
    return json.loads(json.dumps(value))

