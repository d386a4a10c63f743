"""Replace unrolled loops by copies of their bodies, and auto-unroll small loop nests.

The decision follows TVM's ``UnrollLoop`` pass. Walking inside out, a loop is
*auto-unrolled* when it is serial with a constant extent, holds no loop left rolled, sits
at most ``auto_max_depth`` unrolled loops deep, and its extent times the statements its
body runs (counting the copies of loops unrolled inside it) is at most the current
``auto_max_step``. Loops of kind UNROLLED are unrolled whenever their extent is constant.
``auto_max_step`` comes from the argument, or inside ``pragma_auto_unroll_max_step``
attributes (``Stage.pragma``) from their value; ``pragma_unroll_explicit = 0`` keeps the
chosen loops as loops of kind UNROLLED, which the code generator asks LLVM to unroll,
instead of copying their bodies here. The pass removes the pragma attributes.

Loops bound to thread axes are transparent (they are not loops of one thread), as are
vectorized loops (they become single vector statements).

The decisions are made first, over the whole function; then one simplifying walk copies the
chosen loops, each copy simplified with its loop variables' values, and simplifies the rest.
"""

from __future__ import annotations

import logging

from ..arith import Analyzer
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.builtin import PRAGMA_PREFIX
from ..tir.function import PrimFunc
from ..tir.functor import IRMutator
from ._common import apply_to_body
from .simplify import StmtSimplifier

__all__ = ["unroll_loops", "MAX_UNROLLED_STATEMENTS", "PRAGMA_PREFIX", "AUTO_MAX_DEPTH"]

logger = logging.getLogger(__name__)

# Beyond this many statement copies an unroll request is refused (the loop stays
# serial): code size would grow without bound and compile time with it.
MAX_UNROLLED_STATEMENTS = 4096

#: How many auto-unrolled loops may nest (TVM's default ``auto_max_depth``).
AUTO_MAX_DEPTH = 8

_TRANSPARENT = (S.ForKind.THREAD_BINDING, S.ForKind.VECTORIZED)


def unroll_loops(func: PrimFunc | S.Stmt, auto_max_step: int = 0,
                 explicit: bool = True) -> PrimFunc | S.Stmt:
    """Unroll loops of kind UNROLLED with a constant extent (others become SERIAL), and
    auto-unroll loop nests of at most ``auto_max_step`` statements (see the module's doc).

    ``explicit=False`` marks the chosen loops UNROLLED instead of copying their bodies.

    The result is simplified as :func:`~compiler.transform.simplify` leaves a function: each
    copy of a body with its loop variables' values, the rest with what its loops imply. One
    walk does both; unrolling and then simplifying walked every copy twice.
    """
    return apply_to_body(func, lambda body, an: _unroll(body, an, auto_max_step, explicit))


def _unroll(body: S.Stmt, an: Analyzer, auto_max_step: int, explicit: bool) -> S.Stmt:
    unroller = _Unroller(auto_max_step, explicit)
    body = unroller.visit(body)
    return _CopyingSimplifier(unroller.to_copy, an).visit(body)


class _Unroller(IRMutator):
    def __init__(self, auto_max_step: int, explicit: bool):
        self.auto_max_step = auto_max_step
        self.explicit = explicit
        # Of the statement just visited: statements it runs (unrolled copies included),
        # how many unrolled loops nest in it, and whether it holds a loop left rolled.
        self.steps = 0
        self.unroll_depth = 0
        self.rolled_depth = 0
        # The loops to replace by copies of their bodies (nodes hash by identity).
        self.to_copy: set[S.For] = set()

    def visit_PrimExpr(self, e):
        return e  # statements only

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        self.steps += 1
        return s

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        self.steps += 1
        return s

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        steps, unroll_depth, rolled_depth = self.steps, self.unroll_depth, self.rolled_depth
        out = []
        for child in s.seq:
            self.steps = self.unroll_depth = self.rolled_depth = 0
            out.append(self.visit(child))
            steps += self.steps
            unroll_depth = max(unroll_depth, self.unroll_depth)
            rolled_depth = max(rolled_depth, self.rolled_depth)
        self.steps, self.unroll_depth, self.rolled_depth = steps, unroll_depth, rolled_depth
        if all(a is b for a, b in zip(out, s.seq, strict=True)):
            return s
        return S.seq(*out)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.key == PRAGMA_PREFIX + "auto_unroll_max_step":
            saved, self.auto_max_step = self.auto_max_step, E.const_value(s.value)
            body = self.visit(s.body)
            self.auto_max_step = saved
            return body
        if s.key == PRAGMA_PREFIX + "unroll_explicit":
            saved, self.explicit = self.explicit, bool(E.const_value(s.value))
            body = self.visit(s.body)
            self.explicit = saved
            return body
        return self.generic_visit(s)

    def visit_For(self, s: S.For) -> S.Stmt:
        body = self.visit(s.body)
        if s.kind in _TRANSPARENT:
            return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)
        extent = s.extent.value if isinstance(s.extent, E.IntImm) else None
        if s.kind is S.ForKind.UNROLLED:
            wanted = extent is not None
        else:
            wanted = (s.kind is S.ForKind.SERIAL and extent is not None and self.rolled_depth == 0
                      and self.unroll_depth <= AUTO_MAX_DEPTH
                      and extent * self.steps <= self.auto_max_step)
        if wanted and self.explicit and extent * self.steps > MAX_UNROLLED_STATEMENTS:
            logger.debug("not unrolling %s: more than %d statements", s.loop_var.name,
                         MAX_UNROLLED_STATEMENTS)
            wanted = False
        if wanted:
            self.steps *= extent
            self.unroll_depth += 1
            kind = S.ForKind.UNROLLED
            if self.explicit:
                # Copied once the whole nest is known: a nest is then copied and simplified in
                # one walk, not once per level (which simplified the inner copies again at
                # every loop around them).
                marked = S.For(s.loop_var, s.min, s.extent, kind, body, s.thread_tag)
                self.to_copy.add(marked)
                return marked
        else:
            self.rolled_depth += 1
            kind = S.ForKind.SERIAL if s.kind is S.ForKind.UNROLLED else s.kind
        if body is s.body and kind is s.kind:
            return s
        return S.For(s.loop_var, s.min, s.extent, kind, body, s.thread_tag)


class _CopyingSimplifier(StmtSimplifier):
    """Simplifies a statement, replacing each loop of ``to_copy`` by copies of its body with
    the loop variable substituted: only the branches a copy's values select are walked."""

    def __init__(self, to_copy: set[S.For], analyzer: Analyzer):
        super().__init__(analyzer)
        self.to_copy = to_copy

    def visit_For(self, s: S.For) -> S.Stmt:
        if s not in self.to_copy:
            return super().visit_For(s)
        dt = s.loop_var.dtype
        copies = []
        for k in range(s.extent.value):
            value = self.an.simplify(E.Add(s.min, E.IntImm(k, dt), dt))
            with self.an.substituting({s.loop_var: value}):
                copies.append(self.visit(s.body))
        return S.seq(*copies)
