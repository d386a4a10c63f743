"""Small ONNX models for the importer's tests, and the check each runs: ONNX Runtime's outputs against
the graph interpreter's and the compiled graph's (on poisoned output buffers)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import from_onnx
from compiler.graph import build_graph, evaluate
from tests.helpers import assert_written, poisoned

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(20240601)


def rand(*shape, low=None) -> np.ndarray:
    """Random non-zero float32: normal, or uniform in [low, low + 1.5) where ``low`` is given."""
    if low is not None:
        return RNG.uniform(low, low + 1.5, shape).astype("float32")
    a = RNG.standard_normal(shape).astype("float32")
    return np.where(np.abs(a) < 1e-3, 0.5, a).astype("float32")


def make_model(nodes, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray] | None = None,
               outputs=("y",), opset: int = 17, check: bool = True):
    """A model of ``nodes``: ``feeds`` as graph inputs, ``consts`` as initializers; each output is a
    name (float32) or ``(name, element type[, shape])``."""
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(*_output_spec(o)) for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in (consts or {}).items()]
    graph = helper.make_graph(nodes, "test", inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9 if opset <= 20 else 10
    if check:  # shape inference gives the outputs their shapes, which the checker wants
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        onnx.checker.check_model(model)
    return model


def _output_spec(o) -> tuple:
    """``(name, element type, shape)`` of an output given as a name or a shorter tuple."""
    spec = (o,) if isinstance(o, str) else tuple(o)
    return spec + (F32, None)[len(spec) - 1:]


def run_both(model, feeds: dict[str, np.ndarray], shape=None, rtol=1e-4, atol=1e-5):
    """The graph of ``model``, after checking that it computes what ONNX Runtime does: run by the
    graph interpreter, and compiled (:func:`compiler.graph.build_graph`) and run on poisoned outputs."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    graph = from_onnx(model, shape=shape)
    got = evaluate(graph, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    if graph.nodes:  # a model that folded to constants has no kernel to compile
        module = build_graph(graph)
        outputs = [poisoned(e.shape, e.dtype) for e in expected]
        module(*[feeds[v.name] for v in graph.inputs], *outputs)
        for g, e in zip(outputs, expected):
            assert_written(g, e, rtol=rtol, atol=atol)
    return graph


def single(op: str, inputs, feeds, consts=None, opset=17, outputs=("y",), **attrs):
    """A one-node model: ``inputs`` lists the node's input names ("" for an absent one)."""
    node = helper.make_node(op, list(inputs), [o if isinstance(o, str) else o[0] for o in outputs],
                            name=f"{op}_0", **attrs)
    return make_model([node], feeds, consts, outputs, opset)


def check_single(op, inputs, feeds, consts=None, opset=17, outputs=("y",), **attrs):
    return run_both(single(op, inputs, feeds, consts, opset, outputs, **attrs), feeds)


def reduction_node(axes, keepdims: int, axes_as_input: bool) -> tuple[list[str], dict, dict]:
    """``(inputs, consts, attrs)`` of a reduction of ``"x"`` over ``axes`` (None: all), given as the
    input ``"a"`` (opset 18's form; ReduceSum's from 13) or as the attribute before."""
    inputs, consts, attrs = ["x"], {}, {"keepdims": keepdims}
    if axes is not None and axes_as_input:
        consts["a"] = np.array(axes, "int64")
        inputs.append("a")
    elif axes is not None:
        attrs["axes"] = axes
    return inputs, consts, attrs
