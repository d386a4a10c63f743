"""``elementwise(M, N, ops, dtype)``: a fused chain of elementwise operations, for CPUs.

``ops`` is a comma-separated chain applied left to right to ``X`` (M, N), e.g.
``"add,mul,relu,gelu"``. Binary ops (``add sub mul div max min``) take one extra
operand each, broadcast against the running value: the k-th binary operand has shape
``(N,)``, ``(M, 1)`` or ``(M, N)`` for ``k % 3 == 0, 1, 2``. Unary ops: ``relu``,
``gelu`` (tanh approximation), ``sigmoid``, ``tanh``, ``exp``, ``neg``, ``abs``.

Inputs are X then the binary operands in order; the output comes last. The chain is
fused into one loop nest (inlined), or, as a knob, each intermediate is computed per
row block; the columns are split into vector-width pieces and the row blocks run in
parallel.
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.simd import vector_lanes
from search_spaces.template import get_config, template
from search_spaces.templates._common import parallel_and_vectorize, random_data

__all__ = ["elementwise", "elementwise_reference", "chain_compute", "parse_chain", "BINARY_OPS", "UNARY_OPS"]

BINARY_OPS = ("add", "sub", "mul", "div", "max", "min")
UNARY_OPS = ("relu", "gelu", "sigmoid", "tanh", "exp", "neg", "abs")
_FLOAT_ONLY = ("div", "gelu", "sigmoid", "tanh", "exp")
# the chain's activations, as topi's table names them (this template's gelu is the tanh one)
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu_tanh", "sigmoid": "sigmoid"}


def parse_chain(ops: str, dtype: str) -> list[str]:
    """The ops of the comma-separated chain ``ops``, checked against ``dtype``."""
    chain = [o.strip() for o in ops.split(",") if o.strip()] if isinstance(ops, str) else []
    if not chain:
        raise ValueError(f"ops is a comma-separated chain such as 'add,mul,relu', got {ops!r}")
    for o in chain:
        if o not in BINARY_OPS + UNARY_OPS:
            raise ValueError(f"unknown elementwise op {o!r}; known: {', '.join(BINARY_OPS + UNARY_OPS)}")
        if o in _FLOAT_ONLY and np.dtype(dtype).kind != "f":
            raise ValueError(f"op {o!r} needs a floating-point dtype, got {dtype!r}")
    return chain


def _operand_shape(k: int, M: int, N: int) -> tuple[int, ...]:
    return ((N,), (M, 1), (M, N))[k % 3]


def elementwise_reference(M: int, N: int, ops: str, dtype: str = "float32", rng=None):
    """Random inputs and the chain evaluated in float64."""
    chain = parse_chain(ops, dtype)
    x = random_data(rng, (M, N), dtype)
    inputs = [x]
    v = x.astype("float64")
    k = 0
    for o in chain:
        if o in BINARY_OPS:
            b = random_data(rng, _operand_shape(k, M, N), dtype)
            inputs.append(b)
            k += 1
            b = b.astype("float64")
            v = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "max": np.maximum, "min": np.minimum}[o](v, b)
            if np.dtype(dtype).kind != "f" and o == "div":
                v = np.trunc(v)
        elif o in _ACTIVATIONS:
            v = topi.nn.ACTIVATIONS[_ACTIVATIONS[o]].numpy(v)
        elif o == "tanh":
            v = np.tanh(v)
        elif o == "exp":
            v = np.exp(v)
        elif o == "neg":
            v = -v
        elif o == "abs":
            v = np.abs(v)
        v = v.astype(dtype).astype("float64")  # every stage rounds to dtype, as the kernel does
    return inputs, [v.astype(dtype)]


def _apply(o: str, v, b, dtype: str):
    zero = te.const(0, dtype)
    if o == "add":
        return v + b
    if o == "sub":
        return v - b
    if o == "mul":
        return v * b
    if o == "div":
        return v / b
    if o == "max":
        return te.max(v, b)
    if o == "min":
        return te.min(v, b)
    if o in _ACTIVATIONS:
        return topi.nn.ACTIVATIONS[_ACTIVATIONS[o]].expr(v)
    if o == "tanh":
        return te.tanh(v)
    if o == "exp":
        return te.exp(v)
    if o == "neg":
        return zero - v
    return te.abs(v)


def _stage_body(o: str, cur, operand, dtype: str):
    """``(i, j) -> o(cur[i, j], operand broadcast to (i, j))``."""

    def body(i, j):
        b = None
        if operand is not None:
            if operand.ndim == 1:
                b = operand[j]
            elif operand.shape[1].value == 1:
                b = operand[i, 0]
            else:
                b = operand[i, j]
        return _apply(o, cur[i, j], b, dtype)

    return body


def chain_compute(M: int, N: int, chain: list[str], dtype: str):
    """``(inputs, stages)``: the placeholders (``X``, then the binary operands) and one
    ``(M, N)`` stage per op of ``chain``, the last being the output. ``relu`` is
    ``topi.nn.relu``; the others have no topi operator with this broadcasting."""
    X = te.placeholder((M, N), name="X", dtype=dtype)
    inputs, stages = [X], []
    cur = X
    for pos, o in enumerate(chain):
        if o == "relu":
            cur = topi.nn.relu(cur)
        else:
            operand = None
            if o in BINARY_OPS:
                operand = te.placeholder(_operand_shape(len(inputs) - 1, M, N), name=f"B{len(inputs) - 1}",
                                         dtype=dtype)
                inputs.append(operand)
            cur = te.compute((M, N), _stage_body(o, cur, operand, dtype), name=f"{o}{pos}")
        stages.append(cur)
    return inputs, stages


@template("elementwise", target="cpu", reference=elementwise_reference)
def elementwise(M: int, N: int, ops: str, dtype: str = "float32"):
    """The chain as one stage per op, fused by inlining (or computed per row block)."""
    chain = parse_chain(ops, dtype)
    cfg = get_config()
    lanes = vector_lanes(dtype)
    cfg.define_split("tile_m", M, num_outputs=2, filter=lambda e: e.size[-1] <= 64, default=[-1, 4])
    cfg.define_split("tile_n", N, policy="verbose", num_outputs=2, filter=lambda e: e.size[-1] <= 8 * lanes,
                     default=[-1, 2 * lanes])
    if len(chain) > 1:
        cfg.define_knob("fuse", ["inline", "row_block"])
    cfg.define_knob("vec", [True, False])
    cfg.define_knob("parallel", [True, False])

    inputs, stages = chain_compute(M, N, chain, dtype)
    out = stages[-1]

    s = te.create_schedule(out.op)
    i, j = s[out].op.axis
    io, ii = cfg["tile_m"].apply(s, out, i)
    jo, ji = cfg["tile_n"].apply(s, out, j)
    s[out].reorder(io, jo, ii, ji)
    parallel_and_vectorize(s, cfg, out, io, ji)
    for st in stages[:-1]:
        if cfg["fuse"].val == "inline":
            s[st].compute_inline()
        else:
            s[st].compute_at(s[out], jo)
            _, je = s[st].op.axis
            if cfg["vec"].val:
                s[st].vectorize(je)
    return s, inputs + [out]
