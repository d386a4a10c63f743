"""The canonical form of integer index arithmetic: ``sum(coefficient * atom) + constant``.

An *atom* is any expression that is not itself a sum: a variable, a load, a
``FloorDiv``/``FloorMod``/``Min``/``Max`` node, a product of two non-constants.
Atoms are identified by a structural :func:`expr_key` so that equal atoms merge
(``x*y + x*y -> x*y*2``) and cancel. Terms keep the order of their first
appearance, which makes the printed form of a simplified expression stable.
"""

from __future__ import annotations

from .. import dtypes
from ..tir import expr as E
from ..tir.evaluate import wrap_int
from ..tir.functor import Functor, child_fields

__all__ = ["LinearSum", "expr_key", "flatten", "is_index_dtype"]


def is_index_dtype(dtype: str) -> bool:
    """Signed scalar integers: the dtypes that are rewritten algebraically.

    Unsigned arithmetic wraps at zero, so ``a - b + b`` style reasoning with
    bounds would be unsound there; those dtypes are only constant-folded.
    """
    return dtype in ("int8", "int16", "int32", "int64")


class LinearSum:
    """A mutable ``sum(coef * atom) + const`` over one integer dtype."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: str, const: int = 0, terms: dict | None = None):
        self.dtype = dtype
        self.const = const
        # key -> [atom, coefficient]; insertion order is the output order.
        self.terms: dict[str, list] = terms if terms is not None else {}

    @staticmethod
    def atom(e: E.PrimExpr, coef: int = 1) -> LinearSum:
        s = LinearSum(e.dtype)
        s.add_term(e, coef)
        return s

    def copy(self) -> LinearSum:
        return LinearSum(self.dtype, self.const, {k: [a, c] for k, (a, c) in self.terms.items()})

    def add_term(self, atom: E.PrimExpr, coef: int, key: str | None = None) -> None:
        if coef == 0:
            return
        key = key if key is not None else expr_key(atom)
        entry = self.terms.get(key)
        if entry is None:
            self.terms[key] = [atom, coef]
        elif entry[1] + coef == 0:
            del self.terms[key]
        else:
            entry[1] += coef

    def iadd(self, other: LinearSum, scale: int = 1) -> LinearSum:
        """``self += scale * other`` in place; returns self."""
        if scale == 0:
            return self
        self.const += scale * other.const
        for key, (atom, coef) in other.terms.items():
            self.add_term(atom, scale * coef, key)
        return self

    def __add__(self, other: LinearSum) -> LinearSum:
        return self.copy().iadd(other)

    def __sub__(self, other: LinearSum) -> LinearSum:
        return self.copy().iadd(other, -1)

    def scaled(self, k: int) -> LinearSum:
        if k == 0:
            return LinearSum(self.dtype)
        return LinearSum(self.dtype, self.const * k,
                         {key: [a, c * k] for key, (a, c) in self.terms.items()})

    @property
    def is_const(self) -> bool:
        return not self.terms

    def single_atom(self) -> E.PrimExpr | None:
        """The atom when this sum is exactly ``1 * atom + 0``."""
        if self.const == 0 and len(self.terms) == 1:
            atom, coef = next(iter(self.terms.values()))
            if coef == 1:
                return atom
        return None

    def to_expr(self) -> E.PrimExpr:
        """Positive terms first (in order), then the constant, then the negative terms."""
        dt = self.dtype

        def imm(v: int) -> E.PrimExpr:
            return E.IntImm(wrap_int(v, dt), dt)

        def term(atom, coef):
            return atom if coef == 1 else E.Mul(atom, imm(coef), dt)

        pos = [(a, c) for a, c in self.terms.values() if c > 0]
        neg = [(a, -c) for a, c in self.terms.values() if c < 0]
        if pos:
            out = term(*pos[0])
            for a, c in pos[1:]:
                out = E.Add(out, term(a, c), dt)
            if self.const > 0:
                out = E.Add(out, imm(self.const), dt)
            elif self.const < 0:
                out = E.Sub(out, imm(-self.const), dt)
        else:
            out = imm(self.const)
        for a, c in neg:
            out = E.Sub(out, term(a, c), dt)
        return out


def flatten(e: E.PrimExpr) -> LinearSum:
    """Read an already-simplified expression as a sum, without rewriting its atoms."""
    return _FLATTEN.visit(e)


class _Flatten(Functor):
    """Sums, differences and constant multiples of index dtype are read through; anything
    else is an atom."""

    def visit_IntImm(self, e):
        return LinearSum(e.dtype, e.value)

    def visit_Add(self, e):
        if not is_index_dtype(e.dtype):
            return LinearSum.atom(e)
        return self.visit(e.a).iadd(self.visit(e.b))

    def visit_Sub(self, e):
        if not is_index_dtype(e.dtype):
            return LinearSum.atom(e)
        return self.visit(e.a).iadd(self.visit(e.b), -1)

    def visit_Mul(self, e):
        if is_index_dtype(e.dtype):
            if isinstance(e.b, E.IntImm):
                return self.visit(e.a).scaled(e.b.value)
            if isinstance(e.a, E.IntImm):
                return self.visit(e.b).scaled(e.a.value)
        return LinearSum.atom(e)

    def generic_visit(self, e):
        return LinearSum.atom(e)


_FLATTEN = _Flatten()

# Fields that identify a node beyond its children.
_EXTRA = {E.Call: ("op",), E.Ramp: ("lanes",), E.Broadcast: ("lanes",), E.BufferLoad: ("lanes",)}


def expr_key(e) -> str:
    """A structural identity of ``e``: equal keys mean equal values.

    Variables and buffers are named by object identity; sums are keyed
    independently of term order. Nodes whose meaning depends on a binder
    (``Let``, ``Reduce``) are keyed by identity, which is safe (never merges
    distinct values) though not complete.
    """
    if type(e) is E.Var:  # the commonest atom, keyed without the functor's dispatch
        return _EXPR_KEY.visit_Var(e)
    return _EXPR_KEY.visit(e)


class _ExprKey(Functor):
    """The functor behind :func:`expr_key`.

    The keys of compound nodes are remembered: a select tree or a product that is one atom of
    many sums would otherwise be keyed again, subtree by subtree, at every sum that holds it.
    Nodes are immutable, so a node's key never changes. An entry holds its node, so that the
    node's ``id`` cannot pass to another object while the entry lives.
    """

    _LEAVES = (E.Var, E.IntImm, E.FloatImm, E.StringImm)
    _MAX_REMEMBERED = 1 << 14  # entries; all are dropped at once when full

    def __init__(self):
        self._remembered: dict[int, tuple[object, str]] = {}

    def visit(self, e):
        if isinstance(e, self._LEAVES):
            return super().visit(e)
        hit = self._remembered.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        key = super().visit(e)
        if len(self._remembered) >= self._MAX_REMEMBERED:
            self._remembered.clear()
        self._remembered[id(e)] = (e, key)
        return key

    def visit_Var(self, e):
        return f"${id(e)}"

    def visit_IntImm(self, e):
        return f"{e.value}:{e.dtype}"

    def visit_FloatImm(self, e):
        return f"{e.value!r}:{e.dtype}"

    def visit_StringImm(self, e):
        return repr(e.value)

    def visit_Let(self, e):
        return f"#{id(e)}"

    visit_Reduce = visit_Let

    def visit_Add(self, e):
        if is_index_dtype(e.dtype):
            key = self._sum_key(e)
            if key is not None:
                return key
        return self._node_key(e)

    visit_Sub = visit_Add

    def visit_Mul(self, e):
        if isinstance(e.a, E.IntImm) or isinstance(e.b, E.IntImm):
            return self.visit_Add(e)
        return self._node_key(e)

    def generic_visit(self, e):
        if not isinstance(e, E.PrimExpr):
            return f"#{id(e)}"
        return self._node_key(e)

    @staticmethod
    def _sum_key(e) -> str | None:
        """Key of a sum independent of term order; None when ``e`` is a single atom."""
        s = flatten(e)
        if len(s.terms) == 1 and s.const == 0 and next(iter(s.terms.values()))[1] == 1:
            return None
        parts = sorted(f"{c}*{k}" for k, (_, c) in s.terms.items())
        return f"sum:{e.dtype}({s.const};{';'.join(parts)})"

    def _node_key(self, e) -> str:
        head = type(e).__name__ + ":" + e.dtype
        for name in _EXTRA.get(type(e), ()):
            head += f":{getattr(e, name)}"
        if isinstance(e, E.BufferLoad):
            head += f":@{id(e.buffer)}"
        if isinstance(e, E.ProducerLoad):
            head += f":@{id(e.producer)}"
        parts = []
        for name in child_fields(type(e)):
            value = getattr(e, name)
            if isinstance(value, tuple):
                parts.append("[" + ",".join(self.visit(v) for v in value) + "]")
            elif isinstance(value, E.PrimExpr):
                parts.append(self.visit(value))
        return head + "(" + ",".join(parts) + ")"


_EXPR_KEY = _ExprKey()


def bool_const(value: bool) -> E.IntImm:
    return E.IntImm(int(bool(value)), "bool")


def int_const(value: int, dtype: str) -> E.IntImm:
    return E.IntImm(wrap_int(value, dtype), dtype)


def is_signed_int(dtype: str) -> bool:
    return dtypes.is_int(dtype) and not dtypes.is_uint(dtype)
