"""A readable CUDA C rendering of device PrimFuncs (``mod.get_source("cuda")``).

For people to read: the PTX (:mod:`.nvptx`) is what runs, and this text is never
compiled. Floor division and modulo print as C's ``/`` and ``%``, which agree for the
non-negative indices lowering produces; vector nodes print in a pseudo-syntax.
"""

from __future__ import annotations

from .. import dtypes
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.op import EXTERN_OPS
from ..tir.transform.thread_sync import SYNC_OP
from .intrinsics import extern_name

__all__ = ["cuda_source"]

_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.FloorDiv: "/", E.FloorMod: "%",
        E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}
_FLOAT_CALLS = {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "fabs": "fabsf", "floor": "floorf",
                "ceil": "ceilf", "round": "rintf", "trunc": "truncf", "tanh": "tanhf", "exp2": "exp2f",
                "log2": "log2f", "rsqrt": "rsqrtf"}


def _ctype(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype == "handle":
        return "void*"
    if dtypes.is_float(dtype):
        return {"float16": "half", "float32": "float", "float64": "double"}[dtype]
    bits = dtypes.bits(dtype)
    if bits == 32 and not dtypes.is_uint(dtype):
        return "int"
    return f"{'u' if dtypes.is_uint(dtype) else ''}int{bits}_t"


def _name(v) -> str:
    name = v.name
    if name.startswith(("threadIdx.", "blockIdx.")):
        return name
    return name.replace(".", "_")


def _expr(e) -> str:
    if isinstance(e, E.Var):
        return _name(e)
    if isinstance(e, E.IntImm):
        return ("true" if e.value else "false") if e.dtype == "bool" else str(e.value)
    if isinstance(e, E.FloatImm):
        return f"{e.value!r}f" if e.dtype == "float32" else repr(e.value)
    op = _OPS.get(type(e))
    if op is not None:
        return f"({_expr(e.a)} {op} {_expr(e.b)})"
    if isinstance(e, (E.Min, E.Max)):
        return f"{type(e).__name__.lower()}({_expr(e.a)}, {_expr(e.b)})"
    if isinstance(e, E.Not):
        return f"!{_expr(e.a)}"
    if isinstance(e, E.Cast):
        return f"(({_ctype(e.dtype)}){_expr(e.value)})"
    if isinstance(e, E.Select):
        return f"({_expr(e.condition)} ? {_expr(e.true_value)} : {_expr(e.false_value)})"
    if isinstance(e, E.Call):
        args = e.args
        if e.op in EXTERN_OPS:  # the function by its own name: expf(x), __expf(x)
            name, args = extern_name(e), args[1:]
        else:
            name = _FLOAT_CALLS.get(e.op, e.op) if e.dtype == "float32" else e.op
        return f"{name}({', '.join(_expr(a) for a in args)})"
    if isinstance(e, E.BufferLoad):
        vec = f"/*x{e.lanes}*/" if e.lanes > 1 else ""
        return f"{_name(e.buffer)}{vec}[{', '.join(_expr(i) for i in e.indices)}]"
    if isinstance(e, E.Ramp):
        return f"ramp({_expr(e.base)}, {_expr(e.stride)}, {e.lanes})"
    if isinstance(e, E.Broadcast):
        return f"broadcast({_expr(e.value)}, {e.lanes})"
    if isinstance(e, E.Let):
        return f"({_expr(e.body)} /* {_name(e.var)} = {_expr(e.value)} */)"
    return f"/*{type(e).__name__}*/"


def _stmt(s, ind: int, out: list) -> None:
    pad = "  " * ind
    if isinstance(s, S.SeqStmt):
        for c in s.seq:
            _stmt(c, ind, out)
    elif isinstance(s, S.AttrStmt):
        if s.key == "thread_extent":
            out.append(f"{pad}// {getattr(s.node, 'name', s.node)} in [0, {_expr(s.value)})")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.For):
        v = _name(s.loop_var)
        pragma = {S.ForKind.UNROLLED: "#pragma unroll", S.ForKind.VECTORIZED: "// vectorized"}.get(s.kind)
        if pragma:
            out.append(f"{pad}{pragma}")
        stop = _expr(s.extent) if E.is_const_int(s.min, 0) else f"{_expr(s.min)} + {_expr(s.extent)}"
        out.append(f"{pad}for ({_ctype(s.loop_var.dtype)} {v} = {_expr(s.min)}; {v} < {stop}; ++{v}) {{")
        _stmt(s.body, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, S.BufferStore):
        vec = f"/*x{s.indices[0].lanes}*/" if s.indices and isinstance(s.indices[0], E.Ramp) else ""
        idx = ", ".join(_expr(i) for i in s.indices)
        out.append(f"{pad}{_name(s.buffer)}{vec}[{idx}] = {_expr(s.value)};")
    elif isinstance(s, S.Allocate):
        b = s.buffer
        size = " * ".join(_expr(d) for d in b.shape)
        qual = "__shared__ " if b.scope == "shared" else ""
        out.append(f"{pad}{qual}{_ctype(b.dtype)} {_name(b)}[{size}];")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.IfThenElse):
        out.append(f"{pad}if ({_expr(s.condition)}) {{")
        _stmt(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}}} else {{")
            _stmt(s.else_case, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, S.LetStmt):
        out.append(f"{pad}{_ctype(s.var.dtype)} {_name(s.var)} = {_expr(s.value)};")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.Evaluate):
        if isinstance(s.value, E.Call) and s.value.op == SYNC_OP:
            out.append(f"{pad}__syncthreads();")
        elif not isinstance(s.value, (E.IntImm, E.FloatImm)):
            out.append(f"{pad}{_expr(s.value)};")
    else:
        out.append(f"{pad}/* {type(s).__name__} */")


def _kernel(f: PrimFunc) -> str:
    params = []
    for p in f.params:
        if isinstance(p, Buffer):
            params.append(f"{_ctype(p.dtype)}* __restrict__ {_name(p)}")
        else:
            params.append(f"{_ctype(p.dtype)} {_name(p)}")
    block = f.attrs.get("block") or [1, 1, 1]
    threads = block[0] * block[1] * block[2]
    grid = ", ".join(str(g) for g in f.attrs.get("grid", []))
    lines = [f"// grid ({grid}), block ({', '.join(map(str, block))})",
             f'extern "C" __global__ void __launch_bounds__({threads}) {f.name}({", ".join(params)}) {{']
    _stmt(f.body, 1, lines)
    lines.append("}")
    return "\n".join(lines)


def cuda_source(funcs: list[PrimFunc]) -> str:
    """CUDA C text of the device functions ``funcs``."""
    return "\n\n".join(_kernel(f) for f in funcs) + "\n"
