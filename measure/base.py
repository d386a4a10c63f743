"""What a builder and a runner are: the two stages of measurement.

A :class:`Builder` turns measure inputs into build replies, yielding each as it
finishes; a :class:`Runner` takes built candidates from a queue as they arrive and
yields measure results. Both are plain picklable objects whose worker pools (or
Ray actors) start on first use and are reused across batches; ``close()`` stops them.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator, Sequence

from measure.gate import Gates
from measure.protocol import BuildReply
from measure.records import ErrorKind, MeasureInput, MeasureResult

__all__ = ["Builder", "Runner", "error_result"]


class Builder:
    """Builds candidates; subclasses implement :meth:`build`."""

    def build(self, inputs: Sequence[MeasureInput], gates: Gates) -> Iterator[tuple[int, BuildReply]]:
        """``(index into inputs, result)`` pairs, as builds finish."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers (they start again on the next build)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Runner:
    """Checks and times built candidates; subclasses implement :meth:`run`."""

    def run(self, jobs: queue.Queue, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        """Take ``(index, MeasureInput, BuildReply)`` from ``jobs`` until ``None`` arrives;
        yield ``(index, result)`` as runs finish."""
        raise NotImplementedError

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
