"""Loop-IR passes: each is a function from PrimFunc (or Stmt) to the same kind."""

from .hoist_if import hoist_if
from .inject_prefetch import inject_prefetch
from .loop_partition import loop_partition
from .remove_no_op import remove_no_op
from .simplify import StmtSimplifier, simplify
from .unroll_loops import MAX_UNROLLED_STATEMENTS, unroll_loops
from .vectorize import MAX_LANES, vectorize_loops

__all__ = ["hoist_if", "inject_prefetch", "simplify", "remove_no_op", "unroll_loops", "loop_partition",
           "vectorize_loops", "StmtSimplifier", "MAX_UNROLLED_STATEMENTS", "MAX_LANES"]
