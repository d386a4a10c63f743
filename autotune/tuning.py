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

import logging
import signal
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from tqdm.auto import tqdm

import db as tuning_db
from compiler.runtime.device import device_memory
from compiler.target import Target
from measure import LocalRunner, MeasureInput, MeasureOptions, measure_batch, measure_stream
from search_spaces import SearchSpaceError, create_task

from . import transfer
from .errors import AutotuneError
from .selection import Ranking, gflops, record_of, workload_label
from .tuner.tuner import get_tuner

__all__ = ["Trial", "TuneResult", "tune", "tune_tasks", "check_measurable"]

logger = logging.getLogger(__name__)

# How many of the best configs are measured again at the end, and how often. A config timed
# once at a lucky moment would outrank those whose re-measurements met a slow one, so the
# re-measurement goes on (at most FINAL_PASSES passes) until the FINAL_TOP_K best have all
# been measured again.
FINAL_TOP_K = 3
FINAL_ROUNDS = 2
FINAL_PASSES = 3


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
    at its end.
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
    """Writes the measure results of one run into the log (:func:`selection.record_of`), one
    commit per result."""

    def __init__(self, log, task, run_id: str):
        self.log, self.task, self.run_id = log, task, run_id
        self.model = Target(task.target).model
        self.host = socket.gethostname()

    def add(self, inp, result, kind: str = tuning_db.TRIAL) -> tuning_db.Record:
        """Write the record of ``inp`` (a :class:`measure.MeasureInput`) measured as ``result``;
        returns it."""
        record = record_of(self.task, inp.config, result, run_id=self.run_id, kind=kind,
                           target_model=self.model, host=self.host, config_json=inp.config_json)
        self.log.add(record)
        return record


def _resume(log, task, tuner) -> tuple[list, int]:
    """Earlier records of this workload, fed to the tuner: their (config, costs) pairs, every
    measurement, and how many of them were trials."""
    records = log.records(task)
    pairs = [(r.config, r.costs if r.error_kind is None else []) for r in records]
    trials = sum(r.kind == tuning_db.TRIAL for r in records)
    if pairs:
        tuner.load_history((cfg, (sum(c) / len(c)) if c else None) for cfg, c in pairs)
        logger.info("resuming %s: %d earlier trials", task.workload_name, trials)
    return pairs, trials


def _pretrain(log, task, tuner, limit: int = 2000) -> None:
    """Give a learning tuner the records of other workloads of the same template."""
    if not hasattr(tuner, "pretrain"):
        return
    triples = []
    for w in log.workloads():
        if w.template != task.name or w.key == task.workload_key or w.target_kind != task.target.split()[0]:
            continue
        try:
            other = create_task(w.template, w.args, w.target)
        except Exception as err:  # noqa: BLE001 - a workload this code can no longer build
            logger.debug("skipping workload %s for pre-training: %s", w.key, err)
            continue
        for r in log.records(w.key, errors=False, limit=limit - len(triples)):
            triples.append((r.config, other, r.mean_cost))
        if len(triples) >= limit:
            break
    if triples:
        tuner.pretrain(triples)
        logger.info("pre-trained the cost model on %d records of other %s workloads", len(triples), task.name)


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


def _progress(total: int, enabled: bool, name: str):
    return tqdm(total=total, disable=not enabled, desc=name, unit="trial", leave=True,
                dynamic_ncols=True)


class _Session:
    """The state of tuning one task: its tuner, its log records and its best so far."""

    def __init__(self, task, tuner, log, seed, batch_size, options_note: dict, warm_start: int = 0):
        self.task = task
        self.tuner = get_tuner(tuner, task, seed=seed)
        self.batch_size = batch_size or self.tuner.default_batch_size
        self.run_id = log.start_run(self.tuner.name, {**options_note, "batch_size": self.batch_size,
                                                      "seed": seed, "workload": task.workload_name})
        self.log = log
        self.recorder = _Recorder(log, task, self.run_id)
        # every measurement of the workload, earlier runs' too, pooled by config
        pairs, self.earlier_trials = _resume(log, task, self.tuner)
        self.ranking = Ranking()
        for config, costs in pairs:
            self.ranking.add(config, costs)
        _pretrain(log, task, self.tuner)
        self.warm = _warm_start(log, task, self.tuner, warm_start)  # measured before the tuner's own
        self.history: list[Trial] = []
        self.errors: Counter = Counter()
        self.best_cost = min((sum(c) / len(c) for _, c in pairs if c), default=float("inf"))
        self.best_curve: list[float] = []  # best cost after each trial of this run
        self.since_best = 0
        self.stopped: str | None = None
        self.ended = False  # whether the log records the end of the run

    def step(self, n: int, options, callbacks, on_result) -> int:
        """Measure up to ``n`` new candidates; returns how many were measured."""
        configs = self._next_configs(min(self.batch_size, n))
        if not configs:
            self.stopped = "exhausted"
            return 0
        done_inputs, done_results = [], []
        try:
            for inp, res in measure_stream([MeasureInput(self.task, c) for c in configs], options):
                record = self.recorder.add(inp, res)
                self.ranking.add(record.config, record.costs)
                self.history.append(Trial(inp.config, res))
                done_inputs.append(inp)
                done_results.append(res)
                if res.error_kind is not None:
                    self.errors[res.error_kind.value] += 1
                if res.mean_cost < self.best_cost:
                    self.best_cost, self.since_best = res.mean_cost, 0
                else:
                    self.since_best += 1
                self.best_curve.append(self.best_cost)
                for cb in callbacks:
                    cb(inp, res)
                on_result(self)
        finally:
            if done_inputs:
                self.tuner.update(done_inputs, done_results)
        return len(done_inputs)

    def _next_configs(self, n: int) -> list:
        """The next batch: the warm-start configs first, then the tuner's proposals (the
        default config leading the first batch either way)."""
        if self.warm:
            configs = self._with_default(self.warm[:n])
            taken = {c.index for c in configs}
            self.warm = [c for c in self.warm if c.index not in taken]
            return configs
        if not self.tuner.has_next():
            return []
        return self._with_default(self.tuner.next_batch(n))

    def abandon(self) -> None:
        """Record the run as failed, when tuning stops on an error before :meth:`finish`."""
        if self.ended:
            return
        try:
            self.log.end_run(self.run_id, "failed")
            self.ended = True
        except tuning_db.TuningLogError as err:  # the error being raised says more
            logger.warning("could not record the end of run %s: %s", self.run_id, err)

    def _with_default(self, configs: list) -> list:
        """Put the default config first in the first batch of a workload, so the tuned result
        is never judged without the baseline a user would otherwise get."""
        default = self.task.config_space.default_config
        if self.history or default.index in self.tuner.measured or not configs:
            return configs
        rest = [c for c in configs if c.index != default.index]
        return [default, *rest[:len(configs) - 1]]

    def ranked_median(self) -> float:
        """The median cost of the config ranked first so far (inf before any success)."""
        best = self.ranking.best()
        return best.median if best else float("inf")

    def finish(self, options, remeasure: bool) -> TuneResult:
        """Measure the best few again (unless interrupted), close the run and report.

        An interrupt (Ctrl-C, SIGTERM) during the re-measurement ends it: the run is
        recorded as interrupted, with every measurement that finished."""
        ranked = self.ranking.ranked()
        remeasured = 0
        if ranked and remeasure:
            done: set[str] = set()
            try:
                for _ in range(FINAL_PASSES):
                    todo = [r for r in ranked[:FINAL_TOP_K] if r.fingerprint not in done]
                    if not todo:
                        break
                    top = [self.task.config_space.from_json(r.config) for r in todo]
                    inputs = [MeasureInput(self.task, c) for _ in range(FINAL_ROUNDS) for c in top]
                    for inp, res in zip(inputs, measure_batch(inputs, options)):
                        record = self.recorder.add(inp, res, kind=tuning_db.REMEASURE)
                        remeasured += 1
                        self.ranking.add(record.config, record.costs)
                    done.update(r.fingerprint for r in todo)
                    ranked = self.ranking.ranked()
            except KeyboardInterrupt:
                self.stopped = "interrupted"
                logger.warning("re-measurement of the best configs interrupted")
            ranked = self.ranking.ranked()
        stopped = self.stopped or "budget"
        self.log.end_run(self.run_id, stopped)
        self.ended = True
        best_config = self.task.config_space.from_json(ranked[0].config) if ranked else None
        best = ranked[0].median if ranked else float("inf")
        return TuneResult(self.task, best_config, best, _gflops(self.task, best), self.history,
                          dict(self.errors), stopped, self.run_id, resumed=self.earlier_trials,
                          remeasured=remeasured)


def _postfix(bar, sessions) -> None:
    # The figure TuneResult and ``autotune best`` will show: the top-ranked config's median.
    best = ", ".join(f"{_gflops(s.task, s.ranked_median()):.1f}" for s in sessions)
    bar.set_postfix(best_gflops=best, errors=sum(sum(s.errors.values()) for s in sessions))


def tune(task, trials: int = 500, tuner="xgb", db="tuning.db", measure_option=None,
         early_stopping: int | None = None, batch_size: int | None = None, seed: int | None = None,
         callbacks: Sequence[Callable] = (), progress: bool = True, total: bool = False,
         warm_start: int = 0, remeasure: bool = True) -> TuneResult:
    """Search ``task``'s config space for its fastest config.

    ``trials`` is the number of new trials to make; with ``total=True`` it is the number of
    trials of this workload in all, those the log already holds included, so that running
    the same call again after a kill finishes the budget (a run whose budget is already
    spent measures nothing). Configs the log holds are never measured again.

    ``tuner`` is a name of :data:`autotune.tuner.TUNERS` ("random", "grid", "ga", "xgb",
    "optuna"), a Tuner subclass or a Tuner instance; ``batch_size`` defaults to the tuner's
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
    re-measurement of the best few: the log then holds the run's trials only.
    """
    return tune_tasks([task], trials, tuner=tuner, db=db, measure_option=measure_option,
                      early_stopping=early_stopping, batch_size=batch_size, seed=seed,
                      callbacks=callbacks, progress=progress, total=total, warm_start=warm_start,
                      remeasure=remeasure)[0]


def tune_tasks(tasks: Sequence, trials: int, tuner="xgb", db="tuning.db", measure_option=None,
               early_stopping: int | None = None, batch_size: int | None = None,
               seed: int | None = None, callbacks: Sequence[Callable] = (), progress: bool = True,
               weights: Sequence[float] | None = None, total: bool = False, warm_start: int = 0,
               remeasure: bool = True) -> list[TuneResult]:
    """Tune several tasks with one budget of ``trials``, shared where it gains most
    (with ``total=True``, the log's earlier trials of these tasks count against it).

    Each task first gets one batch (round-robin warm-up); then each batch goes to the
    task whose end-to-end time (its best cost times its ``weights`` entry, how often
    it runs) is expected to fall most, judged from its recent improvement and an
    optimistic guess, as Ansor's task scheduler does. One progress bar covers all.
    ``warm_start`` and ``remeasure`` are as for :func:`tune`, per task.
    Returns one :class:`TuneResult` per task, in order.
    """
    tasks = list(tasks)
    if not tasks:
        raise AutotuneError("tune_tasks needs at least one task")
    if trials < 0:
        raise AutotuneError(f"trials must be >= 0, got {trials}")
    if warm_start < 0:
        raise AutotuneError(f"warm_start must be >= 0, got {warm_start}")
    weights = list(weights) if weights is not None else [1.0] * len(tasks)
    if len(weights) != len(tasks):
        raise AutotuneError(f"{len(weights)} weights for {len(tasks)} tasks")
    check_measurable(tasks, measure_option)
    log, own_log = _open_log(db)
    options = measure_option if measure_option is not None else MeasureOptions()
    note = {"trials": trials, "total": total, "early_stopping": early_stopping, "tasks": len(tasks),
            "warm_start": warm_start}
    sessions = [_Session(t, tuner, log, seed, batch_size, note, warm_start) for t in tasks]
    if total:
        done = sum(s.earlier_trials for s in sessions)
        trials = max(0, trials - done)
        logger.info("%d trials in the log already; %d to go", done, trials)
    name = tasks[0].workload_name if len(tasks) == 1 else f"{len(tasks)} tasks"
    bar = _progress(trials, progress, name)
    spent = total and trials == 0  # nothing to measure, nothing to re-measure

    def on_result(session) -> None:
        bar.update(1)
        _postfix(bar, sessions)

    try:
        with _sigterm_interrupts(), log.keep_alive([s.run_id for s in sessions]):
            interrupted = _search(sessions, weights, trials, early_stopping, options, callbacks,
                                  on_result, bar)
            results = []
            for s in sessions:
                results.append(s.finish(options, remeasure=remeasure and not (interrupted or spent)))
                interrupted = interrupted or results[-1].stopped == "interrupted"
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


def _search(sessions, weights, trials, early_stopping, options, callbacks, on_result, bar) -> bool:
    """Measure up to ``trials`` candidates over ``sessions``; returns whether it was interrupted."""
    try:
        done = 0
        while done < trials:
            session = _next_session(sessions, weights)
            if session is None:
                break
            done += session.step(trials - done, options, callbacks, on_result)
            if early_stopping is not None and session.since_best >= early_stopping:
                session.stopped = "early_stopping"
    except KeyboardInterrupt:
        for s in sessions:
            s.stopped = "interrupted"
        logger.warning("tuning interrupted; every finished measurement is in the log")
        return True
    finally:
        bar.close()
    return False


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


def check_measurable(tasks: Sequence, measure_option=None) -> None:
    """Raise :class:`AutotuneError` when ``tasks`` cannot be measured with ``measure_option``.

    A task whose code runs on a device other than the host's CPU (a CUDA GPU), timed by a
    local runner (the default), needs that device and its driver (for CUDA: pycuda) on this
    machine; without them every trial would only record why, so tuning stops before any
    worker starts or any record is written. A Ray runner is not judged here: its cluster
    may have GPUs elsewhere.
    """
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


# Ansor's scheduler: weight of the observed improvement against the optimistic guess,
# and how many recent trials the observed improvement is measured over.
_ALPHA = 0.2
_WINDOW = 16


def _next_session(sessions: list, weights: list):
    """The session to measure next: warm-up first, then the largest expected gain."""
    active = [(s, w) for s, w in zip(sessions, weights) if s.stopped is None]
    if not active:
        return None
    for s, _ in active:
        if not s.history:
            return s
    best, best_gain = None, -1.0
    for s, w in active:
        curve = s.best_curve
        cost = curve[-1] if curve and curve[-1] < float("inf") else None
        if cost is None:
            gain = float("inf")  # nothing works yet: keep looking
        else:
            back = curve[-1 - _WINDOW] if len(curve) > _WINDOW else curve[0]
            observed = max(0.0, back if back < float("inf") else cost) - cost
            observed /= min(_WINDOW, len(curve))
            optimistic = cost / len(curve)
            gain = w * (_ALPHA * observed + (1 - _ALPHA) * optimistic)
        if gain > best_gain:
            best, best_gain = s, gain
    return best
