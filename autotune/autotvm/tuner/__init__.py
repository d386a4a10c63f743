"""AutoTVM's ``autotvm.tuner``: ``GridSearchTuner``, ``RandomTuner``, ``GATuner``, ``XGBTuner``
and ``XGBoostCostModel``.

Each tuner is this project's tuner of the same strategy (:mod:`autotune.tuner`) with
AutoTVM's constructor, ``tune(n_trial, measure_option, early_stopping, callbacks)`` and
AutoTVM's index semantics (:mod:`.index_based_tuner`). One concept per module:
:mod:`.tuner` (the base), :mod:`.index_based_tuner`, :mod:`.ga_tuner`,
:mod:`.xgboost_tuner`, :mod:`.xgboost_cost_model`.
"""

from .ga_tuner import GATuner
from .index_based_tuner import GridSearchTuner, IndexBaseTuner, RandomTuner
from .tuner import Tuner
from .xgboost_cost_model import XGBoostCostModel
from .xgboost_tuner import XGBTuner

__all__ = ["Tuner", "IndexBaseTuner", "GridSearchTuner", "RandomTuner", "GATuner", "XGBTuner",
           "XGBoostCostModel"]
