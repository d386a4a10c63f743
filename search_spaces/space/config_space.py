"""The config space a template defines: ordered knobs, constraints, and access by index.

A point of the space is a mixed-radix index: knob ``k`` contributes
``choice_k * stride_k`` with ``stride_0 = 1`` (the first knob varies fastest), so a
space of 10**12 points is never enumerated. Constraint analysis
(:mod:`~search_spaces.space.constraint`) counts the valid points;
:mod:`~search_spaces.space.sampling` draws and walks them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from search_spaces.errors import SearchSpaceError
from search_spaces.space import sampling
from search_spaces.space.axis import Axis, VirtualAxis, axis_length, knob_outputs
from search_spaces.space.config import ConfigEntity, checked_flop
from search_spaces.space.constraint import Constraint, Part, analyse, violated
from search_spaces.space.entity import Entity
from search_spaces.space.knob import AnnotateSpace, KnobSpace, OtherOptionSpace, ReorderSpace, SplitSpace

__all__ = ["ConfigSpace"]


class ConfigSpace:
    """The space a template defines: ordered knobs and whole-config constraints.

    In *define* mode (while a template runs to build the space) ``define_*`` record
    knobs and ``cfg[name]`` gives the knob's default entity. Afterwards the space
    answers questions by mixed-radix index: :meth:`from_index`, :meth:`sample`,
    :meth:`neighbors`, :meth:`encode`, :attr:`default_config`, :meth:`from_json`.
    ``len(space)`` counts the valid configs and :meth:`get` numbers them ``0..len-1``.
    """

    is_fallback = False

    def __init__(self):
        self.space_map: dict[str, KnobSpace] = {}
        self._constraints: list[Constraint] = []
        self._parts: list[Part] | None = None
        self._default: ConfigEntity | None = None
        self.flop = 0  # what the template declared with add_flop; 0: counted from the compute
        self.errors: list[str] = []  # what the template's define run passed to raise_error

    # ------------------------------------------------------------------ defining

    def _add(self, knob: KnobSpace, outputs: int) -> list[Axis]:
        """Record ``knob``; returns its ``outputs`` output axes, as AutoTVM's ``define_*``."""
        if not isinstance(knob.name, str) or not knob.name:
            raise SearchSpaceError(f"a knob name must be a non-empty string, got {knob.name!r}")
        if knob.name in self.space_map:
            raise SearchSpaceError(f"knob {knob.name!r} is defined twice")
        self.space_map[knob.name] = knob
        self._invalidate()
        return knob_outputs(knob, outputs)

    @staticmethod
    def axis(var, name: str | None = None) -> VirtualAxis:
        """A virtual axis (AutoTVM's ``cfg.axis``): ``var`` is its length or an IterVar.
        Knobs may be defined on it, and reorder candidates name it."""
        return VirtualAxis(var, name)

    reduce_axis = axis

    def define_split(self, name: str, axis, policy: str = "factors", num_outputs: int = 2,
                     max_factor: int | None = None, filter: Callable | None = None,
                     default: Sequence[int] | None = None, candidate: Sequence[Sequence[int]] | None = None,
                     no_tail: bool | None = None) -> list[Axis]:
        """A knob splitting ``axis`` (an IterVar of constant extent, a ``cfg.axis``, or the extent).

        ``policy`` is ``"factors"``, ``"power2"``, ``"verbose"`` or ``"candidate"`` (with
        ``candidate=[[sizes], ...]``), as in AutoTVM (see :class:`SplitSpace`). ``default``
        gives preferred sizes (outermost first, -1 for "the rest"); the closest choice
        becomes the default, which otherwise aims the innermost size at a vector width.
        Returns the ``num_outputs`` output axes (:class:`~search_spaces.space.axis.Axis`), as AutoTVM.
        """
        return self._add(SplitSpace(name, axis_length(axis, name), policy, num_outputs, max_factor, filter,
                                    default, candidate, no_tail), num_outputs)

    def define_reorder(self, name: str, axes: Sequence, policy: str = "all", candidate=None,
                       interval: tuple[int, int] | None = None,
                       default: Sequence[int] | None = None) -> list[Axis]:
        """A knob choosing the order of ``axes``: ``policy`` is ``"all"``, ``"identity"``,
        ``"interval_all"`` (with ``interval=(lo, hi)``) or ``"candidate"`` (identity order
        by default). Returns one output axis per axis, as AutoTVM."""
        return self._add(ReorderSpace(name, axes, policy, candidate, interval, default), len(axes))

    def define_annotate(self, name: str, axes: Sequence, policy: str = "try_unroll",
                        default: Sequence[str] | None = None, num_anchor: int | None = None) -> list[Axis]:
        """A knob choosing annotations of ``axes`` (``"try_unroll"``, ``"try_vec"``,
        ``"try_unroll_vec"``..., or ``"locate_cache"`` with ``num_anchor``; see
        :class:`AnnotateSpace`). Returns one output axis per axis, as AutoTVM."""
        return self._add(AnnotateSpace(name, axes, policy, default, num_anchor), len(axes))

    def define_knob(self, name: str, candidate: Sequence, default=None, absent=None) -> list[Axis]:
        """A knob choosing one of ``candidate`` (the first by default). Returns ``[]`` (it has no
        output axes), as AutoTVM.

        ``absent``, for a knob added to a template that tuning logs already hold configs of: the
        choice that does what the template did before, which a config recorded without the knob
        stands for (:meth:`ConfigEntity.from_json`), so that those logs still apply and resume.
        """
        return self._add(OtherOptionSpace(name, candidate, default, absent), 0)

    def add_flop(self, flop) -> None:
        """Declare ``flop`` arithmetic operations of one run of the template (AutoTVM's
        ``cfg.add_flop``); calls add up. A task's ``flop`` is what was declared, or, where
        nothing was, what its compute definition counts: declare it when the work happens
        where no count can see it (``te.extern`` calls, a library's kernel)."""
        self.flop += checked_flop(flop)

    def raise_error(self, msg: str) -> None:
        """AutoTVM's ``cfg.raise_error`` while the space is defined: the template ran with each
        knob's default, which it may reject; that is noted in :attr:`errors` and nothing more
        (a config it rejects when applied fails as an instantiation error)."""
        self.errors.append(msg)

    def valid(self) -> bool:
        """Whether the define run passed nothing to :meth:`raise_error`."""
        return not self.errors

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
        self._constraints.append(Constraint(predicate, knobs, f"{label!r}"))
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
        for part in self.parts():
            if part.valid is not None:
                exact *= len(part.valid)
                total *= len(part.valid)
            else:
                total *= part.estimate
        return exact if self.size_is_exact else max(1, int(round(total)))

    @property
    def size_is_exact(self) -> bool:
        """Whether :attr:`size` is a count (True) or an estimate by sampling (False)."""
        return all(p.valid is not None for p in self.parts())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        lines = [f"ConfigSpace({self.size}{'' if self.size_is_exact else ' (estimated)'} configs, "
                 f"{len(self.space_map)} knobs, {len(self._constraints)} constraints)"]
        for k in self.space_map.values():
            lines.append(f"  {k.name}: {k.kind}, {len(k)} choices, default {k[k.default].value()!r}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ indices

    def strides(self) -> list[int]:
        """How much a knob's choice weighs in a mixed-radix index, per knob (definition order):
        ``index == sum(choice * stride)``."""
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
        return sum(int(c) * st for c, st in zip(choices, self.strides(), strict=True))

    def _check_index(self, index) -> int:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise SearchSpaceError(f"a config index is an int, got {index!r}")
        index = int(index)
        if not 0 <= index < self.raw_size:
            raise SearchSpaceError(f"config index {index} is outside the space [0, {self.raw_size})")
        return index

    def entities(self, choices: Sequence[int]) -> dict[str, Entity]:
        """``{knob name: entity}`` of one choice per knob (definition order), unchecked."""
        return {k.name: k.entities[c] for k, c in zip(self.space_map.values(), choices)}

    def violated_constraint(self, entities: dict[str, Entity]) -> Constraint | None:
        """The first constraint that the knob entities ``entities`` break, or None."""
        return violated(self._constraints, entities)

    @property
    def range_length(self) -> int:
        """The number of indices, valid or not (AutoTVM's ``range_length``): :attr:`raw_size`."""
        return self.raw_size

    def is_index_valid(self, index: int) -> bool:
        """Whether ``index`` (``0 <= index < range_length``) is a config that satisfies every
        constraint (AutoTVM's ``is_index_valid``)."""
        return self.is_valid(index)

    def is_valid(self, index: int) -> bool:
        """Whether the config at ``index`` satisfies every constraint."""
        return self.violated_constraint(self.entities(self.index_to_choices(index))) is None

    def get(self, position: int) -> ConfigEntity:
        """The ``position``-th valid config in index order, ``0 <= position < len(self)``:
        ``[space.get(i) for i in range(len(space))]`` is ``list(space)``.

        Outside that range raises :class:`IndexError`; a space whose size is only an
        estimate (:attr:`size_is_exact` False) cannot be indexed by position and raises
        :class:`SearchSpaceError`. :meth:`from_index` reads a config by its mixed-radix index.
        """
        if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
            raise SearchSpaceError(f"a config position is an int, got {position!r}")
        if not self.size_is_exact:
            raise SearchSpaceError(f"get({position}): this space's size is an estimate (a constrained part "
                                   "is too large to enumerate), so its configs have no positions; "
                                   "use from_index(index) or sample()")
        if not 0 <= position < self.size:
            raise IndexError(f"config position {position} is outside the {self.size} valid configs")
        return self.from_index(sampling.valid_index_at(self, int(position)), check=False)

    def from_index(self, index: int, check: bool = True) -> ConfigEntity:
        """The config at mixed-radix ``index`` (``0 <= index < raw_size``; see
        :meth:`index_to_choices`); with ``check``, one violating a constraint raises
        :class:`SearchSpaceError`."""
        entities = self.entities(self.index_to_choices(index))
        if check:
            bad = self.violated_constraint(entities)
            if bad is not None:
                raise SearchSpaceError(f"config index {index} violates constraint {bad.name}")
        return ConfigEntity(int(index), entities)

    def __iter__(self) -> Iterator[ConfigEntity]:
        """Every valid config in index order, as :meth:`get` numbers them (meant for small
        spaces: grid search)."""
        for index in range(self.raw_size):
            entities = self.entities(self.index_to_choices(index))
            if self.violated_constraint(entities) is None:
                yield ConfigEntity(index, entities)

    # ------------------------------------------------------------------ constraint analysis

    def parts(self) -> list[Part]:
        """The space's parts (knobs that constraints tie together, each knob alone otherwise) with
        what is known of their valid points (computed once per definition;
        :mod:`~search_spaces.space.sampling` walks them)."""
        if self._parts is None:
            self._parts = analyse(self.knobs, self._constraints)
        return self._parts

    def describe_constraints(self) -> str:
        """``"constraints: <name>, ..."``: the space's constraints, for error messages."""
        return "constraints: " + ", ".join(c.name for c in self._constraints)

    # ------------------------------------------------------------------ sampling, local search

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> list[ConfigEntity]:
        """``n`` distinct valid configs drawn uniformly (fewer if the space is smaller).

        ``rng`` is a numpy Generator or a seed. Raises :class:`SearchSpaceError` when no
        valid config can be found (constraints that leave the space empty).
        """
        return [self.from_index(i, check=False) for i in self.sample_indices(n, rng)]

    def sample_indices(self, n: int, rng: np.random.Generator | int | None = None,
                       exclude: set[int] | None = None) -> list[int]:
        """Like :meth:`sample`, but indices; ``exclude`` lists indices not to return."""
        return sampling.sample_indices(self, n, sampling.as_rng(rng), exclude)

    def valid_indices(self) -> list[int]:
        """The mixed-radix index of every valid config, sorted: ``get(i).index`` is the
        ``i``-th. Only for a space whose size is exact, and meant for small ones (it lists
        them all; :meth:`get` finds one without listing)."""
        if not self.size_is_exact:
            raise SearchSpaceError("valid_indices: this space's size is an estimate (a constrained part "
                                   "is too large to enumerate); draw configs with sample()")
        return sampling.all_valid(self)

    def neighbors(self, config: ConfigEntity | int) -> list[ConfigEntity]:
        """Valid configs that differ from ``config`` in exactly one knob."""
        index = config.index if isinstance(config, ConfigEntity) else int(config)
        return [self.from_index(j, check=False) for j in sampling.neighbor_indices(self, index)]

    # ------------------------------------------------------------------ features

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
            found = sampling.nearest_valid(self, start)
        self._default = self.from_index(found, check=False)
        return self._default

    def from_json(self, data: dict | str) -> ConfigEntity:
        """Read back a config written by :meth:`ConfigEntity.to_json`, validated against this space."""
        return ConfigEntity.from_json(self, data)
