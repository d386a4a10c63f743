"""The operator library, under TVM's ``topi`` names.

* ``topi.nn``: operators as tensor expressions (``pad``, ``conv2d_nchw``,
  ``conv2d_nhwc``, ``depthwise_conv2d_nchw``, ``dense``, ``matmul``, ``batch_matmul``,
  ``pool2d``, ``softmax``, ``relu``), with TVM's argument order and meaning;
* ``topi.image``: ``resize2d`` (nearest neighbour and bilinear, ONNX Resize's coordinate modes) and
  ``grid_sample`` (an image sampled at the points of a grid);
* ``topi.vision``: ``roi_align`` (regions of interest pooled into bins of bilinear samples);
* ``topi.testing``: their numpy references (``conv2d_nchw_python``,
  ``conv2d_nhwc_python``, ``depthwise_conv2d_python_nchw``, ``poolnd_python``,
  ``softmax_python``, ``batch_matmul``, ``dilate_python``);
* ``topi.utils``: helpers on shapes (``get_const_tuple``, ``get_const_int``);
* ``topi.add``, ``topi.subtract``, ``topi.multiply``, ``topi.divide``: numpy-style broadcasting
  (what ``A + B`` builds on tensors), and ``topi.tag``: the operator tags;
* ``topi.cumsum`` (:mod:`.scan`), ``topi.take``, ``topi.gather``, ``topi.trilu``, ``topi.one_hot``,
  ``topi.gather_nd``, ``topi.scatter_elements`` and ``topi.scatter_nd`` (:mod:`.transform`):
  running sums and operators that pick or place elements by index;
* ``topi.topk`` (:mod:`.sort`): the ``k`` largest or smallest elements along an axis and their
  indices;
* ``topi.qnn``: ``quantize``, ``dequantize`` and ``requantize`` (TVM's qnn operators, with ONNX's
  float32 arithmetic).

The templates in ``search_spaces`` build their computations from these, so a kernel a
user writes against ``topi.nn`` and a tuned template compute the same thing.
See ``docs/topi.md``.
"""

from . import image, nn, qnn, tag, testing, utils, vision
from .broadcast import add, divide, multiply, subtract
from .scan import cumsum
from .sort import topk
from .transform import gather, gather_nd, one_hot, scatter_elements, scatter_nd, take, trilu

__all__ = ["image", "nn", "qnn", "tag", "testing", "utils", "vision", "add", "subtract", "multiply", "divide",
           "cumsum", "take", "gather", "trilu", "one_hot", "gather_nd", "scatter_elements", "scatter_nd",
           "topk"]
