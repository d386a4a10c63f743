"""The one generic visitor and mutator over expressions and statements.

Subclasses define ``visit_<NodeClass>`` for the node kinds they care about; every
other node is traversed generically through its dataclass fields. A mutator
rebuilds a node only when one of its children changed, so untouched subtrees
are shared.
"""

from __future__ import annotations

import dataclasses

from .expr import PrimExpr
from .stmt import Stmt

__all__ = ["IRVisitor", "IRMutator", "child_fields"]

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of ``cls`` that may hold child nodes."""
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        skip = {"dtype", "name", "op", "kind", "thread_tag", "lanes", "key", "combiner",
                "producer", "buffer", "node", "axis", "var", "loop_var"}
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)
        _FIELDS_CACHE[cls] = names
    return names


def _is_node(x) -> bool:
    return isinstance(x, (PrimExpr, Stmt))


class _Dispatch:
    _method_cache: dict

    def _method(self, node):
        cache = type(self).__dict__.get("_method_cache_")
        if cache is None:
            cache = {}
            type(self)._method_cache_ = cache
        cls = type(node)
        m = cache.get(cls)
        if m is None:
            m = getattr(type(self), "visit_" + cls.__name__, None)
            cache[cls] = m
        return m


class IRVisitor(_Dispatch):
    """Visits every node; override ``visit_<Node>`` and call ``self.generic_visit(node)``
    to continue into children."""

    def visit(self, node) -> None:
        m = self._method(node)
        if m is not None:
            m(self, node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node) -> None:
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if _is_node(value):
                self.visit(value)
            elif isinstance(value, tuple):
                for item in value:
                    if _is_node(item):
                        self.visit(item)


class IRMutator(_Dispatch):
    """Rebuilds the tree; ``visit_<Node>`` returns the replacement node."""

    def visit(self, node):
        m = self._method(node)
        if m is not None:
            return m(self, node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        changes = {}
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if _is_node(value):
                new = self.visit(value)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, tuple) and value and any(_is_node(v) for v in value):
                new_items = tuple(self.visit(v) if _is_node(v) else v for v in value)
                if any(a is not b for a, b in zip(new_items, value, strict=True)):
                    changes[name] = new_items
        if not changes:
            return node
        return dataclasses.replace(node, **changes)


