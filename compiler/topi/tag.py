"""The tags of topi's operators (TVM's ``topi.tag``): ``tag.ELEMWISE``, ``tag.BROADCAST``,
``tag.INJECTIVE``, ``tag.COMM_REDUCE``, with ``is_broadcast`` and ``is_injective``."""

from ..te.tag import BROADCAST, COMM_REDUCE, COMM_REDUCE_IDX, ELEMWISE, INJECTIVE, is_broadcast, is_injective

__all__ = ["ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE", "COMM_REDUCE_IDX", "is_broadcast",
           "is_injective"]
