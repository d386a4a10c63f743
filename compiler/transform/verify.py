"""A well-formedness check of lowered functions, run between passes when asked
(:class:`compiler.transform.pipeline.VerifyIR`, ``COMPILER_VERIFY_IR=1``).

A function is well formed when

* every variable its body uses is defined: a scalar parameter, a variable of a buffer
  parameter (its data, or a symbolic size, stride or offset), a loop, ``Let`` or
  allocation inside it, a reduction axis, or a thread index that an attribute
  (``thread_extent``, ``virtual_thread``) declares;
* no loop, ``Let`` or allocation defines again a variable that an enclosing one defines.
"""

from __future__ import annotations

from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.functor import IRVisitor

__all__ = ["verify_ir"]

# Attributes whose node is a thread index that the body may use.
_THREAD_ATTRS = ("thread_extent", "virtual_thread")


def verify_ir(func: PrimFunc) -> list[str]:
    """What is wrong with ``func`` (an empty list when it is well formed)."""
    checker = _Checker(_parameter_vars(func))
    checker.visit(func.body)
    return checker.problems


def _parameter_vars(func: PrimFunc) -> set:
    out = set(func.scalar_vars())
    for p in func.params:
        if isinstance(p, Buffer):
            out.add(p.data)
    return out


class _Checker(IRVisitor):
    def __init__(self, defined: set):
        self.defined = defined
        self.scoped: set = set()  # defined by an enclosing loop, Let or allocation
        self.problems: list[str] = []
        self.undefined: set = set()

    def _define(self, var, where: str, *bodies) -> None:
        if var in self.scoped:
            self.problems.append(f"{where} defines {var.name!r} again inside its own scope")
            for b in bodies:
                self.visit(b)
            return
        self.scoped.add(var)
        for b in bodies:
            if b is not None:
                self.visit(b)
        self.scoped.discard(var)

    def _use(self, var) -> None:
        if var not in self.defined and var not in self.scoped and var not in self.undefined:
            self.undefined.add(var)
            self.problems.append(f"variable {var.name!r} is used but defined nowhere")

    def visit_Var(self, node: E.Var) -> None:
        self._use(node)

    def visit_For(self, node: S.For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self._define(node.loop_var, f"loop {node.loop_var.name!r}", node.body)

    def visit_LetStmt(self, node: S.LetStmt) -> None:
        self.visit(node.value)
        self._define(node.var, f"let {node.var.name!r}", node.body)

    def visit_Let(self, node: E.Let) -> None:
        self.visit(node.value)
        self._define(node.var, f"let {node.var.name!r}", node.body)

    def visit_Allocate(self, node: S.Allocate) -> None:
        for e in node.buffer.shape:
            self.visit(e)
        self._define(node.buffer.data, f"allocation {node.buffer.name!r}", node.body)

    def visit_Reduce(self, node: E.Reduce) -> None:
        added = [iv.var for iv in node.axis if iv.var not in self.scoped]
        self.scoped.update(added)
        self.generic_visit(node)
        self.scoped.difference_update(added)

    def visit_AttrStmt(self, node: S.AttrStmt) -> None:
        var = getattr(node.node, "var", node.node)
        if node.key in _THREAD_ATTRS and isinstance(var, E.Var) and var not in self.scoped:
            self.visit(node.value)
            self.scoped.add(var)
            self.visit(node.body)
            self.scoped.discard(var)
            return
        self.generic_visit(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self._use(node.buffer.data)
        self.generic_visit(node)

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        self._use(node.buffer.data)
        self.generic_visit(node)
