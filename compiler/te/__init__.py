"""Tensor expressions: describe what to compute, then schedule how.

>>> n = te.var("n")
>>> A = te.placeholder((n,), name="A")
>>> B = te.compute(A.shape, lambda i: A[i] * 2, name="B")
>>> s = te.create_schedule(B.op)
"""

from ..schedule import Schedule, Stage, create_schedule
from ..tir.expr import IterVar, PrimExpr, Range, Var
from . import schedule, tag
from .intrin import (  # noqa: A004
                     abs,
                     acos,
                     acosh,
                     all,
                     any,
                     asin,
                     asinh,
                     atan,
                     atanh,
                     call_extern,
                     call_intrin,
                     call_pure_extern,
                     ceil,
                     comm_reducer,
                     const,
                     cos,
                     cosh,
                     div,
                     erf,
                     exp,
                     exp2,
                     floor,
                     floordiv,
                     floormod,
                     fmod,
                     if_then_else,
                     indexdiv,
                     indexmod,
                     isfinite,
                     isinf,
                     isnan,
                     log,
                     log2,
                     log10,
                     max,
                     max_value,
                     min,
                     min_value,
                     nearbyint,
                     popcount,
                     power,
                     round,
                     rsqrt,
                     sigmoid,
                     sin,
                     sinh,
                     sqrt,
                     sum,
                     tan,
                     tanh,
                     trunc,
                     truncdiv,
                     truncmod,
)
from .operation import compute, extern, placeholder, reduce_axis, scan, size_var, thread_axis, var
from .tag import TagScope, tag_scope
from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor, TensorSlice
from .tensor_intrin import TensorIntrin, decl_tensor_intrin, transpose_intrin

__all__ = [
    "placeholder", "compute", "reduce_axis", "var", "size_var", "thread_axis", "create_schedule",
    "Schedule", "Stage", "Tensor", "Operation", "PlaceholderOp", "ComputeOp", "IterVar", "PrimExpr",
    "Range", "Var", "sum", "max", "min", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt",
    "tanh", "sin", "cos", "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc", "power",
    "isnan", "if_then_else", "all", "any", "max_value", "min_value", "const", "floordiv", "floormod",
    "call_extern", "comm_reducer",
    "scan", "extern", "ScanOp", "ExternOp",
    "call_intrin", "call_pure_extern", "indexdiv", "indexmod", "div", "truncdiv", "truncmod", "nearbyint",
    "popcount", "fmod", "isinf", "isfinite", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh",
    "decl_tensor_intrin", "TensorIntrin", "transpose_intrin",
    "tag", "tag_scope", "TagScope", "TensorSlice", "schedule",
]
