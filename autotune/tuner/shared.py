"""One cost model for the tuners of a template: transfer learning between the tasks of a run.

A model's tasks are a few templates at many shapes (ResNet-18: 16 ``conv2d_nchwc``
workloads), and what one workload's measurements teach about which configs are fast
mostly holds for its siblings, as AutoTVM's transfer learning found. :class:`SharedModels`
gives the XGBoost tuners of one run (``tune_tasks``) one :class:`SharedCostModel` per
template, target kind, feature type and loss type:

* it trains on every attached tuner's own measurements, live, as they arrive, and on the
  tuning log's records of the template's other workloads (up to ``limit`` of them, read
  before its first fit, and only as many as :data:`PRETRAIN_SECONDS` of computing their
  features allows), each workload its own group: labels are throughputs relative to
  the group's best and ranking pairs are formed within a group
  (:mod:`autotune.tuner.cost_model`), so a slow workload's records never outrank a fast
  one's configs (per-task normalisation); a fit computes the features of the records new to
  it for at most :data:`FIT_FEATURE_SECONDS` (a run resumed from a large log starts searching
  at once, on part of its records, and the rest join the fits that follow);
* it is fitted again only when its data grew since its last fit, by a quarter at least
  (:data:`REFIT_GROWTH`): tuners that propose in turn without new results between them cost
  one fit, not one each, and the fits of a long run cost a bounded share of its time;
* each tuner searches with it on its own task's features.

A tuner that is not attached (used outside ``tune_tasks``, or made with
``XGBTuner(share_model=False)``) keeps a SharedCostModel of its own: trained on its own
measurements and on what :meth:`XGBTuner.pretrain` gave it, by the same code.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence

from autotune.transfer import arg_distance
from autotune.tuner.cost_model import Group, XGBCostModel
from autotune.tuner.tuner import result_cost
from search_spaces import ConfigEntity, SearchSpaceError, create_task

__all__ = ["SharedCostModel", "SharedModels", "log_records"]

logger = logging.getLogger(__name__)

# A fitted model is fitted again once its data grew by this share: every batch while data is
# scarce, every 64 trials of one task tuned in batches of 16 at 256 (AutoTVM's cadence), and
# a bounded share of the tuner's time once thousands of records (a large cluster's trials)
# make one fit cost more than the cluster takes to measure a batch.
REFIT_GROWTH = 0.25

# Each of the log's records of another workload costs a lowering for its features before the
# first fit: about 10 ms for a matmul, 0.4 s for a Winograd convolution, whose hundred records
# in a model's log would hold a model's tuning for minutes. Pre-training takes at most this
# many seconds of the feature workers' time (the nearest workloads' records first), and never
# fewer records than PRETRAIN_MIN.
PRETRAIN_SECONDS = 20.0
PRETRAIN_MIN = 8

# The tasks' own records cost a lowering each too: a run resumed from a log that holds hundreds
# of a template's records (ResNet-18's Winograd layers: 560) would compute their features, a
# minute and more, before its first fit, with the tuning stopped meanwhile. A fit computes at most
# this many seconds of missing features (the tasks' newest records first, then the other
# workloads', never fewer than FIT_MIN_NEW_ROWS); the rest join at the fits that follow.
FIT_FEATURE_SECONDS = 10.0
FIT_MIN_NEW_ROWS = 16


class SharedCostModel:
    """An :class:`XGBCostModel` and the data it trains on.

    ``members`` are the groups of the tuners that search with the model (their own
    measurements, extended through :meth:`record`); ``others`` the groups of other
    workloads of ``template`` (pre-training), by workload key. ``fits`` counts the fits
    that succeeded: a tuner that saw another count knows the model changed. ``preload``,
    if given, is called once, before the first fit, with the members' tasks, and
    returns ``(config, task, cost)`` records to add as :meth:`add` does (the log's, read
    only once every tuner of a run has joined, so that none of theirs is taken as another
    workload's, and the nearest to theirs are read first).
    """

    def __init__(self, model: XGBCostModel, template: str,
                 preload: Callable[[list], Iterable] | None = None):
        self.model = model
        self.template = template
        self.members: list[Group] = []
        self.others: dict[str, Group] = {}
        self.fits = 0
        self.preload = preload
        self._version = 0     # bumped by every change of the training data
        self._tried_at = -1   # the version the last fit was tried on
        self._fitted_rows = 0     # the records the last fit trained on
        self._surrogate: XGBCostModel | None = None
        self._surrogate_fits = 0  # the model's fits when the surrogate was last fitted

    def join(self, group: Group) -> None:
        """Train on ``group`` (a tuner's own measurements) from now on. Pre-training records
        of its workload are dropped: its tuner holds them as its own."""
        self.members.append(group)
        self.others.pop(group.task.workload_key, None)
        self._version += 1

    def record(self, group: Group, indices: list[int], costs: list[float | None]) -> None:
        """New measurements of the member ``group``."""
        group.indices += indices
        group.costs += costs
        self._version += 1

    def add(self, records: Iterable) -> int:
        """Add ``(config, task, cost)`` records of other workloads of the template; returns how
        many were skipped: those of other templates, of a member's workload, or whose config is
        not in their task's space. ``config`` is a ConfigEntity or its JSON dict, ``cost``
        seconds or a result (as :func:`~autotune.tuner.tuner.result_cost` takes; None for a
        failure)."""
        own = {g.task.workload_key for g in self.members}
        skipped = 0
        for config, task, cost in records:
            if task.template != self.template or task.workload_key in own:
                skipped += 1
                continue
            index = _config_index(config, task)
            if index is None:
                skipped += 1
                continue
            group = self.others.setdefault(task.workload_key, Group(task, [], []))
            group.indices.append(index)
            group.costs.append(result_cost(cost))
            self._version += 1
        return skipped

    def absorb(self, other: SharedCostModel) -> None:
        """Take over ``other``'s pre-training groups (a tuner's private model, as it joins this one)."""
        own = {g.task.workload_key for g in self.members}
        for key, group in other.others.items():
            if key not in own and key not in self.others:
                self.others[key] = group
                self._version += 1

    def refresh(self, min_train: int) -> bool:
        """Fit the model again if its data changed since the last try, and grew by at least
        :data:`REFIT_GROWTH` since the last fit; whether it did.

        Until the members hold ``min_train`` measurements together, only pre-training data
        can start a model (one member's results then train every member's first model)."""
        if self.preload is not None:
            preload, self.preload = self.preload, None
            records = self._affordable(list(preload([g.task for g in self.members])))
            if records:
                self.add(records)
                logger.info("the shared %s model starts from %d records of other workloads",
                            self.template, len(records))
        if self._version == self._tried_at:
            return False
        if sum(len(g.indices) for g in self.members) < min_train and not self.others:
            return False
        groups = self._computable(self._groups())
        rows = sum(len(g.indices) for g in groups)
        if self.fits and rows < self._fitted_rows * (1 + REFIT_GROWTH):
            return False
        self._tried_at = self._version
        if not self.model.fit(groups):
            return False
        self.fits += 1
        self._fitted_rows = rows
        return True

    def _affordable(self, records: list) -> list:
        """The first of ``records`` whose features take at most :data:`PRETRAIN_SECONDS` to
        compute (judged by the first record's, computed here and kept in the cache), at least
        :data:`PRETRAIN_MIN`; knob features cost nothing, and all are kept."""
        features = self.model.features
        if features.feature_type == "knob" or len(records) <= PRETRAIN_MIN:
            return records
        config, task, _ = records[0]
        index = _config_index(config, task)
        if index is None:
            return records
        seconds = _time_row(features, task, index)
        affordable = PRETRAIN_SECONDS * max(1, features.workers) / max(seconds, 1e-6)
        if affordable < len(records):
            keep = max(PRETRAIN_MIN, int(affordable))
            logger.info("the shared %s model pre-trains on %d of the log's %d records of other workloads "
                        "(their features take %.2f s each to compute)", self.template, keep, len(records),
                        seconds)
            return records[:keep]
        return records

    def _computable(self, groups: list[Group]) -> list[Group]:
        """``groups`` less the records whose features are not cached and do not fit this fit's
        :data:`FIT_FEATURE_SECONDS` (at the features' cost per row so far, else that of one row
        computed here): the members' newest first, a record of each in turn, then the other
        workloads'. Records left out stay in the groups, and join a later fit."""
        features = self.model.features
        if features.feature_type == "knob":
            return groups
        missing = [features.missing(g.task, g.indices) for g in groups]
        if not any(missing):
            return groups
        members = {id(g) for g in self.members}
        pairs = list(zip(groups, missing))
        queue = (_in_turns([[(g, i) for i in reversed(m)] for g, m in pairs if id(g) in members])
                 + _in_turns([[(g, i) for i in m] for g, m in pairs if id(g) not in members]))
        per_row = features.seconds_per_row
        if per_row is None:  # nothing computed yet: time the first row due (it stays cached)
            g, i = queue.pop(0)
            per_row = _time_row(features, g.task, i) / max(1, features.workers)
        afford = max(FIT_MIN_NEW_ROWS, int(FIT_FEATURE_SECONDS / max(per_row, 1e-9)))
        if len(queue) <= afford:
            return groups
        later: dict[int, set[int]] = {}
        for g, i in queue[afford:]:
            later.setdefault(id(g), set()).add(i)
        out = []
        for g in groups:
            skip = later.get(id(g))
            if not skip:
                out.append(g)
                continue
            kept = [(i, c) for i, c in zip(g.indices, g.costs) if i not in skip]
            out.append(Group(g.task, [i for i, _ in kept], [c for _, c in kept]))
        logger.info("the shared %s model trains on %d of its %d records now; the features of the other %d "
                    "(%.2f s a record) join the fits that follow", self.template,
                    sum(len(g.indices) for g in out), sum(len(g.indices) for g in groups),
                    len(queue) - afford, per_row)
        return out

    def surrogate(self) -> XGBCostModel | None:
        """A model of the same kind on knob features, which cost nothing to compute, fitted on
        the data of the model's latest fit (again after each new fit; only when asked for); None
        while the model is untrained, or when the model's own features are knob features."""
        if self.model.features.feature_type == "knob" or not self.fits:
            return None
        if self._surrogate is None:
            self._surrogate = self.model.sibling("knob")
        if self._surrogate_fits != self.fits:
            self._surrogate_fits = self.fits
            self._surrogate.fit(self._groups())
        return self._surrogate if self._surrogate.trained else None

    def _groups(self) -> list[Group]:
        """The training data: other workloads first, members last (the order the model's groups
        always had)."""
        return [*self.others.values(), *self.members]


def _time_row(features, task, index: int) -> float:
    """Seconds the features of ``task``'s config ``index`` take to compute here (they stay in
    the cache): the price of the rows still to compute."""
    start = time.perf_counter()
    features.row(task, index)
    return time.perf_counter() - start


def _in_turns(lists: list[list]) -> list:
    """The items of ``lists``, one of each in turn: the first of each, then the second, ..."""
    return [x for row in itertools.zip_longest(*lists) for x in row if x is not None]


def _config_index(config, task) -> int | None:
    """The index in ``task``'s space of ``config`` (a ConfigEntity or its JSON dict); None where
    the space does not hold it."""
    try:
        data = config.to_json() if isinstance(config, ConfigEntity) else config
        return task.config_space.from_json(data).index
    except SearchSpaceError:
        return None


def log_records(log, template: str, target_kind: str, exclude: set[str], limit: int,
                near: Iterable[Sequence] = ()) -> list:
    """Up to ``limit`` ``(config, task, cost)`` records of ``log``'s workloads of ``template``
    and ``target_kind`` (successes only), leaving out the workloads whose keys are in ``exclude``
    and those this code can no longer define. The workloads nearest (by
    :func:`~autotune.transfer.arg_distance`) to any of the argument lists ``near`` come first,
    those that cannot be compared last, each in the log's order otherwise: where the log holds
    more than ``limit``, the records kept are those of the nearest shapes."""
    near = list(near)
    workloads = [w for w in log.workloads()
                 if w.template == template and w.key not in exclude and w.target_kind == target_kind]
    if near:
        workloads.sort(key=lambda w: _nearest(w.args, near))  # stable: the log's order among equals
    records: list = []
    for w in workloads:
        if len(records) >= limit:
            break
        try:
            task = create_task(w.template, w.args, w.target)
        except Exception as err:  # noqa: BLE001 - a workload this code can no longer build
            logger.debug("skipping workload %s for the shared model: %s", w.key, err)
            continue
        for r in log.records(w.key, errors=False, limit=limit - len(records)):
            records.append((r.config, task, r.mean_cost))
    return records


def _nearest(args: Sequence, near: list[Sequence]) -> float:
    distances = [d for d in (arg_distance(args, other) for other in near) if d is not None]
    return min(distances, default=math.inf)


class SharedModels:
    """The shared cost models of one tuning run: one per template, target kind, feature type
    and loss type, for the XGBoost tuners attached to it.

    ``log`` (a :class:`db.TuningLog`, or None) warm-starts each model with up to ``limit``
    records of its template's other workloads (those of no attached tuner), nearest shapes to
    the attached tuners' first (:func:`log_records`), read before the model's first fit. The
    first tuner of a kind lends the model its settings (rounds, threads, seed, feature workers)
    and its feature cache.
    """

    def __init__(self, log=None, limit: int = 2000):
        self.log = log
        self.limit = limit
        self.models: dict[tuple, SharedCostModel] = {}

    def attach(self, tuner) -> bool:
        """Let ``tuner`` (bound to its task) search with the shared model of its kind; False,
        and the tuner keeps working alone, for tuners without a cost model and those made with
        ``share_model=False``."""
        from autotune.tuner.xgb_tuner import XGBTuner

        if not isinstance(tuner, XGBTuner) or not tuner.share_model or tuner.task is None:
            return False
        task = tuner.task
        kind = task.target.split()[0]
        key = (task.template, kind, tuner.feature_type, tuner.loss_type)
        shared = self.models.get(key)
        if shared is None:
            shared = self.models[key] = tuner.shared  # the first tuner's model becomes the shared one
            if self.log is not None:
                shared.preload = lambda tasks: log_records(self.log, task.template, kind,
                                                           {t.workload_key for t in tasks}, self.limit,
                                                           near=[t.args for t in tasks])
            return True
        tuner.join(shared)
        return True
