"""Importers of model files into :class:`compiler.graph.Graph`.

The ONNX importer needs the optional ``onnx`` package; importing this package does not, only
calling :func:`from_onnx` (or importing :mod:`compiler.frontend.onnx`) does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["from_onnx"]


def from_onnx(model_or_path: Any | str | os.PathLike | bytes,
              shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
              name: str | None = None) -> Graph:
    """The graph of an ONNX model (an ``onnx.ModelProto``, a file path or the file's bytes).

    ``shape`` binds the model's symbolic dimensions: ``{input name: shape}``, or a bare shape
    for a model with one input. See :func:`compiler.frontend.onnx.from_onnx`."""
    try:
        import onnx  # noqa: F401
    except ImportError as err:
        raise ImportError("compiler.frontend.from_onnx needs the onnx package (pip install onnx)") from err
    from .onnx import from_onnx as _from_onnx

    return _from_onnx(model_or_path, shape=shape, name=name)
