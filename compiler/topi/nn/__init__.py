"""Neural-network operators as tensor expressions, under TVM's ``topi.nn`` names.

Each function returns the output ``te.Tensor``; schedule it with ``te.create_schedule``
(or a template). Sizes, strides, padding and dilation follow TVM's meaning.
"""

from .batch_matmul import batch_matmul
from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc
from .conv2d_transpose import conv2d_transpose_nchw, conv2d_transpose_output_size
from .dense import dense, matmul
from .depthwise_conv2d import depthwise_conv2d_nchw
from .elemwise import ACTIVATIONS, Activation, activation, erf_numpy, leaky_relu, leaky_relu_name, relu
from .pad import pad
from .pooling import pool2d
from .softmax import softmax
from .utils import get_pad_tuple
from .winograd import conv2d_winograd_nchwc, conv2d_winograd_weight_transform

__all__ = ["pad", "conv2d", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nchw",
           "conv2d_transpose_output_size", "depthwise_conv2d_nchw", "dense", "matmul", "batch_matmul",
           "pool2d", "softmax", "relu", "leaky_relu", "Activation", "ACTIVATIONS", "activation",
           "leaky_relu_name", "erf_numpy", "get_pad_tuple", "conv2d_winograd_nchwc",
           "conv2d_winograd_weight_transform"]
