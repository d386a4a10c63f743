"""What a builder and a runner are: the two stages of measurement.

A :class:`Builder` turns measure inputs into build replies, yielding each as it
finishes; a :class:`Runner` takes built candidates from a queue as they arrive and
yields measure results. Both are plain picklable objects whose worker pools (or
Ray actors) start on first use and are reused across batches; ``close()`` stops them.

A builder whose ``streams`` is true takes a :class:`Feed`, a list of inputs that grows
while it builds, so that a tuner keeping many candidates in flight never waits for the
slowest build of a batch before the next batch starts. ``slots()`` says how many
candidates a builder builds, or a runner times, at once: what a tuning loop must keep in
flight to keep every worker busy.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence

from measure.gate import Gates
from measure.protocol import BuildReply
from measure.records import ErrorKind, MeasureInput, MeasureResult

__all__ = ["Builder", "Runner", "Feed", "as_feed", "error_result"]


class Feed:
    """Measure inputs handed to a builder over time.

    Inputs are indexed in the order they were put; ``closed`` once no more will come.
    A list is a feed that is closed from the start (:func:`as_feed`).
    """

    def __init__(self, inputs: Iterable[MeasureInput] = ()):
        self._items: list[MeasureInput] = list(inputs)
        self._closed = False
        self._cv = threading.Condition()

    def put(self, inputs: Iterable[MeasureInput]) -> range:
        """Append ``inputs``; returns their indices."""
        with self._cv:
            if self._closed:
                raise RuntimeError("put on a closed Feed")
            start = len(self._items)
            self._items.extend(inputs)
            self._cv.notify_all()
            return range(start, len(self._items))

    def close(self) -> None:
        """No more inputs will come."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    @property
    def closed(self) -> bool:
        """Whether no more inputs will come."""
        return self._closed

    def done(self, seen: int) -> bool:
        """Whether a consumer that has taken ``seen`` inputs has taken the last one."""
        with self._cv:
            return self._closed and seen >= len(self._items)

    def wait(self, seen: int, timeout: float | None = None) -> None:
        """Block until there are more than ``seen`` inputs, the feed closes, or ``timeout`` s pass."""
        with self._cv:
            self._cv.wait_for(lambda: self._closed or len(self._items) > seen, timeout)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index):
        return self._items[index]


def as_feed(inputs: Sequence[MeasureInput] | Feed) -> Feed:
    """``inputs`` as a :class:`Feed` (a list becomes a closed one)."""
    if isinstance(inputs, Feed):
        return inputs
    feed = Feed(inputs)
    feed.close()
    return feed


class Builder:
    """Builds candidates; subclasses implement :meth:`build`."""

    #: Whether :meth:`build` takes a :class:`Feed` that grows while it builds. A builder that
    #: does not is given one closed list of inputs per call, the next only after it finished.
    streams = False

    def build(self, inputs: Sequence[MeasureInput] | Feed, gates: Gates) -> Iterator[tuple[int, BuildReply]]:
        """``(index into inputs, result)`` pairs, as builds finish."""
        raise NotImplementedError

    def slots(self) -> int:
        """How many candidates this builder builds at once."""
        return 1

    def close(self) -> None:
        """Stop the workers (they start again on the next build)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Runner:
    """Checks and times built candidates; subclasses implement :meth:`run`."""

    #: What of a CPU candidate's arguments is evicted from the caches before each timed call: nothing
    #: (False), all but the first (True), or all but the first and the last ("weights"; "model"
    #: then has the thread pool write the first; see :data:`compiler.runtime.timer.CACHE_FLUSH_CHOICES`).
    #: Costs timed differently do not compare: the tuning log keeps them apart by run.
    cache_flush: bool | str = False

    def run(self, jobs: queue.Queue, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        """Take ``(index, MeasureInput, BuildReply)`` from ``jobs`` until ``None`` arrives;
        yield ``(index, result)`` as runs finish."""
        raise NotImplementedError

    def slots(self) -> int:
        """How many candidates this runner times at once."""
        return 1

    def close(self) -> None:
        """Stop the workers (they start again on the next run)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def error_result(kind: ErrorKind, message: str, build_time: float = 0.0, run_time: float = 0.0,
                 worker: str = "") -> MeasureResult:
    """A MeasureResult without costs."""
    return MeasureResult((), kind, message, build_time, run_time, time.time(), worker)
