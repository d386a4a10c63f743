"""Task schedulers: which of several tasks tuned with one budget gets the next batch.

A model is many tasks, and what its user wants is the model's latency: the sum over its
tasks of each one's best cost times its weight (how often the model runs it). A scheduler
is asked, whenever measuring slots are free, which task should propose the next batch:

* ``"gradient"`` (the default): Ansor's task scheduler. After one batch each, the next
  batch goes to the task whose weighted cost is expected to fall most per trial, judged
  from its recent improvement and an optimistic guess (a task at ``n`` trials could still
  fall by ``cost / n``).
* ``"round-robin"``: every task in turn, the fewest trials first (AutoTVM's plain loop).

A task's trials in flight (proposed, not yet measured) count as spent, so that a cluster
that keeps many candidates in flight does not pile them onto one task before its results
return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .errors import AutotuneError

__all__ = ["TaskState", "TaskScheduler", "GradientScheduler", "RoundRobinScheduler", "SCHEDULERS",
           "get_scheduler"]


class TaskState(Protocol):
    """What a scheduler reads of a task being tuned."""

    #: The task's best cost (seconds) after each of its trials so far, inf before a success.
    best_curve: list[float]
    #: Its candidates proposed and not yet measured.
    in_flight: int
    #: None while it may be given more trials ("exhausted", "early_stopping", ... once not).
    stopped: str | None


class TaskScheduler:
    """Chooses the task that gets the next batch; subclasses implement :meth:`pick`."""

    name = "scheduler"

    def pick(self, tasks: Sequence[TaskState], weights: Sequence[float]) -> int | None:
        """The index of the task to measure next, or None when none may be given more."""
        raise NotImplementedError


class RoundRobinScheduler(TaskScheduler):
    """Every task in turn: the one with the fewest trials (measured and in flight) first."""

    name = "round-robin"

    def pick(self, tasks, weights):
        active = [k for k, t in enumerate(tasks) if t.stopped is None]
        if not active:
            return None
        return min(active, key=lambda k: (len(tasks[k].best_curve) + tasks[k].in_flight, k))


# Ansor's scheduler: weight of the observed improvement against the optimistic guess,
# and how many recent trials the observed improvement is measured over.
_ALPHA = 0.2
_WINDOW = 16


class GradientScheduler(TaskScheduler):
    """Ansor's gradient scheduler: one batch each first, then the largest expected gain."""

    name = "gradient"

    def __init__(self, alpha: float = _ALPHA, window: int = _WINDOW):
        self.alpha, self.window = alpha, window

    def pick(self, tasks, weights):
        active = [k for k, t in enumerate(tasks) if t.stopped is None]
        if not active:
            return None
        for k in active:  # warm-up: every task gets its first batch
            if not tasks[k].best_curve and not tasks[k].in_flight:
                return k
        # On a tie (e.g. every task's first batch still out), the task with the fewest trials.
        return max(active, key=lambda k: (self.gain(tasks[k], weights[k]),
                                          -(len(tasks[k].best_curve) + tasks[k].in_flight), -k))

    def gain(self, task: TaskState, weight: float) -> float:
        """How much ``weight`` times the task's best cost is expected to fall per trial."""
        curve = task.best_curve
        if not curve or curve[-1] == float("inf"):
            # Nothing works yet (or nothing is back): keep looking, unless a batch is out.
            return float("inf") if not task.in_flight else 0.0
        cost = curve[-1]
        spent = len(curve) + task.in_flight
        back = curve[-1 - self.window] if len(curve) > self.window else curve[0]
        observed = (max(0.0, back if back < float("inf") else cost) - cost) / min(self.window, len(curve))
        optimistic = cost / spent
        return weight * (self.alpha * observed + (1 - self.alpha) * optimistic)


#: The schedulers by name (``tune_tasks(scheduler=...)``, ``autotune tune-model --scheduler``).
SCHEDULERS = {"gradient": GradientScheduler, "round-robin": RoundRobinScheduler}


def get_scheduler(scheduler) -> TaskScheduler:
    """A :class:`TaskScheduler` from a name in :data:`SCHEDULERS` or an instance."""
    if isinstance(scheduler, TaskScheduler):
        return scheduler
    if isinstance(scheduler, str) and scheduler in SCHEDULERS:
        return SCHEDULERS[scheduler]()
    raise AutotuneError(f"unknown task scheduler {scheduler!r}; choose one of {', '.join(SCHEDULERS)} "
                        "or pass a TaskScheduler instance")
