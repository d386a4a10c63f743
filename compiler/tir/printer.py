"""Readable, stable text for expressions, statements and functions."""

from __future__ import annotations

import math

from . import expr as E
from . import stmt as S

__all__ = ["expr_to_str", "stmt_to_str", "func_to_str"]

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
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return _num(e)
    if isinstance(e, E.StringImm):
        return repr(e.value)
    op = _BINOP.get(type(e))
    if op is not None:
        p = _PREC[type(e)]
        text = f"{expr_to_str(e.a, p)} {op} {expr_to_str(e.b, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, E.Min):
        return f"min({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, E.Max):
        return f"max({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, E.Not):
        return f"!{expr_to_str(e.a, 9)}"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({expr_to_str(e.value)})"
    if isinstance(e, E.Select):
        return (f"select({expr_to_str(e.condition)}, {expr_to_str(e.true_value)}, "
                f"{expr_to_str(e.false_value)})")
    if isinstance(e, E.Call):
        return f"{e.op}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, E.Let):
        return f"(let {e.var.name} = {expr_to_str(e.value)} in {expr_to_str(e.body)})"
    if isinstance(e, E.ProducerLoad):
        return f"{e.producer.name}[{', '.join(expr_to_str(i) for i in e.indices)}]"
    if isinstance(e, E.BufferLoad):
        lanes = f"<x{e.lanes}>" if e.lanes > 1 else ""
        mask = "" if e.predicate is None else f", mask={expr_to_str(e.predicate)}"
        return f"{e.buffer.name}{lanes}[{', '.join(expr_to_str(i) for i in e.indices)}{mask}]"
    if isinstance(e, E.Ramp):
        return f"ramp({expr_to_str(e.base)}, {expr_to_str(e.stride)}, {e.lanes})"
    if isinstance(e, E.Broadcast):
        return f"x{e.lanes}({expr_to_str(e.value)})"
    if isinstance(e, E.Reduce):
        axes = ", ".join(iv.var.name for iv in e.axis)
        cond = "" if E.is_const_int(e.condition) or (
            isinstance(e.condition, E.IntImm) and e.condition.value) \
            else f", where={expr_to_str(e.condition)}"
        source = (expr_to_str(e.source) if not e.sources else
                  "(" + ", ".join(expr_to_str(x) for x in e.sources) + f")[{e.value_index}]")
        return f"reduce_{e.combiner.label}({source}, axis=[{axes}]{cond})"
    return f"<{type(e).__name__}>"


def stmt_to_str(s, indent: int = 0) -> str:
    lines: list[str] = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if isinstance(s, S.SeqStmt):
        for c in s.seq:
            _stmt(c, ind, out)
    elif isinstance(s, S.For):
        kind = "" if s.kind is S.ForKind.SERIAL else f" {s.kind.value}"
        if s.thread_tag:
            kind += f" {s.thread_tag!r}"
        stop = expr_to_str(_loop_stop(s))
        rng = (f"{expr_to_str(s.extent)}" if E.is_const_int(s.min, 0)
               else f"{expr_to_str(s.min)}, {stop}")
        out.append(f"{pad}for {s.loop_var.name} in range({rng}){kind}:")
        _stmt(s.body, ind + 1, out)
    elif isinstance(s, S.BufferStore):
        idx = ", ".join(expr_to_str(i) for i in s.indices)
        mask = "" if s.predicate is None else f", mask={expr_to_str(s.predicate)}"
        out.append(f"{pad}{s.buffer.name}[{idx}{mask}] = {expr_to_str(s.value)}")
    elif isinstance(s, S.Allocate):
        b = s.buffer
        shape = ", ".join(expr_to_str(x) for x in b.shape)
        out.append(f"{pad}allocate {b.name}[{b.dtype} * {shape}], {b.scope}")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.IfThenElse):
        out.append(f"{pad}if {expr_to_str(s.condition)}:")
        _stmt(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            _stmt(s.else_case, ind + 1, out)
    elif isinstance(s, S.LetStmt):
        out.append(f"{pad}{s.var.name} = {expr_to_str(s.value)}")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.Evaluate):
        out.append(f"{pad}{expr_to_str(s.value)}")
    elif isinstance(s, S.AttrStmt):
        node = getattr(s.node, "name", None) or getattr(getattr(s.node, "var", None), "name", "")
        out.append(f"{pad}// attr [{node}] {s.key} = {expr_to_str(s.value)}")
        _stmt(s.body, ind, out)
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def _loop_stop(s):
    """``min + extent`` of a loop, simplified so that ``range(a, a + (b - a))`` reads ``range(a, b)``."""
    stop = s.min + s.extent
    try:
        from ..arith import simplify
    except ImportError:  # pragma: no cover - printing must work whatever is importable
        return stop
    return simplify(stop)


def func_to_str(f) -> str:
    from .buffer import Buffer

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
