"""Virtual threads: a loop bound to ``vthread`` becomes interleaved work of one real thread.

As in TVM's InjectVirtualThread, the ``vthread`` loop disappears and its iterations
are pushed down to the statements that depend on them: a statement that does not
mention the virtual thread index runs once (a cooperative load into shared memory,
say), a loop that does not depend on it is kept and the injection continues in its
body, and a leaf statement that does is replicated once per virtual thread (or put
in a loop when there are many). The local buffers allocated inside the virtual
thread get one copy per virtual thread when what is stored into them depends on it.
The replicated statements of the virtual
threads sit side by side in the innermost loops: independent work for the
instruction scheduler, and accesses strided across banks.

Runs on flattened IR (after :func:`~compiler.transform.storage_flatten`).
"""

from __future__ import annotations

from ..errors import LoweringError
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, substitute
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.functor import Functor, IRMutator, children

__all__ = ["inject_virtual_thread"]

# More virtual threads than this around a statement with loops become a loop, not copies.
_MAX_UNROLL = 16


def inject_virtual_thread(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Replace every ``vthread`` loop of ``func`` by interleaved statements."""
    if isinstance(func, PrimFunc):
        body = _Lower().visit(func.body)
        return func if body is func.body else func.with_body(body)
    return _Lower().visit(func)


class _Lower(IRMutator):
    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if s.kind is S.ForKind.THREAD_BINDING and s.thread_tag == "vthread":
            n = E.const_value(s.extent)
            if not isinstance(n, int):
                raise LoweringError(f"virtual thread loop {s.loop_var.name!r} needs a constant extent, "
                                    f"got {s.extent}")
            if not E.is_const_int(s.min, 0):
                body = substitute(body, {s.loop_var: s.loop_var + s.min})
            injector = _Injector(s.loop_var, n)
            return injector.inject(injector.expand_buffers(body))
        if body is s.body:
            return s
        return S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)


class _Injector(Functor):
    def __init__(self, var: E.Var, n: int):
        self.var, self.n = var, n
        # node -> whether it mentions the thread. The injection asks about every statement
        # and then about its parts, so without this a nest of depth d is walked d times.
        self._touching: dict[object, bool] = {}

    def touches(self, node) -> bool:
        """Whether ``node`` mentions the virtual thread's index."""
        known = self._touching.get(node)
        if known is None:
            known = node is self.var or any(self.touches(c) for c in children(node))
            self._touching[node] = known
        return known

    def inject(self, s: S.Stmt) -> S.Stmt:
        """``s`` run by every virtual thread: statements that do not mention the thread are
        kept, the innermost ones that do are replicated (or looped over)."""
        if not self.touches(s):
            return s
        return self.visit(s)

    def visit_SeqStmt(self, s):
        return S.seq(*[self.inject(c) for c in s.seq])

    def visit_For(self, s):
        if self.touches(s.min) or self.touches(s.extent):
            return self.replicate(s)
        return S.For(s.loop_var, s.min, s.extent, s.kind, self.inject(s.body), s.thread_tag)

    def visit_Allocate(self, s):
        return S.Allocate(s.buffer, self.inject(s.body))

    def visit_IfThenElse(self, s):
        if self.touches(s.condition):
            return self.replicate(s)
        other = None if s.else_case is None else self.inject(s.else_case)
        return S.IfThenElse(s.condition, self.inject(s.then_case), other)

    def visit_LetStmt(self, s):
        if self.touches(s.value):
            return self.replicate(s)
        return S.LetStmt(s.var, s.value, self.inject(s.body))

    def visit_AttrStmt(self, s):
        if self.touches(s.value):
            return self.replicate(s)
        return S.AttrStmt(s.node, s.key, s.value, self.inject(s.body))

    def generic_visit(self, s):
        return self.replicate(s)

    def expand_buffers(self, body: S.Stmt) -> S.Stmt:
        """Give one copy per virtual thread to every local buffer whose contents depend on
        it: stores that mention it, sit in loops or conditions that do, or read another
        such buffer (to a fixed point)."""
        allocs = [a for a in collect(body, lambda n: isinstance(n, S.Allocate)) if a.buffer.scope == "local"]
        dep: set[E.Var] = set()  # the data of the buffers that get a copy per thread
        changed = True
        while changed:
            changed = False
            for a in allocs:
                if a.buffer.data not in dep and self.writes_depend(a.buffer.data, a.body, dep):
                    dep.add(a.buffer.data)
                    changed = True
        if not dep:
            return body
        return _ExpandAll(dep, self.var, self.n).visit(body)

    def writes_depend(self, data: E.Var, body: S.Stmt, dep: set) -> bool:
        """Whether what a virtual thread stores into the buffer ``data`` depends on it."""
        check = _WritesDepend(self, data, dep)
        check.within(body, False)
        return check.found

    def replicate(self, s: S.Stmt) -> S.Stmt:
        if self.n > _MAX_UNROLL and collect(s, lambda n: isinstance(n, S.For)):
            return S.For(self.var, E.const(0, self.var.dtype), E.const(self.n, self.var.dtype),
                         S.ForKind.SERIAL, s)
        return S.seq(*[substitute(s, {self.var: E.const(k, self.var.dtype)}) for k in range(self.n)])


class _WritesDepend(Functor):
    """Looks for a store into ``data`` that depends on the virtual thread: it mentions the
    thread, reads a buffer in ``dep``, or sits where ``around`` (an enclosing loop bound,
    condition or binding that mentions the thread) holds."""

    def __init__(self, injector: _Injector, data: E.Var, dep: set):
        self.touches = injector.touches
        self.data, self.dep = data, dep
        self.around = False
        self.found = False

    def within(self, s: S.Stmt, around: bool) -> None:
        if self.found:
            return
        saved, self.around = self.around, around
        try:
            self.visit(s)
        finally:
            self.around = saved

    def visit_BufferStore(self, s):
        self.found = s.buffer.data is self.data and (self.around or self.touches(s) or self._reads_dep(s))

    def _reads_dep(self, s: S.BufferStore) -> bool:
        return bool(collect(s.value, lambda n: isinstance(n, E.BufferLoad) and n.buffer.data in self.dep))

    def visit_SeqStmt(self, s):
        for c in s.seq:
            self.within(c, self.around)

    def visit_For(self, s):
        self.within(s.body, self.around or self.touches(s.min) or self.touches(s.extent))

    def visit_IfThenElse(self, s):
        around = self.around or self.touches(s.condition)
        self.within(s.then_case, around)
        if s.else_case is not None:
            self.within(s.else_case, around)

    def visit_LetStmt(self, s):
        self.within(s.body, self.around or self.touches(s.value))

    visit_AttrStmt = visit_LetStmt

    def visit_Allocate(self, s):
        self.within(s.body, self.around)

    def generic_visit(self, s):
        return None


def _widened(buf: Buffer, var: E.Var, n: int) -> tuple[Buffer, E.PrimExpr]:
    """The (flattened) local ``buf`` with one copy per virtual thread, and the offset of
    thread ``var``'s copy (``var * size``)."""
    if len(buf.shape) != 1:
        raise LoweringError(f"virtual threads need flattened buffers; {buf.name!r} has shape {buf.shape}")
    size = buf.shape[0]
    value = E.const_value(size)
    wide_size = E.const(value * n, size.dtype) if isinstance(value, int) else size * n
    wide = Buffer(buf.name, (wide_size,), buf.dtype, buf.data, (), None, buf.scope, buf.align)
    offset = E.Cast(size.dtype, var) * size if var.dtype != size.dtype else var * size
    return wide, offset


class _ExpandAll(IRMutator):
    """Widens every local buffer in ``dep`` and moves each access to its thread's copy, all
    in one walk (nested allocations would otherwise walk the inner ones once per level)."""

    def __init__(self, dep: set, var: E.Var, n: int):
        self.dep, self.var, self.n = dep, var, n
        self.wide: dict[E.Var, tuple[Buffer, E.PrimExpr]] = {}  # data -> (wide buffer, offset)

    def visit_Allocate(self, s: S.Allocate):
        if s.buffer.data in self.dep:
            self.wide[s.buffer.data] = _widened(s.buffer, self.var, self.n)
        body = self.visit(s.body)
        if s.buffer.data in self.dep:
            return S.Allocate(self.wide[s.buffer.data][0], body)
        return s if body is s.body else S.Allocate(s.buffer, body)

    def _index(self, index: E.PrimExpr, offset: E.PrimExpr) -> E.PrimExpr:
        if isinstance(index, E.Ramp):
            return E.Ramp(self._index(index.base, offset), index.stride, index.lanes, index.dtype)
        return index + (offset if offset.dtype == index.dtype else E.Cast(index.dtype, offset))

    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        if node.buffer.data not in self.wide:
            return node
        wide, offset = self.wide[node.buffer.data]
        return E.BufferLoad(wide, (self._index(node.indices[0], offset),), node.dtype, node.lanes,
                            node.predicate)

    def visit_BufferStore(self, node: S.BufferStore):
        node = self.generic_visit(node)
        if node.buffer.data not in self.wide:
            return node
        wide, offset = self.wide[node.buffer.data]
        return S.BufferStore(wide, node.value, (self._index(node.indices[0], offset),), node.predicate)
