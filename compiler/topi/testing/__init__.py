"""Numpy references of the ``topi.nn`` operators, under TVM's ``topi.testing`` names.

They compute in float64 (int64 for integers) and return the input's dtype, so that
they can check kernels on random data.
"""

from .conv2d import (
           conv2d_nchw_python,
           conv2d_nhwc_python,
           conv2d_transpose_nchw_python,
           depthwise_conv2d_python_nchw,
           dilate_python,
)
from .misc import batch_matmul, softmax_python
from .pool import pool2d_python, poolnd_python
from .resize import resize2d_python

__all__ = ["conv2d_nchw_python", "conv2d_transpose_nchw_python", "conv2d_nhwc_python",
           "depthwise_conv2d_python_nchw", "dilate_python", "poolnd_python", "pool2d_python",
           "softmax_python", "batch_matmul", "resize2d_python"]
