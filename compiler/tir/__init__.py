"""The loop-level IR: expressions, statements, buffers, functions, passes and the printer."""

from . import ir_builder
from .analysis import free_vars, post_order_visit, substitute
from .buffer import Buffer, decl_buffer
from .expr import *  # noqa: F403
from .expr import __all__ as _expr_all
from .function import ArgSpec, IRModule, PrimFunc, Signature
from .functor import IRMutator, IRVisitor
from .op import *  # noqa: F403
from .op import __all__ as _op_all
from .packed import call_packed
from .stmt import *  # noqa: F403
from .stmt import __all__ as _stmt_all

__all__ = [*_expr_all, *_stmt_all, *_op_all, "Buffer", "decl_buffer", "PrimFunc", "IRModule", "ArgSpec",
           "Signature", "IRMutator", "IRVisitor", "free_vars", "post_order_visit", "substitute",
           "call_packed", "ir_builder"]
