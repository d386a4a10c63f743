"""AutoTVM's ``Tuner``: what AutoTVM's tuners add to this project's (:mod:`autotune.tuner`).

``tune(n_trial, measure_option, early_stopping, callbacks)`` runs :func:`autotune.tune`
(the one tuning loop) and calls the callbacks as AutoTVM does, ``callback(tuner, inputs,
results)``. As in AutoTVM, results go where the callbacks put them: the loop itself tunes
into an in-memory log, makes ``n_trial`` trials of the tuner's picks (fewer when the space
runs out or ``early_stopping`` stops it) and measures nothing more. ``has_next()``,
``next_batch(n)``, ``update(inputs, results)``, ``load_history(data_set)``, ``reset()``,
``best_config``, ``best_flops``, ``best_measure_pair`` and ``best_iter`` mean what they
mean in AutoTVM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from autotune import tuning

from .. import measure
from ..measure import MeasureInput, MeasureResult

__all__ = ["Tuner"]

# AutoTVM scripts configure the "autotvm" logger to watch each trial; it gets the same lines here.
logger = logging.getLogger("autotvm")


class Tuner:
    """What AutoTVM's tuners add to ours (a mixin before a :class:`autotune.tuner.Tuner`):
    :meth:`tune`, :meth:`reset`, an :meth:`update` that takes AutoTVM's measure results,
    ``best_flops``, ``best_measure_pair`` and ``best_iter`` (kept by :meth:`tune`, as in
    AutoTVM)."""

    lead_with_default = False  # AutoTVM's tune() measures the tuner's picks only
    best_flops: float = 0.0
    best_measure_pair: tuple | None = None
    best_iter: int = 0

    def tune(self, n_trial: int, measure_option=None, early_stopping: int | None = None,
             callbacks: Sequence[Callable] = (), si_prefix: str = "G"):
        """Measure up to ``n_trial`` configs of the task, calling each of ``callbacks`` as
        ``callback(tuner, inputs, results)`` after every measurement; returns the
        :class:`autotune.TuneResult`. ``measure_option`` comes from
        :func:`autotune.autotvm.measure_option` (default: local builder and runner);
        ``early_stopping=N`` stops after N trials without a better config. ``si_prefix`` is
        accepted for AutoTVM's signature (progress is shown by ``callback.progress_bar``)."""
        if n_trial < 0:
            raise ValueError(f"n_trial must be >= 0, got {n_trial}")
        options = measure_option if measure_option is not None else measure.measure_option()
        callbacks = list(callbacks)
        done = 0

        def call_back(inp, res) -> None:
            nonlocal done
            views = [MeasureInput.of(inp)], [MeasureResult.of(res)]
            flops = self._note_best(*views) if res.error_kind is None and res.costs else 0.0
            done += 1
            logger.debug("No: %d\tGFLOPS: %.2f/%.2f\tresult: %s\t%s", done, flops / 1e9,
                         self.best_flops / 1e9, views[1][0], inp.config)
            for cb in callbacks:
                cb(self, *views)

        try:
            return tuning.tune(self.task, trials=n_trial, tuner=self, db=None, measure_option=options,
                        early_stopping=early_stopping, callbacks=[call_back], progress=False,
                        remeasure=False)
        finally:
            if measure_option is None:
                options.close()

    def update(self, inputs: Sequence, results: Sequence) -> None:
        """Learn from measured ``inputs`` (with ``.config``) and their ``results``: AutoTVM's
        ``MeasureResult`` (``error_no``, ``costs``) or this project's."""
        super().update(inputs, [_seconds(r) if hasattr(r, "error_no") else r for r in results])

    def reset(self) -> None:
        """Forget the best measurement (AutoTVM's ``reset``); what was measured stays measured."""
        self.best_config = None
        self.best_cost = float("inf")
        self.best_flops = 0.0
        self.best_measure_pair = None
        self.best_iter = 0

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """AutoTVM's ``load_history``: ``(MeasureInput, MeasureResult)`` pairs, such as
        :func:`autotune.autotvm.record.load_from_file` gives. Configs of this tuner's task
        count as measured and are never proposed; with a learning tuner (``XGBTuner``),
        records of other workloads of the same template train its cost model once there are
        ``min_seed_records`` of them (AutoTVM's transfer learning). ``(config, result)``
        pairs, as :func:`autotune.tune` passes when it resumes, load as in every tuner."""
        pairs = list(data_set)
        if not pairs or not hasattr(pairs[0][0], "task"):
            super().load_history(pairs)
            return
        key = self.task.workload_key  # "llvm" and "llvm -mcpu=<this CPU>" are one workload
        own = [(inp.config, _seconds(res)) for inp, res in pairs if inp.task.workload_key == key]
        others = [(inp.config, inp.task, _seconds(res)) for inp, res in pairs if inp.task.workload_key != key]
        if own:
            super().load_history(own)
        if others and hasattr(self, "pretrain") and len(others) >= min_seed_records:
            self.pretrain(others)

    def _note_best(self, inputs: list, results: list) -> float:
        """Keep the best measurement so far, as AutoTVM's tuners do; returns its FLOPS."""
        seconds = sum(results[0].costs) / len(results[0].costs)
        flops = self.task.flop / seconds if seconds > 0 else 0.0
        if flops > self.best_flops:
            self.best_flops = flops
            self.best_config = inputs[0].config
            self.best_measure_pair = (inputs[0], results[0])
            self.best_iter = len(self.measured)
        return flops


def _seconds(result) -> float | None:
    """Mean seconds of an AutoTVM measure result; None for a failure."""
    if result.error_no != 0 or not result.costs:
        return None
    return sum(result.costs) / len(result.costs)
