"""The operator library, under TVM's ``topi`` names.

``topi.utils`` holds the helpers TE code uses on shapes (``get_const_tuple``,
``get_const_int``).
"""

from . import utils

__all__ = ["utils"]
