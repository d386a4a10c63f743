"""AutoTVM's ``autotvm.task.space``: knobs, entities and config spaces (:mod:`search_spaces.space`),
and ``InstantiationError``, what ``cfg.raise_error`` raises."""

from search_spaces.errors import InstantiationError
from search_spaces.space import (
    AnnotateEntity,
    AnnotateSpace,
    Axis,
    ConfigEntity,
    ConfigSpace,
    FallbackConfigEntity,
    OtherOptionEntity,
    OtherOptionSpace,
    ReorderEntity,
    ReorderSpace,
    SplitEntity,
    SplitSpace,
    VirtualAxis,
    get_factors,
)

__all__ = ["ConfigSpace", "ConfigEntity", "SplitSpace", "SplitEntity", "ReorderSpace", "ReorderEntity",
           "AnnotateSpace", "AnnotateEntity", "OtherOptionSpace", "OtherOptionEntity", "VirtualAxis",
           "InstantiationError", "FallbackConfigEntity", "Axis", "get_factors"]
