"""A user's own AutoTVM ``Builder`` or ``Runner`` in the tuning loop.

:class:`CustomRunner` is a :class:`measure.Runner` that hands built candidates to a
user's subclass of AutoTVM's :class:`~.measure.Runner`, up to its ``n_parallel`` at a
time, as ``run(measure_inputs, build_results)``, and turns the AutoTVM
MeasureResults it returns into :class:`measure.MeasureResult`. :class:`CustomBuilder`
does the same for a user's :class:`~.measure.Builder`; what it builds goes to the
user's runner as it is. Both call ``set_task`` as AutoTVM does, once per new task: the
runner's, then the builder's with the runner's ``get_build_kwargs()``.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator

import measure
from measure.base import Builder as MeasureBuilder
from measure.base import Runner as MeasureRunner
from measure.local import LOCAL
from measure.protocol import BuildReply
from search_spaces import InstantiationError

from .measure import MeasureInput, to_measure_result
from .measure_methods import BuildResult

__all__ = ["CustomBuilder", "CustomRunner"]

# The artifact kind of a candidate that a user's Builder built: the BuildResult itself stays in
# this process, under the artifact's "key", until the user's Runner has it.
USER_BUILD = "autotvm.user_build"


class _TaskSetter:
    """Calls ``set_task`` on a user's object when the task changes."""

    def __init__(self):
        self._key = None
        self._lock = threading.Lock()

    def changed(self, task) -> bool:
        key = (task.workload_key, task.target)
        with self._lock:
            if key == self._key:
                return False
            self._key = key
            return True


class CustomRunner(MeasureRunner):
    """A user's AutoTVM Runner (``self.runner``) as a :class:`measure.Runner`."""

    def __init__(self, runner):
        self.runner = runner
        self._tasks = _TaskSetter()
        self._builds: dict[int, BuildResult] = {}   # key -> a user's Builder's result
        self._keys = itertools.count()
        self._lock = threading.Lock()

    def set_task_of(self, task) -> None:
        """``runner.set_task(task)`` unless ``task`` is the one it has."""
        if self._tasks.changed(task):
            self.runner.set_task(task)

    def build_kwargs(self) -> dict:
        """The runner's ``get_build_kwargs()`` ({} where it has none)."""
        try:
            kwargs = self.runner.get_build_kwargs()
        except NotImplementedError:
            return {}
        return dict(kwargs or {})

    def keep(self, build: BuildResult) -> int:
        """Keep a user's Builder's result for the runner; returns its key."""
        with self._lock:
            key = next(self._keys)
            self._builds[key] = build
            return key

    def slots(self) -> int:
        return max(1, int(getattr(self.runner, "n_parallel", 1) or 1))

    def run(self, jobs: queue.Queue, gates) -> Iterator[tuple[int, measure.MeasureResult]]:
        gate = gates(LOCAL)
        end = False
        while not end:
            job = jobs.get()
            if job is None:
                return
            batch = [job]
            while len(batch) < self.slots():  # what is queued already joins the batch
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    end = True
                    break
                batch.append(job)
            if gates.stop.is_set():
                continue
            gate.acquire_timing()  # the user's runner may time on this machine: builds wait
            try:
                results = self._run(batch)
            finally:
                gate.release_timing()
            yield from zip((i for i, _, _ in batch), results)

    def _run(self, batch: list) -> list:
        for _, inp, _ in batch:
            self.set_task_of(inp.task)
        inputs = [MeasureInput.of(inp) for _, inp, _ in batch]
        builds = [self._build_result(build) for _, _, build in batch]
        results = self.runner.run(inputs, builds)
        name = type(self.runner).__name__
        if results is None or len(results) != len(batch):
            raise TypeError(f"{name}.run returned {results!r}; it must return one MeasureResult per "
                            f"measure input ({len(batch)})")
        out = []
        for res in results:
            if not all(hasattr(res, f) for f in ("costs", "error_no", "all_cost", "timestamp")):
                raise TypeError(f"{name}.run returned {res!r}, not a MeasureResult(costs, error_no, "
                                "all_cost, timestamp)")
            try:
                out.append(to_measure_result(res))
            except ValueError as exc:
                raise TypeError(f"{name}.run returned {res!r}: {exc}") from None
        return out

    def _build_result(self, build: BuildReply) -> BuildResult:
        if build.artifact is not None and build.artifact.kind == USER_BUILD:
            with self._lock:
                return self._builds.pop(build.artifact.metadata["key"])
        return BuildResult.of(build)

    def close(self) -> None:
        """Close the user's runner if it can be closed (a LocalRunner subclass's workers)."""
        _close(self.runner)

    def __repr__(self) -> str:
        return f"CustomRunner({self.runner!r})"


class CustomBuilder(MeasureBuilder):
    """A user's AutoTVM Builder (``self.builder``) as a :class:`measure.Builder`. Results that
    hold a candidate compiled by this project's builders (a LocalBuilder subclass calling
    ``super().build``) go to any runner; others only to a user's runner (a
    :class:`CustomRunner`), as they are."""

    def __init__(self, builder, runner: MeasureRunner):
        self.builder = builder
        self.runner = runner
        self._tasks = _TaskSetter()

    def set_task_of(self, task) -> None:
        """The runner's ``set_task(task)``, then the builder's with its build kwargs, unless
        ``task`` is the one they have."""
        if self._tasks.changed(task):
            if isinstance(self.runner, CustomRunner):
                self.runner.set_task_of(task)
                kwargs = self.runner.build_kwargs()
            else:
                kwargs = self.runner.get_build_kwargs() if hasattr(self.runner, "get_build_kwargs") else {}
            self.builder.set_task(task, kwargs)

    def slots(self) -> int:
        return max(1, int(getattr(self.builder, "n_parallel", 1) or 1))

    def build(self, inputs, gates) -> Iterator[tuple[int, BuildReply]]:
        for task in {id(inp.task): inp.task for inp in inputs}.values():
            self.set_task_of(task)
        views = [MeasureInput.of(inp) for inp in inputs]
        results = self.builder.build(views)
        name = type(self.builder).__name__
        if results is None or len(results) != len(views):
            raise TypeError(f"{name}.build returned {results!r}; it must return one BuildResult per "
                            f"measure input ({len(views)})")
        for i, res in enumerate(results):
            if not all(hasattr(res, f) for f in ("filename", "arg_info", "error", "time_cost")):
                raise TypeError(f"{name}.build returned {res!r}, not a BuildResult(filename, arg_info, "
                                "error, time_cost)")
            seconds = float(res.time_cost or 0.0)
            reply = getattr(res, "reply", None)
            if res.error is not None:
                kind = measure.ErrorKind.INSTANTIATION_ERROR if isinstance(res.error, InstantiationError) \
                    else measure.ErrorKind.COMPILE_ERROR
                yield i, BuildReply(None, f"{type(res.error).__name__}: {res.error}", seconds, kind)
            elif isinstance(self.runner, CustomRunner):
                key = self.runner.keep(res)
                yield i, BuildReply(measure.Artifact(USER_BUILD, b"", {"key": key}), None, seconds)
            elif reply is not None and reply.artifact is not None:
                yield i, reply
            else:
                raise TypeError(f"{name}.build returned {res!r}, which holds no candidate compiled by this "
                                f"project's builders; {type(self.runner).__name__} cannot run it (only a "
                                "user's Runner can)")

    def close(self) -> None:
        """Close the user's builder if it can be closed (a LocalBuilder subclass's workers)."""
        _close(self.builder)

    def __repr__(self) -> str:
        return f"CustomBuilder({self.builder!r})"


def _close(obj) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()
