"""Floating-point math of ``Call`` nodes.

``exp``, ``log``, ``tanh`` and ``sigmoid`` of float32/float64, ``erf`` of float32 (and float16, computed
in float32) are our own inline implementations (:mod:`.vector_math`): LLVM would turn a
vector ``exp`` into one libm call per lane. Everything else is an LLVM intrinsic where
one exists, libm otherwise (one call per lane of a vector).
"""

from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from ..errors import CodegenError
from ..tir import expr as E
from ..tir.op import INT_OPS
from .llvm_machine import process_has_symbol
from .llvm_types import scalar_type, splat_constant, split_dtype, type_suffix
from .vector_math import VECTOR_MATH_OPS, VectorMath, supports

__all__ = ["MathEmitter", "FLOAT_OPS", "CALL_OPS", "LIBM_FUNCTIONS", "emit_call_extern", "extern_name",
           "per_lane"]

# Call.op -> LLVM intrinsic base name. ``round`` rounds halves away from zero and ``nearbyint``
# to even, as TVM lowers them (to llvm.round and llvm.nearbyint).
_INTRINSICS = {"exp2": "exp2", "log2": "log2", "log10": "log10",
               "sqrt": "sqrt", "sin": "sin", "cos": "cos", "fabs": "fabs", "floor": "floor",
               "ceil": "ceil", "round": "round", "trunc": "trunc", "nearbyint": "nearbyint"}
# Call.op -> libm names for (float, double).
_LIBM = {op: (op + "f", op) for op in ("erf", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                                       "atanh")}
#: The C math library functions generated code may call (an exported function must not take their names).
LIBM_FUNCTIONS = frozenset(name for names in _LIBM.values() for name in names)
_COMPOSED = ("rsqrt",)

FLOAT_OPS = frozenset((*VECTOR_MATH_OPS, *_INTRINSICS, *_LIBM, *_COMPOSED, "pow", "fmod"))
# Every Call.op the LLVM backend knows. ``omp_thread_id``/``omp_num_threads`` give the
# OpenMP thread number and team size inside a parallel loop (0 and 1 outside one).
CALL_OPS = frozenset((*FLOAT_OPS, *INT_OPS, "abs", "isnan", "omp_thread_id", "omp_num_threads"))


class MathEmitter:
    """Emits float math into one module, declaring what it calls on first use."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.ours = VectorMath(module)

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name)

    def intrinsic(self, base: str, t: ir.Type, nargs: int = 1) -> ir.Function:
        return self.declare(f"llvm.{base}.{type_suffix(t)}", t, [t] * nargs)

    def emit(self, b: ir.IRBuilder, op: str, args: list[ir.Value], fm: tuple) -> ir.Value:
        """``op`` applied to ``args`` (already of the result's float type)."""
        x = args[0]
        t = x.type
        if supports(op, t):  # strict IEEE inside whatever ``fm`` says: see vector_math
            return self.ours.call(b, op, x)
        if _is_half(t) and supports(op, _as_float(t)):
            return b.fptrunc(self.ours.call(b, op, b.fpext(x, _as_float(t))), t)
        if op in _INTRINSICS:
            return b.call(self.intrinsic(_INTRINSICS[op], t), [x], fastmath=fm)
        if op == "pow":
            return b.call(self.intrinsic("pow", t, 2), args[:2], fastmath=fm)
        if op == "fmod":  # LLVM's frem is C's fmod
            return b.frem(args[0], args[1], flags=fm)
        if op == "rsqrt":
            root = b.call(self.intrinsic("sqrt", t), [x], fastmath=fm)
            return b.fdiv(splat_constant(t, 1.0), root, flags=fm)
        if op in _LIBM:
            return self._libm(b, _LIBM[op], x, fm)
        raise CodegenError(f"unknown float math op {op!r}")

    def _libm(self, b: ir.IRBuilder, names: tuple[str, str], x: ir.Value, fm: tuple) -> ir.Value:
        if isinstance(x.type, ir.VectorType):  # libm has no vector forms: one call per lane
            out = ir.Constant(x.type, ir.Undefined)
            for k in range(x.type.count):
                lane = self._libm(b, names, b.extract_element(x, ir.Constant(ir.IntType(32), k)), fm)
                out = b.insert_element(out, lane, ir.Constant(ir.IntType(32), k))
            return out
        if isinstance(x.type, ir.DoubleType):
            return b.call(self.declare(names[1], x.type, [x.type]), [x], fastmath=fm)
        f32 = ir.FloatType()
        wide = b.fpext(x, f32) if isinstance(x.type, ir.HalfType) else x  # half computes in float
        y = b.call(self.declare(names[0], f32, [f32]), [wide], fastmath=fm)
        return b.fptrunc(y, x.type) if isinstance(x.type, ir.HalfType) else y


def _is_half(t: ir.Type) -> bool:
    return isinstance(t.element if isinstance(t, ir.VectorType) else t, ir.HalfType)


def _as_float(t: ir.Type) -> ir.Type:
    """The float32 type with as many lanes as ``t``."""
    return ir.VectorType(ir.FloatType(), t.count) if isinstance(t, ir.VectorType) else ir.FloatType()


# ---------------------------------------------------------------------------- extern calls


def extern_name(e) -> str:
    """The function name of a ``call_extern``/``call_pure_extern`` call (its first argument,
    a StringImm, broadcast if the call was vectorised)."""
    name = e.args[0]
    while isinstance(name, E.Broadcast):
        name = name.value
    if not isinstance(name, E.StringImm):
        raise CodegenError(f"{e.op} needs the function name as its first argument, got {name!r}")
    return name.value


def per_lane(b: ir.IRBuilder, values: list[ir.Value], ret: ir.Type, scalar_call) -> ir.Value:
    """``scalar_call(scalars)`` on each lane of the vector ``values`` (scalars are shared by
    every lane), gathered into a vector; a plain call when no value is a vector."""
    lanes = max([v.type.count for v in values if isinstance(v.type, ir.VectorType)], default=1)
    if lanes == 1:
        return scalar_call(values)
    out = ir.Constant(ir.VectorType(ret, lanes), ir.Undefined)
    for k in range(lanes):
        idx = ir.Constant(ir.IntType(32), k)
        lane_args = [b.extract_element(v, idx) if isinstance(v.type, ir.VectorType) else v for v in values]
        out = b.insert_element(out, scalar_call(lane_args), idx)
    return out


def _check_host_symbol(name: str, triple: str) -> None:
    """Refuse a call of a function this process does not have when compiling for this machine,
    naming it, before the code is compiled (the JIT would refuse to link it)."""
    if triple and triple != llvm.get_process_triple():
        return  # code for another machine: its symbols are resolved there
    if process_has_symbol(name):
        return
    hint = " (CUDA math such as __expf exists only in CUDA kernels)" if name.startswith("__") else ""
    raise CodegenError(f"call_extern: no function {name!r} is loaded in this process{hint}; load the "
                       "library defining it first, with ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL) or "
                       "llvmlite.binding.load_library_permanently(path)")


def emit_call_extern(gen, e, name: str | None = None) -> ir.Value:
    """``call_extern(dtype, name, *args)`` (or ``call_pure_extern``): declare ``dtype name(args...)``
    and call it.

    ``gen`` is the LLVM code generator (its ``b``, ``expr`` and ``_declare``); ``name``
    replaces the call's own (the CUDA backend's libdevice names). Without it, for this
    machine, the function must be loaded in the process. Vector arguments are called lane
    by lane, since C functions take scalars.
    """
    if name is None:
        _check_host_symbol(extern_name(e), gen.module.triple)
    values = [gen.expr(a) for a in e.args[1:]]
    ret = scalar_type(split_dtype(e.dtype)[0])
    scalar_args = [v.type.element if isinstance(v.type, ir.VectorType) else v.type for v in values]
    fn = gen._declare(name or extern_name(e), ret, scalar_args)
    return per_lane(gen.b, values, ret, lambda args: gen.b.call(fn, args))
