"""Image operators as tensor expressions, under TVM's ``topi.image`` names: ``resize2d`` and
``grid_sample``."""

from .grid_sample import CUBIC_ALPHA, GRID_SAMPLE_METHODS, PADDING_MODES, grid_sample
from .resize import COORDINATE_MODES, METHODS, ROUNDING_METHODS, ROWS_TAG, TABLE_TAG, resize2d

__all__ = ["resize2d", "METHODS", "COORDINATE_MODES", "ROUNDING_METHODS", "ROWS_TAG", "TABLE_TAG",
           "grid_sample", "GRID_SAMPLE_METHODS", "PADDING_MODES", "CUBIC_ALPHA"]
