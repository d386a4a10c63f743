"""The vocabulary shared by the schedule, the passes and the code generators: attribute keys
the loop builder writes into the IR and the passes read, and the barrier builtin.

It lives beside the IR so that the schedule, which writes these names, does not depend on
the passes (:mod:`compiler.transform`) that read them.
"""

from __future__ import annotations

from . import expr as E
from . import stmt as S

__all__ = ["PRAGMA_PREFIX", "DOUBLE_BUFFER_SCOPE", "DOUBLE_BUFFER_WRITE", "SCAN_LOOP", "SYNC_OP",
           "PREFETCH_SCOPE", "PREFETCH", "sync_stmt", "is_sync", "is_prefetch"]

#: ``AttrStmt`` keys of ``Stage.pragma(axis, name)`` are ``PRAGMA_PREFIX + name``.
PRAGMA_PREFIX = "pragma_"
#: ``AttrStmt(buffer data, DOUBLE_BUFFER_SCOPE)`` around the Allocate of a double-buffered buffer.
DOUBLE_BUFFER_SCOPE = "double_buffer_scope"
#: ``AttrStmt`` around the loads of the next tile, written by :mod:`compiler.transform.inject_double_buffer`.
DOUBLE_BUFFER_WRITE = "double_buffer_write"
#: ``AttrStmt`` key marking the time loop of a scan, which runs on the host around its kernels.
SCAN_LOOP = "scan_loop"
#: ``AttrStmt(buffer data, PREFETCH_SCOPE, offset)`` as the body of a loop: prefetch what the
#: body reads of that buffer ``offset`` iterations ahead (``Stage.prefetch``).
PREFETCH_SCOPE = "prefetch_scope"
#: ``Evaluate(Call("int32", PREFETCH, (access_ptr,)))``: ask the cache line at that address in.
PREFETCH = "prefetch"
#: The barrier of a thread block: ``tvm_storage_sync("shared")``.
SYNC_OP = "tvm_storage_sync"


def sync_stmt() -> S.Stmt:
    """The barrier statement: ``tvm_storage_sync('shared')``."""
    return S.Evaluate(E.Call("int32", SYNC_OP, (E.StringImm("shared"),)))


def is_sync(s) -> bool:
    """Whether ``s`` is a barrier statement."""
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == SYNC_OP


def is_prefetch(s) -> bool:
    """Whether ``s`` is a prefetch statement (a hint that code without caches may drop)."""
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == PREFETCH
