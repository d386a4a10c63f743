"""``measure_batch`` and ``measure_stream``: builder, then runner, with plain records between.

Builds and runs overlap: a thread feeds the builder's results into the runner's
queue as they finish, another drains the runner, and the caller receives results
as they come. A failed build becomes a result at once, without a run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

from compiler.runtime import num_threads
from measure.base import Builder, Runner, error_result
from measure.gate import Gates
from measure.local import LocalBuilder, LocalRunner, usable_cpus
from measure.records import ErrorKind, MeasureInput, MeasureResult

__all__ = ["MeasureOptions", "measure_batch", "measure_stream"]


class MeasureOptions:
    """A builder and a runner (default ``LocalBuilder()`` and ``LocalRunner()``).

    Reusable across batches; their workers start on first use and stay up until
    :meth:`close` (or the end of a ``with`` block). Picklable (without the workers).

    Where both are local, timing and builds share this machine. If the kernels run
    on fewer threads than there are usable CPUs (``AUTOTUNE_NUM_THREADS``), the run
    worker is pinned to the first ones and the build workers to the rest, and they
    overlap; otherwise builds pause while a candidate is timed (:mod:`measure.gate`).
    """

    def __init__(self, builder: Builder | None = None, runner: Runner | None = None):
        self.builder = builder if builder is not None else LocalBuilder()
        self.runner = runner if runner is not None else LocalRunner()
        self._exclusive: bool | None = None

    def _plan(self) -> bool:
        """Whether builds must pause during timing; pins local workers to disjoint cores if not."""
        if self._exclusive is None:
            self._exclusive = True
            if isinstance(self.builder, LocalBuilder) and isinstance(self.runner, LocalRunner):
                cpus, threads = usable_cpus(), num_threads()
                if threads < len(cpus) and self.builder.cpus is None and self.runner.cpus is None:
                    self.runner.cpus, self.builder.cpus = cpus[:threads], cpus[threads:]
                    self._exclusive = False
        return self._exclusive

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"MeasureOptions(builder={self.builder!r}, runner={self.runner!r})"


def measure_batch(inputs: Iterable[MeasureInput],
                  options: MeasureOptions | None = None) -> list[MeasureResult]:
    """One result per input, in the inputs' order."""
    inputs = list(inputs)
    results: list[MeasureResult | None] = [None] * len(inputs)
    for i, result in _measure_indexed(inputs, options):
        results[i] = result
    return results


def measure_stream(inputs: Iterable[MeasureInput],
                   options: MeasureOptions | None = None) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    """``(input, result)`` pairs as candidates finish."""
    inputs = list(inputs)
    for i, result in _measure_indexed(inputs, options):
        yield inputs[i], result


def _measure_indexed(inputs: list, options: MeasureOptions | None) -> Iterator[tuple[int, MeasureResult]]:
    if not inputs:
        return
    owned = options is None
    options = options or MeasureOptions()
    gates = Gates(exclusive=options._plan())
    built: queue.Queue = queue.Queue()
    out: queue.Queue = queue.Queue()

    def build_side() -> None:
        try:
            for i, build in options.builder.build(inputs, gates):
                if build.artifact is None:
                    kind = build.error_kind or ErrorKind.COMPILE_ERROR
                    out.put((i, error_result(kind, build.error or "", build.build_time, 0.0, build.worker)))
                else:
                    built.put((i, inputs[i], build))
        except BaseException as exc:
            out.put((None, exc))
        finally:
            built.put(None)

    def run_side() -> None:
        try:
            for i, result in options.runner.run(built, gates):
                out.put((i, result))
        except BaseException as exc:
            out.put((None, exc))

    threads = [threading.Thread(target=build_side, name="measure-build", daemon=True),
               threading.Thread(target=run_side, name="measure-run", daemon=True)]
    for t in threads:
        t.start()
    try:
        for _ in range(len(inputs)):
            i, item = out.get()
            if i is None:
                raise item
            yield i, item
    finally:
        gates.stop.set()
        for t in threads:
            t.join()
        if owned:
            options.close()
