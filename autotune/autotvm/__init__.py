"""AutoTVM's API over this project: AutoTVM scripts run with only their imports renamed.

``from autotune import autotvm`` gives AutoTVM's names with AutoTVM's meaning::

    @autotvm.template("tutorial/matmul")          # one template for every target
    def matmul(N, L, M, dtype): ...
    task = autotvm.task.create("tutorial/matmul", args=(N, L, M, "float32"), target="llvm")
    option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=5))
    tuner = autotvm.tuner.RandomTuner(task)
    tuner.tune(n_trial=10, measure_option=option,
               callbacks=[autotvm.callback.log_to_file("matmul.log")])
    with autotvm.apply_history_best("matmul.log"):
        with compiler.Target("llvm"):
            s, args = matmul(N, L, M, "float32")

One concept per module: :mod:`.task`, :mod:`.measure`, :mod:`.tuner`,
:mod:`.callback`, :mod:`.record` (AutoTVM's JSON-lines logs, :func:`import_log`) and
:mod:`.dispatch`. The tuners run :func:`autotune.tune`, the one tuning loop, which
stays the main API.
"""

from autotune.history import ApplyHistoryBest
from search_spaces import get_config

from . import callback, database, env, feature, measure, record, task, tuner
from .dispatch import apply_history_best
from .measure import (
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    RPCRunner,
    measure_option,
)
from .record import import_log
from .task import ApplyConfig, ConfigEntity, ConfigSpace, DispatchContext, FallbackContext, template

__all__ = ["env", "template", "get_config", "task", "measure", "tuner", "callback", "record", "database",
           "feature", "measure_option",
           "LocalBuilder", "LocalRunner", "RPCRunner", "MeasureInput", "MeasureResult", "MeasureErrorNo",
           "apply_history_best", "ApplyHistoryBest", "import_log", "ConfigSpace", "ConfigEntity",
           "DispatchContext", "ApplyConfig", "FallbackContext"]

