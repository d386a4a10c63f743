"""The one generic functor over expressions and statements, and the visitor and
mutator built on it.

:class:`Functor` dispatches ``visit(node)`` to ``visit_<NodeClass>`` (looked up once
per functor class and node class, then cached) and returns what that method returns;
a node kind without a method goes to ``generic_visit``. Code generators, printers and
analyses subclass it directly and return values (LLVM values, text, intervals);
:class:`IRVisitor` walks every child and :class:`IRMutator` rebuilds the tree.

:func:`post_order_visit` walks the same children in the same order with no dispatch, for
the analyses that only look at every node.

The children of every node class are declared once, in :data:`CHILDREN`: the fields
that hold sub-expressions or sub-statements (a node, a tuple of nodes, or None).
Fields such as a loop's ``loop_var``, a ``Let``'s ``var``, a ``Reduce``'s ``axis`` or
a load's ``buffer`` are binders or references, not children, and are not walked.
"""

from __future__ import annotations

import dataclasses

from . import expr as E
from . import stmt as S

__all__ = ["CHILDREN", "Functor", "IRVisitor", "IRMutator", "child_fields", "children", "post_order_visit"]

#: The child fields of every IR node class, in the order they are walked.
CHILDREN: dict[type, tuple[str, ...]] = {
    E.Var: (),
    E.IntImm: (),
    E.FloatImm: (),
    E.StringImm: (),
    E.Cast: ("value",),
    E.BinaryOp: ("a", "b"),  # and every arithmetic, comparison and logical subclass
    E.Not: ("a",),
    E.Select: ("condition", "true_value", "false_value"),
    E.Call: ("args",),
    E.Let: ("value", "body"),
    E.ProducerLoad: ("indices",),
    E.BufferLoad: ("indices", "predicate"),
    E.Ramp: ("base", "stride"),
    E.Broadcast: ("value",),
    E.Reduce: ("source", "condition", "sources", "init"),
    S.For: ("min", "extent", "body"),
    S.While: ("condition", "body"),
    S.BufferStore: ("value", "indices", "predicate"),
    S.Allocate: ("body",),
    S.IfThenElse: ("condition", "then_case", "else_case"),
    S.LetStmt: ("value", "body"),
    S.SeqStmt: ("seq",),
    S.Evaluate: ("value",),
    S.AttrStmt: ("value", "body"),
}

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of node class ``cls`` that hold child nodes.

    A subclass without its own entry in :data:`CHILDREN` has its base class's children.
    """
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        base = next((k for k in cls.__mro__ if k in CHILDREN), None)
        if base is None:
            raise TypeError(f"{cls.__name__} is not an IR node: its children are not declared")
        names = _FIELDS_CACHE[cls] = CHILDREN[base]
    return names


_NODE_TYPES = (E.PrimExpr, S.Stmt)


def _is_node(x) -> bool:
    return isinstance(x, _NODE_TYPES)


def children(node) -> list:
    """The child nodes of ``node``, in walking order (None fields left out)."""
    out = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, tuple):
            out.extend(v for v in value if _is_node(v))
        elif _is_node(value):
            out.append(value)
    return out


def post_order_visit(node, fn) -> None:
    """Call ``fn`` on every node below and including ``node``, children first (in the order
    :class:`IRVisitor` walks them)."""
    # A plain recursive function, not an IRVisitor: analyses walk whole functions many times
    # over, and the method dispatch per node was most of the cost of a walk.

    def walk(n) -> None:
        cls = type(n)
        names = _FIELDS_CACHE.get(cls)
        for name in child_fields(cls) if names is None else names:
            value = getattr(n, name)
            if isinstance(value, tuple):
                for item in value:
                    if isinstance(item, _NODE_TYPES):
                        walk(item)
            elif isinstance(value, _NODE_TYPES):
                walk(value)
        fn(n)

    walk(node)


class Functor:
    """Value-returning dispatch: ``visit(node)`` calls ``visit_<type(node).__name__>``.

    Methods are looked up by the node's exact class name first, then by its base
    classes' (``visit_BinaryOp`` serves every binary operator without its own method;
    ``visit_PrimExpr`` every expression, as in a pass that rewrites statements only).
    Each functor class keeps its own table from node class to method, filled on first use.
    """

    _dispatch_table: dict[type, object]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._dispatch_table = {}

    def visit(self, node):
        """Visit ``node`` and return what its ``visit_<Node>`` (or ``generic_visit``) returns."""
        cls = type(node)
        try:
            method = type(self)._dispatch_table[cls]
        except KeyError:
            method = type(self)._dispatch_table[cls] = self._find_method(cls)
        if method is None:
            return self.generic_visit(node)
        return method(self, node)

    @classmethod
    def _find_method(cls, node_cls: type):
        for k in node_cls.__mro__:
            if k is object or k is E.ExprOp:
                break
            method = getattr(cls, "visit_" + k.__name__, None)
            if method is not None:
                return method
        return None

    def generic_visit(self, node):
        """What a node kind without a ``visit_<Node>`` method gives; subclasses override."""
        raise NotImplementedError(f"{type(self).__name__} cannot visit {type(node).__name__}")


Functor._dispatch_table = {}


class IRVisitor(Functor):
    """Visits every node; override ``visit_<Node>`` and call ``self.generic_visit(node)``
    to continue into children."""

    def generic_visit(self, node) -> None:
        # The walk of every pass: child_fields and the node test inlined (millions of calls).
        names = _FIELDS_CACHE.get(type(node))
        for name in child_fields(type(node)) if names is None else names:
            value = getattr(node, name)
            if isinstance(value, tuple):
                for item in value:
                    if isinstance(item, _NODE_TYPES):
                        self.visit(item)
            elif isinstance(value, _NODE_TYPES):
                self.visit(value)


class IRMutator(Functor):
    """Rebuilds the tree; ``visit_<Node>`` returns the replacement node.

    A node is rebuilt only when one of its children changed, so untouched subtrees
    are shared.

    A mutator whose replacement for a node depends on nothing but the node (a substitution of
    variables, a rewrite of loads into buffer reads) sets ``memoize = True``: each distinct
    node object is then visited once per mutator object, and a subexpression that many
    parents share (an inlined producer's body, a table of selects) is rebuilt once and stays
    shared in the result, rather than walked and copied once for every parent.
    """

    memoize = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "memoize" in cls.__dict__ and "visit" not in cls.__dict__:  # a visit of its own stays
            cls.visit = IRMutator._visit_once if cls.memoize else Functor.visit

    def _visit_once(self, node):
        try:
            memo = self._memo
        except AttributeError:
            memo = self._memo = {}
        # keyed by id, the node kept beside its result so that its id is not reused
        done = memo.get(id(node))
        if done is None:
            done = memo[id(node)] = (node, Functor.visit(self, node))
        return done[1]

    def generic_visit(self, node):
        changes = None
        names = _FIELDS_CACHE.get(type(node))
        for name in child_fields(type(node)) if names is None else names:
            value = getattr(node, name)
            if isinstance(value, tuple):
                new_items = None
                for k, item in enumerate(value):
                    if isinstance(item, _NODE_TYPES):
                        new = self.visit(item)
                        if new is not item:
                            if new_items is None:
                                new_items = list(value)
                            new_items[k] = new
                if new_items is not None:
                    changes = changes or {}
                    changes[name] = tuple(new_items)
            elif isinstance(value, _NODE_TYPES):
                new = self.visit(value)
                if new is not value:
                    changes = changes or {}
                    changes[name] = new
        if changes is None:
            return node
        return dataclasses.replace(node, **changes)
