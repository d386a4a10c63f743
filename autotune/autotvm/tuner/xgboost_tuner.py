"""AutoTVM's ``XGBTuner``: an XGBoost cost model guiding simulated annealing."""

from __future__ import annotations

from autotune.tuner import xgb_tuner

from .tuner import Tuner

__all__ = ["XGBTuner"]


class XGBTuner(Tuner, xgb_tuner.XGBTuner):
    """A gradient-boosted cost model guiding simulated annealing (AutoTVM's ``XGBTuner``).

    ``plan_size`` (configs picked per search of the model; the search runs again after as many
    measurements), ``feature_type`` ("itervar", "knob", "curve") and ``loss_type`` ("rank",
    "reg") mean what they mean in AutoTVM; ``num_threads`` is the model's threads (None: 1, not
    AutoTVM's all cores, so that a tuning run does not depend on the machine's core count);
    ``optimizer`` must be "sa"; ``diversity_filter_ratio`` is accepted for AutoTVM's signature
    only as None, and ``log_interval`` is accepted and unused.
    """

    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "rank",
                 num_threads: int | None = None, optimizer: str = "sa", diversity_filter_ratio=None,
                 log_interval: int = 50, seed: int | None = None):
        if optimizer != "sa":
            raise ValueError(f"XGBTuner: optimizer {optimizer!r} is not supported; it uses simulated "
                             "annealing ('sa')")
        if diversity_filter_ratio is not None:
            raise ValueError("XGBTuner: diversity_filter_ratio is not supported")
        super().__init__(task, seed=seed, feature_type=feature_type, loss_type=loss_type,
                         plan_size=plan_size, num_threads=num_threads or 1)
