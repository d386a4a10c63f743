"""Image operators as tensor expressions, under TVM's ``topi.image`` names."""

from .resize import COORDINATE_MODES, METHODS, ROUNDING_METHODS, resize2d

__all__ = ["resize2d", "METHODS", "COORDINATE_MODES", "ROUNDING_METHODS"]
