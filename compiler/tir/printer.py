"""Readable, stable text for expressions, statements and functions."""

from __future__ import annotations

import math

from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .evaluate import wrap_int
from .functor import Functor

__all__ = ["expr_to_str", "stmt_to_str", "func_to_str", "LineWriter"]

_BINOP = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.FloorDiv: "//", E.FloorMod: "%",
          E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
          E.And: "&&", E.Or: "||"}
_PREC = {E.Or: 1, E.And: 2, E.EQ: 3, E.NE: 3, E.LT: 3, E.LE: 3, E.GT: 3, E.GE: 3,
         E.Add: 4, E.Sub: 4, E.Mul: 5, E.Div: 5, E.FloorDiv: 5, E.FloorMod: 5}


def _num(e) -> str:
    if isinstance(e, E.IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int32",) else f"{e.value}{_suffix(e.dtype)}"
    v = e.value
    if math.isinf(v):
        text = "inf" if v > 0 else "-inf"
    elif math.isnan(v):
        text = "nan"
    else:
        text = repr(float(v))
    return text + ("f" if e.dtype == "float32" else _suffix(e.dtype) if e.dtype != "float64" else "")


def _suffix(dtype: str) -> str:
    return {"int64": "i64", "int8": "i8", "int16": "i16", "uint8": "u8", "uint16": "u16",
            "uint32": "u32", "uint64": "u64", "float16": "h"}.get(dtype, "")


def expr_to_str(e, prec: int = 0) -> str:
    """Text of an expression; ``prec`` is the binding strength of the context."""
    if isinstance(e, E.IterVar):
        return e.var.name
    return _ExprPrinter().text(e, prec)


class _ExprPrinter(Functor):
    """Text of expressions; ``prec`` is the binding strength of the enclosing context."""

    def __init__(self):
        self.prec = 0

    def text(self, e, prec: int = 0) -> str:
        saved, self.prec = self.prec, prec
        try:
            return self.visit(e)
        finally:
            self.prec = saved

    def visit_Var(self, e):
        return e.name

    def visit_IntImm(self, e):
        return _num(e)

    visit_FloatImm = visit_IntImm

    def visit_StringImm(self, e):
        return repr(e.value)

    def visit_BinaryOp(self, e):
        p = _PREC[type(e)]
        text = f"{self.text(e.a, p)} {_BINOP[type(e)]} {self.text(e.b, p + 1)}"
        return f"({text})" if p < self.prec else text

    def visit_Mod(self, e):
        return f"truncmod({self.text(e.a)}, {self.text(e.b)})"

    def visit_Min(self, e):
        return f"min({self.text(e.a)}, {self.text(e.b)})"

    def visit_Max(self, e):
        return f"max({self.text(e.a)}, {self.text(e.b)})"

    def visit_Not(self, e):
        return f"!{self.text(e.a, 9)}"

    def visit_Cast(self, e):
        return f"{e.dtype}({self.text(e.value)})"

    def visit_Select(self, e):
        return (f"select({self.text(e.condition)}, {self.text(e.true_value)}, "
                f"{self.text(e.false_value)})")

    def visit_Call(self, e):
        return f"{e.op}({', '.join(self.text(a) for a in e.args)})"

    def visit_Let(self, e):
        return f"(let {e.var.name} = {self.text(e.value)} in {self.text(e.body)})"

    def visit_ProducerLoad(self, e):
        return f"{e.producer.name}[{', '.join(self.text(i) for i in e.indices)}]"

    def visit_BufferLoad(self, e):
        lanes = f"<x{e.lanes}>" if e.lanes > 1 else ""
        mask = "" if e.predicate is None else f", mask={self.text(e.predicate)}"
        return f"{e.buffer.name}{lanes}[{', '.join(self.text(i) for i in e.indices)}{mask}]"

    def visit_Ramp(self, e):
        return f"ramp({self.text(e.base)}, {self.text(e.stride)}, {e.lanes})"

    def visit_Broadcast(self, e):
        return f"x{e.lanes}({self.text(e.value)})"

    def visit_Reduce(self, e):
        axes = ", ".join(iv.var.name for iv in e.axis)
        cond = "" if E.is_const_int(e.condition) or (
            isinstance(e.condition, E.IntImm) and e.condition.value) \
            else f", where={self.text(e.condition)}"
        source = (self.text(e.source) if not e.sources else
                  "(" + ", ".join(self.text(x) for x in e.sources) + f")[{e.value_index}]")
        init = "" if not e.init else ", init=(" + ", ".join(self.text(x) for x in e.init) + ")"
        return f"reduce_{e.combiner.label}({source}, axis=[{axes}]{cond}{init})"

    def generic_visit(self, e):
        return f"<{type(e).__name__}>"


def stmt_to_str(s, indent: int = 0) -> str:
    """Text of a statement, one line per statement, indented by ``indent`` levels."""
    printer = _StmtPrinter(indent)
    printer.visit(s)
    return "\n".join(printer.lines)


class LineWriter(Functor):
    """A statement functor that writes indented lines of text (the printer, CUDA C):
    ``_line`` appends one at the current level ``ind``, ``_nested`` visits a body one
    level deeper."""

    def __init__(self, indent: int, lines: list[str] | None = None):
        self.ind = indent
        self.lines: list[str] = [] if lines is None else lines

    def _line(self, text: str) -> None:
        self.lines.append("  " * self.ind + text)

    def _nested(self, s) -> None:
        self.ind += 1
        try:
            self.visit(s)
        finally:
            self.ind -= 1

    def visit_SeqStmt(self, s):
        for c in s.seq:
            self.visit(c)


class _StmtPrinter(LineWriter):
    """Appends the lines of a statement to ``lines``; ``ind`` is the current indent level."""

    def visit_For(self, s):
        kind = "" if s.kind is S.ForKind.SERIAL else f" {s.kind.value}"
        if s.thread_tag:
            kind += f" {s.thread_tag!r}"
        stop = expr_to_str(_loop_stop(s))
        rng = (f"{expr_to_str(s.extent)}" if E.is_const_int(s.min, 0)
               else f"{expr_to_str(s.min)}, {stop}")
        self._line(f"for {s.loop_var.name} in range({rng}){kind}:")
        self._nested(s.body)

    def visit_While(self, s):
        self._line(f"while {expr_to_str(s.condition)}:")
        self._nested(s.body)

    def visit_BufferStore(self, s):
        idx = ", ".join(expr_to_str(i) for i in s.indices)
        mask = "" if s.predicate is None else f", mask={expr_to_str(s.predicate)}"
        self._line(f"{s.buffer.name}[{idx}{mask}] = {expr_to_str(s.value)}")

    def visit_Allocate(self, s):
        b = s.buffer
        shape = ", ".join(expr_to_str(x) for x in b.shape)
        self._line(f"allocate {b.name}[{b.dtype} * {shape}], {b.scope}")
        self.visit(s.body)

    def visit_IfThenElse(self, s):
        self._line(f"if {expr_to_str(s.condition)}:")
        self._nested(s.then_case)
        if s.else_case is not None:
            self._line("else:")
            self._nested(s.else_case)

    def visit_LetStmt(self, s):
        self._line(f"{s.var.name} = {expr_to_str(s.value)}")
        self.visit(s.body)

    def visit_Evaluate(self, s):
        self._line(expr_to_str(s.value))

    def visit_AttrStmt(self, s):
        node = getattr(s.node, "name", None) or getattr(getattr(s.node, "var", None), "name", "")
        self._line(f"// attr [{node}] {s.key} = {expr_to_str(s.value)}")
        self.visit(s.body)

    def generic_visit(self, s):
        self._line(f"<{type(s).__name__}>")


_INDEX_DTYPES = ("int8", "int16", "int32", "int64")


def _loop_stop(s):
    """``min + extent`` of a loop, read as a sum of terms so that ``range(a, a + (b - a))``
    reads ``range(a, b)`` and ``range(1, 1 + 11)`` reads ``range(1, 12)``.

    Terms that print alike cancel, and the sum is written as :mod:`compiler.arith` writes
    its canonical form: positive terms in order of first appearance, then the constant,
    then the negative terms.
    """
    stop = s.min + s.extent
    if stop.dtype not in _INDEX_DTYPES:
        return stop
    terms: dict[str, list] = {}
    const = _read_sum(stop, 1, terms)
    return _write_sum(terms, const, stop.dtype)


def _read_sum(e, coef: int, terms: dict) -> int:
    """Add ``coef * e`` to ``terms`` (the text of an atom -> [atom, coefficient]), reading
    through sums and constant multiples; returns the constant part."""
    if isinstance(e, E.IntImm):
        return coef * e.value
    if isinstance(e, (E.Add, E.Sub)) and e.dtype in _INDEX_DTYPES:
        sign = 1 if isinstance(e, E.Add) else -1
        return _read_sum(e.a, coef, terms) + _read_sum(e.b, sign * coef, terms)
    if isinstance(e, E.Mul) and e.dtype in _INDEX_DTYPES:
        if isinstance(e.b, E.IntImm):
            return _read_sum(e.a, coef * e.b.value, terms)
        if isinstance(e.a, E.IntImm):
            return _read_sum(e.b, coef * e.a.value, terms)
    if coef != 0:
        key = f"{e.dtype}:{expr_to_str(e)}"
        entry = terms.get(key)
        if entry is None:
            terms[key] = [e, coef]
        elif entry[1] + coef == 0:
            del terms[key]
        else:
            entry[1] += coef
    return 0


def _write_sum(terms: dict, const: int, dtype: str):
    """The expression ``sum(coefficient * atom) + const`` of :func:`_read_sum`'s terms."""

    def imm(v: int):
        return E.IntImm(wrap_int(v, dtype), dtype)

    def term(atom, coef: int):
        return atom if coef == 1 else E.Mul(atom, imm(coef), dtype)

    pos = [(a, c) for a, c in terms.values() if c > 0]
    neg = [(a, -c) for a, c in terms.values() if c < 0]
    if pos:
        out = term(*pos[0])
        for a, c in pos[1:]:
            out = E.Add(out, term(a, c), dtype)
        if const > 0:
            out = E.Add(out, imm(const), dtype)
        elif const < 0:
            out = E.Sub(out, imm(-const), dtype)
    else:
        out = imm(const)
    for a, c in neg:
        out = E.Sub(out, term(a, c), dtype)
    return out


def func_to_str(f) -> str:
    """Text of a function: its signature line, then its body indented one level."""
    params = []
    for p in f.params:
        if isinstance(p, Buffer):
            shape = ", ".join(expr_to_str(x) for x in p.shape)
            strides = f", strides=[{', '.join(expr_to_str(x) for x in p.strides)}]" if p.strides else ""
            params.append(f"{p.name}: {p.dtype}[{shape}]{strides}")
        else:
            params.append(f"{p.name}: {p.dtype}")
    head = f"def {f.name}({', '.join(params)}):"
    return head + "\n" + stmt_to_str(f.body, 1)
