"""AutoTVM's ``autotvm.task.dispatcher``: dispatch contexts (:mod:`search_spaces.dispatch`).

``DispatchContext.current`` is the innermost context of this thread; ``with ctx:`` stacks
contexts, each keeping the one it was entered in as ``_old_ctx``, and a query the inner
one cannot answer falls through to the outer ones, down to the global
:class:`FallbackContext`.
"""

from autotune.history import ApplyHistoryBest
from search_spaces.dispatch import ApplyConfig, DispatchContext, FallbackContext, clear_fallback_cache

__all__ = ["DispatchContext", "ApplyConfig", "ApplyHistoryBest", "FallbackContext", "clear_fallback_cache"]
