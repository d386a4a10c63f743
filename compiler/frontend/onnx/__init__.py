"""The ONNX importer: an ``onnx.ModelProto`` (or its file) as a :class:`compiler.graph.Graph`.

:func:`from_onnx` (:mod:`.importer`) walks the model's nodes and hands each to the converter
registered for its op type in :data:`CONVERTERS`. The converters live by family, each module
registering its own on import: :mod:`.elementwise`, :mod:`.tensor` (constants, shapes, data
movement), :mod:`.image` (``Resize``), :mod:`.nn` (convolutions, pools, matrix products; with
:mod:`.volume`, 3-D convolutions as 2-D ones), :mod:`.attention` (``Attention``,
``RotaryEmbedding``), :mod:`.spectral` (``DFT``, ``STFT``, the windows), :mod:`.reduce` (softmax,
normalisations, reductions), :mod:`.composed` (``Einsum``, the normalisations and pools written
in catalog operators), :mod:`.indexing` (scans, scatters, ``OneHot``), :mod:`.recurrent`
(``LSTM``, ``GRU``, ``RNN``, unrolled), :mod:`.quantize` (``QuantizeLinear``,
``DequantizeLinear``, ``QLinearConv``, ``QLinearMatMul``, ``ConvInteger``, ``MatMulInteger``) and
:mod:`.vision` (``TopK``, ``ReverseSequence``, ``GridSample``, ``RoiAlign``).

A converter is ``fn(ctx, inputs, attrs)`` decorated with ``@converts("OpType", ...)``; it emits
catalog operators through ``ctx.emit`` (:class:`~.importer.NodeContext`).
"""

from __future__ import annotations

from . import (
    attention,
    composed,
    elementwise,
    image,
    indexing,
    nn,
    quantize,
    recurrent,
    reduce,
    spectral,
    tensor,
    vision,
)
from .importer import CONVERTERS, from_onnx, supported_ops

__all__ = ["from_onnx", "CONVERTERS", "supported_ops", "attention", "composed", "elementwise", "image",
           "indexing", "nn", "quantize", "recurrent", "reduce", "spectral", "tensor", "vision"]
