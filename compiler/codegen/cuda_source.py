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
from ..tir.builtin import SYNC_OP
from ..tir.function import PrimFunc
from ..tir.functor import Functor
from ..tir.op import EXTERN_OPS
from ..tir.printer import LineWriter
from .intrinsics import extern_name

__all__ = ["cuda_source"]

_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Mod: "%", E.FloorDiv: "/", E.FloorMod: "%",
        E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}
_FLOAT_CALLS = {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "fabs": "fabsf", "floor": "floorf",
                "ceil": "ceilf", "round": "roundf", "nearbyint": "rintf", "trunc": "truncf", "tanh": "tanhf",
                "exp2": "exp2f", "log2": "log2f", "rsqrt": "rsqrtf"}


def _ctype(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype == "handle":
        return "void*"
    if dtypes.is_float(dtype):
        names = {"float16": "half", "float32": "float", "float64": "double", "bfloat16": "__nv_bfloat16"}
        return names[dtype]
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
    return _EXPR.visit(e)


class _ExprSource(Functor):
    """CUDA C text of an expression."""

    def visit_Var(self, e):
        return _name(e)

    def visit_IntImm(self, e):
        return ("true" if e.value else "false") if e.dtype == "bool" else str(e.value)

    def visit_FloatImm(self, e):
        return f"{e.value!r}f" if e.dtype == "float32" else repr(e.value)

    def visit_BinaryOp(self, e):
        return f"({self.visit(e.a)} {_OPS[type(e)]} {self.visit(e.b)})"

    def visit_Min(self, e):
        return f"{type(e).__name__.lower()}({self.visit(e.a)}, {self.visit(e.b)})"

    visit_Max = visit_Min

    def visit_Not(self, e):
        return f"!{self.visit(e.a)}"

    def visit_Cast(self, e):
        return f"(({_ctype(e.dtype)}){self.visit(e.value)})"

    def visit_Select(self, e):
        return f"({self.visit(e.condition)} ? {self.visit(e.true_value)} : {self.visit(e.false_value)})"

    def visit_Call(self, e):
        args = e.args
        if e.op in EXTERN_OPS:  # the function by its own name: expf(x), __expf(x)
            name, args = extern_name(e), args[1:]
        else:
            name = _FLOAT_CALLS.get(e.op, e.op) if e.dtype == "float32" else e.op
        return f"{name}({', '.join(self.visit(a) for a in args)})"

    def visit_BufferLoad(self, e):
        vec = f"/*x{e.lanes}*/" if e.lanes > 1 else ""
        return f"{_name(e.buffer)}{vec}[{', '.join(self.visit(i) for i in e.indices)}]"

    def visit_Ramp(self, e):
        return f"ramp({self.visit(e.base)}, {self.visit(e.stride)}, {e.lanes})"

    def visit_Broadcast(self, e):
        return f"broadcast({self.visit(e.value)}, {e.lanes})"

    def visit_Let(self, e):
        return f"({self.visit(e.body)} /* {_name(e.var)} = {self.visit(e.value)} */)"

    def generic_visit(self, e):
        return f"/*{type(e).__name__}*/"


_EXPR = _ExprSource()


class _StmtSource(LineWriter):
    """Appends the CUDA C lines of a statement to ``lines`` at indent level ``ind``."""

    def visit_AttrStmt(self, s):
        if s.key == "thread_extent":
            self._line(f"// {getattr(s.node, 'name', s.node)} in [0, {_expr(s.value)})")
        self.visit(s.body)

    def visit_For(self, s):
        v = _name(s.loop_var)
        pragma = {S.ForKind.UNROLLED: "#pragma unroll", S.ForKind.VECTORIZED: "// vectorized"}.get(s.kind)
        if pragma:
            self._line(pragma)
        stop = _expr(s.extent) if E.is_const_int(s.min, 0) else f"{_expr(s.min)} + {_expr(s.extent)}"
        self._line(f"for ({_ctype(s.loop_var.dtype)} {v} = {_expr(s.min)}; {v} < {stop}; ++{v}) {{")
        self._nested(s.body)
        self._line("}")

    def visit_While(self, s):
        self._line(f"while ({_expr(s.condition)}) {{")
        self._nested(s.body)
        self._line("}")

    def visit_BufferStore(self, s):
        vec = f"/*x{s.indices[0].lanes}*/" if s.indices and isinstance(s.indices[0], E.Ramp) else ""
        idx = ", ".join(_expr(i) for i in s.indices)
        self._line(f"{_name(s.buffer)}{vec}[{idx}] = {_expr(s.value)};")

    def visit_Allocate(self, s):
        b = s.buffer
        size = " * ".join(_expr(d) for d in b.shape)
        qual = "__shared__ " if b.scope == "shared" else ""
        self._line(f"{qual}{_ctype(b.dtype)} {_name(b)}[{size}];")
        self.visit(s.body)

    def visit_IfThenElse(self, s):
        self._line(f"if ({_expr(s.condition)}) {{")
        self._nested(s.then_case)
        if s.else_case is not None:
            self._line("} else {")
            self._nested(s.else_case)
        self._line("}")

    def visit_LetStmt(self, s):
        self._line(f"{_ctype(s.var.dtype)} {_name(s.var)} = {_expr(s.value)};")
        self.visit(s.body)

    def visit_Evaluate(self, s):
        if isinstance(s.value, E.Call) and s.value.op == SYNC_OP:
            self._line("__syncthreads();")
        elif not isinstance(s.value, (E.IntImm, E.FloatImm)):
            self._line(f"{_expr(s.value)};")

    def generic_visit(self, s):
        self._line(f"/* {type(s).__name__} */")


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
    _StmtSource(1, lines).visit(f.body)
    lines.append("}")
    return "\n".join(lines)


def cuda_source(funcs: list[PrimFunc]) -> str:
    """CUDA C text of the device functions ``funcs``."""
    return "\n\n".join(_kernel(f) for f in funcs) + "\n"
