"""Building a graph by hand, the types inferred by each operator's rule::

    b = GraphBuilder("mlp")
    x = b.input("x", (1, 64))
    h = b.op("nn.relu", b.op("nn.dense", x, b.const("w", w)))
    graph = b.finish(h)
"""

from __future__ import annotations

import numpy as np

from .errors import GraphError
from .ir import Graph, Node, TensorType, Value
from .op import apply_op

__all__ = ["GraphBuilder"]


class GraphBuilder:
    """Inputs, constants and nodes in the order they are made; :meth:`finish` gives the graph."""

    def __init__(self, name: str = "model"):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []

    def input(self, name: str, shape, dtype: str = "float32") -> Value:
        """A new model input."""
        v = Value(name, TensorType(tuple(shape), dtype))
        self.inputs.append(v)
        return v

    def const(self, name: str, data) -> Value:
        """A constant holding ``data`` (a numpy array keeps its dtype; Python numbers are float32)."""
        if not isinstance(data, np.ndarray):
            data = np.asarray(data, dtype="float32")
        return Value.constant(name, data)

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs) -> Value:
        """Apply ``op``: its only output (see :meth:`op_multi` for several)."""
        outs = self.op_multi(op, *inputs, name=name, **attrs)
        if len(outs) != 1:
            raise GraphError(f"{op} has {len(outs)} outputs; use op_multi")
        return outs[0]

    def op_multi(self, op: str, *inputs: Value, name: str | None = None, **attrs) -> list[Value]:
        """Apply ``op``: all of its outputs."""
        node_name = name or f"{op.replace('nn.', '')}_{len(self.nodes)}"
        try:
            node = apply_op(op, inputs, attrs, node_name, node_name)
        except GraphError as e:
            raise GraphError(f"node {node_name!r}: {e}") from None
        self.nodes.append(node)
        return node.outputs

    def finish(self, *outputs: Value) -> Graph:
        """The graph computing ``outputs``."""
        return Graph(self.inputs, outputs, self.nodes, self.name)
