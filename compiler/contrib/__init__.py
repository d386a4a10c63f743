"""Wrappers of external libraries as tensor operations (TVM's ``tvm.contrib``): ``cblas``."""

__all__ = ["cblas"]
