"""Turn vectorized loops into vector code: ``Ramp``, ``Broadcast``, vector loads and stores.

For a loop ``for v in range(min, min + n) vectorized`` with a constant ``n``, the
body is rewritten once for all lanes (as TVM's ``VectorizeLoop`` does): ``v``
becomes ``Ramp(min, 1, n)``, index arithmetic stays a ``Ramp`` while it is
affine in ``v``, loop-invariant values stay scalar and are ``Broadcast`` where
they meet a vector, loads and stores at a unit-stride ``Ramp`` become contiguous
vector accesses, and any other vector index a gather or scatter.

Control flow that depends on the lanes becomes masks: an ``if`` on a vector
condition predicates the stores (and loads) of its branches, and the branches of
a ``Select`` on a vector condition read memory only in the lanes they are chosen
in. Both are what a bounds guard on a split tail needs, so a guarded tail is a
masked vector operation rather than a scalar loop.

A loop stays as it was (kind VECTORIZED, which the code generator turns into a
scalar loop with a hint for LLVM's loop vectorizer) when its body cannot be
vectorized faithfully: an allocation or a parallel loop inside it, a store whose
index does not depend on ``v``, a loop bound that does, or lanes that could
observe each other (see :func:`_check_lanes_independent`).

Extents above :data:`MAX_LANES` are vectorized in chunks of that many lanes.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from .. import dtypes
from ..arith import Analyzer
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, conjuncts, substitute, uses_var
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator, child_fields
from ._common import apply_to_body

__all__ = ["vectorize_loops", "MAX_LANES"]

logger = logging.getLogger(__name__)

# Widest vector one loop becomes (64 x float32 = 4 AVX-512 registers); LLVM legalises any
# width, but much wider vectors only cost compile time and registers.
MAX_LANES = 64


def vectorize_loops(func: PrimFunc | S.Stmt) -> PrimFunc | S.Stmt:
    """Rewrite every VECTORIZED loop of constant extent into vector expressions
    (see the module docstring); loops that cannot be vectorized keep their kind."""
    return apply_to_body(func, lambda body, an: _LoopVectorizer(an).visit(body))


class _NotVectorizable(Exception):
    """Raised inside :class:`_Vectorizer` when a body has no faithful vector form."""


class _LoopVectorizer(IRMutator):
    """Finds vectorized loops, innermost first, tracking the ranges of enclosing loops
    and which allocations are private to the code being visited."""

    def __init__(self, an: Analyzer):
        self.an = an
        # The data of buffers allocated with no parallel loop between the allocation and
        # here: only this thread sees them.
        self.private: frozenset[E.Var] = frozenset()

    def visit_PrimExpr(self, e):
        return e  # statements only

    def visit_For(self, s: S.For) -> S.Stmt:
        outer_private = self.private
        if s.kind in (S.ForKind.PARALLEL, S.ForKind.THREAD_BINDING):
            self.private = frozenset()
        try:
            with self.an.bound(s.loop_var, E.Range(s.min, s.extent)):
                body = self.visit(s.body)
                if s.kind is S.ForKind.VECTORIZED and isinstance(s.extent, E.IntImm) and s.extent.value > 1:
                    try:
                        return _vectorize_loop(s, body, self.an, self.private)
                    except _NotVectorizable as e:
                        logger.debug("loop %s stays scalar: %s", s.loop_var.name, e)
        finally:
            self.private = outer_private
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        outer_private = self.private
        self.private = outer_private | {s.buffer.data}
        try:
            body = self.visit(s.body)
        finally:
            self.private = outer_private
        return s if body is s.body else S.Allocate(s.buffer, body)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        with self.an.bound(s.var, (s.value, s.value)):
            body = self.visit(s.body)
        return s if body is s.body else S.LetStmt(s.var, s.value, body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        with self.an.constraint(s.condition):
            then_case = self.visit(s.then_case)
        else_case = None if s.else_case is None else self.visit(s.else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(s.condition, then_case, else_case)


def _vectorize_loop(s: S.For, body: S.Stmt, an: Analyzer, private: frozenset) -> S.Stmt:
    """The vector form of ``s`` (with ``body`` already processed): whole chunks of
    :data:`MAX_LANES` lanes in a serial loop, then the remaining lanes."""
    n, dt = s.extent.value, s.loop_var.dtype
    full, rest = divmod(n, MAX_LANES) if n > MAX_LANES else (0, n)
    pieces = []
    if full:
        outer = E.Var(f"{s.loop_var.name}.chunk", dt)
        base = an.simplify(E.Add(s.min, E.Mul(outer, E.IntImm(MAX_LANES, dt), dt), dt))
        with an.bound(outer, E.Range(E.IntImm(0, dt), E.IntImm(full, dt))):
            chunk = _vectorize_chunk(s.loop_var, base, MAX_LANES, body, an, private)
        pieces.append(S.For(outer, E.IntImm(0, dt), E.IntImm(full, dt), S.ForKind.SERIAL, chunk))
    if rest:
        base = an.simplify(E.Add(s.min, E.IntImm(full * MAX_LANES, dt), dt))
        pieces.append(_vectorize_chunk(s.loop_var, base, rest, body, an, private) if rest > 1
                      else substitute(body, {s.loop_var: base}))
    return S.seq(*pieces)


def _vectorize_chunk(var: E.Var, base: E.PrimExpr, lanes: int, body: S.Stmt, an: Analyzer,
                     private: frozenset) -> S.Stmt:
    v = _Vectorizer(var, base, lanes, an, private)
    out = v.visit(body)
    _check_lanes_independent(out, v.inner, an)
    return out


# ====================================================================== the rewriter


_INDEX_OPS = (E.Add, E.Sub)


class _Vectorizer(IRMutator):
    """Rewrites one loop body for ``lanes`` lanes; every node kind it does not know
    raises :class:`_NotVectorizable` (see :meth:`generic_visit`)."""

    def __init__(self, var: E.Var, base: E.PrimExpr, lanes: int, an: Analyzer, private: frozenset):
        self.var = var
        self.private = private
        self.ramp = E.Ramp(base, E.IntImm(1, var.dtype), lanes, var.dtype)
        self.lanes = lanes
        self.an = an
        self.mask: E.PrimExpr | None = None  # lanes that execute the code being rewritten
        self.inner: set[E.Var] = set()  # variables bound inside the body
        self._let: dict[E.Var, E.Var] = {}  # scalar let variable -> its vector replacement
        self._width: dict[E.PrimExpr, int] = {}  # new vector node -> its lanes
        # An index such as ((i*4 + v)*16 + c) is affine at every level, and simplifying each
        # level's base re-reads the levels below it: a ramp that its parent reads as affine
        # keeps its base as built, and the outermost level simplifies once for all of them.
        self._operand_of_affine = False  # set by an affine parent for the visit of an operand
        self._affine_parent = False  # whether the node being visited is such an operand
        self._unsimplified: set[E.PrimExpr] = set()  # ramps and broadcasts built that way

    def visit(self, node):
        self._affine_parent, self._operand_of_affine = self._operand_of_affine, False
        return super().visit(node)

    def generic_visit(self, node):
        raise _NotVectorizable(f"{type(node).__name__} has no vector form here")

    # -------------------------------------------------------------- lanes bookkeeping

    def width(self, e: E.PrimExpr) -> int:
        if isinstance(e, (E.Ramp, E.Broadcast, E.BufferLoad)):
            return e.lanes
        return self._width.get(e, 1)

    def _vector(self, e: E.PrimExpr) -> E.PrimExpr:
        """Record that ``e`` (a node built here) is ``self.lanes`` wide."""
        self._width[e] = self.lanes
        return e

    def widen(self, e: E.PrimExpr) -> E.PrimExpr:
        return e if self.width(e) == self.lanes else E.Broadcast(e, self.lanes, e.dtype)

    def _elementwise(self, node, values: list, rebuild) -> E.PrimExpr:
        """``rebuild(*values)``: scalar if every value is, else a vector over broadcast operands."""
        if all(self.width(v) == 1 for v in values):
            if all(a is b for a, b in zip(values, _children(node), strict=True)):
                return node
            return rebuild(*values)
        return self._vector(rebuild(*(self.widen(v) for v in values)))

    @contextmanager
    def _masked(self, cond: E.PrimExpr):
        outer = self.mask
        self.mask = cond if outer is None else self._vector(E.And(outer, cond, "bool"))
        try:
            yield
        finally:
            self.mask = outer

    def _mask_var(self) -> E.Var:
        m = E.Var("mask", "bool")
        self.inner.add(m)
        return self._vector(m)

    # -------------------------------------------------------------- leaves

    def visit_Var(self, e: E.Var) -> E.PrimExpr:
        if e is self.var:
            return self.ramp
        return self._let.get(e, e)

    def visit_IntImm(self, e):
        return e

    visit_FloatImm = visit_StringImm = visit_IntImm

    def visit_Ramp(self, e):
        raise _NotVectorizable("the body is already vectorized")

    visit_Broadcast = visit_Ramp

    # -------------------------------------------------------------- arithmetic

    def _ramp(self, base: E.PrimExpr, stride: E.PrimExpr, dtype: str, nested: bool = False) -> E.PrimExpr:
        """``Ramp(base, stride)``, or a Broadcast for a zero stride; ``nested``: an operand of
        an affine parent, whose base that parent simplifies (see :meth:`_affine_operands`)."""
        stride = self.an.simplify(stride)
        if not nested:
            base = self.an.simplify(base)
        out = (E.Broadcast(base, self.lanes, dtype) if E.is_const_int(stride, 0)
               else E.Ramp(base, stride, self.lanes, dtype))
        if nested:
            self._unsimplified.add(out)
        return out

    def _affine_operands(self, e: E.BinaryOp) -> tuple[bool, E.PrimExpr, E.PrimExpr]:
        """Whether ``e`` is itself an operand of an affine parent, and its operands visited
        as such."""
        nested = self._affine_parent
        self._operand_of_affine = True
        a = self.visit(e.a)
        self._operand_of_affine = True
        b = self.visit(e.b)
        return nested, a, b

    def _simplified(self, v: E.PrimExpr) -> E.PrimExpr:
        """``v`` with its base simplified, when it is a ramp or broadcast built nested."""
        if v not in self._unsimplified:
            return v
        base = v.base if isinstance(v, E.Ramp) else v.value
        stride = v.stride if isinstance(v, E.Ramp) else E.IntImm(0, v.dtype)
        return self._ramp(base, stride, v.dtype)

    def _as_affine(self, e: E.PrimExpr) -> tuple | None:
        """``(base, stride)`` of an integer scalar, Broadcast or Ramp; None for other vectors."""
        if isinstance(e, E.Ramp):
            return e.base, e.stride
        if isinstance(e, E.Broadcast):
            return e.value, E.IntImm(0, e.dtype)
        if self.width(e) == 1:
            return e, E.IntImm(0, e.dtype)
        return None

    def _add_sub(self, e: E.BinaryOp) -> E.PrimExpr:
        nested, a, b = self._affine_operands(e)
        cls = type(e)
        if (self.width(a) > 1 or self.width(b) > 1) and _is_int(e.dtype):
            fa, fb = self._as_affine(a), self._as_affine(b)
            if fa is not None and fb is not None:
                return self._ramp(cls(fa[0], fb[0], e.dtype), cls(fa[1], fb[1], e.dtype), e.dtype, nested)
        a, b = self._simplified(a), self._simplified(b)
        return self._elementwise(e, [a, b], lambda x, y: cls(x, y, e.dtype))

    visit_Add = visit_Sub = _add_sub

    def visit_Mul(self, e: E.Mul) -> E.PrimExpr:
        nested, a, b = self._affine_operands(e)
        if _is_int(e.dtype) and (self.width(a) == 1) != (self.width(b) == 1):
            ramp, scale = (a, b) if self.width(b) == 1 else (b, a)
            f = self._as_affine(ramp)
            if f is not None:
                return self._ramp(E.Mul(f[0], scale, e.dtype), E.Mul(f[1], scale, e.dtype), e.dtype, nested)
        a, b = self._simplified(a), self._simplified(b)
        return self._elementwise(e, [a, b], lambda x, y: E.Mul(x, y, e.dtype))

    def _division(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        cls = type(e)
        if _is_int(e.dtype) and self.mask is not None and not _nonzero_const(b):
            # Masked-off lanes would divide too, and an integer division by zero traps.
            raise _NotVectorizable("integer division by a variable under a mask")
        if (cls in (E.FloorDiv, E.FloorMod) and isinstance(a, E.Ramp) and isinstance(b, E.IntImm)
                and b.value > 0 and isinstance(a.stride, E.IntImm) and a.stride.value >= 0):
            # Ramp(base, s) // c is Broadcast(base // c) when no lane crosses a multiple of c.
            rem = E.FloorMod(a.base, b, e.dtype)
            last = E.IntImm(a.stride.value * (self.lanes - 1), e.dtype)
            if self.an.can_prove(E.LT(E.Add(rem, last, e.dtype), b, "bool")):
                if cls is E.FloorDiv:
                    return E.Broadcast(self.an.simplify(E.FloorDiv(a.base, b, e.dtype)), self.lanes, e.dtype)
                return self._ramp(rem, a.stride, e.dtype)
        return self._elementwise(e, [a, b], lambda x, y: cls(x, y, e.dtype))

    visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = _division

    def _binary(self, e: E.BinaryOp) -> E.PrimExpr:
        cls = type(e)
        return self._elementwise(e, [self.visit(e.a), self.visit(e.b)], lambda x, y: cls(x, y, e.dtype))

    visit_Min = visit_Max = visit_And = visit_Or = _binary
    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _binary

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        return self._elementwise(e, [self.visit(e.a)], lambda x: E.Not(x, e.dtype))

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        widening = _is_int(e.dtype) and _is_int(v.dtype) and _bits(e.dtype) >= _bits(v.dtype)
        if isinstance(v, E.Ramp) and widening:
            # Widening keeps an index affine (its lanes do not overflow the narrow type).
            return self._ramp(E.Cast(e.dtype, v.base), E.Cast(e.dtype, v.stride), e.dtype)
        return self._elementwise(e, [v], lambda x: E.Cast(e.dtype, x))

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if e.op in ("omp_thread_id", "omp_num_threads"):
            return e
        return self._elementwise(e, [self.visit(a) for a in e.args], lambda *xs: E.Call(e.dtype, e.op, xs))

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if self.width(cond) == 1:
            # Every lane takes the same side; the code generator evaluates only that side.
            t, f = self.visit(e.true_value), self.visit(e.false_value)
            if self.width(t) == 1 and self.width(f) == 1:
                unchanged = cond is e.condition and t is e.true_value and f is e.false_value
                return e if unchanged else E.Select(cond, t, f, e.dtype)
            return self._vector(E.Select(cond, self.widen(t), self.widen(f), e.dtype))
        # Each side may read memory only in the lanes that choose it (a padding guard).
        m = self._mask_var()
        with self._masked(m):
            t = self.widen(self.visit(e.true_value))
        with self._masked(self._vector(E.Not(m, "bool"))):
            f = self.widen(self.visit(e.false_value))
        return self._vector(E.Let(m, cond, self._vector(E.Select(m, t, f, e.dtype)), e.dtype))

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        var = self._bind(e.var, value)
        try:
            body = self.visit(e.body)
        finally:
            self._let.pop(e.var, None)
        out = E.Let(var, value, body, e.dtype)
        return self._vector(out) if self.width(body) > 1 else out

    def _bind(self, var: E.Var, value: E.PrimExpr) -> E.Var:
        """The variable that holds ``value`` in the rewritten body (a new one for a vector)."""
        if self.width(value) > 1:
            new = self._vector(E.Var(var.name, var.dtype))
            self._let[var] = new
            var = new
        self.inner.add(var)
        return var

    # -------------------------------------------------------------- memory

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        if e.lanes != 1 or e.predicate is not None:
            raise _NotVectorizable("the body is already vectorized")
        if len(e.indices) != 1:
            raise _NotVectorizable(f"load of {e.buffer.name!r} is not flattened")
        index = self.visit(e.indices[0])
        if isinstance(index, E.Broadcast):
            index = index.value
        if self.width(index) == 1:
            return self._scalar_load(e, index)
        return E.BufferLoad(e.buffer, (index,), e.dtype, self.lanes, self._access_mask(e.buffer, index))

    def _access_mask(self, buf, index: E.PrimExpr) -> E.PrimExpr | None:
        """The predicate an access at vector ``index`` needs under the current mask.

        None for a private buffer (an allocation of this thread) whose every lane is
        provably in bounds: reading inactive lanes cannot fault, nobody else can observe
        them, and plain accesses let LLVM keep such a buffer in registers.
        """
        if self.mask is None or (buf.data in self.private and self._lanes_in_bounds(buf, index)):
            return None
        return self.mask

    def _lanes_in_bounds(self, buf, index: E.PrimExpr) -> bool:
        if not (isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm)):
            return False
        last = E.Add(index.base, E.IntImm(index.stride.value * (self.lanes - 1), index.dtype), index.dtype)
        return self._in_bounds(buf, index.base) and self._in_bounds(buf, last)

    def _scalar_load(self, e: E.BufferLoad, index: E.PrimExpr) -> E.PrimExpr:
        """A load at the same address in every lane.

        Under a mask it runs even when no lane is active, which is only safe where the
        address is provably inside the buffer; elsewhere it becomes a masked gather.
        """
        load = e if index is e.indices[0] else E.BufferLoad(e.buffer, (index,), e.dtype)
        if self.mask is None or self._in_bounds(e.buffer, index):
            return load
        return E.BufferLoad(e.buffer, (E.Broadcast(index, self.lanes, index.dtype),), e.dtype, self.lanes,
                            self.mask)

    def _in_bounds(self, buf, index: E.PrimExpr) -> bool:
        if len(buf.shape) != 1:
            return False
        size = E.convert(buf.shape[0])
        if size.dtype != index.dtype:
            size = E.Cast(index.dtype, size)
        zero = E.IntImm(0, index.dtype)
        return self.an.can_prove(E.And(E.GE(index, zero, "bool"), E.LT(index, size, "bool"), "bool"))

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        if s.predicate is not None:
            raise _NotVectorizable("the body is already vectorized")
        if len(s.indices) != 1:
            raise _NotVectorizable(f"store to {s.buffer.name!r} is not flattened")
        index = self.visit(s.indices[0])
        if self.width(index) == 1 or isinstance(index, E.Broadcast):
            # Every lane would write the same element; only the last lane's value survives.
            raise _NotVectorizable(f"the index of the store to {s.buffer.name!r} does not depend on "
                                   f"{self.var.name}")
        value = self.widen(self.visit(s.value))
        predicate = self._access_mask(s.buffer, index)
        if self.mask is not None and predicate is None:
            # Inactive lanes keep their old value: a blend, which only this thread can see.
            old = E.BufferLoad(s.buffer, (index,), s.buffer.dtype, self.lanes)
            value = self._vector(E.Select(self.mask, value, old, value.dtype))
        return S.BufferStore(s.buffer, value, (index,), predicate)

    # -------------------------------------------------------------- statements

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        return S.seq(*[self.visit(c) for c in s.seq])

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        value = self.visit(s.value)
        return s if value is s.value else S.Evaluate(value)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        return s if body is s.body else S.AttrStmt(s.node, s.key, s.value, body)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.visit(s.value)
        var = self._bind(s.var, value)
        try:
            if self.width(value) == 1:
                with self.an.bound(var, (value, value)):
                    body = self.visit(s.body)
            else:
                body = self.visit(s.body)
        finally:
            self._let.pop(s.var, None)
        return S.LetStmt(var, value, body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        if s.else_case is None and isinstance(s.condition, E.And):
            # Hoist the conjuncts that are the same in every lane into a scalar branch, so
            # that ``if i < n && k < 11`` tests k once instead of in each lane's mask.
            scalar, vector = [], []
            for c in conjuncts(s.condition):
                (vector if uses_var(c, {self.var} | set(self._let)) else scalar).append(c)
            if scalar and vector:
                inner = S.IfThenElse(E.all_of(*vector), s.then_case)
                return self.visit(S.IfThenElse(E.all_of(*scalar), inner))
        cond = self.visit(s.condition)
        if self.width(cond) == 1:
            with self.an.constraint(cond):  # helps prove the branch's loads in bounds
                then_case = self.visit(s.then_case)
            else_case = None if s.else_case is None else self.visit(s.else_case)
            return S.IfThenElse(cond, then_case, else_case)
        # The condition is evaluated once, before either branch writes anything.
        m = self._mask_var()
        with self._masked(m):
            then_case = self.visit(s.then_case)
        else_case = None
        if s.else_case is not None:
            with self._masked(self._vector(E.Not(m, "bool"))):
                else_case = self.visit(s.else_case)
        return S.LetStmt(m, cond, S.seq(then_case, else_case))

    def visit_For(self, s: S.For) -> S.Stmt:
        if s.kind in (S.ForKind.PARALLEL, S.ForKind.THREAD_BINDING):
            raise _NotVectorizable(f"{s.kind.value} loop {s.loop_var.name} inside a vectorized loop")
        lo, ext = self.visit(s.min), self.visit(s.extent)
        if self.width(lo) > 1 or self.width(ext) > 1:
            raise _NotVectorizable(f"the range of loop {s.loop_var.name} depends on {self.var.name}")
        self.inner.add(s.loop_var)
        with self.an.bound(s.loop_var, E.Range(lo, ext)):
            body = self.visit(s.body)
        kind = S.ForKind.SERIAL if s.kind is S.ForKind.VECTORIZED else s.kind
        return S.For(s.loop_var, lo, ext, kind, body, s.thread_tag)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        raise _NotVectorizable(f"allocation of {s.buffer.name!r} inside a vectorized loop")


# ====================================================================== legality


def _check_lanes_independent(stmt: S.Stmt, inner: set[E.Var], an: Analyzer) -> None:
    """Raise unless running ``stmt`` lane after lane equals running it for all lanes at once.

    The vector form runs each statement for every lane before the next statement, so
    a lane must never touch an element of a written buffer that another lane touches.
    That holds when every access to a written buffer uses one ``Ramp`` index with a
    non-zero constant stride (distinct lanes, distinct elements), or when a buffer is
    written by a single store and never read (stores are ordered by lane, as serially).
    The index must not depend on inner loops or lets, whose order the vector form changes.
    """
    accesses: dict[E.Var, tuple[list, list]] = {}  # by the buffer's data
    found = collect(stmt, lambda n: isinstance(n, (S.BufferStore, E.BufferLoad)))  # one walk for both
    for st in found:
        if isinstance(st, S.BufferStore):
            accesses.setdefault(st.buffer.data, ([], []))[0].append(st.indices[0])
    for ld in found:
        entry = accesses.get(ld.buffer.data) if isinstance(ld, E.BufferLoad) else None
        if entry is not None:
            entry[1].append(ld.indices[0])
    for stores, loads in accesses.values():
        if any(uses_var(i, inner) for i in stores + loads):
            raise _NotVectorizable("a store index depends on a variable bound inside the loop")
        if len(stores) == 1 and not loads:
            continue
        first, *rest = stores + loads
        if not (isinstance(first, E.Ramp) and isinstance(first.stride, E.IntImm) and first.stride.value):
            raise _NotVectorizable("lanes may access the same element of a written buffer")
        for other in rest:
            same = (isinstance(other, E.Ramp) and other.lanes == first.lanes
                    and E.is_const_int(other.stride, first.stride.value)
                    and an.can_prove_equal(other.base, first.base))
            if not same:
                raise _NotVectorizable("a written buffer is accessed at different elements across lanes")


# ====================================================================== helpers


def _children(node) -> list:
    out: list = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        out.extend(value if isinstance(value, tuple) else [value])
    return out


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _bits(dtype: str) -> int:
    return dtypes.bits(dtype)


def _nonzero_const(e: E.PrimExpr) -> bool:
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value != 0
