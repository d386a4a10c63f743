"""Small analyses and rewrites used throughout: free variables, substitution, search."""

from __future__ import annotations

from collections.abc import Callable

from .buffer import ACCESS_PTR
from .expr import And, Call, Let, PrimExpr, Reduce, Var, convert
from .functor import IRMutator, IRVisitor, post_order_visit
from .packed import ARRAY_HANDLE
from .stmt import Allocate, BufferStore, For, LetStmt

__all__ = ["conjuncts", "free_vars", "substitute", "post_order_visit", "uses_var", "contains", "collect",
           "stored_buffers"]


class _FreeVars(IRVisitor):
    def __init__(self):
        self.bound: set[Var] = set()
        self.found: dict[Var, None] = {}  # an ordered set: the order of first use

    def visit_Var(self, node: Var) -> None:
        if node not in self.bound:
            self.found.setdefault(node, None)

    def _bind(self, var, *children):
        added = var not in self.bound
        self.bound.add(var)
        for c in children:
            if c is not None:
                self.visit(c)
        if added:
            self.bound.discard(var)

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self._bind(node.loop_var, node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self._bind(node.var, node.body)

    def visit_Let(self, node: Let) -> None:
        self.visit(node.value)
        self._bind(node.var, node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        for e in node.buffer.shape:
            self.visit(e)
        self._bind(node.buffer.data, node.body)

    def visit_Reduce(self, node: Reduce) -> None:
        for iv in node.axis:
            self.bound.add(iv.var)
        self.generic_visit(node)
        for iv in node.axis:
            self.bound.discard(iv.var)

    def visit_BufferLoad(self, node) -> None:
        self.visit_Var(node.buffer.data)
        self.generic_visit(node)

    def visit_BufferStore(self, node) -> None:
        self.visit_Var(node.buffer.data)
        self.generic_visit(node)


def free_vars(node) -> list[Var]:
    """Variables used in ``node`` but not bound inside it, in order of first use."""
    v = _FreeVars()
    v.visit(node)
    return list(v.found)


def conjuncts(cond: PrimExpr) -> list[PrimExpr]:
    """The terms of a conjunction ``a && b && ...``, in order (``[cond]`` for any other)."""
    if isinstance(cond, And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def uses_var(node, variables: set[Var] | dict) -> bool:
    """Whether ``node`` mentions any of ``variables`` (a set of :class:`Var`, or a dict keyed
    by them)."""
    return contains(node, lambda n: isinstance(n, Var) and n in variables)


class _Substitute(IRMutator):
    memoize = True

    def __init__(self, mapping: dict[Var, PrimExpr]):
        self.mapping = mapping

    def visit_Var(self, node: Var):
        return self.mapping.get(node, node)


def substitute(node, mapping: dict) -> object:
    """Replace variables by expressions: ``mapping`` maps :class:`Var` objects to expressions
    (or Python numbers)."""
    if not mapping:
        return node
    exprs = {}
    for k, v in mapping.items():
        if isinstance(k, int):  # the ids older callers passed would silently match nothing
            raise TypeError(f"substitute maps variables, not their ids (got the key {k!r})")
        exprs[k] = convert(v)
    return _Substitute(exprs).visit(node)


class _Found(Exception):
    pass


def contains(node, predicate: Callable) -> bool:
    """Whether ``predicate`` holds for some node below or at ``node``; the walk stops at the
    first one."""

    def check(n) -> None:
        if predicate(n):
            raise _Found

    try:
        post_order_visit(node, check)
    except _Found:
        return True
    return False


def collect(node, predicate: Callable) -> list:
    """Every node for which ``predicate`` holds, in post order."""
    out: list = []
    post_order_visit(node, lambda n: out.append(n) if predicate(n) else None)
    return out


def stored_buffers(node) -> set[Var]:
    """The data variable of every buffer that ``node`` stores into, or passes to a function
    it calls (which may write it: ``call_packed``, ``call_extern``)."""
    stored = set()
    for n in collect(node, lambda n: isinstance(n, (BufferStore, Call))):  # one walk for both
        if isinstance(n, BufferStore):
            stored.add(n.buffer.data)
            continue
        call = n
        if call.op == ARRAY_HANDLE:  # (data, dtype, access, ...): "r" is only read
            if call.args[2].value != "r":
                stored.add(call.args[0])
            continue
        if call.op == ACCESS_PTR:  # (dtype, data, offset, extent, mask): "r" is only read
            if call.args[4].value != "r":
                stored.add(call.args[1])
            continue
        stored.update(a for a in call.args if isinstance(a, Var) and a.dtype == "handle")
    return stored
