"""The built-in templates, one module per operator family and target; importing this
package registers them."""

from search_spaces.templates import (  # noqa: F401
    cpu_batch_matmul,
    cpu_conv2d,
    cpu_conv2d_depthwise,
    cpu_conv2d_nchwc,
    cpu_conv2d_winograd,
    cpu_dense,
    cpu_depthwise,
    cpu_elementwise,
    cpu_matmul,
    cpu_norm,
    cpu_pool,
    cuda_gemm,
    cuda_ops,
)
