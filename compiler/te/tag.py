"""Operator tags from a scope, as TVM's ``te.tag_scope``.

Inside ``with te.tag_scope("conv"):`` (or in a function decorated with
``@te.tag_scope("conv")``) every ``te.compute``, ``te.scan`` and ``te.extern`` that is
given no ``tag=`` of its own gets the scope's tag as ``op.tag``; topi's schedules read
tags such as ``"elemwise"``, ``"broadcast"`` and ``"injective"`` to pick a schedule.
"""

from __future__ import annotations

import functools
import threading
import warnings

from ..errors import TagScopeError

__all__ = ["TagScope", "tag_scope", "current_tag", "ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE",
           "COMM_REDUCE_IDX", "is_broadcast", "is_injective"]

_state = threading.local()


class TagScope:
    """A tag for the operations declared inside it: a context manager and a decorator."""

    def __init__(self, tag: str):
        if not isinstance(tag, str):
            raise TypeError(f"tag_scope needs a string tag, got {tag!r}")
        self.tag = tag
        self.accessed = False

    @staticmethod
    def get_current() -> TagScope | None:
        """The innermost active scope (None outside any), marked as used."""
        scope = getattr(_state, "current", None)
        if scope is not None:
            scope.accessed = True
        return scope

    def __enter__(self) -> TagScope:
        # TVM refuses nested tag scopes; so do we, rather than pick one of the tags.
        if getattr(_state, "current", None) is not None:
            raise TagScopeError(f"tag_scope({self.tag!r}) inside tag_scope({_state.current.tag!r}): "
                                "tag scopes cannot be nested")
        _state.current = self
        return self

    def __exit__(self, *exc) -> None:
        _state.current = None
        if not self.accessed and exc[0] is None:
            warnings.warn(f"tag {self.tag!r} declared with tag_scope was not used by any operation",
                          stacklevel=2)

    def __call__(self, fdecl):
        @functools.wraps(fdecl)
        def tagged(*args, **kwargs):
            with self:
                return fdecl(*args, **kwargs)

        return tagged


def tag_scope(tag: str) -> TagScope:
    """The scope that tags every operation declared inside it with ``tag``::

        with te.tag_scope(tag="matmul"):
            C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k))

        @te.tag_scope(tag="elemwise")
        def relu(x):
            return te.compute(x.shape, lambda *i: te.max(x(*i), 0.0))
    """
    return TagScope(tag)


def current_tag(tag: str, name: str) -> str:
    """The tag of an operation named ``name`` declared with ``tag``: the scope's, when
    there is one and ``tag`` is empty."""
    scope = TagScope.get_current()
    if scope is None:
        return tag
    if tag:
        raise TagScopeError(f"operation {name!r} declared with tag={tag!r} inside tag_scope({scope.tag!r}): "
                            "give the tag in one place")
    return scope.tag


#: The tags topi's operators carry and its generic schedules read (TVM's ``topi.tag``).
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    """Whether an operation tagged ``tag`` is elementwise or a broadcast (``"elemwise"``,
    ``"broadcast"``, or a tag starting with either)."""
    return tag.startswith((ELEMWISE, BROADCAST))


def is_injective(tag: str) -> bool:
    """Whether an operation tagged ``tag`` computes each output element from its inputs
    without a reduction (a broadcast, or a tag starting with ``"injective"``)."""
    return is_broadcast(tag) or tag.startswith(INJECTIVE)
