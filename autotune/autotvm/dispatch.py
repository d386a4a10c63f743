"""``apply_history_best`` as AutoTVM users call it: on a tuning log or an AutoTVM JSON log."""

from __future__ import annotations

import os

import db as tuning_db
from autotune import history

from .callback import is_autotvm_log
from .record import import_log

__all__ = ["apply_history_best"]


def apply_history_best(records, **options):
    """A dispatch context (``with autotvm.apply_history_best(log): ...``) in which templates
    use the best config recorded in ``records``.

    ``records`` is a tuning log (path, URL or open :class:`db.TuningLog`), or an AutoTVM
    JSON-lines log (a ``.json`` or ``.log`` file that is not an SQLite database, as
    :func:`autotune.autotvm.callback.log_to_file` writes), which is read into an in-memory
    tuning log first. ``options`` go to :func:`autotune.apply_history_best`.
    """
    if isinstance(records, str | os.PathLike) and is_autotvm_log(records):
        if not os.path.exists(records):
            raise FileNotFoundError(f"apply_history_best: no such AutoTVM log: {os.fspath(records)}")
        log = tuning_db.open(":memory:")
        import_log(log, records, report_dropped=False)  # only the costs matter here
        records = log
    return history.apply_history_best(records, **options)

