"""AutoTVM's ``autotvm.measure.measure_methods``: ``LocalBuilder``, ``LocalRunner`` and
``BuildResult`` (``RPCRunner`` is refused).

:class:`LocalBuilder` and :class:`LocalRunner` take AutoTVM's arguments and are
:class:`measure.LocalBuilder` and :class:`measure.LocalRunner` (what ``measure_option``
hands to the tuning loop) as well as AutoTVM's :class:`~.measure.Builder` and
:class:`~.measure.Runner`: called directly, as AutoTVM code may do,
``builder.build(measure_inputs)`` returns one :class:`BuildResult` per input and
``runner.run(measure_inputs, build_results)`` one :class:`~.measure.MeasureResult`.
"""

from __future__ import annotations

import queue
import time
from collections import namedtuple

import measure
from measure.gate import Gates
from measure.protocol import BuildReply
from search_spaces import InstantiationError

from ...errors import AutotuneError
from .measure import Builder, MeasureResult, Runner, error_no

__all__ = ["LocalBuilder", "LocalRunner", "BuildResult", "RPCRunner"]


class BuildResult(namedtuple("BuildResult", ["filename", "arg_info", "error", "time_cost"])):
    """AutoTVM's build result: ``filename`` (always None here: a candidate is compiled to an
    in-memory artifact, ``build_result.artifact``, not to a shared library on disk),
    ``arg_info`` (``((shape, dtype), ...)`` of the kernel's buffer arguments), ``error``
    (the exception of a failed build, else None) and ``time_cost`` (seconds)."""

    @classmethod
    def of(cls, reply: BuildReply) -> BuildResult:
        """The AutoTVM view of a :class:`measure.BuildReply`; ``.reply`` keeps it."""
        if reply.artifact is None:
            kind = reply.error_kind or measure.ErrorKind.COMPILE_ERROR
            error = (InstantiationError if kind is measure.ErrorKind.INSTANTIATION_ERROR else RuntimeError)(
                f"{kind.value}: {reply.error or ''}")
            view = cls(None, (), error, reply.build_time)
        else:
            view = cls(None, _arg_info(reply.artifact), None, reply.build_time)
        view.reply = reply
        return view

    @property
    def artifact(self):
        """The compiled candidate (:class:`compiler.backends.Artifact`), None for a failure."""
        reply = getattr(self, "reply", None)
        return None if reply is None else reply.artifact


def _arg_info(artifact) -> tuple:
    infos = artifact.function_infos()
    entry = infos.get(artifact.metadata.get("entry")) or next(iter(infos.values()), None)
    if entry is None:
        return ()
    return tuple((tuple(a.shape or ()), a.dtype) for a in entry.signature.args if a.kind == "buffer")


class LocalBuilder(measure.LocalBuilder, Builder):
    """AutoTVM's ``LocalBuilder(timeout, n_parallel, build_kwargs, build_func, do_fork, runtime)``:
    builds candidates in ``n_parallel`` local worker processes (default: the usable CPUs),
    each build limited to ``timeout`` seconds.

    The other arguments exist for AutoTVM's signature: builds always run in isolated
    workers with this project's own build function, so only their defaults are accepted.
    """

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, build_kwargs: dict | None = None,
                 build_func: str = "default", do_fork: bool = False, runtime=None):
        unsupported = {"build_kwargs": build_kwargs or None, "runtime": runtime,
                       "build_func": None if build_func == "default" else build_func}
        given = {k: v for k, v in unsupported.items() if v is not None}
        if given:
            raise ValueError(f"autotvm.LocalBuilder: {', '.join(f'{k}={v!r}' for k, v in given.items())} "
                             "not supported; candidates are built with compiler.build in isolated workers")
        super().__init__(n_parallel=n_parallel, timeout=timeout)
        self.build_kwargs = {}
        self.task = None

    def build(self, inputs, gates: Gates | None = None):
        """Without ``gates`` (AutoTVM's call ``build(measure_inputs)``): one
        :class:`BuildResult` per input, built in the workers. With them: the
        :class:`measure.Builder` protocol of the tuning loop."""
        if gates is not None:
            return super().build(inputs, gates)
        todo = [measure.MeasureInput(inp.task, inp.config) for inp in inputs]
        results: list = [None] * len(todo)
        for i, reply in super().build(todo, Gates(exclusive=False)):
            results[i] = BuildResult.of(reply)
        return results


class LocalRunner(measure.LocalRunner, Runner):
    """AutoTVM's ``LocalRunner(timeout, number, repeat, min_repeat_ms, cooldown_interval,
    enable_cpu_cache_flush)``: times each candidate ``repeat`` times, each the mean of
    ``number`` runs (more, until one measurement takes ``min_repeat_ms``), sleeping
    ``cooldown_interval`` seconds between measurements and, with
    ``enable_cpu_cache_flush``, evicting every argument but the first (the input) from the
    CPU caches before every run, as AutoTVM does.

    Unlike AutoTVM's, the runner also checks each candidate's outputs against the
    template's reference (or, without one, its default config) before timing it, so that
    a wrong kernel is never recorded as fast; ``check_correctness=False`` turns that off.
    ``module_loader`` (AutoTVM's hook for remote devices) is not supported.
    """

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None,
                 check_correctness: bool = True):
        if module_loader is not None:
            raise ValueError("autotvm.LocalRunner: module_loader is not supported; candidates run in "
                             "local workers (measure.ray.RayRunner measures on other machines)")
        if cooldown_interval < 0:
            raise ValueError(f"autotvm.LocalRunner: cooldown_interval must be >= 0 seconds, "
                             f"got {cooldown_interval}")
        super().__init__(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout,
                         cooldown_ms=cooldown_interval * 1e3, cache_flush=enable_cpu_cache_flush,
                         check_correctness=check_correctness)
        self.task = None

    @property
    def cooldown_interval(self) -> float:
        """Seconds between two measurements of a candidate."""
        return self.cooldown_ms / 1e3

    @property
    def enable_cpu_cache_flush(self) -> bool:
        """Whether the CPU caches are flushed before every run."""
        return self.cache_flush

    def get_build_kwargs(self) -> dict:
        """Nothing: builds need no device limits from this runner."""
        return {}

    def run(self, jobs, gates=None):
        """AutoTVM's call ``run(measure_inputs, build_results)``: one
        :class:`~.measure.MeasureResult` per input, timed one after another. With a queue of
        jobs and :class:`measure.gate.Gates`: the :class:`measure.Runner` protocol of the
        tuning loop."""
        if isinstance(jobs, queue.Queue):
            return super().run(jobs, gates)
        inputs, builds = list(jobs), list(gates if gates is not None else ())
        if len(inputs) != len(builds):
            raise ValueError(f"LocalRunner.run: {len(inputs)} measure inputs but {len(builds)} build results")
        return [self._run_one(inp, build) for inp, build in zip(inputs, builds)]

    def _run_one(self, inp, build) -> MeasureResult:
        if build.error is not None:
            kind = measure.ErrorKind.INSTANTIATION_ERROR if isinstance(build.error, InstantiationError) \
                else measure.ErrorKind.COMPILE_ERROR
            return MeasureResult((build.error,), int(error_no(kind)), build.time_cost, time.time())
        reply = getattr(build, "reply", None)
        if reply is None or reply.artifact is None:
            raise ValueError("LocalRunner.run: the build result holds no artifact of this project's builders "
                             "(AutoTVM's shared-library files cannot be loaded here)")
        return MeasureResult.of(self.measure_one(inp.task, reply))


class RPCRunner(Runner):
    """AutoTVM's ``RPCRunner`` (timing on devices behind an RPC tracker): not available here."""

    def __init__(self, key=None, host=None, port=None, *args, **kwargs):
        raise AutotuneError("autotvm.RPCRunner is not supported: there is no RPC tracker here. Time "
                            "candidates on other machines with measure.ray.RayRunner (a Ray cluster), or "
                            "locally with autotvm.LocalRunner")
