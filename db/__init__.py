"""The tuning log: an SQL store (SQLAlchemy) of measurement records.

Records are plain data (JSON and SQL rows, never pickles); this package imports none of
the others. ``db.open(path_or_url)`` returns a :class:`TuningLog`::

    import db
    with db.open("tuning.db") as log:          # or "postgresql://user:pw@host/autotune"
        run = log.start_run("xgb", {"trials": 500})
        log.add(db.Record(workload_key=key, template="matmul", args=[1024, 1024, 1024, "float32"],
                          target="llvm -mcpu=znver4", target_model="znver4",
                          config={"tile_y": [32, 32]}, costs=[1.2e-3, 1.1e-3], run_id=run))
        log.end_run(run, "finished")
        records = log.records(key, errors=False)     # [Record, ...], in the order stored

Workload keys come from the caller (the task); configs read back are plain dicts for the
caller to validate against its space before applying them. Which config is best is
decided by ``autotune.selection``, which ranks the records of a log.
"""

from db.errors import RecordError, SchemaVersionError, TuningLogError
from db.log import (
    BUSY_TIMEOUT_S,
    DEAD_AFTER_BEATS,
    HEARTBEAT_ENV,
    HEARTBEAT_INTERVAL_S,
    RECONNECT_TIMEOUT_S,
    CurvePoint,
    TaskOrKey,
    TrialCurve,
    TuningLog,
    default_heartbeat_interval,
    hide_passwords,
    open,
)
from db.record import (
    RECORD_KINDS,
    REMEASURE,
    TRIAL,
    Record,
    RunInfo,
    SummaryRow,
    Workload,
    canonical_json,
    target_kind,
)
from db.schema import SCHEMA_VERSION
from db.stats import ConfigStats, confident_cost, knobs_fingerprint, knobs_of

__all__ = [
    "open",
    "hide_passwords",
    "TuningLog",
    "TaskOrKey",
    "ConfigStats",
    "TrialCurve",
    "CurvePoint",
    "confident_cost",
    "knobs_of",
    "knobs_fingerprint",
    "Record",
    "TRIAL",
    "REMEASURE",
    "RECORD_KINDS",
    "Workload",
    "RunInfo",
    "SummaryRow",
    "canonical_json",
    "target_kind",
    "SCHEMA_VERSION",
    "BUSY_TIMEOUT_S",
    "RECONNECT_TIMEOUT_S",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_ENV",
    "DEAD_AFTER_BEATS",
    "default_heartbeat_interval",
    "TuningLogError",
    "RecordError",
    "SchemaVersionError",
]
