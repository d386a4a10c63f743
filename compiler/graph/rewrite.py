"""Rewriting a graph node by node: the one walk every graph pass shares.

:func:`rewrite` visits the nodes in order with the inputs already renamed to their
replacements; the visitor returns the nodes to emit in place of each one (the same node, new
ones, or none) and may map the node's old outputs to other values (a constant, a value
computed earlier). Graph outputs follow the mapping.
"""

from __future__ import annotations

from collections.abc import Callable

from .ir import Graph, Node, Value

__all__ = ["rewrite", "Rewriter"]


class Rewriter:
    """The state of one :func:`rewrite`: the replacements so far and the nodes emitted."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.replaced: dict[int, Value] = {}
        self.nodes: list[Node] = []

    def value(self, v: Value) -> Value:
        """The current replacement of ``v`` (``v`` itself if it has none)."""
        return self.replaced.get(v.uid, v)

    def replace(self, old: Value, new: Value) -> None:
        """Have every later reader of ``old`` read ``new``."""
        self.replaced[old.uid] = new

    def emit(self, node: Node) -> Node:
        """Add ``node`` to the graph being built."""
        self.nodes.append(node)
        return node


def rewrite(graph: Graph, visit: Callable[[Rewriter, Node], None]) -> Graph:
    """The graph that ``visit(rewriter, node)`` builds: called once per node, with the node's
    inputs already replaced, it emits nodes (``rewriter.emit``) and maps values
    (``rewriter.replace``). A node it does not emit is dropped."""
    rw = Rewriter(graph)
    for node in graph.nodes:
        inputs = [rw.value(v) for v in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, node.outputs, dict(node.attrs), node.name)
        visit(rw, node)
    outputs = [rw.value(v) for v in graph.outputs]
    return _without_dead_nodes(graph.rebuilt(rw.nodes, outputs))


def _without_dead_nodes(graph: Graph) -> Graph:
    """``graph`` without the nodes no output depends on."""
    live = {v.uid for v in graph.outputs}
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(v.uid in live for v in node.outputs):
            kept.append(node)
            live.update(v.uid for v in node.inputs)
    if len(kept) == len(graph.nodes):
        return graph
    return graph.rebuilt(reversed(kept))
