"""Models: the tuning tasks of a graph, tuning them, and the graph built with the log's best configs.

AutoTVM's three steps for a model, on a graph from :func:`compiler.frontend.from_onnx`::

    graph = compiler.frontend.from_onnx("resnet18.onnx")
    tasks = autotune.extract_tasks(graph, "llvm")           # the fused kernels that have templates
    result = autotune.tune_model(tasks, time_budget=30 * 60, db="log.db")   # or trials=...
    print(result.report())                                   # each task's best, the model's estimate
    module = autotune.build_model(graph, "llvm", db="log.db")
    module.export_library("resnet18.so")                     # compiler.runtime.load_module runs it

A task is the fused workload that is deployed: a convolution with its bias, activation and
residual add in its output stage is one task, and its ``weight`` is how many kernels of the model
run it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

import compiler
from compiler.graph import Graph, Node, build_graph, prepare
from compiler.graph.build import KernelChoice
from compiler.graph.memory import aliases
from compiler.runtime.timer import FLUSH_MODEL
from compiler.target import Target
from measure import LocalRunner, MeasureOptions, code_version
from search_spaces import ConfigEntity, Task
from search_spaces.graph_tasks import kernel_task

from .errors import AutotuneError
from .history import ApplyHistoryBest
from .transfer import BorrowedConfig
from .tuner import TUNERS, tuner_class
from .tuning import TuneResult, estimated_latency, tune_tasks

__all__ = ["ModelTask", "ModelTasks", "ModelTuneResult", "MODEL_TIMING", "model_timing", "extract_tasks",
           "tune_model", "build_model",
           "measure_latency", "latencies_in_turn", "DeployedLatency", "measure_deployed"]

logger = logging.getLogger(__name__)


@dataclass
class ModelTask:
    """A distinct tuning task of a model, the kernels that run it, and how many there are."""

    task: Task
    kernels: list[str] = field(default_factory=list)

    @property
    def weight(self) -> int:
        """How many times one run of the model runs this task's kernel."""
        return len(self.kernels)


class ModelTasks(list):
    """The distinct tasks of a model (a list of :class:`ModelTask`), the kernels that have
    no template (``untemplated``: they get the default schedule), and the reshapes that are
    views of their input (``views``: the build gives them no kernel and no memory of their own)."""

    def __init__(self, tasks, untemplated, kernels: int, views=()):
        super().__init__(tasks)
        self.untemplated: list[str] = list(untemplated)
        self.kernels = kernels
        self.views: list[str] = list(views)

    @property
    def tasks(self) -> list[Task]:
        """The tasks, in order (what ``tune_tasks`` takes)."""
        return [t.task for t in self]

    @property
    def weights(self) -> list[int]:
        """Each task's weight, in order (``tune_tasks``'s ``weights``)."""
        return [t.weight for t in self]

    def report(self) -> str:
        """The tasks with their weights, and the kernels left to the default schedule."""
        no_template, views = len(self.untemplated), len(self.views)
        head = (f"{self.kernels} kernels: {sum(self.weights)} run {len(self)} tuning tasks, "
                f"{no_template} {'has' if no_template == 1 else 'have'} no template (default schedule)")
        if views:
            head += (f"; {views} reshapes are views of their input (no kernel)" if views > 1
                     else "; 1 reshape is a view of its input (no kernel)")
        lines = [head]
        lines += [f"  x{t.weight:<3d} {t.task.workload_name}" for t in self]
        if self.untemplated:
            lines.append("  default schedule: " + ", ".join(self.untemplated))
        return "\n".join(lines)


def _check_graph(graph) -> None:
    """Raise AutotuneError unless ``graph`` is a model's graph."""
    if not isinstance(graph, Graph):
        raise AutotuneError(f"expected a model's graph (compiler.frontend.from_onnx(path) makes one from an "
                            f"ONNX file), got {type(graph).__name__} {graph!r:.60}")


def extract_tasks(graph: Graph, target="llvm", algorithms=None) -> ModelTasks:
    """The distinct tuning tasks of ``graph``'s kernels on ``target``, with their weights.

    The graph is optimised and fused first (:func:`compiler.graph.prepare`), so each task is a
    kernel as it is deployed: built with ``algorithms`` (a map ``{layer: tile size}``, as
    :func:`build_model` takes it; :attr:`~autotune.AlgorithmChoices.algorithms` holds measured ones),
    its 3x3 layers run as that map says."""
    _check_graph(graph)
    target = compiler.Target.from_any(target)
    fused = prepare(graph, target, algorithms=algorithms)
    tasks: dict[str, ModelTask] = {}
    untemplated, views = [], []
    in_place = aliases(fused)
    for node in fused.nodes:
        if node.output.uid in in_place:
            views.append(node.name)
            continue
        task = kernel_task(node, target)
        if task is None:
            untemplated.append(f"{node.name} ({', '.join(n.op for n in node.attrs['body'].nodes)})")
            continue
        tasks.setdefault(task.workload_key, ModelTask(task)).kernels.append(node.name)
    return ModelTasks(tasks.values(), untemplated, len(fused.nodes) - len(views), views)


#: Trials per task of a model when neither ``trials`` nor ``time_budget`` is given.
DEFAULT_TRIALS_PER_TASK = 64

#: Configs borrowed from the nearest tuned workloads that each task measures first.
DEFAULT_WARM_START = 4


@dataclass
class ModelTuneResult:
    """What :func:`tune_model` did: the model's tasks, one :class:`~autotune.TuneResult` each
    (in order), and the seconds it took."""

    tasks: ModelTasks
    results: list[TuneResult]
    seconds: float

    @property
    def estimated_latency(self) -> float:
        """The weighted sum of the tasks' best costs (seconds): the model's latency as its tuned
        kernels add up, without its kernels that have no template and without tasks that have
        no result (:attr:`missing`)."""
        return estimated_latency(self._bests(), self.tasks.weights)[0]

    @property
    def missing(self) -> list[str]:
        """The tasks without a working config (left out of :attr:`estimated_latency`)."""
        return [t.task.workload_name for t, r in zip(self.tasks, self.results) if not _ok(r)]

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C or SIGTERM ended the tuning (every finished trial is in the log)."""
        return any(r.stopped == "interrupted" for r in self.results)

    def _bests(self):
        return [_Best(r.best_cost if _ok(r) else float("inf")) for r in self.results]

    def report(self) -> str:
        """A table: each task's weight, best cost, trials made in this run and why it stopped,
        then the model's estimated latency."""
        lines = []
        for t, r in zip(self.tasks, self.results):
            best = duration_text(r.best_cost) if _ok(r) else ("no working config" if r.trials else "-")
            lines.append(f"  x{t.weight:<3d} {best:>17}  {r.trials:4d} trials  {r.stopped:<14} "
                         f"{t.task.workload_name}")
        missing = self.missing
        note = f" (without {len(missing)} task(s) that have no result)" if missing else ""
        lines.append(f"estimated latency of the tuned kernels {duration_text(self.estimated_latency)}{note}; "
                     f"{sum(r.trials for r in self.results)} trials in {self.seconds:.0f} s")
        return "\n".join(lines)


@dataclass
class _Best:
    """A task's best as :func:`autotune.tuning.estimated_latency` reads it."""

    cost: float

    def ranked_median(self) -> float:
        return self.cost


def duration_text(seconds: float) -> str:
    """A kernel's or a model's time for people: ms, or us below 0.1 ms."""
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.2f} us"


def _ok(result: TuneResult) -> bool:
    return result.best_config is not None and result.best_cost < float("inf")


#: How :func:`tune_model` times a CPU candidate by default: ten calls, each timed alone after the
#: candidate's weights, every argument but the first (the input) and the last (the output), are
#: evicted from the caches and the thread pool has written the input, each thread its share
#: (``cache_flush="model"``; TVM's model-tuning tutorials for x86 use ``number=1, repeat=10,
#: min_repeat_ms=0`` with ``enable_cpu_cache_flush``, which evicts the output too and leaves the
#: input where the kernel's own last call read it). Inside a model a kernel reads its weights
#: from memory or the last-level cache (the other layers' weights have passed through since it
#: last ran), its input from the caches of the cores whose threads have just written it (the
#: kernel before), and writes its output into a workspace buffer that other kernels have just
#: used. Timed hot, again and again, ResNet-18's kernels summed to 0.7x their time inside the
#: model on a 2-vCPU Intel Xeon guest; with the weights evicted, 1.02x (MobileNetV2's 1.03x); and
#: ResNet-50's 1x1 layers that reduce the channels ran up to 1.8x their time alone inside the
#: model until the input was written so (a layer whose threads each read the whole input).
MODEL_TIMING = {"number": 1, "repeat": 10, "min_repeat_ms": 0, "cache_flush": FLUSH_MODEL}


def model_timing(target, cache_flush: bool = True) -> dict:
    """The runner settings that :func:`tune_model` times ``target``'s candidates with (keyword
    arguments of :class:`measure.LocalRunner` and :class:`measure.ray.RayRunner`): on a CPU,
    :data:`MODEL_TIMING` (nothing evicted where ``cache_flush`` is false: the runner's defaults);
    on a GPU, the runner's defaults (kernels there are timed alike either way)."""
    if not cache_flush or Target(target).device_type != "cpu":
        return {}
    return dict(MODEL_TIMING)


def tune_model(model, target="llvm", *, trials: int | None = None, time_budget: float | None = None,
               db="tuning.db", tuner="xgb", measure_option=None, scheduler="gradient",
               warm_start: int = DEFAULT_WARM_START, early_stopping: int | None = None,
               seed: int | None = None, progress: bool = True) -> ModelTuneResult:
    """Tune every task of a model with one budget: ``trials`` in all, ``time_budget`` seconds,
    or both (whichever ends first); with neither, :data:`DEFAULT_TRIALS_PER_TASK` per task.

    ``model`` is a graph (its tasks on ``target`` are extracted with :func:`extract_tasks`) or
    the :class:`ModelTasks` of one. The trials count the log's earlier trials of these tasks
    too (those that other runs made, such as another model's tuning, up to each task's equal
    share), so the same call run again after a kill or Ctrl-C finishes the budget (a time budget
    starts again). Tasks run on every worker at once (:func:`~autotune.tune_tasks`), and
    ``scheduler`` gives each batch to the task whose weighted cost is expected to fall most;
    the progress display shows each task's best and the model's estimated latency. Each task
    first measures up to ``warm_start`` configs borrowed from the nearest tuned workloads
    (:mod:`autotune.transfer`), and the tasks of one template share one cost model.

    Without ``measure_option``, CPU candidates are timed as they run inside the model, their
    weights read from memory (:data:`MODEL_TIMING`), so that the log's figures add up to the
    deployed model's latency; a log tuned otherwise (by a runner without
    ``cache_flush="model"``, such as :func:`~autotune.tune`'s default) cannot be resumed so:
    the error says how.
    """
    tasks = model if isinstance(model, ModelTasks) else extract_tasks(model, target)
    if not tasks:
        raise AutotuneError("the model has no kernel with a template: nothing to tune "
                            f"({len(tasks.untemplated)} kernels get the default schedule)")
    if trials is None and time_budget is None:
        trials = DEFAULT_TRIALS_PER_TASK * len(tasks)
    batch_size = None
    if trials is not None:  # batches no larger than a task's share, so that every task gets one
        kind = tuner_class(tuner) if isinstance(tuner, str) and tuner in TUNERS else tuner
        batch_size = min(getattr(kind, "default_batch_size", 8), max(1, trials // len(tasks)))
    start = time.perf_counter()
    options = measure_option if measure_option is not None else \
        MeasureOptions(runner=LocalRunner(**model_timing(tasks.tasks[0].target)))
    try:
        results = tune_tasks(tasks.tasks, trials, tuner=tuner, db=db, measure_option=options,
                             early_stopping=early_stopping, seed=seed, progress=progress,
                             batch_size=batch_size, weights=tasks.weights, total=trials is not None,
                             warm_start=warm_start, time_budget=time_budget, scheduler=scheduler)
    finally:
        if measure_option is None:
            options.close()
    return ModelTuneResult(tasks, results, time.perf_counter() - start)


def measure_latency(module: compiler.runtime.Module, repeat: int = 10, min_repeat_ms: float = 200.0,
                    seed: int = 0) -> float:
    """A compiled model's median latency (seconds) on random inputs, timed as a whole."""
    from compiler.graph.runner import model_info, random_inputs

    info = model_info(module)
    inputs = random_inputs(module, np.random.default_rng(seed))
    outputs = [np.empty(o["shape"], dtype=o["dtype"]) for o in info["outputs"]]
    timer = module.time_evaluator(module.entry_name, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return timer(*inputs, *outputs).median


def latencies_in_turn(modules, rounds: int, repeat: int = 10, min_repeat_ms: float = 200.0) -> list[float]:
    """Each of ``modules``' median latency (seconds, :func:`measure_latency`) over ``rounds``, the
    modules timed in turn in each round, so that a slower spell of the machine hits each."""
    times: list[list[float]] = [[] for _ in modules]
    for _ in range(rounds):
        for samples, module in zip(times, modules):
            samples.append(measure_latency(module, repeat, min_repeat_ms))
    return [float(np.median(samples)) for samples in times]


@dataclass(frozen=True)
class DeployedLatency:
    """A built model's latency (seconds) in the parts that the tuning log's estimate does and does
    not cover: its kernels that have a template and those on the default schedule, each timed
    inside the model (:func:`compiler.graph.profile_runs`: the medians over the runs of their
    calls' sums), and what the executor adds, the latency beyond the model's runs through its
    profiling entry from the first kernel's start to the last one's end (``profiled``: the
    latency less the median over rounds of that difference, each round timing both in turn): the
    entry's calls and the gaps before and after its kernels."""

    measured: float  # the model timed as a whole
    templated: float  # its kernels that have a template (the tuning log's), inside the model
    untemplated: float  # its kernels on the default schedule, inside the model
    untemplated_kernels: int
    profiled: float  # the runs through the profiling entry, first kernel's start to last one's end

    @classmethod
    def from_rounds(cls, latencies, profiled, templated: float, untemplated: float,
                    untemplated_kernels: int) -> DeployedLatency:
        """From rounds that each timed the model whole (``latencies``) and then its runs through the
        profiling entry (``profiled``, their median in each round), seconds: the latency the
        median of the rounds', the executor the median of their differences, as each round saw
        it (the rounds' latencies differ by more than it)."""
        latency = float(np.median(latencies))
        executor = float(np.median(np.subtract(latencies, profiled)))
        return cls(latency, templated, untemplated, untemplated_kernels, latency - executor)

    @property
    def executor(self) -> float:
        """The latency beyond the model's kernels run back to back (``profiled``)."""
        return self.measured - self.profiled

    def against(self, estimate: float) -> str:
        """The measured latency against ``estimate`` (:attr:`ModelTuneResult.estimated_latency`),
        part by part: where the tuned kernels run slower in the model than their log figures,
        they were tuned hot (a runner without ``cache_flush``) and stream from memory inside the
        model what they found in the caches when tuned."""
        parts = [f"the kernels with a template {duration_text(self.templated)} "
                 f"({self.templated / estimate:.2f}x their log figures)"]
        if self.untemplated_kernels:
            parts.append(f"the {self.untemplated_kernels} without one {duration_text(self.untemplated)}")
        executor = self.executor
        if executor >= 0:
            share = executor / self.measured
            parts.append(f"the executor {duration_text(executor)} ({share:.1%} of the latency)")
        else:  # two timings of the same runs, and the noise between them is larger than the executor
            parts.append(f"the executor too little to see (the model timed whole came out "
                         f"{duration_text(-executor)} below its kernels run back to back)")
        return (f"deployed model: {duration_text(self.measured)} measured against {duration_text(estimate)} "
                f"estimated from the tuning log ({self.measured / estimate:.2f}x). Inside the model: "
                + ", ".join(parts))


def measure_deployed(module: compiler.runtime.Module, repeat: int = 10, min_repeat_ms: float = 200.0,
                     seed: int = 0) -> DeployedLatency:
    """A compiled model's latency and its parts, timed inside the model (:class:`DeployedLatency`):
    ``repeat`` rounds, each a timing of the model whole (:func:`measure_latency`, at least
    ``min_repeat_ms``) and then its runs through the profiling entry for as long, so that the
    executor's share compares timings of one spell of the machine (a host may move the threads'
    cores every few seconds); the latency the median of the rounds'."""
    from compiler.graph import profile_runs, split_runs_by_template

    rng = np.random.default_rng(seed)
    latencies, runs = [], []
    for _ in range(repeat):
        latencies.append(measure_latency(module, 1, min_repeat_ms, seed))
        runs.append(profile_runs(module, 1, min_repeat_ms, rng))
    templated, untemplated, others = split_runs_by_template(module, np.concatenate(runs))
    return DeployedLatency.from_rounds(latencies, [float(np.median(r.sum(axis=1))) for r in runs],
                                       templated, untemplated, len(others))


def build_model(graph: Graph, target="llvm", db=None, *, transfer: bool = True, any_model: bool = False,
                name: str = "run", algorithms=None, configs=None) -> compiler.runtime.Module:
    """Compile ``graph`` for ``target`` with each kernel's best config in ``db`` (a tuning log or
    a pin file): one Module holding every kernel and an ahead-of-time executor that calls them in
    order (:func:`compiler.graph.build_graph`). A workload the log does not hold borrows its
    nearest tuned neighbour's config (``transfer``), else uses its template's default config;
    one warning lists those. ``module.export_library(path)`` writes one shared library.

    ``algorithms`` says how the 3x3 layers that can run by Winograd run: None for the planner's
    rule (by the size of the transformed kernel), a map ``{layer: tile size}`` (0: direct; what
    :attr:`~autotune.AlgorithmChoices.algorithms` holds), or ``"measure"``: each layer's algorithm timed
    inside the model on this machine first (:func:`~autotune.choose_algorithms`, which logs its
    report), and then each kernel whose best config has its threads on the output's height timed
    there against its best config with threads split otherwise
    (:func:`~autotune.thread_splits.choose_thread_splits`, which logs its report too). ``configs``
    (``{workload key: config}``, what :attr:`~autotune.ThreadSplits.configs` holds) replaces the
    log's best config of those workloads; with ``"measure"`` the measured choices add to it."""
    _check_graph(graph)
    target = compiler.Target.from_any(target)
    if isinstance(algorithms, str):
        if algorithms != "measure":
            raise AutotuneError(f"algorithms must be None, a map of layer names to tile sizes or "
                                f"'measure', got {algorithms!r}")
        from .algorithms import choose_algorithms
        from .thread_splits import choose_thread_splits

        choices = choose_algorithms(graph, target, db, transfer=transfer, any_model=any_model)
        logger.info("%s", choices.report())
        algorithms = choices.algorithms
        splits = choose_thread_splits(graph, target, db, algorithms=algorithms, transfer=transfer,
                                      any_model=any_model)
        logger.info("%s", splits.report())
        configs = {**splits.configs, **(configs or {})}
    with ModelBuilder(target, db, transfer=transfer, any_model=any_model, configs=configs) as builder:
        module = builder.build(prepare(graph, target, algorithms=algorithms), name)
        builder.warn_untuned(graph.name)
        builder.warn_stale(graph.name)
    return module


class ModelBuilder:
    """Compiles prepared graphs for ``target`` with the best configs of one tuning log (or pin
    file) ``db``, opened once (see :func:`build_model`), or, for the workloads (keys) of
    ``configs``, with the config given there; a context manager that closes a log it opened.
    :meth:`warn_untuned` logs the workloads that had no tuned config, :meth:`warn_stale` those
    whose config a figure of other code than today's chose."""

    def __init__(self, target, db, *, transfer: bool = True, any_model: bool = False, configs=None):
        self.target = compiler.Target.from_any(target)
        self.db = db
        # Borrowed configs are named once, by warn_untuned, not once per kernel as they are looked up.
        self.history = None if db is None else ApplyHistoryBest(db, transfer=transfer, any_model=any_model,
                                                                 announce=False)
        self.configs: dict = dict(configs or {})
        bad = next((key for key, c in self.configs.items() if not isinstance(c, ConfigEntity)), None)
        if bad is not None:
            raise AutotuneError(f"configs maps workload keys to configs of their spaces (ConfigEntity, as "
                                f"ThreadSplits.configs holds them); {bad!r} maps to {self.configs[bad]!r}")
        self.untuned: dict[str, None] = {}

    def __enter__(self) -> ModelBuilder:
        return self

    def __exit__(self, *exc) -> None:
        history = self.history
        if history is not None and history.log is not None and history.log is not self.db:
            history.log.close()  # opened here, from a path or URL

    def schedule_kernel(self, node: Node) -> KernelChoice | None:
        """The kernel of fused ``node`` with its config in ``configs``, else the log's best
        (``build_graph``'s hook)."""
        task = kernel_task(node, self.target)
        if task is None:
            return None
        config = self.configs.get(task.workload_key)
        if config is not None:
            source = "tuned, chosen inside the model"
        elif (config := self.best_config(task)) is None:
            self.untuned[task.workload_name] = None
            config, source = task.config_space.default_config, "default config"
        elif isinstance(config, BorrowedConfig):
            self.untuned[f"{task.workload_name} (borrowed from {config.borrowed_from}"
                         f"{config.describe_changes()})"] = None
            source = f"borrowed from {config.borrowed_from}"
        else:
            source = "tuned"
        schedule, tensors = task.instantiate(config)
        return KernelChoice(schedule, tensors, f"{task.name}: {source}", task.workload_key)

    def best_config(self, task: Task):
        """The log's best config of ``task`` (own or borrowed), or None."""
        return self.history.lookup(task.target, task) if self.history is not None else None

    def build(self, prepared: Graph, name: str = "run") -> compiler.runtime.Module:
        """``prepared`` (:func:`compiler.graph.prepare`'s result) compiled into one Module."""
        return build_graph(prepared, self.target, self.schedule_kernel, name)

    def warn_stale(self, model: str) -> None:
        """One warning that counts the kernels whose config was chosen by figures that other code than
        today's measured (``measure.code_version()``), if any: tuning the model again with the same
        budget makes no new trials but times those configs again."""
        stale = self.history.stale if self.history is not None else {}
        if stale:
            versions = sorted(set(stale.values()))
            logger.warning("%d kernel(s) of %s have configs chosen by figures that other code than today's "
                           "measured (code version %s; today %s): tuning the model again with the same "
                           "budget times them again", len(stale), model,
                           ", ".join(repr(v) for v in versions), code_version())

    def warn_untuned(self, model: str) -> None:
        """One warning that lists the workloads built without a tuned config, if any."""
        if self.untuned:
            logger.warning("%d kernel(s) of %s have no tuned config in %s: %s", len(self.untuned), model,
                           self.db if self.db is not None else "(no log)", "; ".join(self.untuned))
