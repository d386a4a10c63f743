"""AutoTVM's ``autotvm.measure.measure``: measure inputs and results, error numbers, the
``Builder`` and ``Runner`` base classes, ``measure_option`` and ``create_measure_batch``.

:class:`MeasureInput` ``(target, task, config)`` and :class:`MeasureResult` ``(costs,
error_no, all_cost, timestamp)`` are named tuples, as in AutoTVM: callbacks receive them,
and users make them (a custom runner returns MeasureResults). A view of this project's
:class:`measure.MeasureResult` made by :meth:`MeasureResult.of` keeps that result (see
:func:`to_measure_result`).

Measurement itself is :mod:`measure`'s: ``measure_option`` gives a
:class:`measure.MeasureOptions` whose builder and runner are :class:`measure.Builder` /
:class:`measure.Runner` objects (:class:`~.measure_methods.LocalBuilder`,
:class:`~.measure_methods.LocalRunner`, Ray's); a user's own subclass of AutoTVM's
:class:`Builder` or :class:`Runner` is plugged in through :mod:`.custom`.
"""

from __future__ import annotations

import enum
from collections import namedtuple

import measure
from compiler.target import Target
from measure import ErrorKind, MeasureOptions
from measure.local import usable_cpus

__all__ = ["MeasureInput", "MeasureResult", "MeasureErrorNo", "Builder", "Runner", "measure_option",
           "create_measure_batch", "AutotvmMeasureOptions", "error_no", "error_kind", "to_measure_result"]


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


class MeasureInput(namedtuple("MeasureInput", ["target", "task", "config"])):
    """AutoTVM's measure input: the ``target`` (a :class:`compiler.Target`), the ``task``
    (:class:`search_spaces.Task`) and the ``config`` (a ConfigEntity of its space)."""

    @classmethod
    def of(cls, inp: measure.MeasureInput) -> MeasureInput:
        """The AutoTVM view of one of :mod:`measure`'s inputs."""
        return cls(Target(inp.task.target), inp.task, inp.config)


class MeasureResult(namedtuple("MeasureResult", ["costs", "error_no", "all_cost", "timestamp"])):
    """AutoTVM's measure result: ``costs`` (seconds per repeat; on an error, the error as
    AutoTVM keeps it: here its message), ``error_no`` (:class:`MeasureErrorNo`),
    ``all_cost`` (seconds spent building and running) and ``timestamp`` (when it finished,
    epoch seconds)."""

    @classmethod
    def of(cls, res: measure.MeasureResult) -> MeasureResult:
        """The AutoTVM view of one of :mod:`measure`'s results (kept: see
        :func:`to_measure_result`)."""
        costs = tuple(res.costs) if res.error_kind is None else (res.error_msg,)
        view = cls(costs, int(error_no(res.error_kind)), res.build_time + res.run_time, res.timestamp)
        view._measured = res
        return view


def to_measure_result(res) -> measure.MeasureResult:
    """The :class:`measure.MeasureResult` of ``res``: itself if it is one, the result behind
    an AutoTVM view made by :meth:`MeasureResult.of`, or one made from an AutoTVM
    MeasureResult's four fields (``all_cost`` counts as build time; a failure's message
    is its first cost, as AutoTVM keeps the exception there)."""
    if isinstance(res, measure.MeasureResult):
        return res
    behind = getattr(res, "_measured", None)
    if behind is not None:
        return behind
    kind = error_kind(res.error_no)
    costs = tuple(res.costs) if res.costs is not None else ()
    if kind is None:
        if not costs or not all(isinstance(c, int | float) and not isinstance(c, bool) for c in costs):
            raise ValueError(f"a successful MeasureResult has costs in seconds, got {res.costs!r}")
        return measure.MeasureResult(tuple(float(c) for c in costs), None, "", float(res.all_cost or 0.0),
                                     0.0, float(res.timestamp), "")
    message = f"AutoTVM {MeasureErrorNo(int(res.error_no)).name}"
    if costs and not isinstance(costs[0], int | float):
        message += f": {costs[0]}"
    return measure.MeasureResult((), kind, message, float(res.all_cost or 0.0), 0.0, float(res.timestamp), "")


class Builder:
    """AutoTVM's base of builders: ``Builder(timeout, n_parallel)``, ``set_task(task,
    build_kwargs)`` and ``build(measure_inputs) -> [BuildResult]``.

    A subclass that implements :meth:`build` can be given to :func:`measure_option`
    together with a subclass of :class:`Runner` that runs what it builds (this
    project's LocalRunner runs only what its own builders compile). The builders of this
    project (:class:`~.measure_methods.LocalBuilder`) are Builders too.
    """

    timeout: float = 10
    n_parallel: int | None = None
    build_kwargs: dict | None = None
    task = None

    def __init__(self, timeout: float = 10, n_parallel: int | None = None):
        self.timeout = timeout
        self.n_parallel = n_parallel or len(usable_cpus())
        self.build_kwargs = {}
        self.task = None

    def set_task(self, task, build_kwargs: dict | None = None) -> None:
        """Start building candidates of ``task`` (with the runner's ``build_kwargs``)."""
        self.task = task
        self.build_kwargs = build_kwargs

    def build(self, measure_inputs):
        """One :class:`~.measure_methods.BuildResult` per measure input."""
        raise NotImplementedError(f"{type(self).__name__}.build is not implemented")


class Runner:
    """AutoTVM's base of runners: ``Runner(timeout, n_parallel)``, ``set_task(task)``,
    ``get_build_kwargs()`` and ``run(measure_inputs, build_results) -> [MeasureResult]``.

    A subclass that implements :meth:`run` can be given to :func:`measure_option`: it
    receives up to ``n_parallel`` candidates at a time, with the BuildResults of the
    builder, and returns one :class:`MeasureResult` per candidate.
    """

    timeout: float = 5
    n_parallel: int | None = None
    task = None

    def __init__(self, timeout: float = 5, n_parallel: int | None = None):
        self.timeout = timeout
        self.n_parallel = n_parallel or len(usable_cpus())
        self.task = None

    def set_task(self, task):
        """Start running candidates of ``task``."""
        self.task = task

    def get_build_kwargs(self) -> dict:
        """What the builder must know of the device (e.g. its limits), as keyword arguments."""
        raise NotImplementedError(f"{type(self).__name__}.get_build_kwargs is not implemented")

    def run(self, measure_inputs, build_results):
        """One :class:`MeasureResult` per measure input."""
        raise NotImplementedError(f"{type(self).__name__}.run is not implemented")


class AutotvmMeasureOptions(MeasureOptions):
    """What :func:`measure_option` returns: a :class:`measure.MeasureOptions` that also reads
    as AutoTVM's dict, ``option["builder"]`` and ``option["runner"]`` (the objects given)."""

    def __init__(self, builder, runner, given: tuple):
        super().__init__(builder=builder, runner=runner)
        self._given = dict(zip(("builder", "runner"), given))

    def __getitem__(self, key: str):
        if key not in self._given:
            raise KeyError(f"measure options have 'builder' and 'runner', not {key!r}")
        return self._given[key]

    def keys(self):
        return self._given.keys()

    def get(self, key: str, default=None):
        return self._given.get(key, default)


def measure_option(builder="local", runner="local") -> AutotvmMeasureOptions:
    """AutoTVM's ``measure_option``: a builder and a runner, each ``"local"``, one of this
    project's (:class:`~.measure_methods.LocalBuilder`, :class:`~.measure_methods.LocalRunner`,
    any :class:`measure.Builder` / :class:`measure.Runner` such as Ray's) or a user's subclass
    of AutoTVM's :class:`Builder` / :class:`Runner`.

    A user's own Builder needs a user's own Runner: what it builds is handed to that runner
    as it is (this project's runners run only what its builders compile). A subclass of
    LocalBuilder or LocalRunner that overrides ``build`` or ``run`` is called as AutoTVM
    calls it, ``build(measure_inputs)`` and ``run(measure_inputs, build_results)``."""
    from . import custom
    from .measure_methods import LocalBuilder, LocalRunner

    if isinstance(builder, str):
        if builder != "local":
            raise ValueError(f"measure_option: builder is 'local' or a Builder, got {builder!r}")
        builder = LocalBuilder()
    if isinstance(runner, str):
        if runner != "local":
            raise ValueError(f"measure_option: runner is 'local' or a Runner (AutoTVM's RPCRunner is "
                             f"measure.ray.RayRunner here), got {runner!r}")
        runner = LocalRunner()
    given = (builder, runner)
    if not isinstance(runner, measure.Runner) or _overrides(runner, LocalRunner, "run"):
        if not isinstance(runner, Runner):
            raise ValueError(f"measure_option: runner is 'local' or a Runner (AutoTVM's RPCRunner is "
                             f"measure.ray.RayRunner here), got {runner!r}")
        runner = custom.CustomRunner(runner)
    if not isinstance(builder, measure.Builder):
        if not isinstance(builder, Builder):
            raise ValueError(f"measure_option: builder is 'local' or a Builder, got {builder!r}")
        if not isinstance(runner, custom.CustomRunner):
            raise ValueError(f"measure_option: the builder {type(builder).__name__} is a user's Builder; "
                             f"its build results can be run only by a user's Runner, not by "
                             f"{type(runner).__name__}, which runs what this project's builders compile "
                             "(subclass LocalBuilder to change how candidates are built)")
        builder = custom.CustomBuilder(builder, runner)
    elif _overrides(builder, LocalBuilder, "build"):
        builder = custom.CustomBuilder(builder, runner)
    return AutotvmMeasureOptions(builder, runner, given)


def _overrides(obj, base: type, method: str) -> bool:
    """Whether ``obj`` is of a subclass of ``base`` with its own ``method`` (AutoTVM's signature
    of it, which the tuning loop reaches through :mod:`.custom`)."""
    return isinstance(obj, base) and getattr(type(obj), method) is not getattr(base, method)


def create_measure_batch(task, option):
    """AutoTVM's ``create_measure_batch``: a function ``measure_batch(measure_inputs)`` that
    builds and times a list of :class:`MeasureInput` of ``task`` with ``option`` (from
    :func:`measure_option`, or AutoTVM's dict of a builder and a runner) and returns one
    :class:`MeasureResult` per input, in order. ``measure_batch.n_parallel`` is the
    builder's parallelism; ``measure_batch.close()`` stops the workers."""
    if not isinstance(option, MeasureOptions):
        try:
            option = measure_option(option["builder"], option["runner"])
        except (KeyError, TypeError):
            raise ValueError(f"create_measure_batch: option comes from measure_option, got {option!r}") \
                from None
    for side in (option.builder, option.runner):
        if hasattr(side, "set_task_of"):
            side.set_task_of(task)
    if isinstance(option.runner, Runner):
        option.runner.set_task(task)
    if isinstance(option.builder, Builder):
        option.builder.set_task(task, {})

    def measure_batch(measure_inputs):
        inputs = []
        for inp in measure_inputs:
            if not (hasattr(inp, "task") and hasattr(inp, "config")):
                raise TypeError(f"measure_batch: MeasureInput(target, task, config) expected, got {inp!r}")
            inputs.append(measure.MeasureInput(inp.task, inp.config))
        return [MeasureResult.of(r) for r in measure.measure_batch(inputs, option)]

    measure_batch.n_parallel = option.builder.slots()
    measure_batch.attach_objects = None
    measure_batch.close = option.close
    return measure_batch
