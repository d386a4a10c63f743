"""Run a graph with numpy: each node's ``OpDef.evaluate``, in order.

This is the reference a compiled model is checked against, and what constant folding runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .errors import GraphError
from .ir import Graph, Value
from .op import get_op

__all__ = ["evaluate"]


def evaluate(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``graph`` on ``inputs``, a dict from input names to arrays or a list in
    ``graph.inputs`` order.

    Every input must have its value's shape and dtype exactly (GraphError otherwise); each node's
    results are checked against the types its outputs declare.
    """
    env: dict[int, np.ndarray] = {v.uid: a for v, a in zip(graph.inputs, _bind(graph, inputs))}
    last_use = _last_uses(graph)
    for step, node in enumerate(graph.nodes):
        args = [v.data if v.is_constant else env[v.uid] for v in node.inputs]
        try:
            results = get_op(node.op).evaluate(args, node.attrs)
        except GraphError:
            raise
        except Exception as err:  # numpy's own errors, named after the node that raised them
            raise GraphError(f"node {node.name!r} ({node.op}) failed: {err}") from err
        if len(results) != len(node.outputs):
            raise GraphError(f"node {node.name!r} ({node.op}) gave {len(results)} results for "
                             f"{len(node.outputs)} outputs")
        for v, r in zip(node.outputs, results):
            _check(r, v, f"node {node.name!r} ({node.op}) output")
            env[v.uid] = r
        for v in node.inputs:  # drop what no later node reads
            if last_use.get(v.uid) == step:
                env.pop(v.uid, None)
    return [np.array(v.data) if v.is_constant else env[v.uid] for v in graph.outputs]


def _bind(graph: Graph, inputs) -> list[np.ndarray]:
    """The arrays of ``graph.inputs``, in order, checked against their types."""
    if isinstance(inputs, Mapping):
        names = [v.name for v in graph.inputs]
        if len(set(names)) != len(names):
            raise GraphError(f"graph {graph.name!r} has inputs sharing a name; pass a list in order")
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise GraphError(f"graph {graph.name!r} has no inputs named {unknown}; its inputs are {names}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise GraphError(f"graph {graph.name!r} needs inputs {missing}")
        arrays = [inputs[n] for n in names]
    else:
        arrays = list(inputs)
        if len(arrays) != len(graph.inputs):
            raise GraphError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(arrays)}")
    out = []
    for v, a in zip(graph.inputs, arrays):
        a = np.asarray(a)
        _check(a, v, "input")
        out.append(a)
    return out


def _check(array: np.ndarray, value: Value, what: str) -> None:
    if not isinstance(array, np.ndarray):
        raise GraphError(f"{what} {value.name!r} is a {type(array).__name__}, not a numpy array")
    if array.shape != value.shape or array.dtype.name != value.dtype:
        raise GraphError(f"{what} {value.name!r} must be {value.type}, got "
                         f"{array.dtype.name}[{', '.join(map(str, array.shape))}]")


def _last_uses(graph: Graph) -> dict[int, int]:
    """The index of the last node reading each value, for values the graph does not return."""
    outputs = {v.uid for v in graph.outputs}
    last: dict[int, int] = {}
    for step, node in enumerate(graph.nodes):
        for v in node.inputs:
            if not v.is_constant and v.uid not in outputs:
                last[v.uid] = step
    return last
