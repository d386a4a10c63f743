"""Broadcasting binary operators (TVM's ``topi.add``, ``topi.subtract``, ``topi.multiply``,
``topi.divide``): the same operations ``A + B`` builds on tensors."""

from ..te.broadcast import add, broadcast_shape, divide, multiply, subtract

__all__ = ["add", "subtract", "multiply", "divide", "broadcast_shape"]
