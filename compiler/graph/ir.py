"""The model layer's graph IR: operators (nodes) joined by tensors (values).

A :class:`Graph` is what a frontend (:mod:`compiler.frontend`) builds from a model file and
what the graph passes (:mod:`compiler.graph.passes`) rewrite:

* a :class:`Value` is a tensor with a static shape and a dtype; a constant (a weight) carries
  its data as a numpy array;
* a :class:`Node` applies one registered operator (:mod:`compiler.graph.op`) with attributes
  to input values and defines its output values;
* the graph lists its inputs, its outputs and its nodes in an order where every value is
  defined before it is used.

Passes build new graphs rather than edit shared ones: :meth:`Graph.rebuilt` gives a graph
with nodes replaced, and values keep their identity across passes unless a pass replaces them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from .errors import GraphError

__all__ = ["Value", "Node", "Graph", "TensorType"]

_ids = itertools.count()


@dataclass(frozen=True)
class TensorType:
    """A static shape and a dtype."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        shape = tuple(self.shape)
        for d in shape:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
                raise GraphError(f"a tensor's shape must be non-negative ints, got {shape}")
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        if self.dtype not in dtypes.SUPPORTED:
            raise GraphError(f"unsupported tensor dtype {self.dtype!r}")

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(eq=False)
class Value:
    """A tensor of the graph: a model input, a node's output, or a constant (``data`` set).

    Values compare by identity; ``name`` is for people (model files name their tensors)."""

    name: str
    type: TensorType
    data: np.ndarray | None = None
    uid: int = field(default_factory=lambda: next(_ids), repr=False)

    @staticmethod
    def constant(name: str, data) -> Value:
        """A constant value holding a contiguous copy of ``data``."""
        arr = np.asarray(data)
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes 0-d arrays 1-d
        if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype("float32")
        value = Value(name, TensorType(arr.shape, str(arr.dtype)), arr)
        value.data.setflags(write=False)
        return value

    @property
    def shape(self) -> tuple[int, ...]:
        """The static shape."""
        return self.type.shape

    @property
    def dtype(self) -> str:
        """The element type."""
        return self.type.dtype

    @property
    def is_constant(self) -> bool:
        """Whether the value is a constant (a weight), its data known."""
        return self.data is not None

    def __repr__(self) -> str:
        kind = "const " if self.is_constant else ""
        return f"%{self.name}: {kind}{self.type}"


@dataclass(eq=False)
class Node:
    """One operator applied to ``inputs`` with ``attrs``, defining ``outputs``."""

    op: str
    inputs: list[Value]
    outputs: list[Value]
    attrs: dict = field(default_factory=dict)
    name: str = ""

    @property
    def output(self) -> Value:
        """The only output (GraphError if there are several)."""
        if len(self.outputs) != 1:
            raise GraphError(f"node {self.name!r} ({self.op}) has {len(self.outputs)} outputs, not one")
        return self.outputs[0]

    def __str__(self) -> str:
        outs = ", ".join(f"%{v.name}" for v in self.outputs)
        ins = ", ".join(f"%{v.name}" for v in self.inputs)
        attrs = "".join(f", {k}={_attr_text(v)}" for k, v in sorted(self.attrs.items()) if k != "params")
        types = ", ".join(str(v.type) for v in self.outputs)
        return f"{outs} = {self.op}({ins}{attrs})  # {types}"


def _attr_text(v) -> str:
    if isinstance(v, Graph):
        return "[" + "; ".join(n.op for n in v.nodes) + "]"
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}"
    return repr(v)


class Graph:
    """Inputs, outputs and the nodes between them, each value defined before its uses."""

    def __init__(self, inputs: Sequence[Value], outputs: Sequence[Value], nodes: Iterable[Node],
                 name: str = "model"):
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = list(nodes)
        self.check()

    # ------------------------------------------------------------------ structure

    def check(self) -> None:
        """GraphError unless every value is defined once, before its uses, and every output exists."""
        defined: set[int] = set()
        for v in self.inputs:
            if v.is_constant:
                raise GraphError(f"graph input {v.name!r} is a constant")
            if v.uid in defined:
                raise GraphError(f"graph input {v.name!r} is listed twice")
            defined.add(v.uid)
        for node in self.nodes:
            for v in node.inputs:
                if not v.is_constant and v.uid not in defined:
                    raise GraphError(f"node {node.name!r} ({node.op}) reads {v.name!r} before it is defined")
            for v in node.outputs:
                if v.uid in defined or v.is_constant:
                    raise GraphError(f"value {v.name!r} is defined twice (node {node.name!r})")
                defined.add(v.uid)
        for v in self.outputs:
            if not v.is_constant and v.uid not in defined:
                raise GraphError(f"graph output {v.name!r} is never computed")

    def producers(self) -> dict[int, Node]:
        """The node defining each computed value, by the value's uid."""
        return {v.uid: node for node in self.nodes for v in node.outputs}

    def consumers(self) -> dict[int, list[Node]]:
        """The nodes reading each value, by the value's uid (in node order, once per node)."""
        readers: dict[int, list[Node]] = {}
        for node in self.nodes:
            for uid in dict.fromkeys(v.uid for v in node.inputs):
                readers.setdefault(uid, []).append(node)
        return readers

    def constants(self) -> list[Value]:
        """The constant values the nodes read, each once, in order of first use."""
        seen: dict[int, Value] = {}
        for node in self.nodes:
            for v in node.inputs:
                if v.is_constant:
                    seen.setdefault(v.uid, v)
        for v in self.outputs:
            if v.is_constant:
                seen.setdefault(v.uid, v)
        return list(seen.values())

    def rebuilt(self, nodes: Iterable[Node], outputs: Sequence[Value] | None = None) -> Graph:
        """A graph with the same inputs and name, ``nodes`` and ``outputs`` (default: the same)."""
        return Graph(self.inputs, self.outputs if outputs is None else outputs, nodes, self.name)

    def op_counts(self) -> dict[str, int]:
        """How many nodes apply each operator."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts

    def __str__(self) -> str:
        lines = [f"graph {self.name}(" + ", ".join(repr(v) for v in self.inputs) + ") {"]
        lines += [f"  {node}" for node in self.nodes]
        lines.append("  return " + ", ".join(f"%{v.name}" for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
                f"{len(self.outputs)} outputs>")
