"""TVM's ``tvm.contrib``: ``cblas`` (an external library as tensor operations), ``cc``
(linking object files into shared libraries) and ``utils`` (``tempdir``)."""

__all__ = ["cblas", "cc", "utils"]
