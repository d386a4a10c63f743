"""Arithmetic analysis of integer index expressions: simplification, bounds, intervals.

``simplify(expr)`` folds constants and rewrites signed integer arithmetic into a
canonical sum of terms; an :class:`Analyzer` carries what is known about
variables (loop ranges, let values) and answers ``can_prove``,
``const_int_bound`` and ``interval`` questions. ``evaluate`` computes the exact
value of an expression (the semantics the folder and the interpreter share; they
belong to the IR and live in :mod:`compiler.tir.evaluate`, re-exported here).
"""

from ..tir.evaluate import binary_value, cast_value, evaluate, wrap_int
from .analyzer import Analyzer, simplify
from .canonical import expr_key

__all__ = ["Analyzer", "simplify", "evaluate", "expr_key", "binary_value", "cast_value",
           "wrap_int"]
