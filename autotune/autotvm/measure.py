"""AutoTVM's measurement options over :mod:`measure`.

``measure_option(builder=LocalBuilder(...), runner=LocalRunner(...))`` gives a
:class:`measure.MeasureOptions`; :class:`LocalBuilder` and :class:`LocalRunner` take
AutoTVM's arguments and are :class:`measure.LocalBuilder` and :class:`measure.LocalRunner`.
:class:`MeasureInput` and :class:`MeasureResult` are the read-only views of a measurement
that AutoTVM callbacks receive (``inp.target``, ``inp.task``, ``inp.config``;
``res.costs``, ``res.error_no``, ``res.all_cost``, ``res.timestamp``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import measure
from measure import ErrorKind, MeasureOptions

__all__ = ["measure_option", "LocalBuilder", "LocalRunner", "MeasureInput", "MeasureResult",
           "MeasureErrorNo", "error_no", "error_kind"]


class MeasureErrorNo(enum.IntEnum):
    """AutoTVM's error numbers of a measure result (0: no error)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1
    COMPILE_HOST = 2
    COMPILE_DEVICE = 3
    RUNTIME_DEVICE = 4
    WRONG_ANSWER = 5
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


_TO_NO = {
    None: MeasureErrorNo.NO_ERROR,
    ErrorKind.INSTANTIATION_ERROR: MeasureErrorNo.INSTANTIATION_ERROR,
    ErrorKind.COMPILE_ERROR: MeasureErrorNo.COMPILE_HOST,
    ErrorKind.RUNTIME_ERROR: MeasureErrorNo.RUNTIME_DEVICE,
    ErrorKind.WRONG_ANSWER: MeasureErrorNo.WRONG_ANSWER,
    ErrorKind.BUILD_TIMEOUT: MeasureErrorNo.BUILD_TIMEOUT,
    ErrorKind.RUN_TIMEOUT: MeasureErrorNo.RUN_TIMEOUT,
    ErrorKind.WORKER_CRASH: MeasureErrorNo.UNKNOWN_ERROR,
}
_FROM_NO = {
    MeasureErrorNo.INSTANTIATION_ERROR: ErrorKind.INSTANTIATION_ERROR,
    MeasureErrorNo.COMPILE_HOST: ErrorKind.COMPILE_ERROR,
    MeasureErrorNo.COMPILE_DEVICE: ErrorKind.COMPILE_ERROR,
    MeasureErrorNo.RUNTIME_DEVICE: ErrorKind.RUNTIME_ERROR,
    MeasureErrorNo.WRONG_ANSWER: ErrorKind.WRONG_ANSWER,
    MeasureErrorNo.BUILD_TIMEOUT: ErrorKind.BUILD_TIMEOUT,
    MeasureErrorNo.RUN_TIMEOUT: ErrorKind.RUN_TIMEOUT,
    MeasureErrorNo.UNKNOWN_ERROR: ErrorKind.RUNTIME_ERROR,
}


def error_no(kind: ErrorKind | None) -> MeasureErrorNo:
    """AutoTVM's error number for an :class:`measure.ErrorKind` (None: no error)."""
    return _TO_NO[kind]


def error_kind(number: int) -> ErrorKind | None:
    """The :class:`measure.ErrorKind` of AutoTVM's error number ``number`` (None for 0);
    an unknown number raises ValueError."""
    no = MeasureErrorNo(int(number))
    return None if no is MeasureErrorNo.NO_ERROR else _FROM_NO[no]


class LocalBuilder(measure.LocalBuilder):
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


class LocalRunner(measure.LocalRunner):
    """AutoTVM's ``LocalRunner(timeout, number, repeat, min_repeat_ms, cooldown_interval,
    enable_cpu_cache_flush)``: times each candidate ``repeat`` times, each the mean of
    ``number`` runs (more, until one measurement takes ``min_repeat_ms``), sleeping
    ``cooldown_interval`` seconds between measurements and, with
    ``enable_cpu_cache_flush``, evicting the CPU caches before every run.

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

    @property
    def cooldown_interval(self) -> float:
        """Seconds between two measurements of a candidate."""
        return self.cooldown_ms / 1e3

    @property
    def enable_cpu_cache_flush(self) -> bool:
        return self.cache_flush


def measure_option(builder="local", runner="local") -> MeasureOptions:
    """AutoTVM's ``measure_option``: a builder and a runner (``"local"`` or an instance of
    :class:`LocalBuilder` / :class:`LocalRunner`, or any :class:`measure.Builder` /
    :class:`measure.Runner` such as Ray's)."""
    if builder == "local":
        builder = LocalBuilder()
    if runner == "local":
        runner = LocalRunner()
    if not isinstance(builder, measure.Builder):
        raise ValueError(f"measure_option: builder is 'local' or a Builder, got {builder!r}")
    if not isinstance(runner, measure.Runner):
        raise ValueError(f"measure_option: runner is 'local' or a Runner (AutoTVM's RPCRunner is "
                         f"measure.ray.RayRunner here), got {runner!r}")
    return MeasureOptions(builder=builder, runner=runner)


@dataclass(frozen=True)
class MeasureInput:
    """What AutoTVM callbacks receive as a measure input: ``target``, ``task``, ``config``."""

    target: str
    task: object    # search_spaces.Task
    config: object  # search_spaces.ConfigEntity

    @classmethod
    def of(cls, inp: measure.MeasureInput) -> MeasureInput:
        return cls(inp.task.target, inp.task, inp.config)


@dataclass(frozen=True)
class MeasureResult:
    """What AutoTVM callbacks receive as a measure result: ``costs`` (seconds; on an error,
    the error message, as AutoTVM has it), ``error_no`` (:class:`MeasureErrorNo`),
    ``all_cost`` (seconds of build and run) and ``timestamp``; ``result`` is the
    :class:`measure.MeasureResult` it shows (None, like ``all_cost``, for a record read
    back from a log)."""

    costs: tuple
    error_no: int
    all_cost: float | None
    timestamp: float
    result: measure.MeasureResult | None = field(repr=False)

    @classmethod
    def of(cls, res: measure.MeasureResult) -> MeasureResult:
        costs = tuple(res.costs) if res.error_kind is None else (res.error_msg,)
        return cls(costs, int(error_no(res.error_kind)), res.build_time + res.run_time, res.timestamp, res)
