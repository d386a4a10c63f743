"""AutoTVM's ``autotvm.env``: ``GLOBAL_SCOPE.silent`` silences the fallback context's warnings
of untuned workloads."""

from search_spaces.dispatch import GLOBAL_SCOPE

__all__ = ["GLOBAL_SCOPE"]
