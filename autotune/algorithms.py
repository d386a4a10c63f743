"""Choosing how each 3x3 layer of a model runs, direct or by Winograd, by timing it inside the model.

The layout planner runs a 3x3 stride-1 convolution by Winograd's ``F(m x m, 3 x 3)`` when its
transformed kernel, ``(m + 2)^2 / 9`` times the direct one, stays under a size limit
(:data:`compiler.graph.layout.MAX_WINOGRAD_WEIGHT_BYTES`): a model streams its weights from
memory every run. Which side of that limit is faster depends on the machine's memory, and the
kernels timed alone do not tell: on a 2-vCPU Intel Xeon guest, ResNet-18's 512-channel layers
ran by F(2x2) in 0.60 ms per call with their weights in the caches and 1.31 ms with them evicted,
direct in 0.96 and 1.45 ms, yet inside the model direct was the faster in three runs of three
(1.14-1.38 ms against 1.27-1.54 ms).

So :func:`choose_algorithms` builds the model once per algorithm (each layer that can run by it
does), times every kernel where it runs (:func:`compiler.graph.profile` with ``in_model=True``),
and gives each layer its fastest; then it times the model built so against the model built by
the rule, whole, and keeps the plan that ran faster. As TensorRT's builder times its tactics, it
measures on the machine that builds: ``build_model(..., algorithms="measure")`` runs it there,
and the choices travel inside the library it exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import compiler
from compiler.graph import Graph, optimize, prepare, profile
from compiler.graph.layout import algorithm_name, algorithm_options

from .model import ModelBuilder, _check_graph, duration_text, latencies_in_turn

__all__ = ["LayerChoice", "AlgorithmChoices", "choose_algorithms", "layers_to_choose"]


@dataclass
class LayerChoice:
    """One 3x3 layer: the tile size the planner's rule gives it, the one chosen, and each
    algorithm's seconds per call inside the model (tile size 0: direct)."""

    layer: str
    rule: int
    chosen: int
    seconds: dict[int, float] = field(default_factory=dict)


@dataclass
class AlgorithmChoices:
    """What :func:`choose_algorithms` measured: each layer's choice, and the model's latency built
    by the rule and with the choices (seconds, each the median of its rounds)."""

    layers: list[LayerChoice]
    rule_latency: float
    chosen_latency: float

    @property
    def changed(self) -> list[LayerChoice]:
        """The layers whose choice differs from the rule's."""
        return [c for c in self.layers if c.chosen != c.rule]

    @property
    def algorithms(self) -> dict[str, int]:
        """The plan to build with (``build_model(..., algorithms=...)``): the layers whose choice
        differs from the rule's, when the model ran faster so; else empty (the rule)."""
        if not self.changed or not self.chosen_latency < self.rule_latency:
            return {}
        return {c.layer: c.chosen for c in self.changed}

    def report(self) -> str:
        """Each layer whose choice differs from the rule's, with its times, and the verdict."""
        lines = []
        for c in self.changed:
            times = ", ".join(f"{algorithm_name(m)} {duration_text(s)}" for m, s in sorted(c.seconds.items()))
            lines.append(f"  {c.layer}: {algorithm_name(c.chosen)} in place of {algorithm_name(c.rule)} "
                         f"(per call in the model: {times})")
        if not self.layers:
            return "3x3 layers: none can run both direct and by Winograd; nothing to choose"
        if not self.changed:
            return (f"3x3 layers: each of the {len(self.layers)} that can run by Winograd or direct ran "
                    f"fastest in the model by the rule's algorithm")
        kept = "kept" if self.algorithms else "not kept: the model ran no faster"
        return "\n".join([f"3x3 layers: {len(self.changed)} of {len(self.layers)} ran faster in the model "
                          f"by another algorithm; the model {duration_text(self.chosen_latency)} with them "
                          f"against {duration_text(self.rule_latency)} by the rule ({kept})", *lines])


def _layer_seconds(module: compiler.runtime.Module, prepared: Graph, layers, repeat: int,
                   min_repeat_ms: float) -> dict[str, float]:
    """Seconds per call, inside the model, of the kernel that runs each of ``layers``."""
    times = profile(module, repeat=repeat, min_repeat_ms=min_repeat_ms, in_model=True)
    kernel_of = {node: k["name"] for k in module.attrs["model"]["kernels"] for node in k["nodes"]}
    seconds = {}
    for node in prepared.nodes:
        for inner in node.attrs["body"].nodes:
            if inner.name in layers and node.name in kernel_of:
                seconds[inner.name] = times[kernel_of[node.name]][1]
    return seconds


def _options(graph: Graph, target: compiler.Target) -> dict:
    with target:
        return algorithm_options(optimize(graph))


def layers_to_choose(graph: Graph, target="llvm") -> list[str]:
    """The 3x3 layers of ``graph`` that can run on ``target`` both direct and by Winograd: those
    :func:`choose_algorithms` times (none: it has nothing to choose)."""
    _check_graph(graph)
    return list(_options(graph, compiler.Target.from_any(target)))


def choose_algorithms(graph: Graph, target="llvm", db=None, *, rounds: int = 3, repeat: int = 10,
                      min_repeat_ms: float = 200.0, transfer: bool = True,
                      any_model: bool = False) -> AlgorithmChoices:
    """Time each 3x3 layer of ``graph`` that can run by Winograd or direct each way inside the
    model, built with ``db``'s best configs as :func:`~autotune.build_model` builds it, and choose
    (see the module's docstring): each build's kernels are timed in turn over ``rounds``, and a
    layer's time per algorithm is its median. The model with the choices and the model by the
    rule are then timed whole, in turn over ``rounds``; the choices stand only if it ran faster.
    Measures on this machine; a model with no such layer is not built at all."""
    _check_graph(graph)
    target = compiler.Target.from_any(target)
    options = _options(graph, target)
    if not options:
        return AlgorithmChoices([], float("nan"), float("nan"))
    layers = {name: LayerChoice(name, rule, rule) for name, (rule, _) in options.items()}
    sizes = sorted({m for _, choices in options.values() for m in choices})
    moved = ({n: m for n, (rule, choices) in options.items() if m in choices and m != rule} for m in sizes)
    plans = [{}, *(plan for plan in moved if plan)]  # the rule, then every layer that can by each algorithm
    with ModelBuilder(target, db, transfer=transfer, any_model=any_model) as builder:
        variants = []
        for plan in plans:
            prepared = prepare(graph, target, algorithms=plan)
            variants.append((plan, prepared, builder.build(prepared)))
        samples: dict[tuple[str, int], list[float]] = {}
        for _ in range(rounds):  # in turn, so that a slower spell of the machine hits each
            for plan, prepared, module in variants:
                for name, s in _layer_seconds(module, prepared, layers, repeat, min_repeat_ms).items():
                    samples.setdefault((name, plan.get(name, options[name][0])), []).append(s)
        for (name, m), times in samples.items():
            layers[name].seconds[m] = float(np.median(times))
        for c in layers.values():
            c.chosen = min(c.seconds, key=lambda k: (c.seconds[k], k != c.rule))
        changed = {c.layer: c.chosen for c in layers.values() if c.chosen != c.rule}
        if not changed:
            return AlgorithmChoices(list(layers.values()), float("nan"), float("nan"))
        chosen = builder.build(prepare(graph, target, algorithms=changed))
    rule_latency, chosen_latency = latencies_in_turn([variants[0][2], chosen], rounds, repeat, min_repeat_ms)
    return AlgorithmChoices(list(layers.values()), rule_latency, chosen_latency)
