"""Models: the tuning tasks of a graph, and the graph built with the tuning log's best configs.

AutoTVM's three steps for a model, on a graph from :func:`compiler.frontend.from_onnx`::

    graph = compiler.frontend.from_onnx("resnet18.onnx")
    tasks = autotune.extract_tasks(graph, "llvm")           # the fused kernels that have templates
    autotune.tune_tasks([t.task for t in tasks], trials=64 * len(tasks), db="log.db",
                        weights=[t.weight for t in tasks])
    module = autotune.build_model(graph, "llvm", db="log.db")
    module.export_library("resnet18.so")                     # compiler.runtime.load_module runs it

A task is the fused workload that is deployed: a convolution with its bias, activation and
residual add in its output stage is one task, and its ``weight`` is how many kernels of the model
run it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import compiler
from compiler.graph import Graph, Node, build_graph, prepare
from compiler.graph.build import KernelChoice
from search_spaces import Task
from search_spaces.graph_tasks import kernel_task

from .history import apply_history_best
from .transfer import BorrowedConfig

__all__ = ["ModelTask", "ModelTasks", "extract_tasks", "build_model"]

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
    """The distinct tasks of a model (a list of :class:`ModelTask`), and the kernels that have
    no template (``untemplated``: they get the default schedule)."""

    def __init__(self, tasks, untemplated, kernels: int):
        super().__init__(tasks)
        self.untemplated: list[str] = list(untemplated)
        self.kernels = kernels

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
        lines = [f"{self.kernels} kernels: {sum(self.weights)} run {len(self)} tuning tasks, "
                 f"{len(self.untemplated)} have no template (default schedule)"]
        lines += [f"  x{t.weight:<3d} {t.task.workload_name}" for t in self]
        if self.untemplated:
            lines.append("  default schedule: " + ", ".join(self.untemplated))
        return "\n".join(lines)


def extract_tasks(graph: Graph, target="llvm") -> ModelTasks:
    """The distinct tuning tasks of ``graph``'s kernels on ``target``, with their weights.

    The graph is optimised and fused first (:func:`compiler.graph.prepare`), so each task is a
    kernel as it is deployed."""
    target = compiler.Target.from_any(target)
    fused = prepare(graph, target)
    tasks: dict[str, ModelTask] = {}
    untemplated = []
    for node in fused.nodes:
        task = kernel_task(node, target)
        if task is None:
            untemplated.append(f"{node.name} ({', '.join(n.op for n in node.attrs['body'].nodes)})")
            continue
        tasks.setdefault(task.workload_key, ModelTask(task)).kernels.append(node.name)
    return ModelTasks(tasks.values(), untemplated, len(fused.nodes))


def build_model(graph: Graph, target="llvm", db=None, *, transfer: bool = True, any_model: bool = False,
                name: str = "run") -> compiler.runtime.Module:
    """Compile ``graph`` for ``target`` with each kernel's best config in ``db`` (a tuning log or
    a pin file): one Module holding every kernel and an ahead-of-time executor that calls them in
    order (:func:`compiler.graph.build_graph`). A workload the log does not hold borrows its
    nearest tuned neighbour's config (``transfer``), else uses its template's default config;
    one warning lists those. ``module.export_library(path)`` writes one shared library."""
    target = compiler.Target.from_any(target)
    history = apply_history_best(db, transfer=transfer, any_model=any_model) if db is not None else None
    untuned: list[str] = []

    def schedule_kernel(node: Node) -> KernelChoice | None:
        task = kernel_task(node, target)
        if task is None:
            return None
        config = history.query(task.target, task) if history is not None else None
        if config is None:
            untuned.append(task.workload_name)
            config, source = task.config_space.default_config, "default config"
        elif isinstance(config, BorrowedConfig):
            untuned.append(f"{task.workload_name} (borrowed from {config.borrowed_from})")
            source = f"borrowed from {config.borrowed_from}"
        else:
            source = "tuned"
        schedule, tensors = task.instantiate(config)
        return KernelChoice(schedule, tensors, f"{task.name}: {source}")

    try:
        module = build_graph(prepare(graph, target), target, schedule_kernel, name)
    finally:
        if history is not None and history.log is not None and history.log is not db:
            history.log.close()  # opened here, from a path or URL
    if untuned:
        logger.warning("%d kernel(s) of %s have no tuned config in %s: %s", len(untuned), graph.name,
                       db if db is not None else "(no log)", "; ".join(dict.fromkeys(untuned)))
    return module
