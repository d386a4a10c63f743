"""Measurement: builders and runners that compile and time candidates in isolation.

Workers receive tasks and configs as plain data, rebuild them, and return plain
results (local processes or Ray workers, with timeouts and correctness checks). The
contents arrive with the tuner; for now the package holds its error types.
"""

from measure.errors import MeasureError

__all__ = ["MeasureError"]
