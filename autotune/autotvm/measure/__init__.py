"""AutoTVM's ``autotvm.measure`` over :mod:`measure`.

:mod:`.measure` has AutoTVM's measure inputs and results, error numbers, the ``Builder``
and ``Runner`` bases, ``measure_option`` and ``create_measure_batch``;
:mod:`.measure_methods` has :class:`LocalBuilder` and :class:`LocalRunner` (this
project's :class:`measure.LocalBuilder` and :class:`measure.LocalRunner` with AutoTVM's
arguments); :mod:`.custom` plugs a user's own Builder or Runner into the tuning loop.
"""

from .measure import (
    AutotvmMeasureOptions,
    Builder,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    Runner,
    create_measure_batch,
    error_kind,
    error_no,
    measure_option,
    to_measure_result,
)
from .measure_methods import BuildResult, LocalBuilder, LocalRunner, RPCRunner

__all__ = ["measure_option", "create_measure_batch", "LocalBuilder", "LocalRunner", "RPCRunner",
           "BuildResult", "Builder", "Runner", "MeasureInput", "MeasureResult", "MeasureErrorNo",
           "AutotvmMeasureOptions", "error_no", "error_kind", "to_measure_result"]
