"""TVM's ``tvm.contrib``: ``cblas`` (an external library as tensor operations), ``cc``
(linking object files into shared libraries), ``clang`` (C to LLVM IR, for the
``import_llvm`` pragma) and ``utils`` (``tempdir``)."""

__all__ = ["cblas", "cc", "clang", "utils"]
