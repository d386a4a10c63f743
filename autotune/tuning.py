"""``tune()``: the tuning loop, written once for every tuner.

Each round asks the tuner for a batch, measures it (results stream back as they
finish), writes every result to the tuning log at once and tells the tuner. Tuning
a task again resumes: configs already in the log for this workload are not
measured again and seed the tuner. By default a run makes ``trials`` new trials on top
of the log's (so a rerun after a kill makes the whole budget again); with
``total=True``, ``trials`` counts the log's earlier trials of the workload too, and a
rerun finishes the budget of a run that was cut short. At the end the few best configs are measured
again (``FINAL_ROUNDS`` times each of the ``FINAL_TOP_K`` best, and again for configs that
rise into the best few meanwhile, up to ``FINAL_PASSES`` passes; these are records of
kind ``"remeasure"``, stored after the run's search trials, and count as measurements of
their config but never as trials) and the winner is chosen by a confident median
(:mod:`autotune.selection`).
"""

from __future__ import annotations

import hashlib
import logging
import signal
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field

from tqdm.auto import tqdm

import db as tuning_db
from compiler.runtime.device import device_memory
from compiler.target import Target
from measure import LocalRunner, MeasureInput, MeasureOptions, MeasureSession, code_version
from measure.contention import BUSY_SHARE
from measure.errors import SimulatedDeviceError, refuse_simulated
from search_spaces import SearchSpaceError

from . import transfer
from .errors import AutotuneError
from .scheduler import get_scheduler
from .selection import Ranking, gflops, record_of, workload_label
from .tuner.shared import SharedModels
from .tuner.tuner import get_tuner

__all__ = ["Trial", "TuneResult", "tune", "tune_tasks", "check_measurable", "estimated_latency"]

logger = logging.getLogger(__name__)

# Under a time budget a task's first batch is at most this many candidates (its default config
# first): a model's every task is measured before any task's second batch, where whole first
# batches of slow builds (a Winograd convolution's: 3-4 s each on a 2-vCPU guest) would spend a
# short budget on the first few tasks and leave the rest untried.
FIRST_BATCH_UNDER_DEADLINE = 4

# How many of the best configs are measured again at the end, and how often. A config timed
# once at a lucky moment would outrank those whose re-measurements met a slow one, so the
# re-measurement goes on (at most FINAL_PASSES passes) until the FINAL_TOP_K best have all
# been measured again.
FINAL_TOP_K = 3
FINAL_ROUNDS = 2
FINAL_PASSES = 3
# The default config is measured first, often at a cold moment, and the winner was chosen for
# one fast measurement: where the re-measurements, timed alike, find the default as fast as
# the config ranked first, both are measured again (at most FINAL_DUELS more passes) until the
# ranking, which pools every measurement, agrees with them, so that a tuned result is never
# slower than the default config when both are timed alike.
FINAL_DUELS = 3
# Then, where a task's config ranked first has a figure that other code than today's measured,
# it is measured again, and the next such winner, for at most STALE_PASSES passes more.
STALE_PASSES = 20


@dataclass
class Trial:
    """One measured candidate of a run: its config and its measure result."""

    config: object  # ConfigEntity
    result: object  # measure.MeasureResult


@dataclass
class TuneResult:
    """What a tuning run found.

    ``best_config`` is the config ranked first by :class:`autotune.selection.Ranking`
    (the one ranking that ``autotune best``, the report and ``apply_history_best`` use);
    ``best_cost`` is the median, in seconds, of every measurement of it, earlier runs and
    re-measurements included: the figure ``autotune best`` and the report show for it; ``history`` lists this
    run's trials in order (never the re-measurements); ``errors`` counts failed trials
    by error kind; ``stopped`` says why the run ended: "budget", "early_stopping",
    "exhausted" or "interrupted"; ``resumed`` is the number of trials of this workload
    that the log held before the run; ``remeasured`` the number of re-measurements made
    at its end. ``search_seconds`` is the wall time of the run's search (all its tasks
    together, the final re-measurement not included) and ``tuner_seconds`` the part of it spent
    in the tuner's own work (proposing candidates: model fitting and search; recording
    results), the same figures on every result of one :func:`tune_tasks` call.
    """

    task: object
    best_config: object | None
    best_cost: float
    best_gflops: float
    history: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)
    stopped: str = "budget"
    run_id: str | None = None
    resumed: int = 0
    remeasured: int = 0
    search_seconds: float = 0.0
    tuner_seconds: float = 0.0

    @property
    def error_counts(self) -> dict:
        return dict(self.errors)

    @property
    def trials(self) -> int:
        return len(self.history)


def _open_log(log):
    if log is None:
        return tuning_db.open(":memory:"), True
    if isinstance(log, tuning_db.TuningLog):
        return log, False
    return tuning_db.open(log), True


def _gflops(task, cost: float) -> float:
    return gflops(task.flop, cost) or 0.0


class _Recorder:
    """Makes the log records of one run's measure results (:func:`selection.record_of`) and
    writes them."""

    def __init__(self, log, task, run_id: str):
        self.log, self.task, self.run_id = log, task, run_id
        self.model = Target(task.target).model
        self.host = socket.gethostname()

    def of(self, inp, result, kind: str = tuning_db.TRIAL) -> tuning_db.Record:
        """The record of ``inp`` (a :class:`measure.MeasureInput`) measured as ``result``."""
        return record_of(self.task, inp.config, result, run_id=self.run_id, kind=kind,
                         target_model=self.model, host=self.host, config_json=inp.config_json)

    def add(self, inp, result, kind: str = tuning_db.TRIAL) -> tuning_db.Record:
        """Write the record of ``inp`` measured as ``result``; returns it."""
        record = self.of(inp, result, kind)
        self.log.add(record)
        return record


def _resume(log, task, tuner) -> tuple[list, Counter]:
    """Earlier records of this workload, fed to the tuner: every measurement (the records),
    and how many of them were trials, by the run that made them."""
    records = log.records(task)
    trials = Counter(r.run_id for r in records if r.kind == tuning_db.TRIAL)
    if records:
        tuner.load_history((r.config, r.mean_cost) for r in records)
        logger.info("resuming %s: %d earlier trials", task.workload_name, trials.total())
    return records, trials


def _task_set(tasks: Sequence) -> str:
    """A digest of the workloads of ``tasks`` (in any order), recorded with each run of
    :func:`tune_tasks`: the runs of one model's tuning share it."""
    return hashlib.sha1("\n".join(sorted(t.workload_key for t in tasks)).encode()).hexdigest()


def _trials_done(log, sessions: Sequence, trials: int, tasks_digest: str) -> int:
    """The log's earlier trials of ``sessions``' tasks that count against a budget of ``trials``
    in all: those of runs that recorded another set of tasks (another model's tuning, a ``tune``
    of one task) up to the task's equal share, so that tasks tuned for another model do not use
    up this one's budget; every other trial whole (runs of this set of tasks: the same call cut
    short; runs logged before runs recorded their set). The capped part stays the same from one
    call to the next, so a call cut short and run again ends on the budget."""
    other_sets = {r.run_id for r in log.runs() if r.options.get("task_set", tasks_digest) != tasks_digest}
    share = trials // len(sessions)
    done = 0
    for s in sessions:
        other = sum(n for run, n in s.earlier_by_run.items() if run in other_sets)
        done += s.earlier_trials - other + min(other, share)
    return done


def _warm_start(log, task, tuner, k: int) -> list:
    """Up to ``k`` configs borrowed from the nearest tuned workloads
    (:func:`autotune.transfer.warm_start_configs`), best first, leaving out those the log
    already holds for ``task`` and any outside its valid space."""
    if k <= 0:
        return []
    space, seen, configs = task.config_space, set(tuner.measured), []
    for cfg in transfer.warm_start_configs(log, task, k):
        try:
            cfg = space.from_json(cfg.to_json())  # a config of this very space, constraints checked
        except SearchSpaceError as err:
            logger.warning("warm start of %s: skipping a borrowed config: %s", task.workload_name, err)
            continue
        if cfg.index not in seen:
            seen.add(cfg.index)
            configs.append(cfg)
    logger.info("warm start of %s: %d borrowed configs to measure first", task.workload_name, len(configs))
    return configs


class _Progress:
    """One progress display for a run: a bar of all its trials, whose figure is the best (one
    task) or the model's estimated latency (the weighted sum of the tasks' bests), and under it
    one line per task, with its trials and its best, when several are tuned.

    "Best" is the figure ``TuneResult``, ``autotune best`` and the report show: the median of
    every measurement of the config the log's ranking puts first (:mod:`autotune.selection`),
    never the fastest single trial. The final re-measurements get a line of their own and
    update the figure, so the bar ends on the figure the summary prints."""

    def __init__(self, sessions, weights, total: int | None, enabled: bool):
        self.sessions, self.weights = sessions, weights
        name = sessions[0].task.workload_name if len(sessions) == 1 else f"{len(sessions)} tasks"
        self.bar = tqdm(total=total, disable=not enabled, desc=name, unit="trial", leave=True,
                        dynamic_ncols=True)
        self.lines = []
        self.finals = None  # the line of the final re-measurements, once they start
        if enabled and len(sessions) > 1:
            self.lines = [tqdm(total=None, desc=f"x{w:g} {s.task.workload_name}", leave=False,
                               position=k + 1, dynamic_ncols=True,
                               bar_format="{desc} {n_fmt} trials {postfix}")
                          for k, (s, w) in enumerate(zip(sessions, weights))]

    def figure(self) -> str:
        """The bar's figure: the best (one task) or the estimated latency, and the errors."""
        errors = sum(sum(s.errors.values()) for s in self.sessions)
        if len(self.sessions) == 1:
            session = self.sessions[0]
            best = session.ranked_median()
            if best == float("inf"):
                return f"best: no result yet, errors={errors}"
            rate = _gflops(session.task, best)
            rate_text = f" {rate:.4g} GFLOPS" if rate > 0 else ""
            return f"best (ranked median) {best * 1e3:.4g} ms{rate_text}, errors={errors}"
        latency, missing = estimated_latency(self.sessions, self.weights)
        more = f" (+{missing} tasks)" if missing else ""
        return f"latency {latency * 1e3:.3f} ms{more}, errors={errors}"

    def update(self, session) -> None:
        """One more result of ``session``."""
        if self.bar.disable:
            return
        self.bar.update(1)
        self.bar.set_postfix_str(self.figure())
        if self.lines:
            line = self.lines[self.sessions.index(session)]
            line.update(1)
            best = session.ranked_median()
            line.set_postfix_str(f"best {best * 1e3:.3f} ms" if best < float("inf") else "no result yet")

    def remeasuring(self, n: int) -> None:
        """``n`` more final re-measurements are submitted."""
        if self.bar.disable:
            return
        if self.finals is None:
            self.finals = tqdm(total=0, desc="re-measuring the best configs", unit="run", leave=True,
                               dynamic_ncols=True, position=len(self.lines) + 1)
        self.finals.total += n
        self.finals.refresh()

    def remeasured(self, session) -> None:
        """One re-measurement of ``session`` is back: the ranking, hence the figure, may change."""
        if self.bar.disable:
            return
        if self.finals is not None:
            self.finals.update(1)
        self.bar.set_postfix_str(self.figure())
        if self.lines:
            best = session.ranked_median()
            self.lines[self.sessions.index(session)].set_postfix_str(f"best {best * 1e3:.3f} ms")

    def close(self) -> None:
        for line in self.lines:
            line.close()
        if self.finals is not None:
            self.finals.close()
        if not self.bar.disable:
            self.bar.set_postfix_str(self.figure())
        self.bar.close()


def estimated_latency(sessions, weights) -> tuple[float, int]:
    """The weighted sum of the tasks' best costs (seconds; the top-ranked config's median of
    each) and how many tasks have no result yet (left out of the sum)."""
    total, missing = 0.0, 0
    for s, w in zip(sessions, weights):
        best = s.ranked_median()
        if best < float("inf"):
            total += w * best
        else:
            missing += 1
    return total, missing


class _Session:
    """The state of tuning one task: its tuner, its log records, its best so far and its
    candidates in flight."""

    def __init__(self, task, tuner, log, seed, batch_size, options_note: dict, warm_start: int = 0,
                 shared: SharedModels | None = None):
        self.task = task
        self.tuner = get_tuner(tuner, task, seed=seed)
        self.tuner.use_log(log)  # before the log's history, which a tuner may keep beside it
        self.batch_size = batch_size or self.tuner.default_batch_size
        self.run_id = log.start_run(self.tuner.name, {**options_note, "batch_size": self.batch_size,
                                                      "seed": seed, "workload": task.workload_name})
        self.log = log
        self.recorder = _Recorder(log, task, self.run_id)
        # every measurement of the workload, earlier runs' too, pooled by config
        earlier, self.earlier_by_run = _resume(log, task, self.tuner)
        self.earlier_trials = self.earlier_by_run.total()
        self.ranking = Ranking()
        self._default: tuple[dict, str] | None = None  # the default config's JSON and fingerprint
        for r in earlier:
            self._pool(r)
        if shared is not None:  # the run's cost model of this template, warm-started from the log
            shared.attach(self.tuner)
        self.warm = _warm_start(log, task, self.tuner, warm_start)  # measured before the tuner's own
        self.history: list[Trial] = []
        self.errors: Counter = Counter()
        self.best_cost = min((r.mean_cost for r in earlier if r.mean_cost is not None), default=float("inf"))
        self.best_curve: list[float] = []  # best cost after each trial of this run
        self.since_best = 0
        self.stopped: str | None = None
        self.ended = False  # whether the log records the end of the run
        self.alike: dict[str, list[float]] = {}  # this run's re-measured costs, by config
        self.in_flight = 0
        self.build_seconds = self.run_seconds = 0.0  # the workers' seconds for this run's results
        self.sent: set[int] = set(self.tuner.measured)  # config indices measured or in flight
        self._unreported: tuple[list, list] = ([], [])  # results the tuner has not been told yet

    def propose(self, n: int) -> list:
        """Up to ``n`` new configs to measure (the tuner first learns every result so far);
        an empty list once the space is exhausted."""
        self.tell_tuner()
        configs = [c for c in self._next_configs(n) if c.index not in self.sent]
        self.sent.update(c.index for c in configs)
        return configs

    def _pool(self, record) -> None:
        """Pool a measurement's record in the ranking (without keeping the record)."""
        self.ranking.add(record.config, record.costs, code_version=record.code_version, when=record.timestamp)

    def record(self, inp, res, record) -> None:
        """Enter one trial's result, whose log ``record`` is written, into the books."""
        self._pool(record)
        self.history.append(Trial(inp.config, res))
        self._unreported[0].append(inp)
        self._unreported[1].append(res)
        self.in_flight -= 1
        self.build_seconds += res.build_time
        self.run_seconds += res.run_time
        if res.error_kind is not None:
            self.errors[res.error_kind.value] += 1
        if res.mean_cost < self.best_cost:
            self.best_cost, self.since_best = res.mean_cost, 0
        else:
            self.since_best += 1
        self.best_curve.append(self.best_cost)

    def tell_tuner(self) -> None:
        """Give the tuner the results it has not seen (in one update, as a batch)."""
        inputs, results = self._unreported
        if inputs:
            self._unreported = ([], [])
            self.tuner.update(inputs, results)

    def _next_configs(self, n: int) -> list:
        """The next batch: the warm-start configs first, then the tuner's proposals; the default
        config leads the first batch either way, so the tuned result is never judged without
        the baseline a user would otherwise get (unless the tuner's ``lead_with_default`` is False,
        as AutoTVM's are: they measure their own picks only)."""
        if not self.warm and not self.tuner.has_next():
            return []
        take = self._take_warm if self.warm else self.tuner.next_batch
        default = self.task.config_space.default_config
        if default.index in self.sent or not self.tuner.lead_with_default:
            return take(n)
        # Take one fewer, so that none is dropped (a tuner never proposes a config twice, so a
        # dropped pick would never be measured); if the default was among them, take one more.
        picks = [c for c in take(n - 1) if c.index != default.index]
        if len(picks) < n - 1 and (self.warm or self.tuner.has_next()):
            picks += [c for c in take(n - 1 - len(picks)) if c.index != default.index]
        return [default, *picks]

    def _take_warm(self, k: int) -> list:
        """The next ``k`` warm-start configs (removed from those left)."""
        configs, self.warm = self.warm[:k], self.warm[k:]
        return configs

    def abandon(self) -> None:
        """Record the run as failed, when tuning stops on an error before :meth:`finish`."""
        if self.ended:
            return
        try:
            self.log.end_run(self.run_id, "failed")
            self.ended = True
        except tuning_db.TuningLogError as err:  # the error being raised says more
            logger.warning("could not record the end of run %s: %s", self.run_id, err)

    def seconds_per_result(self) -> tuple[float, float] | None:
        """The mean seconds the workers took to build and to time one of this run's candidates
        (None before any result)."""
        n = len(self.history)
        return (self.build_seconds / n, self.run_seconds / n) if n else None

    def ranked_median(self) -> float:
        """The median cost of the config ranked first so far (inf before any success)."""
        best = self.ranking.best()
        return best.median if best else float("inf")

    def finalists(self, done: set[str], winner_only: bool = False) -> list:
        """The configs to measure again in the next pass of the final re-measurement: the
        best few not yet measured again (with ``winner_only``, once the time budget is spent:
        the config ranked first, if it was not), and the default config (once), so that the
        winner is judged against the baseline timed alike; once they all were, the config
        ranked first and the default again, while the re-measurements find the default as
        fast."""
        return [self.task.config_space.from_json(c) for c in self._due(done, winner_only)]

    def stale(self) -> bool:
        """Whether a figure among the best few configs was measured with other code than today's
        (:func:`measure.code_version`)."""
        return any(r.code_version != code_version() for r in self.ranking.ranked()[:FINAL_TOP_K])

    def stale_winner(self):
        """The config ranked first (a ConfigEntity) where other code than today's measured its
        figure; else None."""
        best = self.ranking.best()
        if best is None or best.code_version == code_version():
            return None
        return self.task.config_space.from_json(best.config)

    def final_count(self) -> int:
        """How many configs the final re-measurement's first pass would measure again now (the
        best few ranked so far and the default config), without building them."""
        return len(self._due(set()))

    def _due(self, done: set[str], winner_only: bool = False) -> list[dict]:
        """The configs (as JSON) of :meth:`finalists`."""
        ranked = self.ranking.ranked()
        todo = [r.config for r in ranked[:1 if winner_only else FINAL_TOP_K] if r.fingerprint not in done]
        if self._default is None:
            config = self.task.config_space.default_config.to_json()
            self._default = (config, tuning_db.knobs_fingerprint(config))
        default, key = self._default
        if key not in done and any(r.fingerprint == key for r in ranked) \
                and all(tuning_db.knobs_fingerprint(c) != key for c in todo):
            todo.append(default)
        if not todo and ranked and ranked[0].fingerprint != key and self._default_as_fast(ranked[0], key):
            todo = [ranked[0].config, default]
        return todo

    def _default_as_fast(self, winner, key: str) -> bool:
        """Whether this run's re-measurements of the default config (``key``) are no slower than
        those of ``winner``."""
        ours, theirs = self.alike.get(winner.fingerprint), self.alike.get(key)
        return bool(ours and theirs) and statistics.median(theirs) <= statistics.median(ours)

    def remeasured(self, record) -> None:
        """Pool a re-measurement's record."""
        self._pool(record)
        costs = tuning_db.stats.usable_costs(record.costs)
        self.alike.setdefault(tuning_db.knobs_fingerprint(record.config), []).extend(costs)

    def finish(self, remeasured: int, search: _Search) -> TuneResult:
        """Close the run in the log and report."""
        self.tell_tuner()
        ranked = self.ranking.ranked()
        stopped = self.stopped or "budget"
        self.log.end_run(self.run_id, stopped)
        self.ended = True
        best_config = self.task.config_space.from_json(ranked[0].config) if ranked else None
        best = ranked[0].median if ranked else float("inf")
        return TuneResult(self.task, best_config, best, _gflops(self.task, best), self.history,
                          dict(self.errors), stopped, self.run_id, resumed=self.earlier_trials,
                          remeasured=remeasured, search_seconds=search.search_seconds,
                          tuner_seconds=search.tuner_seconds)


def tune(task, trials: int | None = 500, tuner="xgb", db="tuning.db", measure_option=None,
         early_stopping: int | None = None, batch_size: int | None = None, seed: int | None = None,
         callbacks: Sequence[Callable] = (), progress: bool = True, total: bool = False,
         warm_start: int = 0, remeasure: bool = True, time_budget: float | None = None) -> TuneResult:
    """Search ``task``'s config space for its fastest config.

    ``trials`` is the number of new trials to make; with ``total=True`` it is the number of
    trials of this workload in all, those the log already holds included, so that running
    the same call again after a kill finishes the budget (a run whose budget is already
    spent makes no trials). Configs the log holds are never measured again as trials; but
    where the best few configs' figures were measured with other code than today's
    (:func:`measure.code_version`: the compiler or a template changed since), the final
    re-measurement times them again, even in a run with no trials to make, so that the log's
    figures and its choice are today's.
    ``time_budget`` (seconds) ends the search once that much time has passed, leaving room
    for the final re-measurement within it; with a time budget, ``trials=None`` sets no
    limit on trials.

    ``tuner`` is a name of :data:`autotune.tuner.TUNERS` ("random", "grid", "ga", "xgb",
    "optuna": it keeps its Optuna study beside the log, see :mod:`autotune.tuner.optuna_tuner`),
    a Tuner subclass or a Tuner instance; ``batch_size`` defaults to the tuner's
    ``default_batch_size`` (16 for "xgb" and "ga", 8 for the others);
    ``db`` the tuning log (path, URL, open log, or None for an in-memory log);
    ``measure_option`` a :class:`measure.MeasureOptions` (default: local workers);
    ``early_stopping=N`` stops after N trials without improvement; ``callbacks``
    are called as ``cb(input, result)`` once per measured candidate. Ctrl-C, or SIGTERM
    (``kill``) when tuning from the main thread, stops cleanly: every finished measurement
    is already in the log, the workers are stopped and the run is recorded as
    ``"interrupted"``. While it tunes, the run writes a heartbeat into the log (every
    :func:`db.default_heartbeat_interval` seconds), so that a run whose process was killed
    outright reads as ``"dead"`` (:meth:`db.TuningLog.runs`). A task that cannot be
    measured here (see :func:`check_measurable`) raises :class:`AutotuneError` at once.

    ``warm_start=k`` measures first (they count as trials) up to ``k`` configs borrowed
    from the log's nearest tuned workloads (:func:`autotune.transfer.warm_start_configs`),
    leaving out configs the log already holds. ``remeasure=False`` skips the final
    re-measurement of the best few and of the default config: the log then holds the run's
    trials only.
    """
    return tune_tasks([task], trials, tuner=tuner, db=db, measure_option=measure_option,
                      early_stopping=early_stopping, batch_size=batch_size, seed=seed,
                      callbacks=callbacks, progress=progress, total=total, warm_start=warm_start,
                      remeasure=remeasure, time_budget=time_budget)[0]


def tune_tasks(tasks: Sequence, trials: int | None, tuner="xgb", db="tuning.db", measure_option=None,
               early_stopping: int | None = None, batch_size: int | None = None,
               seed: int | None = None, callbacks: Sequence[Callable] = (), progress: bool = True,
               weights: Sequence[float] | None = None, total: bool = False, warm_start: int = 0,
               remeasure: bool = True, time_budget: float | None = None,
               scheduler="gradient") -> list[TuneResult]:
    """Tune several tasks with one budget of ``trials`` (or ``time_budget`` seconds, or
    both), shared where it gains most (with ``total=True``, the log's earlier trials of
    these tasks count against ``trials``: those of runs of another set of tasks up to each
    task's equal share of ``trials``, the others whole).

    Candidates of every task are measured at once: the run keeps as many in flight as the
    measure options' builders and runners can work on (:attr:`measure.MeasureSession.capacity`:
    on a Ray cluster, every CPU building and every node timing). Whenever slots free up,
    ``scheduler`` (a name of :data:`autotune.scheduler.SCHEDULERS` or a
    :class:`~autotune.scheduler.TaskScheduler`) chooses the task that proposes the next
    batch: by default Ansor's gradient scheduler, which after one batch each gives the batch
    to the task whose weighted cost (its best cost times its ``weights`` entry, how often it
    runs) is expected to fall most. The progress display shows each task's best and their
    weighted sum, the estimated latency of a model made of them. At the end, the best few
    configs of every task and its default config are measured again, together.
    ``warm_start``, ``remeasure`` and ``time_budget`` are as for :func:`tune`, per task.
    Returns one :class:`TuneResult` per task, in order.
    """
    tasks = list(tasks)
    if not tasks:
        raise AutotuneError("tune_tasks needs at least one task")
    if trials is None and time_budget is None:
        raise AutotuneError("give a budget: trials, time_budget or both")
    if trials is not None and trials < 0:
        raise AutotuneError(f"trials must be >= 0, got {trials}")
    if time_budget is not None and not time_budget > 0:
        raise AutotuneError(f"time_budget must be a positive number of seconds, got {time_budget}")
    if warm_start < 0:
        raise AutotuneError(f"warm_start must be >= 0, got {warm_start}")
    weights = list(weights) if weights is not None else [1.0] * len(tasks)
    if len(weights) != len(tasks):
        raise AutotuneError(f"{len(weights)} weights for {len(tasks)} tasks")
    scheduler = get_scheduler(scheduler)
    check_measurable(tasks, measure_option)
    deadline = None if time_budget is None else time.monotonic() + time_budget
    log, own_log = _open_log(db)
    options = measure_option if measure_option is not None else MeasureOptions()
    cache_flush = options.runner.cache_flush
    note = {"trials": trials, "total": total, "early_stopping": early_stopping, "tasks": len(tasks),
            "task_set": _task_set(tasks),
            "warm_start": warm_start, "time_budget": time_budget, "scheduler": scheduler.name,
            "cache_flush": cache_flush, **({"model_input": MODEL_INPUT} if cache_flush == "model" else {})}
    shared = SharedModels(log)  # one cost model per template for the learning tuners of the run
    sessions = []
    try:
        check_timing(log, tasks, cache_flush)
        for t in tasks:
            sessions.append(_Session(t, tuner, log, seed, batch_size, note, warm_start, shared))
        if total and trials is not None:
            done = _trials_done(log, sessions, trials, note["task_set"])
            trials = max(0, trials - done)
            logger.info("%d trials in the log already; %d to go", done, trials)
        spent = trials == 0  # no trials to make: only stale figures to measure again
        display = _Progress(sessions, weights, trials, progress)
        # closed after the final re-measurements: the bar ends on the figure the summary shows
        with closing(display), _sigterm_interrupts(), \
                log.keep_alive([s.run_id for s in sessions]), MeasureSession(options) as measurer:
            search = _Search(sessions, weights, scheduler, measurer, callbacks, display, remeasure)
            interrupted = search.run(trials, deadline, early_stopping)
            remeasured = {id(s): 0 for s in sessions}
            if remeasure and not interrupted:
                interrupted = search.remeasure(remeasured, deadline, stale_only=spent)
        results = [s.finish(remeasured[id(s)], search) for s in sessions]
    except Exception:
        for s in sessions:
            s.abandon()
        raise
    finally:
        for s in sessions:
            s.tuner.close()
        if measure_option is None:
            options.close()
        if own_log:
            log.close()
    return results


class _Search:
    """The measuring loop of one run: keeps the measure session's capacity in flight,
    records results as they come, and asks the scheduler which task proposes next."""

    def __init__(self, sessions, weights, scheduler, measurer, callbacks, display, remeasure: bool):
        self.sessions, self.weights, self.scheduler = sessions, weights, scheduler
        self.finals = remeasure  # whether a final re-measurement follows (time is kept for it)
        self.measurer, self.callbacks, self.display = measurer, callbacks, display
        self.owner: dict[int, _Session] = {}  # id(MeasureInput) -> its session
        self.started = time.monotonic()
        #: seconds spent proposing candidates (the tuners' model fitting and search) and recording
        #: results: the tuner's own work, which must stay small beside the measuring.
        self.tuner_seconds = 0.0
        self.search_seconds = 0.0
        self.results = 0
        self.busy_results = 0  # results timed beside other work on their machine (MeasureResult.busy)

    def run(self, trials: int | None, deadline: float | None, early_stopping: int | None) -> bool:
        """Measure up to ``trials`` candidates (all tasks together) until ``deadline``;
        returns whether it was interrupted."""
        # Enough in flight to keep every worker busy, and one whole batch more (a batch cut
        # short costs a learning tuner a whole model fit and search for fewer trials): the next
        # batch goes out while the last candidates of the one before are still measured.
        # On a large cluster, batches grow so that the tasks' batches fill the workers about twice
        # over: a learning tuner's search costs about as much for a large batch as for a small
        # one, and its cost per trial must stay below the cluster's time per trial.
        floor = self.measurer.capacity // (2 * len(self.sessions))
        capacity = self.measurer.capacity + max(max(s.batch_size, floor) for s in self.sessions)
        submitted = 0
        try:
            while True:
                while self._room(capacity, trials, submitted) and not self._late(deadline):
                    k = self.scheduler.pick(self.sessions, self.weights)
                    if k is None:
                        break
                    session = self.sessions[k]
                    batch = max(session.batch_size, floor)
                    if deadline is not None and not session.best_curve and not session.in_flight:
                        batch = min(batch, max(FIRST_BATCH_UNDER_DEADLINE, floor))
                    free = capacity - self.measurer.in_flight
                    if self.measurer.in_flight and free < batch:
                        break  # wait until its whole batch fits
                    n = min(batch, free, trials - submitted if trials is not None else free)
                    t0 = time.monotonic()
                    # A learning tuner's fitting and search take a core for seconds: a kernel timed
                    # on every core meanwhile would run slow, and be ranked wrongly.
                    with self.measurer.holding_cores():
                        configs = session.propose(n)
                    self.tuner_seconds += time.monotonic() - t0
                    if not configs:
                        if not session.in_flight:
                            session.stopped = "exhausted"
                        else:  # its candidates in flight may still teach it something new
                            session.stopped = "waiting"
                        continue
                    inputs = [MeasureInput(session.task, c) for c in configs]
                    for inp in inputs:
                        self.owner[id(inp)] = session
                    session.in_flight += len(inputs)
                    submitted += len(inputs)
                    self.measurer.submit(inputs)
                if not self.measurer.in_flight:
                    return False
                done = self.measurer.results()
                t0 = time.monotonic()
                # Every result that is back is written in one transaction first: whatever
                # interrupts below, the log holds everything that was measured.
                owners = [self.owner.pop(id(inp)) for inp, _ in done]
                records = [s.recorder.of(inp, res) for s, (inp, res) in zip(owners, done)]
                self.sessions[0].log.add(records)
                for session, (inp, res), record in zip(owners, done, records):
                    self._check_quiet(session, res)
                    session.record(inp, res, record)
                    self.results += 1
                    if session.stopped == "waiting":
                        session.stopped = None
                    if early_stopping is not None and session.since_best >= early_stopping:
                        session.stopped = "early_stopping"
                for session in owners:
                    self.display.update(session)
                self.tuner_seconds += time.monotonic() - t0
                # The user's callbacks last: one that interrupts leaves the log and the books agreed.
                for inp, res in done:
                    for cb in self.callbacks:
                        cb(inp, res)
        except KeyboardInterrupt:
            for s in self.sessions:
                s.stopped = "interrupted"
            logger.warning("tuning interrupted; every finished measurement is in the log")
            return True
        finally:
            for s in self.sessions:
                if s.stopped == "waiting":
                    s.stopped = "exhausted"
            self.search_seconds = time.monotonic() - self.started
            if self.results:
                logger.info("%d results in %.1f s; the tuner's own work: %.1f ms per trial", self.results,
                            self.search_seconds, 1e3 * self.tuner_seconds / self.results)
            if self.busy_results:
                logger.warning("%d results were timed beside other work on their machine",
                               self.busy_results)

    def _check_quiet(self, session: _Session, res) -> None:
        """Count a result timed beside other work on its machine, and warn at the first: its
        cost is too high, most for configs that use every core, which the log then ranks low."""
        if res.busy <= BUSY_SHARE:
            return
        self.busy_results += 1
        if self.busy_results == 1:
            logger.warning("other work on the machine took %.0f%% of a core while a candidate of %s was "
                           "timed, however often it was timed again: such timings are slow, most for "
                           "configs that use every core, and rank them too low; keep the machine "
                           "otherwise idle while tuning", 100 * res.busy, session.task.workload_name)

    def _room(self, capacity: int, trials: int | None, submitted: int) -> bool:
        return self.measurer.in_flight < capacity and (trials is None or submitted < trials)

    def _late(self, deadline: float | None) -> bool:
        """Whether the search must stop submitting: past the deadline, less the time that what
        is still to measure is expected to take: the candidates in flight and, if a final
        re-measurement follows, the configs its first pass measures again. Each costs what its
        own task's results so far took the workers to build and run (a Winograd convolution's
        builds take seconds where a dense layer's take a fraction of one; a task with no result
        yet, the mean of all), spread over the measure session's slots: the rate of results
        itself says little, as a learning tuner's search holds them back for minutes on a large
        template while the workers go on measuring what is in flight (and the re-measurement
        searches nothing)."""
        if deadline is None:
            return False
        now = time.monotonic()
        if not self.results:
            return now >= deadline
        overall = (sum(s.build_seconds for s in self.sessions) / self.results,
                   sum(s.run_seconds for s in self.sessions) / self.results)
        build_work = run_work = 0.0  # worker seconds
        for s in self.sessions:
            build, run = s.seconds_per_result() or overall
            builds = runs = s.in_flight
            if self.finals:  # the rounds of one config share its build
                finals = s.final_count()
                builds, runs = builds + finals, runs + FINAL_ROUNDS * finals
            build_work += builds * build
            run_work += runs * run
        left = self.measurer.seconds_to_measure(build_work, run_work)
        return now + left >= deadline

    def remeasure(self, remeasured: dict, deadline: float | None = None, stale_only: bool = False) -> bool:
        """Measure every task's best few and its default config again, all tasks together
        (``FINAL_ROUNDS`` times each, in interleaved rounds), until the best few of each have
        all been measured again (at most ``FINAL_PASSES`` passes, and ``FINAL_DUELS`` more
        of the winner against the default); these are records of kind ``"remeasure"``.
        Past ``deadline``, after the first pass, a task's config ranked first is measured again
        only if it was not yet (and the duel with the default goes on): the others that rose
        into the best few are not, so that the run keeps close to its time budget. Then, while a
        task's config ranked first has a figure of other code than today's (configs older code
        measured rise to the top where today's timings come out slower), it is measured again,
        up to ``STALE_PASSES`` passes more.
        ``stale_only``: only the tasks among whose best few a figure is stale (see
        :meth:`_Session.stale`). Returns whether it was interrupted (Ctrl-C, SIGTERM): then
        the runs are recorded as interrupted, with every measurement that finished."""
        done = {id(s): set() for s in self.sessions}
        sessions = [s for s in self.sessions if s.stale()] if stale_only else self.sessions
        if stale_only and sessions:
            logger.info("%d of %d tasks have best configs measured with other code than today's (%s): "
                        "measuring them again", len(sessions), len(self.sessions), code_version())
        try:
            for k in range(FINAL_PASSES + FINAL_DUELS):
                late = k > 0 and deadline is not None and time.monotonic() >= deadline
                finalists = {id(s): s.finalists(done[id(s)], winner_only=late) for s in sessions}
                for s in sessions:
                    done[id(s)].update(tuning_db.knobs_fingerprint(c.to_json()) for c in finalists[id(s)])
                if not self._measure_again(sessions, finalists, remeasured):
                    break
            for _ in range(STALE_PASSES):
                stale = {id(s): [winner] for s in sessions if (winner := s.stale_winner()) is not None}
                if not self._measure_again(sessions, stale, remeasured):
                    break
            else:
                left = [s.task.workload_name for s in sessions if s.stale_winner() is not None]
                if left:
                    logger.warning("%d task(s) still rank first a config whose figure other code measured, "
                                   "after %d passes measuring such winners again (today's timings come out "
                                   "slower than the older ones): %s", len(left), STALE_PASSES,
                                   "; ".join(left))
        except KeyboardInterrupt:
            for s in self.sessions:
                s.stopped = "interrupted"
            logger.warning("re-measurement of the best configs interrupted")
            return True
        return False

    def _measure_again(self, sessions, configs: dict, remeasured: dict) -> bool:
        """Measure the configs of each session (``configs``: ``id(session)`` -> its configs)
        ``FINAL_ROUNDS`` times, in interleaved rounds, as re-measurements; whether there were any."""
        inputs = []
        for s in sessions:
            for _ in range(FINAL_ROUNDS):
                for c in configs.get(id(s), ()):
                    inp = MeasureInput(s.task, c)
                    self.owner[id(inp)] = s
                    inputs.append(inp)
        if not inputs:
            return False
        self.measurer.submit(inputs)
        self.display.remeasuring(len(inputs))
        while self.measurer.in_flight:
            for inp, res in self.measurer.results():
                s = self.owner.pop(id(inp))
                self._check_quiet(s, res)
                s.remeasured(s.recorder.add(inp, res, kind=tuning_db.REMEASURE))
                remeasured[id(s)] += 1
                self.display.remeasured(s)
        return True


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within this context SIGTERM interrupts tuning as Ctrl-C does (a ``KeyboardInterrupt`` in
    the main thread), so that ``kill`` ends a run cleanly. Only where SIGTERM still has its
    default action (a handler of the program's own is left alone), and only in the main
    thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: How ``cache_flush="model"`` times a candidate, recorded with each run that times so
#: (``model_input`` in its options): 1, the input written by the threads in equal shares of the
#: whole buffer (runs that do not say); 2, a channel-blocked input by the rows of each channel
#: block, as a convolution whose threads split the height writes it
#: (:func:`compiler.runtime.timer.touched_planes`); 3, and the kernel's scratch (a Winograd
#: layer's transformed tiles) in a region evicted with its weights, its epilogue's residuals left
#: in the caches, as they are inside a model.
MODEL_INPUT = 3
#: The timings of runs made by earlier versions of ``cache_flush="model"``, by ``model_input``.
_OLDER_MODEL = {1: "model, the input in shares of the whole", 2: "model, the scratch in the caches"}


def run_cache_flush(run: tuning_db.RunInfo) -> bool | str:
    """What a run of the log evicted before timing each CPU call (:attr:`measure.Runner.cache_flush`:
    False, True, "weights" or "model"); runs that do not say timed hot, as every runner did by default
    before tuning logs recorded it. A "model" run of an earlier version than :data:`MODEL_INPUT`
    is told apart: its figures do not compare with this timer's."""
    flush, version = run.options.get("cache_flush", False), run.options.get("model_input", 1)
    if flush == "model" and version != MODEL_INPUT:
        return _OLDER_MODEL.get(version, f"model, version {version}")
    return flush


#: How a run timed its CPU candidates, and how to time them so again, by ``cache_flush``.
_TIMED = {False: "with warm caches (the default of tune)",
          True: "with every argument but the input evicted before each call (cache_flush=True, TVM's "
                "enable_cpu_cache_flush)",
          "weights": "with its weights evicted before each call (cache_flush='weights', the default of "
                     "tune_model before 'model')",
          "model": "with its weights and scratch evicted, its residual kept and its input written by the "
                   "thread pool before each call, as inside a model (cache_flush='model', the default of "
                   "tune_model)",
          _OLDER_MODEL[1]: "with its weights evicted and its input written by the thread pool in equal "
                           "shares of the whole buffer before each call (cache_flush='model' before "
                           "channel-blocked inputs were written by the rows of each block)",
          _OLDER_MODEL[2]: "with its weights evicted and its input written by the thread pool before each "
                           "call, but its scratch (a Winograd layer's transformed tiles) left in the caches "
                           "and its residual evicted (cache_flush='model' before the scratch was evicted "
                           "and residuals kept)"}
_TIME_SO = {False: "a runner with cache_flush=False: autotune tune, or autotune tune-model --no-cache-flush",
            True: "a runner with cache_flush=True",
            "weights": "a runner with cache_flush='weights': tune_model(..., "
                       "measure_option=measure.MeasureOptions(runner=measure.LocalRunner(number=1, "
                       "repeat=10, cache_flush='weights')))",
            "model": "a runner with cache_flush='model': autotune tune-model without --no-cache-flush",
            **dict.fromkeys(_OLDER_MODEL.values(), "no runner of this version times so any more")}


def check_timing(log, tasks: Sequence, cache_flush: bool | str) -> None:
    """Raise :class:`AutotuneError` when a CPU task's records in ``log`` were timed otherwise than
    ``cache_flush`` says: a kernel timed with its weights in the caches runs up to twice as fast
    as one that reads them from memory, so pooling the two would rank configs by how they were
    timed. (GPU candidates are timed alike either way.)"""
    for task in tasks:
        if Target(task.target).device_type != "cpu":
            continue
        other = [t for t in map(run_cache_flush, log.runs_of(task.workload_key)) if t != cache_flush]
        if other:
            before = other[0]
            raise AutotuneError(
                f"cannot tune {workload_label(task.name, task.args)}: {other.count(before)} earlier "
                f"run(s) in the log timed it {_TIMED.get(before, repr(before))}, this run would time it "
                f"{_TIMED.get(cache_flush, repr(cache_flush))}; "
                f"the two do not compare. Time it as before ({_TIME_SO.get(before, repr(before))}), or tune "
                "into another log")


def check_measurable(tasks: Sequence, measure_option=None) -> None:
    """Raise :class:`AutotuneError` when ``tasks`` cannot be measured with ``measure_option``.

    A task whose code runs on a device other than the host's CPU (a CUDA GPU), timed by a
    local runner (the default), needs that device and its driver (for CUDA: pycuda) on this
    machine; without them every trial would only record why, so tuning stops before any
    worker starts or any record is written. A Ray runner is not judged here: its cluster
    may have GPUs elsewhere. Whatever the runner, a task whose device is simulated in this
    process (``COMPILER_CUDA_SIMULATOR=1``) is refused: simulated timings are never tuned on.
    """
    for task in tasks:  # whatever the runner: the simulator is this process's choice, and it is explicit
        try:
            refuse_simulated(Target(task.target).device_type, workload_label(task.name, task.args))
        except SimulatedDeviceError as e:
            raise AutotuneError(f"cannot tune: {e}") from None
    if measure_option is not None and not isinstance(measure_option.runner, LocalRunner):
        return
    for task in tasks:
        target = Target(task.target)
        if target.device_type == "cpu":
            continue
        reason = device_memory(target.device_type).unavailable_reason()
        if reason is not None:
            label = workload_label(task.name, task.args)
            raise AutotuneError(f"cannot tune {label} for {task.target!r} on this machine: "
                                f"{target.kind.upper()} code cannot run here: {reason}. Tune on a machine "
                                "where it runs, or measure on a Ray cluster (measure.ray.RayRunner)")
