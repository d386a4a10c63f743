"""Choosing, inside the model, between a kernel's best config with threads on the output's height
and its best config with threads split otherwise.

A convolution's threads may take a range of the output's height (``parallel_axis="height"``):
each then reads only the input rows its outputs need, where threads on channel blocks each read
all of the input. Whether that pays inside a model depends on how the kernels around it split
theirs: the input was written, and the output is read next, by threads split their own way,
which a kernel timed alone does not see. On a 2-vCPU Intel Xeon guest, ResNet-50's 1x1 layers at
56x56 ran 0.86 to 0.63 ms a call inside the model by height, while MobileNetV2's 32 to 192
channels at 28x28, between two depthwise layers whose threads take channel blocks, went from
0.036 to 0.060 ms, although timed alone it ran faster by height (0.037 against 0.039 ms).

So :func:`choose_thread_splits` builds the model twice, with the log's best configs and with
each height-split kernel's best other config from the log, times every kernel where it runs
(:func:`compiler.graph.profile` with ``in_model=True``) in turn over rounds, and gives each such
workload the config whose calls took less; then it times the model built so against the model
with the log's best configs, whole, and keeps the choices only if the model ran faster.
``build_model(..., algorithms="measure")`` runs it after :func:`~autotune.choose_algorithms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import compiler
from compiler.graph import Graph, prepare, profile
from search_spaces import SearchSpaceError, Task
from search_spaces.graph_tasks import kernel_task

from . import selection
from .model import ModelBuilder, _check_graph, duration_text, latencies_in_turn

__all__ = ["SplitChoice", "ThreadSplits", "choose_thread_splits", "HEIGHT"]

#: The thread split that :func:`choose_thread_splits` times inside the model against the others.
HEIGHT = "height"


@dataclass
class SplitChoice:
    """One workload whose best config splits threads by height: its name, the seconds its calls
    took in one run of the model with that config (``height``) and with its best other one
    (``other``, whose knobs are ``other_config``), and whether the other was chosen."""

    workload: str
    key: str
    height: float
    other: float
    other_config: object = field(repr=False)

    @property
    def other_chosen(self) -> bool:
        """Whether the other split's calls took less time in the model."""
        return self.other < self.height


@dataclass
class ThreadSplits:
    """What :func:`choose_thread_splits` measured: each height-split workload's times, and the
    model's latency with the log's best configs and with the choices (seconds, medians)."""

    workloads: list[SplitChoice]
    best_latency: float
    chosen_latency: float

    @property
    def changed(self) -> list[SplitChoice]:
        """The workloads that ran faster in the model with their other split."""
        return [c for c in self.workloads if c.other_chosen]

    @property
    def configs(self) -> dict:
        """The configs to build with in place of the log's best (``ModelBuilder(configs=...)``), by
        workload key: those of :attr:`changed` where the model ran faster with them, else none."""
        if not self.changed or not self.chosen_latency < self.best_latency:
            return {}
        return {c.key: c.other_config for c in self.changed}

    def report(self) -> str:
        """Each workload that changed, with its times, and the verdict."""
        if not self.workloads:
            return "thread splits: no kernel's best config has its threads on the output's height"
        if not self.changed:
            return (f"thread splits: each of the {len(self.workloads)} kernels whose best config has its "
                    f"threads on the output's height ran fastest in the model so")
        kept = "kept" if self.configs else "not kept: the model ran no faster"
        lines = [f"  {c.workload}: threads split otherwise (its calls in one run of the model: "
                 f"{duration_text(c.other)} against {duration_text(c.height)} by height)"
                 for c in self.changed]
        head = f"thread splits: {len(self.changed)} of {len(self.workloads)} kernels ran faster in the model"
        return "\n".join([f"{head} with their threads split otherwise than by height; the model "
                          f"{duration_text(self.chosen_latency)} with them against "
                          f"{duration_text(self.best_latency)} with the log's best ({kept})", *lines])


def _other_split(builder: ModelBuilder, task: Task):
    """The log's best config of ``task`` whose threads are not on the output's height, where its
    best config has them there (and the log, not a pin file, holds another); else None."""
    best = builder.best_config(task)
    log = builder.history.log if builder.history is not None else None
    if best is None or log is None or best.knob_values().get("parallel_axis") != HEIGHT:
        return None

    for score in selection.best(log, task, k=len(task.config_space)):
        if score.config["knobs"].get("parallel_axis") != HEIGHT:
            try:
                return task.config_space.from_json(score.config)
            except SearchSpaceError:  # recorded in another space of the template: not this one
                continue
    return None


def _workload_seconds(module: compiler.runtime.Module, keys, repeat: int, min_repeat_ms: float) -> dict:
    """The seconds that the calls of each workload of ``keys`` took in one run of the model."""
    times = profile(module, repeat=repeat, min_repeat_ms=min_repeat_ms, in_model=True)
    seconds = dict.fromkeys(keys, 0.0)
    for kernel in module.attrs["model"]["kernels"]:
        key = kernel.get("workload")
        if key in seconds:
            calls, per_call = times[kernel["name"]]
            seconds[key] += calls * per_call
    return seconds


def choose_thread_splits(graph: Graph, target="llvm", db=None, *, algorithms=None, rounds: int = 3,
                         repeat: int = 10, min_repeat_ms: float = 200.0, transfer: bool = True,
                         any_model: bool = False) -> ThreadSplits:
    """Time each kernel of ``graph`` (built with ``algorithms``, as :func:`~autotune.build_model`
    takes them) whose best config in ``db`` has its threads on the output's height against its best
    config with threads split otherwise, inside the model, and choose (see the module's docstring):
    the two builds' kernels timed in turn over ``rounds``, each workload's time its median. The
    model with the choices and the model with the log's best configs are then timed whole, in turn
    over ``rounds``; the choices stand only if it ran faster. Builds nothing where no kernel has
    such a config."""
    _check_graph(graph)
    target = compiler.Target.from_any(target)
    prepared = prepare(graph, target, algorithms=algorithms)
    with ModelBuilder(target, db, transfer=transfer, any_model=any_model) as builder:
        others, names = {}, {}
        for node in prepared.nodes:
            task = kernel_task(node, target)
            if task is not None and task.workload_key not in others:
                others[task.workload_key] = _other_split(builder, task)
                names[task.workload_key] = task.workload_name
        others = {key: config for key, config in others.items() if config is not None}
        if not others:
            return ThreadSplits([], float("nan"), float("nan"))
        best = builder.build(prepared)
        builder.configs = others
        split = builder.build(prepared)
        samples: dict[str, tuple[list, list]] = {key: ([], []) for key in others}
        for _ in range(rounds):  # in turn, so that a slower spell of the machine hits each
            for k, module in enumerate((best, split)):
                for key, s in _workload_seconds(module, others, repeat, min_repeat_ms).items():
                    samples[key][k].append(s)
        workloads = [SplitChoice(names[key], key, float(np.median(h)), float(np.median(o)), others[key])
                     for key, (h, o) in samples.items()]
        changed = {c.key: c.other_config for c in workloads if c.other_chosen}
        if not changed:
            return ThreadSplits(workloads, float("nan"), float("nan"))
        builder.configs = changed
        chosen = builder.build(prepared)
    return ThreadSplits(workloads, *latencies_in_turn([best, chosen], rounds, repeat, min_repeat_ms))
