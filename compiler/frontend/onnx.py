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

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import dtypes
from ..graph import Graph, GraphError, Node, TensorType, UnsupportedOperatorError, Value, get_op
from ..topi.image import COORDINATE_MODES

__all__ = ["from_onnx", "CONVERTERS", "supported_ops"]

_DEFAULT_DOMAINS = ("", "ai.onnx")

Converter = Callable[["_NodeContext", list, dict], "Value | Sequence[Value | None]"]

#: The converter of each supported ONNX op type (default domain).
CONVERTERS: dict[str, Converter] = {}


def supported_ops() -> list[str]:
    """The ONNX op types the importer converts."""
    return sorted(CONVERTERS)


def _converter(*op_types: str):
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


def _dtype(elem_type: int, what: str) -> str:
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
        _dtype(init.data_type, what)
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
        return [self._input(proto, shape.get(proto.name)) for proto in protos]

    def _input(self, proto: onnx.ValueInfoProto, given) -> Value:
        name = proto.name
        if not proto.type.HasField("tensor_type"):
            kind = proto.type.WhichOneof("value")
            raise UnsupportedOperatorError(f"input {name!r} is not a tensor ({kind})")
        tt = proto.type.tensor_type
        dtype = _dtype(tt.elem_type, f"input {name!r}")
        dims = list(tt.shape.dim) if tt.HasField("shape") else None
        hint = f"pass shape={{{name!r}: (...)}} to from_onnx"
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
            raise GraphError(f"input {name!r} has no shape in the model; {hint}")
        shape = []
        for k, d in enumerate(dims):
            if not d.HasField("dim_value"):
                symbol = repr(d.dim_param) if d.dim_param else "unknown"
                raise GraphError(f"input {name!r}: dimension {k} is symbolic ({symbol}); {hint}")
            shape.append(d.dim_value)
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
        ctx = _NodeContext(self, node, label, where)
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


class _NodeContext:
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


def _opt(inputs: list, k: int) -> Value | None:
    """Optional input ``k`` (None where absent or empty)."""
    return inputs[k] if k < len(inputs) else None


def _all_constant(inputs: list) -> bool:
    return all(v is None or v.is_constant for v in inputs)


# ---------------------------------------------------------------------------- elementwise

_UNARY = {"Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Erf": "erf", "Neg": "negative", "Abs": "abs", "Reciprocal": "reciprocal",
          "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign",
          "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
          "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "IsNaN": "isnan"}


@_converter(*_UNARY)
def _unary(ctx: _NodeContext, ins, attrs):
    return ctx.emit(_UNARY[ctx.op_type], [ins[0]])


@_converter("Gelu")
def _gelu(ctx: _NodeContext, ins, attrs):
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate={approximate!r}")
    return ctx.emit("nn.gelu", [ins[0]], approximate=approximate)


# ONNX's parametrised activations, written out in the catalog's elementwise operators: each
# chain then fuses into one kernel with its neighbours, as any chain of injective operators does.
# Where the parameters allow, they are written with maximum and minimum rather than a select, which
# channel-blocked layouts carry through (a select would take the tensor back to NCHW and out again).
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def _number(ctx: _NodeContext, x: Value, value: float) -> Value:
    """A scalar constant of ``x``'s dtype."""
    return ctx.const(np.array(value, x.dtype))


def _scaled_below_zero(ctx: _NodeContext, x: Value, slope: Value) -> Value:
    """``x`` where ``x >= 0``, else ``slope * x``: ``max(x, slope * x)`` for a constant slope in
    [0, 1], a select otherwise."""
    scaled = ctx.emit("multiply", [x, slope])
    if slope.is_constant and np.all((slope.data >= 0) & (slope.data <= 1)):
        return ctx.emit("maximum", [x, scaled])
    return ctx.emit("where", [ctx.emit("less", [x, _number(ctx, x, 0)]), scaled, x])


def _exponential_below_zero(ctx: _NodeContext, x: Value, alpha: float, scale: float = 1.0) -> Value:
    """``x`` where ``x >= 0``, else ``alpha * (exp(x / scale) - 1)`` (ELU; CELU with ``scale =
    alpha``): ``max(x, 0) + min(alpha * (exp(x / scale) - 1), 0)`` where ``alpha >= 0``."""
    inner = x if scale == 1.0 else ctx.emit("divide", [x, _number(ctx, x, scale)])
    em1 = ctx.emit("subtract", [ctx.emit("exp", [inner]), _number(ctx, x, 1)])
    negative = ctx.emit("multiply", [em1, _number(ctx, x, alpha)])
    if alpha >= 0:
        return ctx.emit("add", [ctx.emit("maximum", [x, _number(ctx, x, 0)]),
                                ctx.emit("minimum", [negative, _number(ctx, x, 0)])])
    return ctx.emit("where", [ctx.emit("less", [x, _number(ctx, x, 0)]), negative, x])


def _softplus_of(ctx: _NodeContext, x: Value) -> Value:
    """``log(1 + exp(x))`` as ``max(x, 0) + log(1 + exp(-|x|))``: no overflow for large ``x``."""
    tail = ctx.emit("exp", [ctx.emit("negative", [ctx.emit("abs", [x])])])
    return ctx.emit("add", [ctx.emit("maximum", [x, _number(ctx, x, 0)]),
                            ctx.emit("log", [ctx.emit("add", [tail, _number(ctx, x, 1)])])])


@_converter("IsInf")
def _is_inf(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    positive, negative = bool(attrs.get("detect_positive", 1)), bool(attrs.get("detect_negative", 1))
    if positive and negative:
        return ctx.emit("isinf", [x])
    if positive or negative:
        return ctx.emit("equal", [x, _number(ctx, x, math.inf if positive else -math.inf)])
    return ctx.emit("greater", [x, _number(ctx, x, math.inf)])  # detects nothing: false everywhere


@_converter("Shrink")
def _shrink(ctx: _NodeContext, ins, attrs):
    """``x - bias`` above ``lambd``, ``x + bias`` below ``-lambd``, 0 between."""
    x = ins[0]
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    below = ctx.emit("where", [ctx.emit("less", [x, _number(ctx, x, -lambd)]),
                               ctx.emit("add", [x, _number(ctx, x, bias)]), _number(ctx, x, 0)])
    return ctx.emit("where", [ctx.emit("greater", [x, _number(ctx, x, lambd)]),
                              ctx.emit("subtract", [x, _number(ctx, x, bias)]), below])


@_converter("Swish")
def _swish(ctx: _NodeContext, ins, attrs):
    """``x * sigmoid(alpha * x)``: SiLU (one operator, fused into the layer before) where alpha is 1."""
    x, alpha = ins[0], float(attrs.get("alpha", 1.0))
    if alpha == 1.0:
        return ctx.emit("nn.silu", [x])
    return ctx.emit("multiply", [x, ctx.emit("sigmoid", [ctx.emit("multiply", [x, _number(ctx, x, alpha)])])])


@_converter("LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
            "Softplus", "Softsign", "Mish")
def _activation(ctx: _NodeContext, ins, attrs):
    x, op = ins[0], ctx.op_type
    if np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"input of dtype {x.dtype} (a float type is needed)")
    if op == "LeakyRelu":
        return ctx.emit("nn.leaky_relu", [x], alpha=float(attrs.get("alpha", 0.01)))
    if op == "PRelu":  # the slope broadcasts to x (unidirectionally)
        return _scaled_below_zero(ctx, x, ctx.cast(ins[1], x.dtype))
    if op == "Elu":
        return _exponential_below_zero(ctx, x, attrs.get("alpha", 1.0))
    if op == "Selu":
        elu = _exponential_below_zero(ctx, x, attrs.get("alpha", _SELU_ALPHA))
        return ctx.emit("multiply", [elu, _number(ctx, x, attrs.get("gamma", _SELU_GAMMA))])
    if op == "Celu":
        alpha = attrs.get("alpha", 1.0)
        if alpha == 0:
            raise ctx.unsupported("alpha=0 (Celu divides by alpha)")
        return _exponential_below_zero(ctx, x, alpha, scale=alpha)
    if op == "ThresholdedRelu":
        above = ctx.emit("greater", [x, _number(ctx, x, attrs.get("alpha", 1.0))])
        return ctx.emit("where", [above, x, _number(ctx, x, 0)])
    if op == "HardSigmoid":
        line = ctx.emit("add", [ctx.emit("multiply", [x, _number(ctx, x, attrs.get("alpha", 0.2))]),
                                _number(ctx, x, attrs.get("beta", 0.5))])
        return ctx.emit("clip", [line], a_min=0.0, a_max=1.0)
    if op == "HardSwish":  # one operator: it fuses into the layer before as its output stage
        return ctx.emit("nn.hardswish", [x])
    if op == "Softplus":
        return _softplus_of(ctx, x)
    if op == "Softsign":
        return ctx.emit("divide", [x, ctx.emit("add", [ctx.emit("abs", [x]), _number(ctx, x, 1)])])
    return ctx.emit("multiply", [x, ctx.emit("tanh", [_softplus_of(ctx, x)])])  # Mish


_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
           "GreaterOrEqual": "greater_equal"}
_COMMUTATIVE = {"Add", "Mul", "Equal"}


@_converter(*_BINARY)
def _binary(ctx: _NodeContext, ins, attrs):
    a, b = ins
    if ctx.opset < 7 and attrs.get("broadcast", 0) and "axis" in attrs:
        raise ctx.unsupported("legacy broadcasting along attribute axis")
    if ctx.op_type == "Pow":
        if a.is_constant and b.is_constant:  # shape arithmetic may raise integers to powers
            return ctx.const(np.power(a.data, b.data).astype(a.dtype))
        b = ctx.cast(b, a.dtype)
    elif ctx.op_type in _COMMUTATIVE and a.is_constant and not b.is_constant:
        a, b = b, a  # the constant second, as a bias or a scale usually is
    return ctx.emit(_BINARY[ctx.op_type], [a, b])


_VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


@_converter(*_VARIADIC)
def _variadic(ctx: _NodeContext, ins, attrs):
    out = ins[0]
    for v in ins[1:]:
        out = ctx.emit(_VARIADIC[ctx.op_type], [out, v])
    if ctx.op_type == "Mean" and len(ins) > 1:
        out = ctx.emit("divide", [out, ctx.const(np.array(len(ins), out.dtype))])
    return out


@_converter("Not")
def _not(ctx: _NodeContext, ins, attrs):
    return ctx.emit("equal", [ins[0], ctx.const(np.array(False))])


@_converter("And", "Or")
def _logical(ctx: _NodeContext, ins, attrs):
    a, b = ins
    if ctx.op_type == "And":
        return ctx.emit("where", [a, b, ctx.const(np.array(False))])
    return ctx.emit("where", [a, ctx.const(np.array(True)), b])


@_converter("Where")
def _where(ctx: _NodeContext, ins, attrs):
    return ctx.emit("where", ins[:3])


@_converter("Clip")
def _clip(ctx: _NodeContext, ins, attrs):
    if ctx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo, hi = ctx.scalar(_opt(ins, 1), "min"), ctx.scalar(_opt(ins, 2), "max")
    return ctx.emit("clip", [ins[0]], a_min=None if lo is None else float(lo),
                    a_max=None if hi is None else float(hi))


@_converter("Cast")
def _cast(ctx: _NodeContext, ins, attrs):
    return ctx.cast(ins[0], _dtype(attrs["to"], ctx.where))


@_converter("CastLike")
def _cast_like(ctx: _NodeContext, ins, attrs):
    return ctx.cast(ins[0], ins[1].dtype)


@_converter("Identity")
def _identity(ctx: _NodeContext, ins, attrs):
    return ins[0]


@_converter("Dropout")
def _dropout(ctx: _NodeContext, ins, attrs):
    x = ins[0]  # inference: the input, and a mask that keeps everything
    return [x, ctx.const(np.ones(x.shape, bool)) if ctx.wants(1) else None]


# ---------------------------------------------------------------------------- constants

_NUMPY_ONLY: dict[str, Callable] = {
    "Mod": lambda ins, attrs: (np.fmod if attrs.get("fmod", 0) else np.mod)(ins[0], ins[1]),
    "Range": lambda ins, attrs: np.arange(ins[0].item(), ins[1].item(), ins[2].item()).astype(ins[0].dtype),
    "Xor": lambda ins, attrs: np.logical_xor(ins[0], ins[1]),
}


@_converter(*_NUMPY_ONLY)
def _numpy_only(ctx: _NodeContext, ins, attrs):
    """Operators the catalog lacks, supported where they only compute on constants (shape arithmetic)."""
    arrays = [ctx.array(v, str(k)) for k, v in enumerate(ins)]
    return ctx.const(np.asarray(_NUMPY_ONLY[ctx.op_type](arrays, attrs)))


@_converter("Constant")
def _constant(ctx: _NodeContext, ins, attrs):
    if "value" in attrs:
        return ctx.const(numpy_helper.to_array(attrs["value"]))
    if "value_float" in attrs:
        return ctx.const(np.array(attrs["value_float"], "float32"))
    if "value_floats" in attrs:
        return ctx.const(np.array(attrs["value_floats"], "float32"))
    if "value_int" in attrs:
        return ctx.const(np.array(attrs["value_int"], "int64"))
    if "value_ints" in attrs:
        return ctx.const(np.array(attrs["value_ints"], "int64"))
    raise ctx.unsupported(f"a constant given as {', '.join(attrs) or 'nothing'}")


@_converter("ConstantOfShape")
def _constant_of_shape(ctx: _NodeContext, ins, attrs):
    shape = ctx.ints(ins[0], "shape")
    fill = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, "float32")
    return ctx.const(np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype))


@_converter("Shape")
def _shape(ctx: _NodeContext, ins, attrs):
    dims = np.array(ins[0].shape, "int64")
    if ctx.opset >= 15:
        dims = dims[attrs.get("start", 0):attrs.get("end")]
    return ctx.const(dims)


@_converter("Size")
def _size(ctx: _NodeContext, ins, attrs):
    return ctx.const(np.array(math.prod(ins[0].shape), "int64"))


# ---------------------------------------------------------------------------- shapes and indexing


def _reshape_target(ctx: _NodeContext, src: tuple[int, ...], shape: list[int], allowzero: bool) -> tuple:
    """ONNX Reshape's ``shape`` resolved against input shape ``src``: 0 copies (unless
    ``allowzero``), -1 is inferred."""
    if not allowzero and any(d == 0 and k >= len(src) for k, d in enumerate(shape)):
        raise ctx.error(f"shape {shape} copies a dimension (0) past the rank of the input {src}")
    out = [src[k] if d == 0 and not allowzero else d for k, d in enumerate(shape)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ctx.error(f"shape {shape} is not a valid reshape target")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or math.prod(src) % known:
            raise ctx.error(f"cannot reshape {src} to {shape}")
        out[out.index(-1)] = math.prod(src) // known
    if math.prod(out) != math.prod(src):
        raise ctx.error(f"cannot reshape {src} ({math.prod(src)} elements) to {tuple(out)}")
    return tuple(out)


@_converter("Reshape")
def _reshape(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    shape = list(attrs["shape"]) if ctx.opset < 5 else ctx.ints(_opt(ins, 1), "shape")
    return ctx.reshape(x, _reshape_target(ctx, x.shape, shape, bool(attrs.get("allowzero", 0))))


@_converter("Flatten")
def _flatten(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    axis = attrs.get("axis", 1)
    if not -ndim <= axis <= ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}")
    axis += ndim if axis < 0 else 0
    return ctx.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@_converter("Unsqueeze")
def _unsqueeze(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    axes = list(attrs["axes"]) if ctx.opset < 13 else ctx.ints(_opt(ins, 1), "axes")
    rank = len(x.shape) + len(axes)
    axes = sorted(ctx.axis(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat an axis")
    dims = iter(x.shape)
    return ctx.reshape(x, [1 if k in axes else next(dims) for k in range(rank)])


@_converter("Squeeze")
def _squeeze(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    if ctx.opset < 13:
        axes = attrs.get("axes")
    else:
        axes = None if _opt(ins, 1) is None else ctx.ints(ins[1], "axes")
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if d == 1]
    axes = {ctx.axis(a, len(x.shape)) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ctx.error(f"cannot squeeze axes {sorted(axes)} of shape {x.shape}: not all are 1")
    return ctx.reshape(x, [d for k, d in enumerate(x.shape) if k not in axes])


@_converter("Transpose")
def _transpose(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    perm = tuple(attrs.get("perm", reversed(range(len(x.shape)))))
    if perm == tuple(range(len(x.shape))):
        return x
    return ctx.emit("transpose", [x], axes=perm)


@_converter("Concat")
def _concat(ctx: _NodeContext, ins, attrs):
    return ctx.emit("concatenate", ins, axis=ctx.axis(attrs["axis"], len(ins[0].shape)))


@_converter("Gather", "GatherElements")
def _gather(ctx: _NodeContext, ins, attrs):
    data, indices = ins
    axis = ctx.axis(attrs.get("axis", 0), len(data.shape))
    if indices.is_constant:
        n = data.shape[axis]
        idx = indices.data
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ctx.error(f"indices out of range for axis {axis} of {data.shape}")
        if (idx < 0).any():
            indices = ctx.const(np.where(idx < 0, idx + n, idx).astype(idx.dtype))
    return ctx.emit("take" if ctx.op_type == "Gather" else "gather", [data, indices], axis=axis)


@_converter("Slice")
def _slice(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    if ctx.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = ctx.ints(ins[1], "starts"), ctx.ints(ins[2], "ends")
        axes = None if _opt(ins, 3) is None else ctx.ints(ins[3], "axes")
        steps = None if _opt(ins, 4) is None else ctx.ints(ins[4], "steps")
    axes = list(range(len(starts))) if axes is None else [ctx.axis(a, ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} do not match")
    begin, end, strides = [0] * ndim, list(x.shape), [1] * ndim
    reversed_axes: dict[int, list[int]] = {}
    for a, s, e, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise ctx.error("a step is 0")
        start, stop, step = slice(s, e, step).indices(x.shape[a])
        if step > 0:
            begin[a], end[a], strides[a] = start, max(start, stop), step
        else:  # taken by index: the catalog's slices step forwards
            reversed_axes[a] = list(range(start, stop, step))
    out = x
    if begin != [0] * ndim or end != list(x.shape) or strides != [1] * ndim:
        out = ctx.emit("strided_slice", [out], begin=tuple(begin), end=tuple(end), strides=tuple(strides))
    for a, index in reversed_axes.items():
        out = ctx.emit("take", [out, ctx.const(np.array(index, "int64"))], axis=a)
    return out


@_converter("Split")
def _split(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    axis = ctx.axis(attrs.get("axis", 0), len(x.shape))
    dim = x.shape[axis]
    if ctx.opset < 13:
        split = attrs.get("split")
    else:
        split = None if _opt(ins, 1) is None else ctx.ints(ins[1], "split")
    if split is None:
        if "num_outputs" in attrs:  # opset 18: the last part may be smaller
            n = attrs["num_outputs"]
            size = -(-dim // n)
            split = [size] * (n - 1) + [dim - size * (n - 1)]
        else:
            n = len(ctx.node.output)
            if dim % n:
                raise ctx.error(f"axis {axis} of {x.shape} does not split into {n} equal parts")
            split = [dim // n] * n
    if sum(split) != dim or any(s < 0 for s in split):
        raise ctx.error(f"parts {list(split)} do not add up to axis {axis} of {x.shape}")
    outs, offset = [], 0
    for size in split:
        begin = [0] * len(x.shape)
        end = list(x.shape)
        begin[axis], end[axis] = offset, offset + size
        outs.append(ctx.emit("strided_slice", [x], begin=tuple(begin), end=tuple(end),
                             strides=(1,) * len(x.shape)))
        offset += size
    return outs


@_converter("Expand")
def _expand(ctx: _NodeContext, ins, attrs):
    return ctx.emit("expand", [ins[0]], shape=tuple(ctx.ints(ins[1], "shape")))


@_converter("Pad")
def _pad(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        raise ctx.unsupported(f"mode={mode!r}")
    if ctx.opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings", []))), attrs.get("value", 0.0)
        axes = None
    else:
        pads = ctx.ints(ins[1], "pads")
        value = ctx.scalar(_opt(ins, 2), "constant_value") or 0
        axes = None if _opt(ins, 3) is None else [ctx.axis(a, ndim) for a in ctx.ints(ins[3], "axes")]
    axes = list(range(ndim)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must hold two entries per padded axis ({len(axes)})")
    if any(p < 0 for p in pads):
        raise ctx.unsupported(f"negative pads {pads}")
    width = [[0, 0] for _ in range(ndim)]
    for k, a in enumerate(axes):
        width[a] = [pads[k], pads[k + len(axes)]]
    if not any(p for pair in width for p in pair):
        return x
    value = float(value) if dtypes.is_float(x.dtype) else int(value)
    return ctx.emit("nn.pad", [x], pad_width=tuple(tuple(p) for p in width), pad_value=value)


@_converter("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: _NodeContext, ins, attrs):
    """Channels moved into blocks of pixels, or back: a reshape, a transpose and a reshape."""
    x, b = ins[0], int(attrs.get("blocksize", 0))
    if len(x.shape) != 4 or b < 1:
        raise ctx.error(f"needs a 4-D input and a positive blocksize, got shape {x.shape}, blocksize {b}")
    N, C, H, W = x.shape
    if ctx.op_type == "SpaceToDepth":
        if H % b or W % b:
            raise ctx.error(f"blocksize {b} must divide the height {H} and width {W}")
        blocks = ctx.reshape(x, (N, C, H // b, b, W // b, b))
        moved = ctx.emit("transpose", [blocks], axes=(0, 3, 5, 1, 2, 4))
        return ctx.reshape(moved, (N, C * b * b, H // b, W // b))
    if C % (b * b):
        raise ctx.error(f"blocksize {b} squared must divide the {C} channels")
    mode = attrs.get("mode", "DCR")
    if mode == "DCR":  # depth, column, row: the block's row and column outermost in the channels
        split, order = (N, b, b, C // (b * b), H, W), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        split, order = (N, C // (b * b), b, b, H, W), (0, 1, 4, 2, 5, 3)
    else:
        raise ctx.error(f"mode {mode!r} is not DCR or CRD")
    moved = ctx.emit("transpose", [ctx.reshape(x, split)], axes=order)
    return ctx.reshape(moved, (N, C // (b * b), H * b, W * b))


@_converter("Tile")
def _tile(ctx: _NodeContext, ins, attrs):
    """Each axis repeated: the input with a new axis of its repeats before each, broadcast along
    them, and merged."""
    x = ins[0]
    reps = ctx.ints(ins[1], "repeats")
    if len(reps) != len(x.shape) or any(r < 1 for r in reps):
        raise ctx.error(f"repeats {reps} must hold one positive count per axis of {x.shape}")
    if all(r == 1 for r in reps):
        return x
    spread = ctx.reshape(x, tuple(d for n in x.shape for d in (1, n)))
    wide = ctx.emit("expand", [spread], shape=tuple(d for r, n in zip(reps, x.shape) for d in (r, n)))
    return ctx.reshape(wide, tuple(r * n for r, n in zip(reps, x.shape)))


_RESIZE_METHODS = {"nearest": "nearest_neighbor", "linear": "linear"}
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_input(ctx: _NodeContext, v: Value | None, what: str) -> np.ndarray | None:
    """A constant ``scales`` or ``sizes`` input (None where absent or empty, as opset 11 writes
    the one not given)."""
    if v is None:
        return None
    data = ctx.array(v, what).reshape(-1)
    return data if data.size else None


@_converter("Resize", "Upsample")
def _resize(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    mode = attrs.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode  # Upsample's older name
    if mode not in _RESIZE_METHODS:
        raise ctx.unsupported(f"mode={mode!r}")
    if len(x.shape) != 4:
        raise ctx.unsupported(f"a {len(x.shape)}-D input (an NCHW image is resized)")
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        # Upsample and Resize-10: scales only (an attribute before opset 9), asymmetric coordinates,
        # nearest rounding down when enlarging and up when shrinking (ONNX Runtime's "simple")
        scales = np.asarray(attrs["scales"] if "scales" in attrs else ctx.array(_opt(ins, 1), "scales"))
        if ctx.op_type == "Upsample" and (scales < 1).any():
            raise ctx.error(f"Upsample's scales must be at least 1, got {scales.tolist()}")
        return _resized(ctx, x, range(4), scales.reshape(-1), None, mode, "asymmetric", None)
    coordinates = attrs.get("coordinate_transformation_mode", "half_pixel")
    if coordinates not in COORDINATE_MODES:
        raise ctx.unsupported(f"coordinate_transformation_mode={coordinates!r}")
    if attrs.get("antialias", 0):
        raise ctx.unsupported("antialias=1")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise ctx.unsupported(f"keep_aspect_ratio_policy={attrs['keep_aspect_ratio_policy']!r}")
    rounding = attrs.get("nearest_mode", "round_prefer_floor")
    if rounding not in _NEAREST_MODES:
        raise ctx.unsupported(f"nearest_mode={rounding!r}")
    axes = [ctx.axis(a, 4) for a in attrs.get("axes", range(4))]
    scales, sizes = _resize_input(ctx, _opt(ins, 2), "scales"), _resize_input(ctx, _opt(ins, 3), "sizes")
    return _resized(ctx, x, axes, scales, sizes, mode, coordinates, rounding)


def _resized(ctx: _NodeContext, x: Value, axes, scales, sizes, mode: str, coordinates: str,
             rounding: str | None) -> Value:
    """``x`` resized on ``axes`` by ``scales`` or to ``sizes`` (one of them None); ``rounding``
    None: down where the image grows, up where it shrinks."""
    axes = list(axes)
    if (scales is None) == (sizes is None):
        raise ctx.error("Resize takes one of scales and sizes")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise ctx.error(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} must have one entry "
                        f"per resized axis ({len(axes)})")
    # Each axis's output size and the scale its coordinates divide by, in float32 as ONNX Runtime
    # computes them: from sizes, size / input; from scales, the scale as given, the size floor(input *
    # scale).
    out, scale = list(x.shape), [np.float32(1.0)] * 4
    for a, g in zip(axes, given):
        if sizes is not None:
            out[a] = int(g)
            scale[a] = np.float32(out[a]) / np.float32(x.shape[a])
        else:
            scale[a] = np.float32(g)
            out[a] = int(np.floor(np.float32(x.shape[a]) * scale[a]))
    if any(d < 1 for d in out) or any(s <= 0 for s in scale):
        raise ctx.error(f"Resize of {x.shape} to {tuple(out)} (scales {[float(s) for s in scale]}): "
                        "every size and scale must be positive")
    if tuple(out[:2]) != x.shape[:2] or scale[0] != 1 or scale[1] != 1:
        raise ctx.unsupported(f"resizing the batch or channel axis ({x.shape} to {tuple(out)})")
    if tuple(out) == x.shape and scale[2] == scale[3] == 1:
        return x
    method = _RESIZE_METHODS[mode]
    if method != "nearest_neighbor":
        rounding = ""
    elif rounding is None:
        directions = {s > 1 for s in scale[2:] if s != 1}
        if len(directions) > 1:
            raise ctx.unsupported(f"nearest-neighbour scales {[float(s) for s in scale]} that enlarge one "
                                  "axis and shrink the other before opset 11")
        rounding = "floor" if directions == {True} else "ceil"
    return ctx.emit("image.resize2d", [x], size=tuple(out[2:]), method=method,
                    coordinate_transformation_mode=coordinates, rounding_method=rounding,
                    scale=(float(scale[2]), float(scale[3])))


# ---------------------------------------------------------------------------- convolution and pooling


def _window_pads(ctx: _NodeContext, attrs, spatial: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int]) -> tuple[int, ...]:
    """ONNX ``pads`` (all begins, then all ends) with ``auto_pad`` resolved."""
    n = len(spatial)
    mode = attrs.get("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = tuple(attrs.get("pads", (0,) * (2 * n)))
        if len(pads) != 2 * n or any(p < 0 for p in pads):
            raise ctx.error(f"pads {list(pads)} must be {2 * n} non-negative ints")
        return pads
    if mode == "VALID":
        return (0,) * (2 * n)
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(f"auto_pad={mode!r}")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else big)
        ends.append(big if mode == "SAME_UPPER" else small)
    return tuple(begins + ends)


def _window_attrs(ctx: _NodeContext, attrs, spatial: Sequence[int], kernel: Sequence[int]):
    """``(strides, dilations, pads)`` of a 2-D convolution or pool, in the catalog's form."""
    n = len(spatial)
    strides = tuple(attrs.get("strides", (1,) * n))
    dilations = tuple(attrs.get("dilations", (1,) * n))
    if len(strides) != n or len(dilations) != n:
        raise ctx.error(f"strides {list(strides)} and dilations {list(dilations)} must have {n} entries")
    pads = _window_pads(ctx, attrs, spatial, kernel, strides, dilations)
    return strides, dilations, pads


def _spatial_rank(ctx: _NodeContext, x: Value, what: str) -> int:
    nd = len(x.shape) - 2
    if nd not in (1, 2):
        raise ctx.unsupported(f"{nd}-D {what} (input shape {x.shape}; 1-D and 2-D are)")
    return nd


def _as_2d(attrs_value: Sequence[int], nd: int, fill: int) -> tuple[int, ...]:
    """A 1-D window attribute as the 2-D one over a height of 1."""
    return tuple(attrs_value) if nd == 2 else (fill,) + tuple(attrs_value)


def _convolution(ctx: _NodeContext, ins, attrs, op: str, window) -> Value:
    """Conv or ConvTranspose as ``op``: ``window(spatial, kernel)`` gives the node's ``(strides,
    dilations, pads, other window attributes)``, pads as ONNX lists them. A 1-D one runs over a
    height of 1; the bias is a ``nn.bias_add`` after it."""
    x, w, b = ins[0], ins[1], _opt(ins, 2)
    nd = _spatial_rank(ctx, x, "convolution" if op == "nn.conv2d" else "transposed convolution")
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        raise ctx.error(f"kernel_shape {attrs['kernel_shape']} differs from the weight's {kernel}")
    strides, dilations, pads, other = window(x.shape[2:], kernel)
    if nd == 1:
        x = ctx.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        w = ctx.reshape(w, w.shape[:2] + (1,) + w.shape[2:])
        pads = (0, pads[0], 0, pads[1])
    other = {name: _as_2d(value, nd, 0) for name, value in other.items()}
    out = ctx.emit(op, [x, w], strides=_as_2d(strides, nd, 1), padding=tuple(int(p) for p in pads),
                   dilation=_as_2d(dilations, nd, 1), groups=int(attrs.get("group", 1)), **other)
    if b is not None:
        out = ctx.emit("nn.bias_add", [out, b], axis=1)
    if nd == 1:
        out = ctx.reshape(out, out.shape[:2] + out.shape[3:])
    return out


@_converter("Conv")
def _conv(ctx: _NodeContext, ins, attrs):
    return _convolution(ctx, ins, attrs, "nn.conv2d",
                        lambda spatial, kernel: (*_window_attrs(ctx, attrs, spatial, kernel), {}))


def _transpose_pads(ctx: _NodeContext, attrs, spatial, kernel, strides, dilations, output_padding) -> tuple:
    """ConvTranspose's pads (all starts, then all ends), from ``pads``, ``auto_pad`` or
    ``output_shape`` as ONNX defines them: where an output shape is given (by it, or by SAME's
    ``input * stride``), the padding its size leaves is split, the larger half at the end for
    SAME_UPPER and at the start otherwise."""
    n = len(spatial)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad={auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    wanted = attrs.get("output_shape")
    if wanted is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(spatial, strides)]
    if wanted is None:
        pads = tuple(attrs.get("pads", (0,) * 2 * n)) if auto_pad == "NOTSET" else (0,) * 2 * n
        if len(pads) != 2 * n:
            raise ctx.error(f"pads {list(pads)} must have {2 * n} entries")
        return pads
    wanted = list(wanted)[-n:]
    starts, ends = [], []
    for size, k, s, d, op, out in zip(spatial, kernel, strides, dilations, output_padding, wanted):
        total = s * (size - 1) + op + (k - 1) * d + 1 - out
        if total < 0:
            raise ctx.unsupported(f"output_shape {list(wanted)} beyond the full output (negative padding)")
        upper = auto_pad == "SAME_UPPER"
        starts.append(total // 2 if upper else total - total // 2)
        ends.append(total - starts[-1])
    return tuple(starts + ends)


@_converter("ConvTranspose")
def _conv_transpose(ctx: _NodeContext, ins, attrs):
    def window(spatial, kernel):
        nd = len(spatial)
        strides = tuple(attrs.get("strides", (1,) * nd))
        dilations = tuple(attrs.get("dilations", (1,) * nd))
        output_padding = tuple(attrs.get("output_padding", (0,) * nd))
        if not len(strides) == len(dilations) == len(output_padding) == nd:
            raise ctx.error(f"strides {list(strides)}, dilations {list(dilations)} and output_padding "
                            f"{list(output_padding)} must have {nd} entries")
        pads = _transpose_pads(ctx, attrs, spatial, kernel, strides, dilations, output_padding)
        if any(p < 0 for p in pads):
            raise ctx.unsupported(f"negative pads {list(pads)}")
        return strides, dilations, pads, {"output_padding": output_padding}

    return _convolution(ctx, ins, attrs, "nn.conv2d_transpose", window)


def _ceil_windows(ctx: _NodeContext, spatial, kernel, strides, dilations, pads,
                  count_include_pad: bool) -> tuple[tuple[int, ...], bool]:
    """``(pads, ceil_mode)`` for the catalog's pools that give ONNX Runtime's ``ceil_mode`` output.

    ONNX Runtime (as torch) drops a last window that would start in the end padding; the
    catalog's ceil_mode keeps it. Where the two differ, the windows ONNX Runtime keeps are
    reached with end padding instead (which an average counting its padding would count)."""
    n = len(spatial)
    floor_out, ceil_out, wanted = [], [], []
    for k, (size, kk, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        span = size + pads[k] + pads[n + k] - (kk - 1) * d - 1
        floor_out.append(span // s + 1)
        ceil_out.append(-(-span // s) + 1)
        wanted.append(ceil_out[-1] - ((ceil_out[-1] - 1) * s >= size + pads[k]))
    if wanted == floor_out:
        return tuple(pads), False
    if wanted == ceil_out:
        return tuple(pads), True
    if count_include_pad:
        raise ctx.unsupported("ceil_mode=1 with count_include_pad=1 where one axis keeps a last partial "
                              "window and another drops one")
    ends = [pads[n + k] + (w - f) * s for k, (w, f, s) in enumerate(zip(wanted, floor_out, strides))]
    return tuple(pads[:n]) + tuple(ends), False


@_converter("MaxPool", "AveragePool")
def _pool(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    nd = _spatial_rank(ctx, x, "pooling")
    if ctx.op_type == "MaxPool" and ctx.wants(1):
        raise ctx.unsupported("the Indices output")
    kernel = tuple(attrs["kernel_shape"])
    if len(kernel) != nd:
        raise ctx.error(f"kernel_shape {list(kernel)} must have {nd} entries")
    strides, dilations, pads = _window_attrs(ctx, attrs, x.shape[2:], kernel)
    extra = {}
    if ctx.op_type == "AveragePool":
        extra["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if ceil_mode:
        pads, ceil_mode = _ceil_windows(ctx, x.shape[2:], kernel, strides, dilations, pads,
                                        extra.get("count_include_pad", False))
    if nd == 1:
        x = ctx.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        pads = (0, pads[0], 0, pads[1])
    op = "nn.max_pool2d" if ctx.op_type == "MaxPool" else "nn.avg_pool2d"
    out = ctx.emit(op, [x], pool_size=_as_2d(kernel, nd, 1), strides=_as_2d(strides, nd, 1),
                   padding=tuple(pads), dilation=_as_2d(dilations, nd, 1), ceil_mode=ceil_mode, **extra)
    if nd == 1:
        out = ctx.reshape(out, out.shape[:2] + out.shape[3:])
    return out


@_converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    if len(x.shape) < 3:
        raise ctx.error(f"the input must have spatial axes, got shape {x.shape}")
    if ctx.op_type == "GlobalAveragePool" and len(x.shape) == 4:
        return ctx.emit("nn.global_avg_pool2d", [x])
    op = "mean" if ctx.op_type == "GlobalAveragePool" else "max"
    return ctx.emit(op, [x], axis=tuple(range(2, len(x.shape))), keepdims=True)


@_converter("BatchNormalization")
def _batch_norm(ctx: _NodeContext, ins, attrs):
    if attrs.get("training_mode", 0):
        raise ctx.unsupported("training_mode=1")
    if ctx.opset < 9 and attrs.get("spatial", 1) == 0:
        raise ctx.unsupported("spatial=0")
    if any(ctx.wants(k) for k in range(1, len(ctx.node.output))):
        raise ctx.unsupported("the training outputs (running mean and variance)")
    x = ins[0]
    params = [ctx.cast(v, x.dtype) for v in ins[1:5]]
    return ctx.emit("nn.batch_norm", [x, *params], epsilon=float(attrs.get("epsilon", 1e-5)), axis=1)


# ---------------------------------------------------------------------------- products


@_converter("Gemm")
def _gemm(ctx: _NodeContext, ins, attrs):
    a, b, c = ins[0], ins[1], _opt(ins, 2)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ctx.error(f"A and B must be 2-D, got {a.shape} and {b.shape}")
    if attrs.get("transA", 0):
        a = ctx.emit("transpose", [a], axes=(1, 0))
    if b.is_constant:  # the weight (N, K), alpha folded into it
        weight = b.data if attrs.get("transB", 0) else b.data.T
        if alpha != 1.0:
            weight = weight * np.asarray(alpha, weight.dtype)
        out = ctx.emit("nn.dense", [a, ctx.const(weight, f"{b.name}:dense")])
    else:
        weight = b if attrs.get("transB", 0) else ctx.emit("transpose", [b], axes=(1, 0))
        out = ctx.emit("nn.dense", [a, weight])
        if alpha != 1.0:
            out = ctx.emit("multiply", [out, ctx.const(np.array(alpha, out.dtype))])
    if c is None or beta == 0.0:
        return out
    if beta != 1.0:
        c = ctx.emit("multiply", [c, ctx.const(np.array(beta, c.dtype))])
    if c.shape in ((out.shape[1],), (1, out.shape[1])):
        return ctx.emit("nn.bias_add", [out, ctx.reshape(c, (out.shape[1],))], axis=1)
    return ctx.emit("add", [out, c])


@_converter("MatMul")
def _matmul(ctx: _NodeContext, ins, attrs):
    a, b = ins
    if not a.shape or not b.shape:
        raise ctx.error(f"MatMul of a scalar (shapes {a.shape} and {b.shape})")
    # numpy's 1-D rules: a vector a is a row (dropped after), a vector b a column
    a2 = ctx.reshape(a, (1,) + a.shape) if len(a.shape) == 1 else a
    b2 = ctx.reshape(b, b.shape + (1,)) if len(b.shape) == 1 else b
    (m, k), (kb, n) = a2.shape[-2:], b2.shape[-2:]
    if k != kb:
        raise ctx.error(f"the reduction lengths differ: {a.shape} @ {b.shape}")
    if b2.is_constant and len(b2.shape) == 2:  # a weight: nn.dense on a 2-D view
        lead = a2.shape[:-1]
        weight = ctx.const(b2.data.T, f"{b.name}:dense")
        out = ctx.emit("nn.dense", [ctx.reshape(a2, (math.prod(lead), k)), weight])
        out = ctx.reshape(out, lead + (n,))
    else:
        batch = _broadcast(ctx, a2.shape[:-2], b2.shape[:-2])
        a3, b3 = (_batch_view(ctx, v, batch) for v in (a2, b2))
        out = ctx.emit("nn.batch_matmul", [a3, b3], transpose_a=False, transpose_b=False)
        out = ctx.reshape(out, batch + (m, n))
    shape = out.shape
    if len(a.shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b.shape) == 1:
        shape = shape[:-1]
    return ctx.reshape(out, shape)


def _broadcast(ctx: _NodeContext, s1: tuple[int, ...], s2: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(s1, s2))
    except ValueError:
        raise ctx.error(f"batch shapes {s1} and {s2} do not broadcast") from None


def _batch_view(ctx: _NodeContext, v: Value, batch: tuple[int, ...]) -> Value:
    """``v`` (..., rows, cols) as 3-D (batch, rows, cols); a batch of 1 stays 1 (it broadcasts)."""
    rows, cols = v.shape[-2:]
    own = v.shape[:-2]
    if math.prod(own) == 1 or own == batch:
        return ctx.reshape(v, (math.prod(own), rows, cols))
    v = ctx.emit("expand", [v], shape=batch + (rows, cols))
    return ctx.reshape(v, (math.prod(batch), rows, cols))


# ---------------------------------------------------------------------------- reductions


@_converter("Softmax", "LogSoftmax")
def _softmax(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    ndim = len(x.shape)
    axis = ctx.axis(attrs.get("axis", -1 if ctx.opset >= 13 else 1), ndim)
    if ctx.opset >= 13 or axis == ndim - 1:
        out = ctx.emit("nn.softmax", [x], axis=axis)
    else:  # before opset 13: over all the axes from axis on, as one
        flat = ctx.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        out = ctx.reshape(ctx.emit("nn.softmax", [flat], axis=1), x.shape)
    return ctx.emit("log", [out]) if ctx.op_type == "LogSoftmax" else out


@_converter("LayerNormalization")
def _layer_norm(ctx: _NodeContext, ins, attrs):
    if ctx.wants(1) or ctx.wants(2):
        raise ctx.unsupported("the Mean and InvStdDev outputs")
    x, scale, bias = ins[0], ins[1], _opt(ins, 2)
    if bias is None:
        bias = ctx.const(np.zeros(scale.shape, scale.dtype))
    axis = ctx.axis(attrs.get("axis", -1), len(x.shape))
    return ctx.emit("nn.layer_norm", [x, ctx.cast(scale, x.dtype), ctx.cast(bias, x.dtype)], axis=axis,
                    epsilon=float(attrs.get("epsilon", 1e-5)))


def _channel_affine(ctx: _NodeContext, x: Value, scale: Value, bias: Value) -> Value:
    """``x * scale + bias`` with one value of each per channel (axis 1) of ``x``."""
    per_channel = (1, x.shape[1]) + (1,) * (len(x.shape) - 2)
    scaled = ctx.emit("multiply", [x, ctx.reshape(ctx.cast(scale, x.dtype), per_channel)])
    return ctx.emit("add", [scaled, ctx.reshape(ctx.cast(bias, x.dtype), per_channel)])


def _normalized(ctx: _NodeContext, x: Value, groups: int, epsilon: float) -> Value:
    """``x`` normalised over each group of ``C / groups`` channels and every position (a layer
    norm of ``x`` seen as ``(N, groups, rest)``), with no scale or shift of its own."""
    N, C = x.shape[:2]
    rest = int(np.prod(x.shape[2:], dtype=np.int64)) * (C // groups)
    one, zero = ctx.const(np.ones(1, x.dtype)), ctx.const(np.zeros(1, x.dtype))
    grouped = ctx.reshape(x, (N, groups, rest))
    normed = ctx.emit("nn.layer_norm", [grouped, one, zero], axis=2, epsilon=epsilon)
    return ctx.reshape(normed, x.shape)


@_converter("InstanceNormalization", "GroupNormalization")
def _channel_norm(ctx: _NodeContext, ins, attrs):
    x, scale, bias = ins[0], ins[1], ins[2]
    if len(x.shape) < 3 or np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"an input of shape {x.shape} and dtype {x.dtype} (N, C and positions, float)")
    C = x.shape[1]
    epsilon = float(attrs.get("epsilon", 1e-5))
    if ctx.op_type == "InstanceNormalization":
        return _channel_affine(ctx, _normalized(ctx, x, C, epsilon), scale, bias)
    groups = int(attrs.get("num_groups", 0))
    if groups < 1 or C % groups:
        raise ctx.error(f"num_groups={groups} must divide the {C} channels")
    if scale.shape == (groups,) and bias.shape == (groups,) and groups != C:
        # opset 18's one scale and shift per group, for each of its channels
        scale, bias = (ctx.const(np.repeat(ctx.array(v, what), C // groups))
                       for v, what in ((scale, "scale"), (bias, "bias")))
    elif scale.shape != (C,) or bias.shape != (C,):
        raise ctx.error(f"scale {scale.shape} and bias {bias.shape} must have one entry per group "
                        f"({groups}) or per channel ({C})")
    return _channel_affine(ctx, _normalized(ctx, x, groups, epsilon), scale, bias)


_REDUCE = {"ReduceMean": ("mean", 18), "ReduceSum": ("sum", 13), "ReduceMax": ("max", 18),
           "ReduceMin": ("min", 18)}
# written out in the catalog's reductions; axes an input from opset 18
_COMPOSED_REDUCE = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp")


def _reduce_axes(ctx: _NodeContext, ins, attrs, axes_input_from: int) -> tuple[int, ...] | None:
    """The reduced axes, sorted; None where an empty list asks for no reduction at all."""
    x = ins[0]
    if ctx.opset >= axes_input_from:
        axes = None if _opt(ins, 1) is None else ctx.ints(ins[1], "axes")
    else:
        axes = attrs.get("axes")
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        axes = range(len(x.shape))
    return tuple(sorted({ctx.axis(a, len(x.shape)) for a in axes}))


@_converter(*_REDUCE)
def _reduce(ctx: _NodeContext, ins, attrs):
    op, axes_input_from = _REDUCE[ctx.op_type]
    axes = _reduce_axes(ctx, ins, attrs, axes_input_from)
    if axes is None:
        return ins[0]
    return ctx.emit(op, [ins[0]], axis=axes, keepdims=bool(attrs.get("keepdims", 1)))


@_converter("ArgMax", "ArgMin")
def _arg_extreme(ctx: _NodeContext, ins, attrs):
    x = ins[0]
    index = ctx.emit(ctx.op_type.lower(), [x], axis=ctx.axis(attrs.get("axis", 0), len(x.shape)),
                     keepdims=bool(attrs.get("keepdims", 1)),
                     select_last_index=bool(attrs.get("select_last_index", 0)))
    return ctx.cast(index, "int64")  # ONNX's indices


@_converter(*_COMPOSED_REDUCE)
def _composed_reduce(ctx: _NodeContext, ins, attrs):
    x, op = ins[0], ctx.op_type
    if np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"input of dtype {x.dtype} (a float type is needed)")
    axes = _reduce_axes(ctx, ins, attrs, 18)
    keepdims = bool(attrs.get("keepdims", 1))
    if op == "ReduceLogSumExp":  # log(sum(exp(x - max))) + max: no overflow
        if axes is None:  # no reduction: each element's log of its own exp
            return x
        top = ctx.emit("max", [x], axis=axes, keepdims=True)
        total = ctx.emit("sum", [ctx.emit("exp", [ctx.emit("subtract", [x, top])])], axis=axes, keepdims=True)
        out = ctx.emit("add", [ctx.emit("log", [total]), top])
        return out if keepdims else ctx.reshape(out, tuple(d for k, d in enumerate(x.shape) if k not in axes))
    terms = ctx.emit("abs", [x]) if op == "ReduceL1" else ctx.emit("multiply", [x, x])
    # no reduction: each term is its own sum
    total = terms if axes is None else ctx.emit("sum", [terms], axis=axes, keepdims=keepdims)
    return ctx.emit("sqrt", [total]) if op == "ReduceL2" else total


# the converters defined in the modules beside this one register themselves
from . import onnx_composed, onnx_indexing, onnx_recurrent  # noqa: E402,F401
