"""The operator catalog: importing this package registers every operator.

* :mod:`.math`: elementwise and broadcasting operators (``add``, ``exp``, ``nn.relu``, ``cast``,
  ``where``, comparisons);
* :mod:`.nn`: ``nn.conv2d``, ``nn.conv2d_transpose``, ``nn.dense``, ``nn.batch_matmul``,
  ``nn.bias_add``, ``nn.batch_norm``;
* :mod:`.reduce`: ``sum``, ``mean``, ``max``, ``min``, ``argmax``, ``argmin``, ``nn.softmax``,
  ``nn.layer_norm`` and the pools;
* :mod:`.tensor`: ``reshape``, ``transpose``, ``concatenate``, ``take``, ``gather``,
  ``strided_slice``, ``expand``, ``nn.pad``;
* :mod:`.layout`: channel-blocked data (``NCHW{b}c``): ``layout_transform``, ``nn.conv2d_nchwc``,
  ``nn.pool2d_nchwc``;
* :mod:`.image`: ``image.resize2d``, ``image.grid_sample``;
* :mod:`.expansion`: ``nn.conv2d_depthwise_nchwc``, a pointwise and a depthwise convolution as one;
* :mod:`.indexing`: ``cumsum``, ``trilu``, ``one_hot``, ``gather_nd``, ``scatter_nd``, ``scatter_elements``;
* :mod:`.qnn`: ``qnn.quantize``, ``qnn.dequantize``, ``qnn.requantize``;
* :mod:`.vision`: ``topk``, ``vision.roi_align``.
"""

from . import expansion, image, indexing, layout, math, nn, qnn, reduce, tensor, vision

__all__ = ["expansion", "image", "indexing", "layout", "math", "nn", "qnn", "reduce", "tensor", "vision"]
