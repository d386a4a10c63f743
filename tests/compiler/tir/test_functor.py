"""The generic functor: declared children, cached dispatch, visitors and mutators."""

from __future__ import annotations

import dataclasses

import pytest

from compiler import tir
from compiler.tir import expr as E
from compiler.tir import stmt as S
from compiler.tir.analysis import contains, post_order_visit, uses_var
from compiler.tir.functor import CHILDREN, Functor, IRMutator, IRVisitor, child_fields, children


def _node_classes():
    objs = [getattr(E, n) for n in E.__all__] + [getattr(S, n) for n in S.__all__]
    return [c for c in objs if isinstance(c, type) and issubclass(c, (E.PrimExpr, S.Stmt))
            and dataclasses.is_dataclass(c)]


@pytest.mark.parametrize("cls", _node_classes(),
                         ids=lambda c: c.__name__)
def test_every_node_class_declares_its_children(cls):
    fields = {f.name for f in dataclasses.fields(cls)}
    names = child_fields(cls)
    assert set(names) <= fields
    # Every field annotated as an expression or statement is a declared child.
    for f in dataclasses.fields(cls):
        if f.type in ("PrimExpr", "Stmt", "PrimExpr | None", "Stmt | None"):
            assert f.name in names, (cls.__name__, f.name)


def test_unknown_class_is_refused():
    with pytest.raises(TypeError, match="not an IR node"):
        child_fields(int)


def test_binders_are_not_children():
    i = E.Var("i")
    loop = S.For(i, E.const(0), E.const(4), S.ForKind.SERIAL, S.Evaluate(i))
    assert children(loop) == [loop.min, loop.extent, loop.body]
    assert "loop_var" not in child_fields(S.For)
    assert "var" not in child_fields(E.Let)
    assert CHILDREN[E.BinaryOp] == child_fields(E.Add) == child_fields(E.LT)


class _Depth(Functor):
    """A value-returning functor: the depth of an expression tree."""

    def visit_Var(self, e):
        return 1

    def visit_IntImm(self, e):
        return 1

    def visit_BinaryOp(self, e):
        return 1 + max(self.visit(e.a), self.visit(e.b))

    def visit_Mul(self, e):
        return 100 + max(self.visit(e.a), self.visit(e.b))


def test_functor_returns_values_and_prefers_the_exact_class():
    x = E.Var("x")
    e = (x + 1) * (x - 2)
    assert _Depth().visit(x + 1) == 2
    assert _Depth().visit(e) == 102
    with pytest.raises(NotImplementedError, match="_Depth cannot visit Cast"):
        _Depth().visit(E.Cast("float32", x))


def test_dispatch_tables_are_per_class():
    class Other(_Depth):
        def visit_Add(self, e):
            return -1

    x = E.Var("x")
    assert _Depth().visit(x + 1) == 2
    assert Other().visit(x + 1) == -1
    assert _Depth().visit(x + 1) == 2


def test_visitor_walks_every_child_in_order():
    x, y = E.Var("x"), E.Var("y")
    seen = []

    class Vars(IRVisitor):
        def visit_Var(self, v):
            seen.append(v.name)

    body = S.IfThenElse(x < y, S.Evaluate(E.Select(x < 1, y, x)), S.Evaluate(y))
    Vars().visit(body)
    assert seen == ["x", "y", "x", "y", "x", "y"]


def test_post_order_visit_sees_children_first_in_the_visitor_s_order():
    x, y = E.Var("x"), E.Var("y")
    load = E.BufferLoad(tir.decl_buffer((8,), name="A"), (x + 1,), "float32")
    body = S.SeqStmt((S.IfThenElse(x < y, S.Evaluate(E.Select(x < 1, y, x)), S.Evaluate(load)),
                      S.Evaluate(E.Call("float32", "exp", (load,)))))
    pre: list = []

    class PreOrder(IRVisitor):
        def visit(self, node):
            pre.append(node)
            super().visit(node)

    PreOrder().visit(body)
    post: list = []
    post_order_visit(body, post.append)
    assert sorted(map(id, post)) == sorted(map(id, pre))  # every node, once per occurrence
    for k, node in enumerate(post):  # each node after all of its children
        assert all(any(p is c for p in post[:k]) for c in children(node)), node
    # the leaves come in the visitor's order
    assert [n.name for n in post if isinstance(n, E.Var)] == [n.name for n in pre if isinstance(n, E.Var)]
    assert post[-1] is body


def test_contains_stops_at_the_first_match():
    x, y = E.Var("x"), E.Var("y")
    body = S.SeqStmt((S.Evaluate(x + 1), S.Evaluate(y * 2), S.Evaluate(y - 3)))
    seen: list = []

    def is_y(n):
        seen.append(n)
        return n is y

    assert contains(body, is_y)
    assert seen[-1] is y and len(seen) == 5  # x, 1, x + 1, the first Evaluate, then y
    assert not contains(body, lambda n: isinstance(n, E.FloatImm))
    assert uses_var(body, {y}) and not uses_var(S.Evaluate(x + 1), {y})


def test_mutator_shares_untouched_subtrees():
    x, y = E.Var("x"), E.Var("y")

    class Swap(IRMutator):
        def visit_Var(self, v):
            return y if v is x else v

    keep = y * 2
    e = E.Add(x + 1, keep, "int32")
    out = Swap().visit(e)
    assert out is not e and out.b is keep and out.a.a is y
    assert Swap().visit(keep) is keep


def test_a_memoizing_mutator_rebuilds_a_shared_subexpression_once():
    """A DAG of 12 levels, each node's two operands the same node one level down, is 4096 paths
    but 13 nodes: a memoizing mutator visits each node once and keeps the sharing in what it
    builds, where a plain one walks every path."""
    x, y = E.Var("x"), E.Var("y")
    e = x + 1
    for _ in range(12):
        e = E.Add(e, e, "int32")

    class Swap(IRMutator):
        memoize = True

        def __init__(self):
            self.vars = 0

        def visit_Var(self, v):
            self.vars += 1
            return y if v is x else v

    class PlainSwap(Swap):
        memoize = False

    swap, plain = Swap(), PlainSwap()
    out = swap.visit(e)
    assert swap.vars == 1
    copied = plain.visit(e)
    assert plain.vars == 4096 and copied.a is not copied.b
    for node in (out, tir.analysis.substitute(e, {x: y})):
        for _ in range(12):
            assert node.a is node.b  # still one node under both operands
            node = node.a
        assert node.a is y


def test_a_base_class_method_serves_every_subclass():
    seen = []

    class StatementsOnly(IRMutator):
        def visit_PrimExpr(self, e):
            seen.append(type(e).__name__)
            return e

    x = E.Var("x")
    body = S.SeqStmt((S.Evaluate(x + 1), S.Evaluate(E.Cast("float32", x))))
    assert StatementsOnly().visit(body) is body
    assert seen == ["Add", "Cast"]
