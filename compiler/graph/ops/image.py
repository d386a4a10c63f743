"""``image.resize2d``: an NCHW image resized by nearest neighbour or bilinear interpolation
(:func:`compiler.topi.image.resize2d`; its reference ``topi.testing.resize2d_python``)."""

from __future__ import annotations

from ... import dtypes, topi
from ..ir import TensorType
from ..op import OpDef, register_op
from ._common import arity, fail, int_tuple, numeric
from .layout import from_blocks, layout_name, parse_layout, to_blocks

__all__: list[str] = []

_OP = "image.resize2d"


def _attrs(x: TensorType, attrs) -> dict:
    """The attributes checked, as :func:`topi.image.resize2d`'s keyword arguments."""
    block = parse_layout(_OP, attrs.get("layout", "NCHW"))
    if len(x.shape) != (4 if block is None else 5) or (block is not None and x.shape[4] != block):
        raise fail(_OP, f"takes a 4-D NCHW tensor or a 5-D one in blocks of its layout, got shape {x.shape} "
                        f"for layout {layout_name(block)}")
    size = int_tuple(_OP, "size", attrs.get("size"), 2, 1)
    method = attrs.get("method", "linear")
    mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    rounding = attrs.get("rounding_method", "")
    image = topi.image
    if method not in image.METHODS:
        raise fail(_OP, f"attribute method must be one of {', '.join(image.METHODS)}, got {method!r}")
    if mode not in image.COORDINATE_MODES:
        raise fail(_OP, f"attribute coordinate_transformation_mode must be one of "
                        f"{', '.join(image.COORDINATE_MODES)}, got {mode!r}")
    if rounding not in ("", *image.ROUNDING_METHODS):
        raise fail(_OP, f"attribute rounding_method must be one of {', '.join(image.ROUNDING_METHODS)}, "
                        f"got {rounding!r}")
    if method == "linear" and not dtypes.is_float(x.dtype):
        raise fail(_OP, f"linear interpolation takes a float tensor, got {x.dtype}")
    scale = attrs.get("scale")
    positive = all(isinstance(s, (int, float)) and s > 0 for s in scale or ())
    if scale is not None and (len(scale) != 2 or not positive):
        raise fail(_OP, f"attribute scale must be (height, width) of positive numbers, got {scale!r}")
    return {"size": size, "layout": layout_name(block), "method": method,
            "coordinate_transformation_mode": mode, "rounding_method": rounding,
            "scale": None if scale is None else tuple(float(s) for s in scale)}


def _infer(types, attrs):
    arity(_OP, types, 1)
    (x,) = types
    numeric(_OP, x)
    size = _attrs(x, attrs)["size"]
    return [TensorType((*x.shape[:2], *size, *x.shape[4:]), x.dtype)]


def _evaluate(arrays, attrs):
    (x,) = arrays
    kwargs = _attrs(TensorType(x.shape, str(x.dtype)), attrs)
    block = parse_layout(_OP, kwargs.pop("layout"))
    plain = x if block is None else from_blocks(x)
    out = topi.testing.resize2d_python(plain, kwargs.pop("size"), **kwargs)
    return [out if block is None else to_blocks(out, block)]


def _compute(tensors, attrs):
    (x,) = tensors
    kwargs = _attrs(TensorType(topi.utils.get_const_tuple(x.shape), x.dtype), attrs)
    return [topi.image.resize2d(x, None, kwargs.pop("size"), **kwargs)]


register_op(OpDef(_OP, "injective", _infer, _evaluate, _compute,
                  "x (NCHW, or NCHW<b>c by attribute layout) resized to attribute size (height, width): "
                  "method 'nearest_neighbor' or 'linear', ONNX Resize's coordinate_transformation_mode and "
                  "rounding_method; scale (height, width), what the coordinates divide by, defaults to "
                  "output over input size."))
