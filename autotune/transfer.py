"""Tuned configs of neighbouring workloads, adapted to a shape nobody tuned.

A deployment meets shapes the tuning log does not hold (``matmul(1000, 1000, 1000)``
beside a log of 768 and 1024). The configs of the nearest workloads of the same template
are still good guesses, once they fit the new shape:

* **Adapting** (:func:`adapt`). Each knob of the new space gets the value nearest the
  tuned one. A split keeps its inner factors where the new extent allows them (exactly,
  or with a guarded tail where the split's policy allows one), else takes the nearest
  factorisation in log space, the innermost (vector) factor weighing most, and work
  wasted in a tail counting against it; a split that held the whole axis in its inner
  loops still does. A numeric knob (``define_knob``) whose value was at an end of its
  range (the largest block: all columns, ``kc = K``) takes the same end of the new range;
  otherwise it keeps its value when the new space has it, else takes the argument of the
  new workload that stands where the value stood among the tuned workload's arguments,
  else the nearest value in log space. Other knobs are carried over when valid. When the
  knobs together break a constraint of the new space, the valid config nearest to the
  wanted values is taken (best-first over the knobs' choices, ordered by distance).
* **Ranking** (:func:`candidates`). Neighbours are workloads of the same template and
  target kind (and CPU or GPU model, unless other models are allowed), nearest first by
  :func:`arg_distance`. Each neighbour's best configs come from :func:`selection.best`; a
  candidate is ranked by how well it did there, its score relative to that workload's
  best (1.0 for the winner), then by the distance of its workload, then by the
  workload's key and the adapted config's index, so that every process reading the
  same log makes the same choice.
  Each candidate says which workload it came from (:class:`BorrowedConfig`).

:func:`warm_start_configs` gives ``tune(warm_start=k)`` the first ``k`` candidates;
``apply_history_best`` applies the first.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import db as tuning_db
from compiler.target import Target
from search_spaces import create_task
from search_spaces.space import ConfigEntity, ConfigSpace, OtherOptionSpace, SplitSpace

from . import selection

__all__ = ["arg_distance", "Adapted", "adapt", "BorrowedConfig", "Source", "LogSource", "candidates",
           "borrow", "warm_start_configs"]

logger = logging.getLogger(__name__)

# How many of the nearest workloads candidates are drawn from.
NEIGHBOURS = 3
# Configs adapted per neighbour when the caller does not ask for more.
PER_NEIGHBOUR = 4
# Configs of the new space the repair of a broken constraint looks at before giving up.
_SEARCH_LIMIT = 20_000
# A split's innermost (vector) factor weighs this much more than the others when it must change.
_INNER_WEIGHT = 2.0
# The cost of a categorical knob that cannot keep its value; its choices are then ordered by
# the knob's own preference, each step adding _STEP.
_CHANGE = 1.0
_STEP = 1e-3


# ---------------------------------------------------------------------------- distances


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _log_gap(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if a > 0 and b > 0:
        return abs(math.log2(a / b))
    return abs(a - b) / (abs(a) + abs(b))  # zero or negative values: a bounded gap


def arg_distance(a: Sequence, b: Sequence) -> float | None:
    """How far apart two argument lists are: the sum of the log2 ratios of their numbers,
    nested lists included (None when they cannot be compared: other lengths, or other
    values that are no numbers, such as another dtype)."""
    if len(a) != len(b):
        return None
    total = 0.0
    for x, y in zip(a, b):
        if isinstance(x, list | tuple) and isinstance(y, list | tuple):
            d = arg_distance(x, y)
            if d is None:
                return None
            total += d
        elif _is_number(x) and _is_number(y):
            total += _log_gap(x, y)
        elif x != y:
            return None
    return total


# ---------------------------------------------------------------------------- adapting one config


@dataclass(frozen=True)
class Adapted:
    """A config adapted to a new space: the config, and each knob whose value changed
    (``{knob: (tuned value, adapted value)}``; ``None`` for a knob the tuned config lacked)."""

    config: ConfigEntity
    changed: dict


def _plain(value):
    return json.loads(json.dumps(value))


def _split_costs(knob: SplitSpace, want) -> list[float]:
    """Distance of each split choice to the tuned sizes ``want`` (outermost first)."""
    n = knob.num_outputs
    if not isinstance(want, list) or len(want) != n or not all(_is_number(x) and x > 0 for x in want):
        return [_STEP * r for r in _ranks(knob)]
    inner = want[1:]
    if want[0] == 1:  # the whole axis in the inner loops: still so, the innermost factors kept
        inner[0] = -(-knob.extent // math.prod(inner[1:]))
    costs = []
    for e in knob.entities:
        got = e.size[1:]
        d = sum(abs(math.log2(w / g)) * (_INNER_WEIGHT if i == n - 2 else 1.0)
                for i, (w, g) in enumerate(zip(inner, got)))
        d += math.log2(e.size[0] * math.prod(got) / knob.extent)  # work wasted in a guarded tail
        costs.append(d)
    return costs


def _role_value(want, knob: OtherOptionSpace, source_args: Sequence, target_args: Sequence):
    """The argument of the new workload that stands where ``want`` stood among the tuned
    workload's arguments (``kc = K`` becomes the new ``K``), if the knob offers it."""
    offered = {json.dumps(e.val) for e in knob.entities}
    found = [t for s, t in zip(source_args, target_args)
             if _is_number(s) and _is_number(t) and s == want and json.dumps(t) in offered]
    return min(found, key=lambda t: (_log_gap(t, want), t)) if found else None


def _numbers(knob) -> list | None:
    """The values of a ``define_knob`` knob when they are all numbers, else None."""
    if not isinstance(knob, OtherOptionSpace):
        return None
    values = [e.val for e in knob.entities]
    return values if all(_is_number(v) for v in values) else None


def _option_costs(knob: OtherOptionSpace, want, source_args, target_args, source_knob) -> list[float]:
    """Distance of each choice of a ``define_knob`` knob to the tuned value ``want``.

    A value at an end of the tuned knob's range (the largest block: all of an axis) aims at
    the same end of the new range; a value the new knob lacks aims at the argument it stood
    for, if any, else at itself.
    """
    values = _numbers(knob)
    if values is None or not _is_number(want):
        return _categorical_costs(knob, want)
    aim = want
    tuned = _numbers(source_knob) if source_knob is not None else None
    if tuned and len(tuned) > 1 and want in (min(tuned), max(tuned)):
        aim = max(values) if want == max(tuned) else min(values)
    elif want not in values:
        role = _role_value(want, knob, source_args, target_args)
        aim = want if role is None else role
    return [_log_gap(v, aim) for v in values]


def _ranks(knob) -> list[int]:
    """The rank of each choice in the knob's own preference (its default first)."""
    rank = [0] * len(knob)
    for r, c in enumerate(knob.preference()):
        rank[c] = r
    return rank


def _categorical_costs(knob, want) -> list[float]:
    key = json.dumps(_plain(want)) if want is not None else None
    return [0.0 if key is not None and json.dumps(e.value()) == key else _CHANGE + _STEP * r
            for e, r in zip(knob.entities, _ranks(knob))]


def _knob_costs(knob, want, source_args, target_args, source_knob) -> list[float]:
    if want is None:  # a knob the tuned config lacks: the knob's own preference
        return [_STEP * r for r in _ranks(knob)]
    if isinstance(knob, SplitSpace):
        return _split_costs(knob, want)
    if isinstance(knob, OtherOptionSpace):
        return _option_costs(knob, want, source_args, target_args, source_knob)
    return _categorical_costs(knob, want)


def adapt(knobs: dict, space: ConfigSpace, source_args: Sequence = (), target_args: Sequence = (),
          source_space: ConfigSpace | None = None) -> Adapted | None:
    """The valid config of ``space`` nearest to the tuned knob values ``knobs``.

    ``source_args`` and ``target_args`` are the arguments of the tuned workload and of the
    new one (a value that equalled a tuned argument follows it); ``source_space``, the
    tuned workload's space, tells which values were at an end of their knob's range.
    Knobs the new space lacks are dropped, knobs the tuned config lacks take their default.
    Returns None when no valid config was found within a bounded search (a space whose
    constraints leave few valid points).
    """
    knobs = selection.knobs_of(knobs)
    names = list(space.space_map)
    source_args, target_args = _plain(list(source_args)), _plain(list(target_args))
    order = []  # per knob: choices sorted by cost, with their costs
    for name in names:
        knob = space.space_map[name]
        source_knob = source_space.space_map.get(name) if source_space is not None else None
        costs = _knob_costs(knob, _plain(knobs.get(name)), source_args, target_args, source_knob)
        order.append(sorted((cost, c) for c, cost in enumerate(costs)))
    index = _nearest_valid(space, order)
    if index is None:
        return None
    config = space.from_index(index)
    changed = {name: (knobs.get(name), value) for name, value in config.knob_values().items()
               if _plain(knobs.get(name)) != value}
    return Adapted(config, changed)


def _nearest_valid(space: ConfigSpace, order: list[list[tuple[float, int]]]) -> int | None:
    """Best-first over one rank per knob (each knob's choices by cost): the valid point of
    least total cost; ties go to the point that changes later knobs (earlier ranks lower)."""
    start = (0,) * len(order)

    def total(ranks) -> float:
        return sum(order[k][r][0] for k, r in enumerate(ranks))

    heap = [(total(start), start)]
    seen = {start}
    for _ in range(_SEARCH_LIMIT):
        if not heap:
            return None
        _, ranks = heapq.heappop(heap)
        index = space.choices_to_index([order[k][r][1] for k, r in enumerate(ranks)])
        if space.is_valid(index):
            return index
        for k in range(len(order)):
            if ranks[k] + 1 < len(order[k]):
                nxt = ranks[:k] + (ranks[k] + 1,) + ranks[k + 1:]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (total(nxt), nxt))
    return None


# ---------------------------------------------------------------------------- sources of tuned configs


class Source:
    """Where tuned configs come from: workloads, and each workload's best configs ranked."""

    def workloads(self) -> list[tuning_db.Workload]:
        """Every workload the source holds."""
        raise NotImplementedError

    def ranked(self, workload: tuning_db.Workload, k: int) -> list[tuple[dict, float]]:
        """The ``k`` best configs of ``workload``, best first: ``(knob values, score)``,
        where a lower score is better."""
        raise NotImplementedError


class LogSource(Source):
    """The configs of a tuning log, under :mod:`autotune.selection`'s ranking."""

    def __init__(self, log: tuning_db.TuningLog):
        self.log = log

    def workloads(self) -> list[tuning_db.Workload]:
        return self.log.workloads()

    def ranked(self, workload, k):
        return [(selection.knobs_of(e.config), e.score) for e in selection.best(self.log, workload.key, k)]


class BorrowedConfig(ConfigEntity):
    """A config adapted from another workload's tuned config.

    ``borrowed_from`` names that workload and its target (as people read it);
    ``source_key`` is its workload key, ``source_score`` the config's score there
    (seconds), ``relative_score`` that score over the workload's best (1.0 for its best),
    ``distance`` the workload's :func:`arg_distance` from the new one and ``changed`` the
    knobs adaptation changed (``{knob: (tuned, adapted)}``).
    """

    def __init__(self, adapted: Adapted, source: tuning_db.Workload, score: float, relative: float,
                 distance: float):
        super().__init__(adapted.config.index, dict(adapted.config.items()))
        self.borrowed_from = (f"{selection.workload_label(source.template, source.args)} on "
                              f"{selection.target_label(source.target, source.target_model)}")
        self.source_key = source.key
        self.source_score = score
        self.relative_score = relative
        self.distance = distance
        self.changed = adapted.changed

    def describe_changes(self) -> str:
        """The knobs adaptation changed, as ``"; name tuned -> adapted"`` each ("" for none)."""
        return "".join(f"; {name} {old} -> {new}" for name, (old, new) in self.changed.items())


def _neighbours(source: Source, task, other_shapes: bool, other_models: bool) -> list:
    """``(distance, workload)`` of the workloads of ``task``'s template it may borrow from,
    nearest first (the task's own model before others at equal distance, then by key)."""
    target = Target(task.target)
    args = _plain(list(task.args))
    near = []
    for w in source.workloads():
        if w.template != task.name or w.key == task.workload_key or w.target_kind != target.kind:
            continue
        if not other_models and w.target_model != target.model:
            continue
        d = arg_distance(args, list(w.args))
        if d is None or (d > 0 and not other_shapes) or (d == 0 and w.target_model == target.model):
            continue  # not comparable, another shape when none may be, or the task's own workload
        near.append((d, w.target_model != target.model, w.key, w))
    near.sort(key=lambda n: n[:3])
    return [(d, w) for d, _, _, w in near]


def _space_of(workload: tuning_db.Workload) -> ConfigSpace | None:
    """The config space of a tuned workload (None when this code can no longer define it)."""
    try:
        return create_task(workload.template, workload.args, workload.target).config_space
    except Exception as err:  # noqa: BLE001 - a workload this code cannot rebuild still lends its knobs
        logger.debug("cannot define the space of %s: %s", workload.key, err)
        return None


def candidates(source, task, k: int = 1, *, other_shapes: bool = True, other_models: bool = False,
               neighbours: int = NEIGHBOURS, accept: Callable[[ConfigEntity], bool] | None = None,
               ) -> list[BorrowedConfig]:
    """Up to ``k`` configs for ``task`` borrowed from the ``neighbours`` nearest workloads of
    ``source`` (a :class:`Source` or a :class:`db.TuningLog`), adapted to ``task``'s space
    and ranked as the module describes, best first, without repeats.

    ``other_shapes`` allows workloads of other arguments, ``other_models`` workloads of the
    same target kind on other CPU or GPU models. ``accept(config)`` may refuse a candidate.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"candidates: k must be a positive int, got {k!r}")
    if isinstance(source, tuning_db.TuningLog):
        source = LogSource(source)
    space = task.config_space
    found = []
    for distance, w in _neighbours(source, task, other_shapes, other_models)[:neighbours]:
        ranked = source.ranked(w, max(k, PER_NEIGHBOUR))
        if not ranked:
            continue
        top = ranked[0][1]
        tuned_space = _space_of(w)
        for knobs, score in ranked:
            adapted = adapt(knobs, space, w.args, task.args, tuned_space)
            if adapted is None:
                logger.info("config %s of %s does not adapt to %s", knobs, w.key, task.workload_name)
                continue
            relative = score / top if top > 0 else 1.0
            found.append(BorrowedConfig(adapted, w, score, relative, distance))
    found.sort(key=lambda c: (c.relative_score, c.distance, c.source_key, c.index))
    out, seen = [], set()
    for c in found:
        if c.index in seen or (accept is not None and not accept(c)):
            continue
        seen.add(c.index)
        out.append(c)
        if len(out) == k:
            break
    return out


def borrow(source, task, *, other_shapes: bool = True, other_models: bool = False,
           accept: Callable[[ConfigEntity], bool] | None = None,
           level: int = logging.WARNING) -> BorrowedConfig | None:
    """The first of :func:`candidates`, logged at ``level`` with where it came from; None when
    there is none."""
    found = candidates(source, task, 1, other_shapes=other_shapes, other_models=other_models, accept=accept)
    if not found:
        return None
    config = found[0]
    logger.log(level, "%s has no tuning record; borrowing the best config of %s%s", task.workload_name,
               config.borrowed_from, config.describe_changes() or " (as tuned)")
    return config


def warm_start_configs(log: tuning_db.TuningLog, task, k: int) -> list[ConfigEntity]:
    """The top ``k`` configs borrowed for ``task`` from the nearest tuned workloads of ``log``
    (same template and target model), adapted to its space, best first; each a
    :class:`BorrowedConfig` that says where it came from. Empty when ``k`` is 0 or nothing
    is near."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"warm_start_configs: k must be an int >= 0, got {k!r}")
    if k == 0:
        return []
    found = candidates(log, task, k)
    for c in found:
        logger.info("warm start for %s: %s (%.3gx its best) from %s", task.workload_name,
                    c.knob_values(), c.relative_score, c.borrowed_from)
    return found
