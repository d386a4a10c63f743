"""The ONNX importer: an ``onnx.ModelProto`` (or its file) as a :class:`compiler.graph.Graph`.

Each ONNX node is converted by one small function registered for its op type in
:data:`CONVERTERS`; a converter reads the model's default-domain opset (``ctx.opset``) where
the operator's inputs or attributes changed between opsets. It emits catalog operators
(:mod:`compiler.graph.ops`) through ``ctx.emit``, which evaluates a node at once with the
operator's numpy ``evaluate`` when all its inputs are constants. Shapes are static, so a
model's shape arithmetic (``Shape``, ``Gather`` on it, ``Concat``, ``Unsqueeze`` feeding a
``Reshape``, ...) folds away at import and the graph keeps only the nodes that depend on the
model inputs. Initializers become constant values.

Inputs with symbolic dimensions (a dynamic batch) are bound with ``shape=``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ... import dtypes
from ...graph import (
    Graph,
    GraphError,
    InputShapeError,
    Node,
    TensorType,
    UnsupportedOperatorError,
    Value,
    get_op,
)

__all__ = ["from_onnx", "CONVERTERS", "supported_ops", "NodeContext", "converts", "optional_input",
           "element_dtype", "scalar_like"]

_DEFAULT_DOMAINS = ("", "ai.onnx")

Converter = Callable[["NodeContext", list, dict], "Value | Sequence[Value | None]"]

#: The converter of each supported ONNX op type (default domain).
CONVERTERS: dict[str, Converter] = {}


def supported_ops() -> list[str]:
    """The ONNX op types the importer converts."""
    return sorted(CONVERTERS)


def converts(*op_types: str):
    """Register the decorated function as the converter of ``op_types``."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            CONVERTERS[op_type] = fn
        return fn

    return register


# ---------------------------------------------------------------------------- entry point


def from_onnx(model_or_path: onnx.ModelProto | str | os.PathLike | bytes,
              shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
              name: str | None = None) -> Graph:
    """The graph of an ONNX model: an ``onnx.ModelProto``, a path to a ``.onnx`` file or its bytes.

    ``shape`` binds symbolic input dimensions: ``{input name: shape}``, or a bare shape for a
    model with one input. ``name`` names the graph (default: the model's graph name).

    Raises FileNotFoundError for a missing file, GraphError for a file that is not an ONNX
    model or a dimension left symbolic, UnsupportedOperatorError for an operator (or an
    attribute value of one) that the importer does not cover.
    """
    model, where = _load(model_or_path)
    opset = _default_opset(model, where)
    return _Importer(model, opset, shape, name).run()


def _load(model_or_path) -> tuple[onnx.ModelProto, str]:
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, "the model"
    if isinstance(model_or_path, (bytes, bytearray, memoryview)):
        where = "the given bytes"
        try:
            model = onnx.load_model_from_string(bytes(model_or_path))
        except Exception as err:
            raise GraphError(f"{where} are not an ONNX model: {err}") from err
    elif isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        where = f"file {path!r}"
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no ONNX model file {path!r}")
        try:
            model = onnx.load(path)
        except Exception as err:
            raise GraphError(f"{where} is not an ONNX model: {err}") from err
    else:
        raise GraphError(f"from_onnx takes an onnx.ModelProto, a path or bytes, "
                         f"got {type(model_or_path).__name__}")
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise GraphError(f"{where} is not an ONNX model (no IR version or no graph)")
    return model, where


def _default_opset(model: onnx.ModelProto, where: str) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        raise GraphError(f"{where} imports no default-domain (ai.onnx) opset")
    return int(versions[0])


def element_dtype(elem_type: int, what: str) -> str:
    """The dtype of ONNX element type ``elem_type`` (UnsupportedOperatorError naming ``what`` where
    the catalog has none)."""
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        dtype = None
    if dtype not in dtypes.SUPPORTED:
        known = elem_type in onnx.TensorProto.DataType.values()
        type_name = onnx.TensorProto.DataType.Name(elem_type) if known else str(elem_type)
        raise UnsupportedOperatorError(f"{what}: element type {type_name} is not supported; "
                                       f"supported: {', '.join(dtypes.SUPPORTED)}")
    return dtype


# ---------------------------------------------------------------------------- the importer


class _Importer:
    """One import: the values bound to ONNX names and the nodes emitted so far."""

    def __init__(self, model: onnx.ModelProto, opset: int, shape, name: str | None):
        self.model, self.opset = model, opset
        self.graph_proto = model.graph
        self.name = name or model.graph.name or "model"
        self.shape = shape
        self.env: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.node_names: set[str] = set()
        self.next_suffix: dict[str, int] = {}

    def run(self) -> Graph:
        g = self.graph_proto
        for init in g.initializer:
            self.env[init.name] = self._initializer(init)
        inputs = self._inputs()
        for v in inputs:
            self.env[v.name] = v
        for index, node in enumerate(g.node):
            self._convert(node, index)
        outputs = []
        for out in g.output:
            if out.name not in self.env:
                raise GraphError(f"graph output {out.name!r} is computed by no node")
            outputs.append(self.env[out.name])
        return Graph(inputs, outputs, _live_nodes(self.nodes, outputs), self.name)

    def _initializer(self, init: onnx.TensorProto) -> Value:
        what = f"initializer {init.name!r}"
        element_dtype(init.data_type, what)
        try:
            array = numpy_helper.to_array(init)
        except Exception as err:
            raise GraphError(f"{what} cannot be read: {err}") from err
        return _const_value(init.name, array)

    def _inputs(self) -> list[Value]:
        init_names = {init.name for init in self.graph_proto.initializer}
        protos = [i for i in self.graph_proto.input if i.name not in init_names]
        names = [i.name for i in protos]
        shape = self.shape
        if shape is None:
            shape = {}
        elif not isinstance(shape, Mapping):
            if len(protos) != 1:
                raise GraphError(f"shape= is a bare shape but the model has {len(protos)} inputs {names}; "
                                 f"pass a dict {{input name: shape}}")
            shape = {names[0]: shape}
        unknown = [k for k in shape if k not in names]
        if unknown:
            raise GraphError(f"shape= names {unknown}, which are not inputs of the model; "
                             f"its inputs are {names}")
        values, unbound = [], {}
        for proto in protos:
            try:
                values.append(self._input(proto, shape.get(proto.name)))
            except InputShapeError as err:
                unbound.update(err.unbound)
        if unbound:  # every input that needs a shape, in one error
            example = ", ".join(f"{name!r}: (...)" for name in unbound)
            raise InputShapeError(unbound, f"pass shape={{{example}}} to from_onnx")
        return values

    def _input(self, proto: onnx.ValueInfoProto, given) -> Value:
        name = proto.name
        if not proto.type.HasField("tensor_type"):
            kind = proto.type.WhichOneof("value")
            raise UnsupportedOperatorError(f"input {name!r} is not a tensor ({kind})")
        tt = proto.type.tensor_type
        dtype = element_dtype(tt.elem_type, f"input {name!r}")
        dims = list(tt.shape.dim) if tt.HasField("shape") else None
        if given is not None:
            if isinstance(given, np.ndarray):
                given = given.tolist()
            if isinstance(given, (str, bytes)) or not isinstance(given, Sequence) or not all(
                    isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in given):
                raise GraphError(f"shape= for input {name!r} must be a tuple of non-negative ints, "
                                 f"got {given!r}")
            given = tuple(int(d) for d in given)
            if dims is not None and len(dims) != len(given):
                raise GraphError(f"shape= gives input {name!r} rank {len(given)} {given}, but the model "
                                 f"declares rank {len(dims)}")
            for k, d in enumerate(dims or []):
                if d.HasField("dim_value") and d.dim_value != given[k]:
                    raise GraphError(f"shape= gives input {name!r} dimension {k} = {given[k]}, but the model "
                                     f"fixes it to {d.dim_value}")
            return Value(name, TensorType(given, dtype))
        if dims is None:
            raise InputShapeError({name: None}, "pass shape= to from_onnx")  # :meth:`_inputs` gathers them
        if not all(d.HasField("dim_value") for d in dims):
            declared = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims)
            raise InputShapeError({name: declared}, "pass shape= to from_onnx")
        shape = [d.dim_value for d in dims]
        return Value(name, TensorType(tuple(shape), dtype))

    def _convert(self, node: onnx.NodeProto, index: int) -> None:
        label = node.name or f"{node.op_type}_{index}"
        where = f"node {label!r}: operator {node.op_type} (opset {self.opset})"
        if node.domain not in _DEFAULT_DOMAINS:
            raise UnsupportedOperatorError(f"{where} of domain {node.domain!r} is not supported; only the "
                                           f"default (ai.onnx) domain is")
        converter = CONVERTERS.get(node.op_type)
        if converter is None:
            raise UnsupportedOperatorError(f"{where} is not supported; "
                                           f"supported: {', '.join(supported_ops())}")
        inputs: list[Value | None] = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name in self.env:
                inputs.append(self.env[name])
            else:
                raise GraphError(f"node {label!r} ({node.op_type}) reads {name!r}, "
                                 f"which no earlier node defines")
        ctx = NodeContext(self, node, label, where)
        try:
            result = converter(ctx, inputs, _attributes(node))
        except GraphError as err:
            if str(err).startswith(f"node {label!r}"):
                raise
            raise type(err)(f"{where}: {err}") from err
        results = [result] if isinstance(result, Value) else list(result)
        for k, out_name in enumerate(node.output):
            if not out_name:
                continue
            if k >= len(results) or results[k] is None:
                raise UnsupportedOperatorError(f"{where}: output {k} ({out_name!r}) is not supported")
            value = results[k]
            if value.uid in ctx.created:
                value.name = out_name
            self.env[out_name] = value

    def unique_node_name(self, base: str) -> str:
        """``base``, or ``base_k`` with the first free ``k``: the next ``k`` to try is kept per base, so
        a converter emitting many nodes under one label names them in linear time."""
        name, k = base, self.next_suffix.get(base, 1)
        while name in self.node_names:
            name, k = f"{base}_{k}", k + 1
        self.next_suffix[base] = k
        self.node_names.add(name)
        return name


def _const_value(name: str, array: np.ndarray) -> Value:
    """``Value.constant`` keeping the shape of a 0-d array (numpy's contiguous copy makes it 1-d)."""
    value = Value.constant(name, array)
    if value.shape != array.shape:
        data = value.data.reshape(array.shape)
        data.setflags(write=False)
        value = Value(name, TensorType(array.shape, value.dtype), data)
    return value


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    attrs = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        attrs[a.name] = value
    return attrs


def _live_nodes(nodes: list[Node], outputs: list[Value]) -> list[Node]:
    """``nodes`` less those no output depends on (e.g. unread optional outputs)."""
    needed = {v.uid for v in outputs}
    live = []
    for node in reversed(nodes):
        if any(v.uid in needed for v in node.outputs):
            live.append(node)
            needed.update(v.uid for v in node.inputs)
    return live[::-1]


class NodeContext:
    """What a converter sees of the import: the ONNX node, the opset and ``emit``."""

    def __init__(self, importer: _Importer, node: onnx.NodeProto, label: str, where: str):
        self.importer, self.node, self.label, self.where = importer, node, label, where
        self.opset = importer.opset
        self.op_type = node.op_type
        self.created: set[int] = set()
        self._count = 0

    # -- values

    def _value_name(self) -> str:
        self._count += 1
        return f"{self.label}:{self._count}"

    def const(self, data, name: str | None = None) -> Value:
        """A new constant holding ``data`` (named ``name`` or after the node)."""
        value = _const_value(name or self._value_name(), np.asarray(data))
        self.created.add(value.uid)
        return value

    def emit(self, op: str, inputs: Sequence[Value], **attrs) -> Value:
        """The output of catalog operator ``op`` on ``inputs``: a constant where every input is one."""
        opdef = get_op(op)
        inputs = list(inputs)
        (out_type,) = opdef.infer([v.type for v in inputs], attrs)
        if all(v.is_constant for v in inputs):
            (result,) = opdef.evaluate([v.data for v in inputs], attrs)
            return self.const(np.asarray(result).astype(out_type.dtype, copy=False))
        out = Value(self._value_name(), out_type)
        self.created.add(out.uid)
        self.importer.nodes.append(Node(op, inputs, [out], attrs, self.importer.unique_node_name(self.label)))
        return out

    def reshape(self, x: Value, newshape: Sequence[int]) -> Value:
        newshape = tuple(int(d) for d in newshape)
        return x if newshape == x.shape else self.emit("reshape", [x], newshape=newshape)

    def cast(self, x: Value, dtype: str) -> Value:
        return x if x.dtype == dtype else self.emit("cast", [x], dtype=dtype)

    # -- inputs and attributes

    def unsupported(self, what: str) -> UnsupportedOperatorError:
        """The error for an attribute value or input form the importer does not cover (raise it)."""
        return UnsupportedOperatorError(f"{self.where}: {what} is not supported")

    def error(self, what: str) -> GraphError:
        """The error for a malformed node (raise it)."""
        return GraphError(f"{self.where}: {what}")

    def array(self, v: Value | None, what: str) -> np.ndarray:
        """The data of input ``v``, which must be a constant."""
        if v is None:
            raise self.error(f"input {what} is missing")
        if not v.is_constant:
            raise self.unsupported(f"input {what} computed from the model inputs (it must be a constant)")
        return v.data

    def ints(self, v: Value | None, what: str) -> list[int]:
        return [int(d) for d in self.array(v, what).reshape(-1)]

    def scalar(self, v: Value | None, what: str) -> float | int | None:
        """The one element of constant input ``v`` (None where the input is absent)."""
        if v is None:
            return None
        data = self.array(v, what)
        if data.size != 1:
            raise self.error(f"input {what} must hold one element, got shape {data.shape}")
        return data.reshape(-1)[0].item()

    def wants(self, k: int) -> bool:
        """Whether the node's output ``k`` is used (listed under a name)."""
        return k < len(self.node.output) and bool(self.node.output[k])

    def axis(self, axis: int, ndim: int) -> int:
        if not -ndim <= axis < ndim:
            raise self.error(f"axis {axis} is out of range for rank {ndim}")
        return axis % ndim


def optional_input(inputs: list, k: int) -> Value | None:
    """Optional input ``k`` (None where absent or empty)."""
    return inputs[k] if k < len(inputs) else None


def scalar_like(ctx: NodeContext, x: Value, value: float) -> Value:
    """A scalar constant of ``x``'s dtype."""
    return ctx.const(np.array(value, x.dtype))
