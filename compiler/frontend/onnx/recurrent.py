"""ONNX's recurrent layers (LSTM, GRU, RNN) unrolled into the catalog's operators.

Shapes are static, so the sequence length is known at import and each layer becomes its steps
written out one after the other. Per direction ``d`` of ``forward``, ``reverse`` or both
(``bidirectional``, the reverse direction walking the sequence from its end):

* the input's part of every gate, for every step and direction, is one matrix product before the
  steps: ``X (seq * batch, input) @ W.T`` with the biases that do not depend on the state added
  (``nn.dense`` and ``nn.bias_add``, a tuned dense kernel with its bias as output stage);
* each step multiplies the previous hidden state by ``R[d].T`` (one ``nn.dense`` for all the
  gates; GRU's default needs two, as its candidate reads the reset state) and computes the gates
  elementwise. A step reads its part of the projection with ``take`` of a constant step and
  direction index, so the steps' kernels differ only in those constants: each compiles once;
* the first step without an ``initial_h`` has no state product at all (the state is zero).

``W`` and ``R`` are constants: they are rearranged at import, never transposed at run time.
The gates stand in ``W``, ``R`` and ``B`` in ONNX's orders, ``H`` rows each:

* LSTM: ``i, o, f, c`` (input, output, forget, cell); peepholes ``P``: ``i, o, f``;
  ``c' = f * c + i * g(x_c + h_c)``, ``h' = o * h(c')``, ``f = 1 - i`` with ``input_forget``;
* GRU: ``z, r, h`` (update, reset, candidate); ``h' = (1 - z) * g(...) + z * h`` where the
  candidate reads ``(r * h) @ Rh.T + Rbh``, or ``r * (h @ Rh.T + Rbh)`` with
  ``linear_before_reset``;
* RNN: one gate, ``h' = f(x @ W.T + h @ R.T + Wb + Rb)``.

``clip`` bounds the input of the gates' activations (after biases and peepholes), not of the
LSTM's output activation ``h``, as ONNX Runtime applies it. ``layout=1`` (opset 14) puts the
batch first in ``X``, the states and the outputs. ``sequence_lens`` (a constant) gives each
batch element its own length: past it, a step leaves the element's state as it was and its
output zero (a reverse direction starts at the element's last step), and an element of length 0
ends with zero states, as ONNX Runtime runs them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ...graph import Value
from .elementwise import activation_of
from .importer import NodeContext, converts, optional_input, scalar_like

__all__: list[str] = []

#: Each layer's gates (rows of ``W`` per direction, in units of ``hidden_size``) and default
#: activations, per direction.
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}

#: The activations ONNX names for recurrent layers: whether each takes alpha and beta, and their
#: defaults. Names compare without case, as ONNX Runtime reads them (torch writes ``tanh`` and
#: ``relu``). None marks a default that ONNX Runtime and the ONNX operator of that name disagree on
#: (ONNX Runtime uses 0): such a parameter must be given.
_ACTIVATIONS: dict[str, tuple[bool, bool, float | None, float | None]] = {
    "sigmoid": (False, False, 0.0, 0.0), "tanh": (False, False, 0.0, 0.0), "relu": (False, False, 0.0, 0.0),
    "affine": (True, True, None, None), "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, None, 0.0), "scaledtanh": (True, True, None, None),
    "hardsigmoid": (True, True, 0.2, 0.5), "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0), "softplus": (False, False, 0.0, 0.0),
}


#: The activations that are ONNX operators too, by their operator's name.
_ONNX_NAMES = {"leakyrelu": "LeakyRelu", "thresholdedrelu": "ThresholdedRelu", "hardsigmoid": "HardSigmoid",
               "elu": "Elu", "softsign": "Softsign", "softplus": "Softplus"}


@dataclass(frozen=True)
class _Activation:
    """One of the layer's activation functions, with its parameters."""

    name: str  # lower case, a key of _ACTIVATIONS
    alpha: float
    beta: float

    def __call__(self, ctx: NodeContext, x: Value) -> Value:
        name, alpha, beta = self.name, self.alpha, self.beta
        if name == "sigmoid":
            return ctx.emit("sigmoid", [x])
        if name == "tanh":
            return ctx.emit("tanh", [x])
        if name == "relu":
            return ctx.emit("nn.relu", [x])
        if name == "affine":
            return _line(ctx, x, alpha, beta)
        if name == "scaledtanh":
            inner = ctx.emit("tanh", [ctx.emit("multiply", [x, scalar_like(ctx, x, beta)])])
            return ctx.emit("multiply", [inner, scalar_like(ctx, x, alpha)])
        # the rest are ONNX operators of their own, with these parameters
        return activation_of(ctx, _ONNX_NAMES[name], x, {"alpha": alpha, "beta": beta})


def _line(ctx: NodeContext, x: Value, alpha: float, beta: float) -> Value:
    """``alpha * x + beta``."""
    return ctx.emit("add", [ctx.emit("multiply", [x, scalar_like(ctx, x, alpha)]), scalar_like(ctx, x, beta)])


def _activations(ctx: NodeContext, attrs, directions: int) -> list[tuple[_Activation, ...]]:
    """Each direction's activation functions. The alphas and betas go, in order, to the functions
    that take them (as ONNX Runtime reads them); the defaults where the lists run out."""
    default = _DEFAULT_ACTIVATIONS[ctx.op_type]
    per = len(default)
    names = list(attrs.get("activations") or default * directions)
    if len(names) != per * directions:
        raise ctx.error(f"activations {names} must name {per} functions per direction ({directions})")
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    funcs = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise ctx.unsupported(f"activation {name!r}")
        takes_alpha, takes_beta, alpha, beta = _ACTIVATIONS[key]
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        if alpha is None or beta is None:
            raise ctx.unsupported(f"activation {name!r} without its activation_alpha and activation_beta "
                                  f"values (ONNX Runtime's defaults differ from the ONNX operator's)")
        funcs.append(_Activation(key, float(alpha), float(beta)))
    return [tuple(funcs[d * per:(d + 1) * per]) for d in range(directions)]


# ---------------------------------------------------------------------------- the layer


@dataclass
class _Layer:
    """What every step of one recurrent node reads: its sizes and the input's projection."""

    ctx: NodeContext
    seq: int
    batch: int
    hidden: int
    gates: int
    batch_first: bool
    projection: Value  # (seq, batch, dirs, gates * hidden), or batch first
    clip: float | None

    def x_gate(self, direction: int, gate: int, step: int) -> Value:
        """The input's part of ``gate`` at time ``step``, biases included: ``(batch, hidden)``."""
        ctx, p, H = self.ctx, self.projection, self.hidden
        sliced = ctx.emit("strided_slice", [p], begin=(0, 0, 0, gate * H),
                          end=p.shape[:3] + ((gate + 1) * H,), strides=(1, 1, 1, 1))
        # the step and the direction as data, not as attributes: every step's kernel is then the
        # same function, for both directions
        at_step = ctx.emit("take", [sliced, ctx.const(np.array(step, "int64"))], axis=int(self.batch_first))
        return ctx.emit("take", [at_step, ctx.const(np.array(direction, "int64"))], axis=1)

    def gate(self, product: Value, gate: int) -> Value:
        """Gate ``gate``'s columns of a state product ``(batch, gates * hidden)``."""
        H = self.hidden
        if product.shape[1] == H:
            return product
        return self.ctx.emit("strided_slice", [product], begin=(0, gate * H),
                             end=(self.batch, (gate + 1) * H), strides=(1, 1))

    def pre(self, direction: int, gate: int, step: int, product: Value | None) -> Value:
        """The input of a gate's activation before the peephole: the input's part plus the state's."""
        x = self.x_gate(direction, gate, step)
        # the projection first: its slice then joins the step's elementwise kernel
        return x if product is None else self.ctx.emit("add", [x, self.gate(product, gate)])

    def clipped(self, x: Value) -> Value:
        """``x`` bounded to the layer's ``[-clip, clip]``, if it has one."""
        if self.clip is None:
            return x
        return self.ctx.emit("clip", [x], a_min=-self.clip, a_max=self.clip)


def _weights(ctx: NodeContext, ins, attrs, gates: int, directions: int):
    """``(W, R, B, hidden)`` checked against one another, as arrays; B summed where absent."""
    W = ctx.array(ins[1], "W")
    R = ctx.array(ins[2], "R")
    if W.ndim != 3 or R.ndim != 3:
        raise ctx.error(f"W {W.shape} and R {R.shape} must be 3-D (directions, gates * hidden, ...)")
    hidden = R.shape[2]
    if "hidden_size" in attrs and attrs["hidden_size"] != hidden:
        raise ctx.error(f"hidden_size={attrs['hidden_size']} differs from R's last axis {R.shape}")
    rows = gates * hidden
    x = ins[0]
    if W.shape != (directions, rows, x.shape[2]):
        raise ctx.error(f"W has shape {W.shape}, expected {(directions, rows, x.shape[2])} "
                        f"(directions, {gates} gates * hidden_size {hidden}, input size)")
    if R.shape != (directions, rows, hidden):
        raise ctx.error(f"R has shape {R.shape}, expected {(directions, rows, hidden)}")
    b = optional_input(ins, 3)
    if b is None:
        B = np.zeros((directions, 2 * rows), W.dtype)
    else:
        B = ctx.array(b, "B")
        if B.shape != (directions, 2 * rows):
            raise ctx.error(f"B has shape {B.shape}, expected {(directions, 2 * rows)}")
    return W, R, B, hidden


def _sequence_lens(ctx: NodeContext, v: Value | None, seq: int, batch: int) -> np.ndarray | None:
    """Each batch element's length, or None where every one runs the whole sequence."""
    if v is None:
        return None
    lens = ctx.array(v, "sequence_lens").reshape(-1)
    if lens.shape != (batch,):
        raise ctx.error(f"sequence_lens has shape {v.shape}, expected ({batch},)")
    if (lens < 0).any() or (lens > seq).any():
        raise ctx.error(f"sequence_lens {lens.tolist()} must lie between 0 and the sequence's length ({seq})")
    return None if (lens == seq).all() else lens


def _state(ctx: NodeContext, v: Value | None, what: str, layer: _Layer,
           directions: int) -> list[Value | None]:
    """Initial state ``v`` as one ``(batch, hidden)`` value per direction (None where absent)."""
    if v is None:
        return [None] * directions
    B, H = layer.batch, layer.hidden
    want = (B, directions, H) if layer.batch_first else (directions, B, H)
    if v.shape != want:
        raise ctx.error(f"{what} has shape {v.shape}, expected {want}")
    v = ctx.cast(v, layer.projection.dtype)
    axis = 1 if layer.batch_first else 0
    states = []
    for d in range(directions):
        begin, end = [0, 0, 0], list(want)
        begin[axis], end[axis] = d, d + 1
        part = v if directions == 1 else ctx.emit("strided_slice", [v], begin=tuple(begin), end=tuple(end),
                                                    strides=(1, 1, 1))
        part = ctx.reshape(part, (B, H))
        # a zero state (what torch exports) is no state: its first step has no product to compute
        states.append(None if part.is_constant and not part.data.any() else part)
    return states


@contextmanager
def _step_names(ctx: NodeContext, step: str):
    """The nodes and values of one step named after it (``LSTM_0/forward3``): readable, and the
    importer's search for a free node name stays within a step's few nodes."""
    label = ctx.label
    ctx.label = f"{label}/{step}"
    try:
        yield
    finally:
        ctx.label = label


def _gathered(ctx: NodeContext, parts: list[Value], shape: tuple[int, ...], batch_first: bool) -> Value:
    """``(batch, hidden)`` values stacked into ``shape``: along the axes before the batch, or
    (``batch_first``) after it."""
    axis = int(batch_first)
    joined = parts[0] if len(parts) == 1 else ctx.emit("concatenate", parts, axis=axis)
    return ctx.reshape(joined, shape)


@converts("LSTM", "GRU", "RNN")
def _recurrent(ctx: NodeContext, ins, attrs):
    """The converter of LSTM, GRU and RNN: checks, the projection, the steps, the outputs."""
    kind = ctx.op_type
    x = ins[0]
    if len(x.shape) != 3:
        raise ctx.error(f"X must be 3-D, got shape {x.shape}")
    if np.dtype(x.dtype).kind != "f":
        raise ctx.unsupported(f"input X of dtype {x.dtype} (a float type is needed)")
    direction = attrs.get("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ctx.error(f"direction {direction!r} is not forward, reverse or bidirectional")
    reverse = _DIRECTIONS[direction]
    dirs = len(reverse)
    batch_first = ctx.opset >= 14 and attrs.get("layout", 0) == 1
    if ctx.opset >= 14 and attrs.get("layout", 0) not in (0, 1):
        raise ctx.error(f"layout={attrs['layout']} is not 0 or 1")
    (B, seq) = x.shape[:2] if batch_first else x.shape[1::-1]
    if seq == 0 or B == 0:
        raise ctx.unsupported(f"an empty sequence or batch (X of shape {x.shape})")
    gates = _GATES[kind]
    W, R, bias, H = _weights(ctx, ins, attrs, gates, dirs)
    lens = _sequence_lens(ctx, optional_input(ins, 4), seq, B)
    acts = _activations(ctx, attrs, dirs)
    clip = attrs.get("clip")
    if clip is not None and not clip > 0:
        raise ctx.error(f"clip={clip} must be positive")
    linear_before_reset = kind == "GRU" and bool(attrs.get("linear_before_reset", 0))
    input_forget = kind == "LSTM" and bool(attrs.get("input_forget", 0))

    dtype = x.dtype
    rows = gates * H
    Wb, Rb = bias[:, :rows].astype(dtype), bias[:, rows:].astype(dtype)
    x_bias = Wb + Rb
    if linear_before_reset:  # the candidate's recurrent bias goes inside the reset product
        x_bias[:, 2 * H:] = Wb[:, 2 * H:]
    flat = ctx.reshape(x, (B * seq, x.shape[2]))
    weight = ctx.const(W.reshape(dirs * rows, -1).astype(dtype), f"{ctx.label}:W")  # all directions' gates
    projection = ctx.emit("nn.dense", [flat, weight])
    projection = ctx.emit("nn.bias_add", [projection, ctx.const(x_bias.reshape(-1))], axis=1)
    projection = ctx.reshape(projection, x.shape[:2] + (dirs, rows))
    layer = _Layer(ctx, seq, B, H, gates, batch_first, projection, None if clip is None else float(clip))

    h0 = _state(ctx, optional_input(ins, 5), "initial_h", layer, dirs)
    c0 = _state(ctx, optional_input(ins, 6), "initial_c", layer, dirs) if kind == "LSTM" else [None] * dirs
    peepholes = _peepholes(ctx, optional_input(ins, 7), dirs, H, dtype) if kind == "LSTM" else None

    ys: list[list[Value]] = [[] for _ in range(seq)]  # per step, per direction
    last_h, last_c = [], []
    zeros = ctx.const(np.zeros((B, H), dtype))  # where sequence_lens leave an output or a state zero
    for d in range(dirs):
        Rd = R[d].astype(dtype)
        if kind == "LSTM":
            step = _LstmStep(layer, d, acts[d], Rd, peepholes[d], input_forget)
        elif kind == "GRU":
            step = _GruStep(layer, d, acts[d], Rd, Rb[d, 2 * H:], linear_before_reset)
        else:
            step = _RnnStep(layer, d, acts[d], Rd)
        h, c = h0[d], c0[d]
        for t in range(seq - 1, -1, -1) if reverse[d] else range(seq):
            running = None if lens is None else lens > t  # the batch elements whose sequence has step t
            if running is not None and not running.any():
                ys[t].append(zeros)
                continue
            with _step_names(ctx, f"{'reverse' if reverse[d] else 'forward'}{t}"):
                new_h, new_c = step(t, h, c)
                if running is None or running.all():
                    h, c, y_t = new_h, new_c, new_h
                else:  # the others keep their state, and output zeros
                    keep = ctx.const(running.reshape(B, 1))
                    y_t = ctx.emit("where", [keep, new_h, zeros])
                    h = ctx.emit("where", [keep, new_h, zeros if h is None else h])
                    if new_c is not None:
                        c = ctx.emit("where", [keep, new_c, zeros if c is None else c])
            ys[t].append(y_t)
        # no step ran (every length 0) from a zero state: the state stays zero
        h = zeros if h is None else h
        c = zeros if c is None and kind == "LSTM" else c
        if lens is not None and not lens.all():  # an empty sequence's last state is zero, not its first
            ran = ctx.const((lens > 0).reshape(B, 1))
            h = ctx.emit("where", [ran, h, zeros])
            c = None if c is None else ctx.emit("where", [ran, c, zeros])
        last_h.append(h)
        last_c.append(c)

    if batch_first:
        y_shape, state_shape = (B, seq, dirs, H), (B, dirs, H)
    else:
        y_shape, state_shape = (seq, dirs, B, H), (dirs, B, H)
    y = None
    if ctx.wants(0):  # time-major: each step's directions together
        y = _gathered(ctx, [h for per_step in ys for h in per_step], y_shape, batch_first)
    y_h = _gathered(ctx, last_h, state_shape, batch_first) if ctx.wants(1) else None
    outputs = [y, y_h]
    if kind == "LSTM":
        outputs.append(_gathered(ctx, last_c, state_shape, batch_first) if ctx.wants(2) else None)
    return outputs


def _peepholes(ctx: NodeContext, v: Value | None, dirs: int, H: int, dtype: str) -> list:
    """Per direction, the LSTM's peephole weights ``(p_i, p_o, p_f)`` as constants, or None."""
    if v is None:
        return [None] * dirs
    P = ctx.array(v, "P")
    if P.shape != (dirs, 3 * H):
        raise ctx.error(f"P has shape {P.shape}, expected {(dirs, 3 * H)}")
    return [tuple(ctx.const(P[d, k * H:(k + 1) * H].astype(dtype)) for k in range(3)) for d in range(dirs)]


class _LstmStep:
    """One LSTM step of direction ``d``: ``(h, c)`` from the previous ones (None: zero)."""

    def __init__(self, layer: _Layer, d: int, acts, R: np.ndarray, peepholes, input_forget: bool):
        self.layer, self.d, self.input_forget = layer, d, input_forget
        self.f, self.g, self.h = acts
        self.R = layer.ctx.const(R)
        self.peepholes = peepholes

    def _peep(self, pre: Value, k: int, c: Value | None) -> Value:
        if self.peepholes is None or c is None:
            return pre
        ctx = self.layer.ctx
        return ctx.emit("add", [pre, ctx.emit("multiply", [c, self.peepholes[k]])])

    def __call__(self, t: int, h: Value | None, c: Value | None) -> tuple[Value, Value]:
        layer, ctx = self.layer, self.layer.ctx
        product = None if h is None else ctx.emit("nn.dense", [h, self.R])
        pre = [layer.pre(self.d, k, t, product) for k in range(4)]  # i, o, f, c
        i = self.f(ctx, layer.clipped(self._peep(pre[0], 0, c)))
        candidate = ctx.emit("multiply", [i, self.g(ctx, layer.clipped(pre[3]))])
        if c is None:  # nothing to forget
            c_new = candidate
        else:
            if self.input_forget:
                f = ctx.emit("subtract", [scalar_like(ctx, i, 1), i])
            else:
                f = self.f(ctx, layer.clipped(self._peep(pre[2], 2, c)))
            c_new = ctx.emit("add", [ctx.emit("multiply", [f, c]), candidate])
        o = self.f(ctx, layer.clipped(self._peep(pre[1], 1, c_new)))
        return ctx.emit("multiply", [o, self.h(ctx, c_new)]), c_new


class _GruStep:
    """One GRU step of direction ``d``: ``h`` from the previous one (None: zero)."""

    def __init__(self, layer: _Layer, d: int, acts, R: np.ndarray, Rbh: np.ndarray,
                 linear_before_reset: bool):
        ctx, H = layer.ctx, layer.hidden
        self.layer, self.d, self.linear_before_reset = layer, d, linear_before_reset
        self.f, self.g = acts
        if linear_before_reset:
            self.R = ctx.const(R)
            self.Rbh = ctx.const(Rbh.astype(R.dtype))
        else:  # the candidate's product reads the reset state: a product of its own
            self.R, self.Rh = ctx.const(R[:2 * H]), ctx.const(R[2 * H:])

    def __call__(self, t: int, h: Value | None, c: None) -> tuple[Value, None]:
        layer, ctx = self.layer, self.layer.ctx
        product = None if h is None else ctx.emit("nn.dense", [h, self.R])
        z = self.f(ctx, layer.clipped(layer.pre(self.d, 0, t, product)))
        r = self.f(ctx, layer.clipped(layer.pre(self.d, 1, t, product)))
        x_h = layer.x_gate(self.d, 2, t)
        if self.linear_before_reset:
            inner = self.Rbh if h is None else ctx.emit("add", [layer.gate(product, 2), self.Rbh])
            pre = ctx.emit("add", [x_h, ctx.emit("multiply", [r, inner])])
        elif h is None:
            pre = x_h
        else:
            pre = ctx.emit("add", [x_h, ctx.emit("nn.dense", [ctx.emit("multiply", [r, h]), self.Rh])])
        candidate = self.g(ctx, layer.clipped(pre))
        if h is None:  # (1 - z) * candidate
            return ctx.emit("subtract", [candidate, ctx.emit("multiply", [z, candidate])]), None
        # (1 - z) * candidate + z * h, with one product
        kept = ctx.emit("multiply", [z, ctx.emit("subtract", [h, candidate])])
        return ctx.emit("add", [candidate, kept]), None


class _RnnStep:
    """One step of a plain RNN of direction ``d``: ``h`` from the previous one (None: zero)."""

    def __init__(self, layer: _Layer, d: int, acts, R: np.ndarray):
        self.layer, self.d = layer, d
        (self.f,) = acts
        self.R = layer.ctx.const(R)

    def __call__(self, t: int, h: Value | None, c: None) -> tuple[Value, None]:
        layer, ctx = self.layer, self.layer.ctx
        product = None if h is None else ctx.emit("nn.dense", [h, self.R])
        return self.f(ctx, layer.clipped(layer.pre(self.d, 0, t, product))), None
