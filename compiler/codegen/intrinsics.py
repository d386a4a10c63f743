"""Floating-point math of ``Call`` nodes: LLVM intrinsics where they exist, libm otherwise."""

from __future__ import annotations

from llvmlite import ir

from ..errors import CodegenError
from .llvm_types import splat_constant, type_suffix

__all__ = ["MathEmitter", "FLOAT_OPS", "CALL_OPS"]

# Call.op -> LLVM intrinsic base name. ``round`` rounds half to even, as numpy does.
_INTRINSICS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
               "sqrt": "sqrt", "sin": "sin", "cos": "cos", "fabs": "fabs", "floor": "floor",
               "ceil": "ceil", "round": "roundeven", "trunc": "trunc"}
# Call.op -> libm names for (float, double).
_LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}
_COMPOSED = ("rsqrt", "sigmoid")

FLOAT_OPS = frozenset((*_INTRINSICS, *_LIBM, *_COMPOSED, "pow"))
# Every Call.op the LLVM backend knows. ``omp_thread_id``/``omp_num_threads`` give the
# OpenMP thread number and team size inside a parallel loop (0 and 1 outside one).
CALL_OPS = frozenset((*FLOAT_OPS, "abs", "isnan", "omp_thread_id", "omp_num_threads"))


class MathEmitter:
    """Emits float math into one module, declaring what it calls on first use."""

    def __init__(self, module: ir.Module):
        self.module = module

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
        if op in _INTRINSICS:
            return b.call(self.intrinsic(_INTRINSICS[op], t), [x], fastmath=fm)
        if op == "pow":
            return b.call(self.intrinsic("pow", t, 2), args[:2], fastmath=fm)
        if op == "rsqrt":
            root = b.call(self.intrinsic("sqrt", t), [x], fastmath=fm)
            return b.fdiv(splat_constant(t, 1.0), root, flags=fm)
        if op == "sigmoid":
            neg = b.fneg(x, flags=fm)
            e = b.call(self.intrinsic("exp", t), [neg], fastmath=fm)
            return b.fdiv(splat_constant(t, 1.0), b.fadd(splat_constant(t, 1.0), e, flags=fm), flags=fm)
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
