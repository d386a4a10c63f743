"""Small analyses and rewrites used throughout: free variables, substitution, search."""

from __future__ import annotations

from collections.abc import Callable

from .expr import Call, Let, PrimExpr, Reduce, Var
from .functor import IRMutator, IRVisitor
from .stmt import Allocate, BufferStore, For, LetStmt

__all__ = ["free_vars", "substitute", "post_order_visit", "uses_var", "collect", "stored_buffers"]


class _FreeVars(IRVisitor):
    def __init__(self):
        self.bound: set[int] = set()
        self.found: dict[int, Var] = {}

    def visit_Var(self, node: Var) -> None:
        if id(node) not in self.bound:
            self.found.setdefault(id(node), node)

    def _bind(self, var, *children):
        added = id(var) not in self.bound
        self.bound.add(id(var))
        for c in children:
            if c is not None:
                self.visit(c)
        if added:
            self.bound.discard(id(var))

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
            self.bound.add(id(iv.var))
        self.generic_visit(node)
        for iv in node.axis:
            self.bound.discard(id(iv.var))

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
    return list(v.found.values())


def uses_var(node, var_ids: set[int]) -> bool:
    """Whether ``node`` mentions any variable whose ``id`` is in ``var_ids``."""
    found = False

    def check(n):
        nonlocal found
        if isinstance(n, Var) and id(n) in var_ids:
            found = True

    post_order_visit(node, check)
    return found


class _Substitute(IRMutator):
    def __init__(self, mapping: dict[int, PrimExpr]):
        self.mapping = mapping

    def visit_Var(self, node: Var):
        return self.mapping.get(id(node), node)


def substitute(node, mapping) -> object:
    """Replace variables by expressions. ``mapping`` maps Var (or id of Var) to expressions."""
    if not mapping:
        return node
    by_id = {}
    for k, v in mapping.items():
        from .expr import convert

        by_id[k if isinstance(k, int) else id(k)] = convert(v)
    return _Substitute(by_id).visit(node)


class _PostOrder(IRVisitor):
    def __init__(self, fn):
        self.fn = fn

    def visit(self, node) -> None:
        super().visit(node)
        self.fn(node)


def post_order_visit(node, fn: Callable) -> None:
    """Call ``fn`` on every node below and including ``node``, children first."""
    _PostOrder(fn).visit(node)


def collect(node, predicate: Callable) -> list:
    """Every node for which ``predicate`` holds, in post order."""
    out: list = []
    post_order_visit(node, lambda n: out.append(n) if predicate(n) else None)
    return out


def stored_buffers(node) -> set[int]:
    """The ``id`` of the data variable of every buffer that ``node`` stores into, or passes
    to a function it calls (which may write it: ``call_packed``, ``call_extern``)."""
    from .buffer import ACCESS_PTR
    from .packed import ARRAY_HANDLE

    stored = {id(s.buffer.data) for s in collect(node, lambda n: isinstance(n, BufferStore))}
    for call in collect(node, lambda n: isinstance(n, Call)):
        if call.op == ARRAY_HANDLE:  # (data, dtype, access, *shape): "r" is only read
            if call.args[2].value != "r":
                stored.add(id(call.args[0]))
            continue
        if call.op == ACCESS_PTR:  # (dtype, data, offset, extent, mask): "r" is only read
            if call.args[4].value != "r":
                stored.add(id(call.args[1]))
            continue
        stored.update(id(a) for a in call.args if isinstance(a, Var) and a.dtype == "handle")
    return stored
