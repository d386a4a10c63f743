"""ONNX's LSTM, GRU and RNN unrolled by the importer, checked against ONNX Runtime (the graph
interpreter and the compiled graph); its errors; layers exported from torch."""

from __future__ import annotations

import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, UnsupportedOperatorError, build_graph, evaluate, prepare  # noqa: E402
from compiler.graph.fuse import fused_kernels  # noqa: E402
from compiler.graph.kernels import kernel_key  # noqa: E402
from tests.helpers import assert_written, poisoned  # noqa: E402
from tests.onnx_helpers import make_model, rand, run_both  # noqa: E402

SEQ, BATCH, INPUT, HIDDEN = 4, 2, 3, 5
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _layer(op: str, direction: str = "forward", *, bias: bool = True, initial_h: str | None = None,
           initial_c: str | None = None, peepholes: bool = False, layout: int = 0, opset: int = 17,
           outputs: tuple[str, ...] | None = None, scale: float = 0.6, full_lens: bool = False,
           lens: list[int] | None = None, **attrs):
    """The graph a one-node model of ``op`` imports to, checked against ONNX Runtime
    (:func:`run_both`). ``initial_h`` and ``initial_c``: "input" (a graph input), "const" (an
    initializer) or None (absent); ``full_lens``: a sequence_lens of the whole length, ``lens``:
    one of these lengths; ``outputs``:
    the node's ("" skips one). ONNX Runtime runs no ``layout=1`` layer: such a layer is checked
    against the same one in layout 0, its inputs and outputs with the batch moved."""
    dirs = 2 if direction == "bidirectional" else 1
    G, H = _GATES[op], HIDDEN
    consts = {"W": rand(dirs, G * H, INPUT) * scale, "R": rand(dirs, G * H, H) * scale}
    feeds = {"x": rand(SEQ, BATCH, INPUT)}
    names = ["x", "W", "R", "B" if bias else "", "lens" if full_lens or lens else ""]
    if bias:
        consts["B"] = rand(dirs, 2 * G * H) * scale
    if full_lens or lens:
        consts["lens"] = np.array(lens or [SEQ] * BATCH, "int32")
    for name, where in [("initial_h", initial_h)] + ([("initial_c", initial_c)] if op == "LSTM" else []):
        names.append(name if where else "")
        if where:
            (feeds if where == "input" else consts)[name] = rand(dirs, BATCH, H)
    if peepholes:
        names.append("P")
        consts["P"] = rand(dirs, 3 * H) * scale
    while names[-1] == "":
        names.pop()
    if outputs is None:
        outputs = ("y", "y_h", "y_c") if op == "LSTM" else ("y", "y_h")
    listed = [o for o in outputs if o]

    def model(layout_attrs: dict, initializers: dict, inputs: dict):
        node = helper.make_node(op, names, list(outputs), hidden_size=H, direction=direction, **attrs,
                                **layout_attrs)
        return make_model([node], inputs, initializers, listed, opset)

    if not layout:
        return run_both(model({}, consts, feeds), feeds)
    # batch first: X (batch, seq, input), the states (batch, dirs, hidden), the outputs' batch first
    first = {k: np.ascontiguousarray(np.swapaxes(a, 0, 1)) for k, a in feeds.items()}
    swapped = {k: np.ascontiguousarray(np.swapaxes(a, 0, 1)) if k.startswith("initial") else a
               for k, a in consts.items()}
    session = ort.InferenceSession(model({}, consts, feeds).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = [np.ascontiguousarray(np.moveaxis(e, -2, 0)) for e in session.run(None, feeds)]
    graph = from_onnx(model({"layout": 1}, swapped, first))
    for got, want in zip(evaluate(graph, first), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    module = build_graph(graph)
    written = [poisoned(e.shape, e.dtype) for e in expected]
    module(*[first[v.name] for v in graph.inputs], *written)
    for got, want in zip(written, expected):
        assert_written(got, want, rtol=1e-4, atol=1e-5)
    return graph


def _products(graph) -> int:
    return graph.op_counts().get("nn.dense", 0)


# ---------------------------------------------------------------------------- LSTM


# ONNX's activations beyond the defaults, spread over the layers below: the alphas and betas go to
# those that take them, in order (Sigmoid, between ThresholdedRelu and Elu, takes none)
_LSTM_ACTIVATIONS = {
    "activations": ["HardSigmoid", "Affine", "ThresholdedRelu", "Sigmoid", "Elu", "ScaledTanh"],
    "activation_alpha": [0.3, 0.7, 0.1, 0.9, 1.5], "activation_beta": [0.4, 0.1, 0.6],
}


@pytest.mark.parametrize("direction, kwargs", [
    ("forward", {"initial_h": "input", "initial_c": "const", "peepholes": True}),
    # only Y_h and Y_c; opset 7, where LSTM was last changed before layout
    ("reverse", {"bias": False, "outputs": ("", "y_h", "y_c"), "opset": 7}),
    ("bidirectional", {"initial_h": "const", "initial_c": "input", "peepholes": True, **_LSTM_ACTIVATIONS}),
])
def test_lstm(direction, kwargs):
    graph = _layer("LSTM", direction, **kwargs)
    ops = graph.op_counts()
    dirs = 2 if direction == "bidirectional" else 1
    # one projection of the whole sequence, then one state product per step but the first where
    # the initial state is a constant (its product folds at import) or absent (zero)
    assert _products(graph) == 1 + dirs * (SEQ - (kwargs.get("initial_h") != "input"))
    assert "transpose" not in ops
    assert ("concatenate" in ops) == ("y" in kwargs.get("outputs", ("y",)))


def test_steps_compile_once():
    """Every step of either direction runs the same kernels: their number does not grow with the
    sequence."""
    def distinct_kernels(seq: int) -> int:
        node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0"], ["y"], hidden_size=HIDDEN,
                                direction="bidirectional")
        feeds = {"x": rand(seq, BATCH, INPUT), "h0": rand(2, BATCH, HIDDEN)}
        consts = {"W": rand(2, 4 * HIDDEN, INPUT), "R": rand(2, 4 * HIDDEN, HIDDEN)}
        kernels = fused_kernels(prepare(from_onnx(make_model([node], feeds, consts))))
        return len({kernel_key(k) for k in kernels})

    assert distinct_kernels(3) == distinct_kernels(6)


def test_lstm_batch_first_clip_input_forget():
    """layout=1 (opset 14): batch-first input, states and outputs; clip bounds the gates' inputs."""
    _layer("LSTM", "bidirectional", initial_h="input", initial_c="const", layout=1, opset=14, clip=0.4,
           input_forget=1, scale=1.5)


# ---------------------------------------------------------------------------- GRU and RNN


@pytest.mark.parametrize("direction, kwargs", [
    ("forward", {"initial_h": "input", "clip": 0.5, "scale": 1.5}),
    ("reverse", {"linear_before_reset": 1, "bias": False, "activations": ["Sigmoid", "Relu"]}),
    ("bidirectional", {"linear_before_reset": 1, "initial_h": "const", "layout": 1, "opset": 14}),
])
def test_gru(direction, kwargs):
    graph = _layer("GRU", direction, **kwargs)
    dirs = 2 if direction == "bidirectional" else 1
    # linear_before_reset=0: the candidate's product is one more per step
    per_step = 1 if kwargs.get("linear_before_reset") else 2
    assert _products(graph) == 1 + dirs * per_step * (SEQ - (kwargs.get("initial_h") != "input"))


@pytest.mark.parametrize("direction, kwargs", [
    ("forward", {"initial_h": "input", "full_lens": True, "activations": ["Softsign"], "clip": 0.8}),
    ("bidirectional", {"activations": ["LeakyRelu", "Softplus"], "activation_alpha": [0.2], "bias": False,
                       "layout": 1, "opset": 14}),
])
def test_rnn(direction, kwargs):
    _layer("RNN", direction, **kwargs)


# ---------------------------------------------------------------------------- errors


def _malformed(op: str, **shapes_and_attrs):
    """A model the checker would refuse: ``W``/``R``/``B`` shapes overridden, attributes given."""
    G, H = _GATES[op], HIDDEN
    shapes = {"W": (1, G * H, INPUT), "R": (1, G * H, H), "B": (1, 2 * G * H)}
    attrs = {"hidden_size": H}
    for k, v in shapes_and_attrs.items():
        (shapes if k in shapes else attrs)[k] = v
    consts = {name: rand(*shape) for name, shape in shapes.items()}
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], **attrs)
    return make_model([node], {"x": rand(SEQ, BATCH, INPUT)}, consts, check=False)


@pytest.mark.parametrize("op, change, message", [
    ("LSTM", {"hidden_size": 7}, "hidden_size=7"),
    ("GRU", {"W": (1, 4 * HIDDEN, INPUT)}, "W has shape"),
    ("RNN", {"B": (1, 3)}, "B has shape"),
    ("LSTM", {"direction": "sideways"}, "direction 'sideways'"),
    ("GRU", {"activations": ["Sigmoid"]}, "activations"),
])
def test_malformed(op, change, message):
    with pytest.raises(GraphError, match=message):
        from_onnx(_malformed(op, **change))


@pytest.mark.parametrize("change, message", [
    ({"activations": ["Gelu"]}, "activation 'Gelu'"),
    ({"activations": ["Affine"]}, "without its activation_alpha"),
])
def test_unsupported_activation(change, message):
    with pytest.raises(UnsupportedOperatorError, match=message):
        from_onnx(_malformed("RNN", **change))


@pytest.mark.parametrize("op, direction, lens, kwargs", [
    ("LSTM", "forward", [SEQ, 2], {"initial_h": "const", "initial_c": "input"}),
    ("GRU", "bidirectional", [1, SEQ], {"initial_h": "input", "linear_before_reset": 1}),
    ("RNN", "reverse", [3, 0], {"initial_h": "const"}),  # an empty sequence ends with a zero state
    ("LSTM", "reverse", [0, 0], {"initial_h": "input"}),  # no step runs at all
])
def test_batch_elements_of_their_own_lengths(op, direction, lens, kwargs):
    """Past its length an element keeps its state and outputs zeros; a reverse direction starts
    at its last step."""
    graph = _layer(op, direction, lens=lens, **kwargs)
    # each step where some element has ended keeps the others' states by a where
    assert graph.op_counts().get("where", 0) > 0


def test_unsupported_sequence_lens():
    """A sequence_lens computed at run time is not unrolled; one past the sequence is malformed."""
    node = helper.make_node("RNN", ["x", "W", "R", "", "lens"], ["y"], hidden_size=HIDDEN)
    consts = {"W": rand(1, HIDDEN, INPUT), "R": rand(1, HIDDEN, HIDDEN)}
    feeds = {"x": rand(SEQ, BATCH, INPUT)}
    computed = make_model([node], {**feeds, "lens": np.array([SEQ, SEQ], "int32")}, consts)
    with pytest.raises(UnsupportedOperatorError, match="sequence_lens"):
        from_onnx(computed)
    long = make_model([node], feeds, {**consts, "lens": np.array([SEQ, SEQ + 1], "int32")}, check=False)
    with pytest.raises(GraphError, match=r"sequence_lens \[4, 5\] must lie between 0 and"):
        from_onnx(long)


# ---------------------------------------------------------------------------- torch


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's note on batch sizes other than 1
def test_torch_export():
    """Two-layer bidirectional LSTM and GRU, one after the other, as torch.onnx exports them: zero
    initial states, each layer's directions joined by a Transpose and a Reshape."""
    torch = pytest.importorskip("torch")

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(INPUT, 4, num_layers=2, bidirectional=True)
            self.gru = torch.nn.GRU(8, 4, num_layers=2, bidirectional=True)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            z, g = self.gru(y)
            return z, h, c, g

    torch.manual_seed(0)
    x = rand(SEQ, BATCH, INPUT)
    buffer = io.BytesIO()
    torch.onnx.export(Stack().eval(), (torch.from_numpy(x),), buffer, dynamo=False, input_names=["x"],
                      opset_version=17)
    model = onnx.load_from_string(buffer.getvalue())
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("LSTM") == ops.count("GRU") == 2
    run_both(model, {"x": x})
