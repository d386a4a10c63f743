"""Epilogues: the elementwise tail that a model fuses into a convolution or dense layer.

An epilogue is a tuple of operations applied, in order, to each output element as the
template writes it (where the accumulator tile is stored, or where the output is
unpacked into its layout): never as a separate pass over memory.

* ``"bias"``: ``+ b[channel]``, with a new input ``b`` of shape ``(channels,)``;
* ``"add"``: ``+ r[index]``, with a new input ``r`` of the output's shape (a residual);
* ``"relu"``, ``"relu6"``, ``"sigmoid"``, ``"gelu"`` (erf's), ``"gelu_tanh"`` (GPT-2's),
  ``"silu"``, ``"hardswish"``: the activations of ``compiler.topi.nn.ACTIVATIONS`` (their
  formulas are there);
* ``"leaky_relu(alpha)"``, e.g. ``"leaky_relu(0.1)"``: ``v`` where positive, ``alpha * v`` below
  (``compiler.topi.nn.leaky_relu_name`` writes the name of a slope).

Each ``"bias"`` and ``"add"`` adds one placeholder; a template's tensors are its own
inputs, then these in epilogue order, then its output. :class:`Epilogue` declares the
placeholders and applies the operations to a TE expression; :func:`reference_epilogue` is
the numpy version for the templates' references. Epilogues take float dtypes only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.topi.nn import activation
from search_spaces.templates._common import random_data

__all__ = ["EPILOGUE_OPS", "Epilogue", "check_epilogue", "is_epilogue_op", "reference_epilogue",
           "is_residual_argument"]

#: The entries by name; LeakyReLU's name holds its slope (see :func:`is_epilogue_op`).
EPILOGUE_OPS = ("bias", "add", "relu", "relu6", "sigmoid", "gelu", "gelu_tanh", "silu", "hardswish")
_INPUTS = {"bias": "bias", "add": "residual"}  # operations that read an input: its name


def is_residual_argument(name: str) -> bool:
    """Whether a template's argument named ``name`` is a residual of its epilogue (an ``"add"``
    input: ``residual``, ``residual2``, ..., after a prefix of :meth:`Epilogue.declare`): inside a
    model, what a kernel before wrote, where its other inputs besides the first are weights."""
    return re.fullmatch(r"(?:\w+_)?residual\d*", name) is not None


def is_epilogue_op(op) -> bool:
    """Whether ``op`` is an epilogue entry: one of :data:`EPILOGUE_OPS`, or LeakyReLU with its
    slope (``"leaky_relu(0.1)"``)."""
    if op in EPILOGUE_OPS:
        return True
    if not isinstance(op, str) or not op.startswith("leaky_relu("):
        return False
    try:
        activation(op)
    except ValueError:
        return False
    return True


def check_epilogue(epilogue, dtype: str) -> tuple[str, ...]:
    """``epilogue`` as a tuple of operation names; ValueError naming what is wrong: not a list
    or tuple of strings, an unknown entry, or a non-float ``dtype`` with any operation."""
    if isinstance(epilogue, str) or not isinstance(epilogue, Sequence):
        raise ValueError(f"epilogue is a tuple of operation names (of {', '.join(EPILOGUE_OPS)}), "
                         f"got {epilogue!r}")
    for k, op in enumerate(epilogue):
        if not is_epilogue_op(op):
            raise ValueError(f"epilogue entry {k} ({op!r}) is not one of {', '.join(EPILOGUE_OPS)} "
                             "or leaky_relu(alpha)")
    ops = tuple(epilogue)
    if ops and np.dtype(dtype).kind != "f":
        raise ValueError(f"epilogue {ops!r} needs a floating-point dtype, got {dtype!r}")
    return ops


@dataclass(frozen=True)
class Epilogue:
    """The operations of an epilogue and the placeholders they read (one per ``"bias"`` and
    ``"add"``, in order)."""

    ops: tuple[str, ...]
    inputs: tuple[te.Tensor, ...]

    @classmethod
    def declare(cls, epilogue, dtype: str, out_shape: Sequence[int], channels: int,
                prefix: str = "") -> Epilogue:
        """Check ``epilogue`` (:func:`check_epilogue`) and declare its inputs: a bias of
        ``(channels,)``, a residual of ``out_shape``, named with ``prefix`` first."""
        ops = check_epilogue(epilogue, dtype)
        inputs, seen = [], {}
        for op in ops:
            if op in _INPUTS:
                n = seen[op] = seen.get(op, 0) + 1
                name = prefix + (_INPUTS[op] if n == 1 else f"{_INPUTS[op]}{n}")
                shape = (channels,) if op == "bias" else tuple(out_shape)
                inputs.append(te.placeholder(shape, name=name, dtype=dtype))
        return cls(ops, tuple(inputs))

    def __bool__(self) -> bool:
        return bool(self.ops)

    def apply(self, value, channel, index: Sequence) -> te.PrimExpr:
        """``value`` (an output element) through the operations; ``channel`` indexes the bias,
        ``index`` (the output element's indices) the residual."""
        inputs = iter(self.inputs)
        for op in self.ops:
            if op == "bias":
                value = value + next(inputs)[channel]
            elif op == "add":
                value = value + next(inputs)[tuple(index)]
            else:
                value = activation(op).expr(value)
        return value

    def output(self, T: te.Tensor, channel: Callable, name: str | None = None) -> te.Tensor:
        """The stage that writes ``T`` through the epilogue (``T`` itself without one);
        ``channel(*index)`` is an element's channel."""
        if not self:
            return T
        return te.compute(T.shape, lambda *i: self.apply(T[i], channel(*i), i),
                          name=name or f"{T.op.name}_out")


def reference_epilogue(epilogue, out: np.ndarray, channel_axis: int, dtype: str, rng=None):
    """``(inputs, result)``: random inputs for the ``"bias"`` and ``"add"`` entries of
    ``epilogue`` (:func:`random_data` drawn from ``rng``, in order) and ``out`` through the
    operations, computed in float64 and returned as ``dtype``. ``channel_axis`` is the axis of
    ``out`` that the bias runs along."""
    ops = check_epilogue(epilogue, dtype)
    if not ops:
        return [], out
    rng = np.random.default_rng(1) if rng is None else rng
    v = np.asarray(out, dtype="float64")
    channel_axis %= v.ndim
    inputs = []
    for op in ops:
        if op == "bias":
            b = random_data(rng, (v.shape[channel_axis],), dtype)
            inputs.append(b)
            v = v + b.astype("float64").reshape([-1 if a == channel_axis else 1 for a in range(v.ndim)])
        elif op == "add":
            r = random_data(rng, v.shape, dtype)
            inputs.append(r)
            v = v + r
        else:
            v = activation(op).numpy(v)
    return inputs, v.astype(dtype)
