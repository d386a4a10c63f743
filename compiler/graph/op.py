"""The operators a graph node may apply: a registry of :class:`OpDef`.

An operator is defined once, by three functions over the same attributes:

* ``infer(types, attrs)``: the output :class:`~compiler.graph.ir.TensorType` s of input types
  (GraphError naming the problem where the inputs do not fit);
* ``evaluate(arrays, attrs)``: the outputs computed with numpy, the reference that constant
  folding runs and that tests compare compiled models with;
* ``compute(tensors, attrs)``: the outputs as tensor expressions (``te.Tensor``, built through
  :mod:`compiler.topi` where it has the operator), what a fused kernel is compiled from.

``pattern`` says how the operator fuses, with TVM's ``OpPatternKind`` names:

* ``"elemwise"``: each output element reads the same element of each input;
* ``"broadcast"``: elementwise with numpy broadcasting;
* ``"injective"``: each output element reads some input elements (reshape, transpose, pad);
* ``"reduce"``: a reduction over some axes (mean, softmax, layer norm, pooling);
* ``"out_elemwise_fusable"``: a reduction heavy enough to be the anchor of a kernel whose
  elementwise successors fuse into its output stage (convolution, dense, matmul);
* ``"opaque"``: never fused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import GraphError, UnsupportedOperatorError
from .ir import Node, Value

__all__ = ["OpDef", "PATTERNS", "register_op", "get_op", "registered_ops", "apply_op"]

PATTERNS = ("elemwise", "broadcast", "injective", "reduce", "out_elemwise_fusable", "opaque")


@dataclass(frozen=True)
class OpDef:
    """One operator: its name, fusion pattern, and its shape, numpy and tensor-expression rules."""

    name: str
    pattern: str
    infer: Callable
    evaluate: Callable
    compute: Callable
    doc: str = ""

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise GraphError(f"operator {self.name!r}: pattern must be one of {PATTERNS}, "
                             f"got {self.pattern!r}")

    @property
    def injective(self) -> bool:
        """Elementwise, broadcast or injective: fusable into a neighbour's loops."""
        return self.pattern in ("elemwise", "broadcast", "injective")


_OPS: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Register ``op`` under its name (GraphError if the name is taken)."""
    if op.name in _OPS and _OPS[op.name] is not op:
        raise GraphError(f"operator {op.name!r} is already registered")
    _OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    """The operator registered as ``name``."""
    try:
        return _OPS[name]
    except KeyError:
        raise UnsupportedOperatorError(f"no operator {name!r} is registered; known: {sorted(_OPS)}") from None


def registered_ops() -> list[str]:
    """The names of every registered operator."""
    return sorted(_OPS)


def apply_op(op: str, inputs: Sequence[Value], attrs: dict, name: str, output_name: str) -> Node:
    """A node ``name`` applying ``op`` to ``inputs``, its outputs typed by the operator's ``infer``
    (GraphError where the inputs do not fit it): one output named ``output_name``, several
    ``output_name + "_out0"``, ``"_out1"``, ..."""
    types = get_op(op).infer([v.type for v in inputs], attrs)
    names = [output_name] if len(types) == 1 else [f"{output_name}_out{k}" for k in range(len(types))]
    return Node(op, list(inputs), [Value(n, t) for n, t in zip(names, types)], attrs, name)
