"""The tuning log: an SQL store (SQLAlchemy) of measurement records.

Records are plain data (JSON and SQL rows, never pickles); this package imports none
of the others. The contents arrive with the tuner; for now it holds its error types.
"""

from db.errors import TuningLogError

__all__ = ["TuningLogError"]
