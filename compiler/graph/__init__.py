"""The model layer: a graph of operators, its passes, and the ahead-of-time executor it compiles into.

* :mod:`.ir`: the graph (:class:`Graph`, :class:`Node`, :class:`Value`), built by a frontend
  (:func:`compiler.frontend.from_onnx`) or by hand;
* :mod:`.op`, :mod:`.ops`: the operator catalog, each operator with its shape rule, its numpy
  reference (:func:`evaluate` interprets a graph with them) and its tensor expression;
* :mod:`.passes`: constant and BatchNorm folding (:data:`OPTIMIZE`); :mod:`.fuse_expansions`: expansions
  fused into their depthwise layers; :mod:`.fuse`: kernels;
  :mod:`.memory`: the memory plan;
* :func:`build_graph`: one Module of kernels and an executor function; :func:`run` and
  :func:`profile` on it.

See ``docs/models.md``.
"""

from . import ops  # noqa: F401  (registers the operators)
from .build import KernelChoice, build_graph, prepare
from .builder import GraphBuilder
from .errors import GraphError, InputShapeError, UnsupportedOperatorError
from .fuse import fuse
from .fuse_expansions import fuse_expansions
from .interpreter import evaluate
from .ir import Graph, Node, TensorType, Value
from .kernels import default_schedule, kernel_tensors
from .memory import MemoryPlan, plan_memory
from .op import OpDef, get_op, register_op, registered_ops
from .passes import OPTIMIZE, GraphPass, GraphPipeline, optimize
from .runner import (
    kernel_medians,
    model_info,
    profile,
    profile_runs,
    random_inputs,
    run,
    split_by_template,
    split_runs_by_template,
)

__all__ = ["Graph", "GraphBuilder", "Node", "Value", "TensorType", "OpDef", "register_op", "get_op",
           "registered_ops", "GraphError", "UnsupportedOperatorError", "InputShapeError",
           "evaluate", "optimize", "OPTIMIZE",
           "GraphPass", "GraphPipeline", "fuse", "fuse_expansions", "plan_memory", "MemoryPlan",
           "build_graph", "prepare",
           "KernelChoice", "default_schedule", "kernel_tensors", "run", "random_inputs", "profile",
           "profile_runs", "kernel_medians", "model_info", "split_by_template", "split_runs_by_template"]
