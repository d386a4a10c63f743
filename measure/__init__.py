"""Measurement: builders and runners that compile and time candidates in isolation.

Workers receive tasks and configs as plain data, rebuild them, and return plain
results::

    from measure import MeasureInput, MeasureOptions, measure_batch
    with MeasureOptions() as options:                   # LocalBuilder() + LocalRunner()
        results = measure_batch([MeasureInput(task, c) for c in configs], options)

``measure.ray`` has ``RayBuilder`` and ``RayRunner`` for a Ray cluster. Workers are
fresh interpreters that never import the tuner's ``__main__`` (a tuning script needs
no ``if __name__ == "__main__":`` guard), and what crosses to them is the messages
of :mod:`measure.protocol`.
"""

from measure.base import Builder, Feed, Runner
from measure.code_version import code_version
from measure.errors import MeasureError
from measure.local import LocalBuilder, LocalRunner
from measure.pipeline import MeasureOptions, MeasureSession, measure_batch, measure_stream
from measure.protocol import BuildReply, BuildRequest, RunReply, RunRequest
from measure.records import Artifact, ErrorKind, MeasureInput, MeasureResult

__all__ = ["MeasureError", "ErrorKind", "MeasureInput", "Artifact", "MeasureResult",
           "BuildRequest", "BuildReply", "RunRequest", "RunReply",
           "Builder", "Runner", "Feed", "LocalBuilder", "LocalRunner", "MeasureOptions", "MeasureSession",
           "measure_batch", "measure_stream", "code_version"]
