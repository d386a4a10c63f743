"""Compiling a graph into one runtime Module: its kernels and an ahead-of-time executor.

:func:`build_graph` runs the graph passes (:data:`~.passes.OPTIMIZE`), fuses the nodes into
kernels (:func:`~.fuse.fuse`), compiles each distinct kernel once (with the schedule a caller
supplies, a tuned template's, or :func:`~.kernels.default_schedule`), plans memory
(:func:`~.memory.plan_memory`: the tensors and each kernel's scratch), and generates the executor
that calls them in order
(:mod:`compiler.codegen.llvm_executor`). The weights go into the module as one read-only block.

The result is a :class:`compiler.runtime.Module` whose entry function takes the model's inputs
and then its outputs, as arrays, checked before any code runs::

    module = compiler.graph.build_graph(graph, target="llvm")
    module(x, out)                      # or: out, = compiler.graph.run(module, x)
    module.export_library("model.so")   # compiler.runtime.load_module("model.so") runs it alone

``module.attrs["model"]`` describes it: inputs, outputs, the kernels and how often each runs,
and the memory plan's sizes. The C ABI is in ``docs/models.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .. import lower
from ..runtime.arguments import FunctionInfo
from ..runtime.library import data_object
from ..runtime.module import Module
from ..runtime.signature import ArgSpec, Signature
from ..target import Target
from ..tir.function import IRModule
from ..topi.utils import get_const_tuple
from .errors import GraphError
from .fuse import FUSED, fuse, fused_kernels
from .fuse_expansions import fuse_expansions
from .gates import gates_into_weights
from .ir import Graph, Node
from .kernels import default_schedule, keeps_last_axis, kernel_key, kernel_tensors
from .layout import plan_layouts
from .memory import ALIGN, MemoryPlan, aliases, plan_memory
from .passes import optimize

__all__ = ["build_graph", "prepare", "ScheduleKernel", "KernelChoice", "PROFILE_SUFFIX"]

log = logging.getLogger(__name__)

#: The profiling entry of a model named ``run`` is ``run_profile``: the model's arguments, then
#: ``int64 stamps[calls + 1]`` (:mod:`compiler.codegen.llvm_executor`; ``profile(in_model=True)``).
PROFILE_SUFFIX = "_profile"


@dataclass(frozen=True)
class KernelChoice:
    """How one kernel is compiled: its schedule and tensors (the node's inputs, then its outputs,
    in order), where the schedule came from (for reports), and the tuning workload it is an
    instance of (its key in a tuning log), if any."""

    schedule: object
    tensors: list
    source: str = "default schedule"
    workload: str | None = None


#: ``schedule_kernel(node) -> KernelChoice | None``: a caller's schedule for a fused node
#: (a tuned template's), or None for the default one.
ScheduleKernel = Callable[[Node], "KernelChoice | None"]


def prepare(graph: Graph, target=None, layouts: bool = True,
            algorithms: Mapping[str, int] | None = None) -> Graph:
    """``graph`` optimised, its layouts planned for ``target`` (the current target by default;
    ``layouts=False`` leaves every tensor in its model layout) and fused: ready to compile.
    ``algorithms`` chooses how 3x3 convolutions run (:func:`~.layout.plan_layouts`). A fused
    graph comes back as it is."""
    if graph.nodes and all(n.op == FUSED for n in graph.nodes):
        return graph
    graph = optimize(graph)
    if layouts:
        with Target.from_any(target) if target is not None else contextlib.nullcontext():
            graph = gates_into_weights(fuse_expansions(plan_layouts(graph, algorithms=algorithms)))
    return fuse(graph)


def _identifier(text: str, limit: int = 40) -> str:
    name = re.sub(r"\W", "_", text)[:limit]
    return name if name and not name[0].isdigit() else f"_{name}"


def _default_choice(node: Node) -> KernelChoice:
    params, outs = kernel_tensors(node)
    return KernelChoice(default_schedule(outs, keeps_last_axis(node)), [*params, *outs])


def _check_tensors(node: Node, choice: KernelChoice) -> None:
    values = [*node.inputs, *node.outputs]
    if len(choice.tensors) != len(values):
        raise GraphError(f"kernel {node.name!r}: the schedule's {len(choice.tensors)} tensors do not match "
                         f"its {len(values)} inputs and outputs")
    for v, t in zip(values, choice.tensors):
        # A template may see a tensor through another shape of the same elements (a softmax's
        # rows): the memory is the same.
        shape = get_const_tuple(t.shape)
        if math.prod(shape) != v.type.size or t.dtype != v.dtype:
            raise GraphError(f"kernel {node.name!r}: tensor {t.op.name!r} is {t.dtype}{list(shape)}, "
                             f"but the value it stands for is {v.type}")


def build_graph(graph: Graph, target=None, schedule_kernel: ScheduleKernel | None = None,
                name: str = "run") -> Module:
    """Compile ``graph`` for a CPU ``target`` (default "llvm") into one Module (see the module's
    docstring). ``schedule_kernel`` supplies tuned schedules; kernels it returns None for get the
    default schedule."""
    target = Target.from_any(target) if target is not None else Target("llvm")
    if target.kind != "llvm":
        raise GraphError(f"models compile for CPU (llvm) targets; got {target}")
    if not name.isidentifier():
        raise GraphError(f"the entry function's name must be an identifier, got {name!r}")
    fused = prepare(graph, target)
    alias = aliases(fused)
    functions: dict[str, object] = {}
    by_key: dict[tuple, str] = {}
    runs: list[tuple[Node, str]] = []  # each kernel node that runs, and its function
    choices: dict[str, KernelChoice] = {}
    nodes: dict[str, list[str]] = {}  # kernel -> the fused nodes it runs
    with target:
        for node in fused_kernels(fused):
            if node.output.uid in alias:
                continue  # a reshape: its output is its input's memory
            key = kernel_key(node)
            fname = by_key.get(key)
            if fname is None:
                fname = f"k{len(by_key)}_{_identifier(node.name.removeprefix('fused_'))}"
                choice = (schedule_kernel(node) if schedule_kernel else None) or _default_choice(node)
                _check_tensors(node, choice)
                functions[fname] = lower(choice.schedule, choice.tensors, name=fname)[fname]
                by_key[key] = fname
                choices[fname] = choice
            runs.append((node, fname))
            nodes.setdefault(fname, []).append(node.name)
    # Imported here: the LLVM code generator loads llvmlite, which loading a library never needs.
    from ..codegen.llvm_scratch import scratch_layout

    scratch = {fname: scratch_layout(f).nbytes for fname, f in functions.items()}
    plan = plan_memory(fused, {node.name: scratch[fname] for node, fname in runs})
    calls: list[tuple[str, list[tuple[str, int]], int | None]] = []
    warm: dict[str, set[int]] = {fname: set() for fname in functions}
    for node, fname in runs:
        places = [plan.place(v) for v in (*node.inputs, *node.outputs)]
        calls.append((fname, [(p.region, p.index) for p in places], plan.scratch.get(node.name)))
        # what other kernels wrote besides the first input (a residual): warm when it is read
        warm[fname].update(k for k in range(1, len(node.inputs)) if places[k].region != "constant")
    return _link(fused, plan, IRModule(functions), calls, choices, nodes, scratch, warm, target, name)


def _link(graph: Graph, plan: MemoryPlan, kernels: IRModule, calls, choices, nodes, scratch: dict[str, int],
          warm: dict[str, set[int]], target: Target, name: str) -> Module:
    # Imported here: the LLVM code generator loads llvmlite, which loading a library never needs.
    from ..codegen import llvm_build
    from ..codegen.llvm_executor import emit_executor

    block = plan.constant_block()
    digest = hashlib.sha256(block)
    digest.update(repr(calls).encode())
    tag = digest.hexdigest()[:16]
    symbol = f"__model_constants_{tag}"
    objects = (data_object(symbol, block, ALIGN),) if block else ()
    profile_name = f"{name}{PROFILE_SUFFIX}"
    ir_text = emit_executor(name, calls, len(graph.inputs), plan.workspace_bytes, symbol if block else None,
                            len(block), [((p.region, p.index), k, n) for p, k, n in plan.copies], tag,
                            profile_name, len(graph.outputs))
    args = [ArgSpec("buffer", v.name, v.dtype, list(v.shape), align=ALIGN)
            for v in (*graph.inputs, *graph.outputs)]
    written = list(range(len(graph.inputs), len(args)))
    entry = FunctionInfo(Signature(name, args, []), written)
    stamps = ArgSpec("buffer", "stamps", "int64", [len(calls) + 1])
    profile_entry = FunctionInfo(Signature(profile_name, [*args, stamps], []), [*written, len(args)])
    attrs = {"model": {
        "name": graph.name,
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in graph.inputs],
        "outputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in graph.outputs],
        "kernels": [{"name": f, "calls": len(runs), "schedule": choices[f].source, "nodes": runs,
                     "scratch_bytes": scratch[f], "warm": sorted(warm[f]),
                     **({"workload": choices[f].workload} if choices[f].workload else {})}
                    for f, runs in nodes.items()],
        "calls": [f for f, _, _ in calls],
        "profile_entry": profile_name,
        "workspace_bytes": plan.workspace_bytes,
        "constant_bytes": plan.constant_bytes,
        "unshared_bytes": plan.unshared_bytes,
    }}
    log.info("model %s: %d kernels (%d distinct), %s", graph.name, len(calls), len(nodes), plan.report())
    return llvm_build.build_linked(kernels, target, ir_text, {name: entry, profile_name: profile_entry}, name,
                                   objects, attrs)
