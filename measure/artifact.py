"""Artifacts: a candidate compiled to bytes in a build worker, and those bytes loaded as a
runtime Module in a run worker.

The target's backend (:mod:`compiler.backends`) decides what the bytes are: for CPU targets
a relocatable object file (no JIT compile in the builder, no ``cc -shared`` link anywhere;
the runner's JIT links it in about a millisecond), for CUDA targets the PTX and launch plans
(building needs neither a GPU nor pycuda, running needs both).
"""

from __future__ import annotations

from compiler import backends
from compiler.driver import build_artifact as compile_artifact
from compiler.driver import load_artifact
from compiler.runtime.device import device_memory
from measure.records import Artifact

__all__ = ["build_artifact", "load_artifact", "device_type_of", "device_count", "ENTRY_NAME"]

ENTRY_NAME = "default_function"


def build_artifact(task, config) -> Artifact:
    """Instantiate ``task`` with ``config``, lower and compile it (raises on failure:
    :class:`search_spaces.InstantiationError`, :class:`compiler.CompilerError`, ...)."""
    s, args = task.instantiate(config)
    return compile_artifact(s, args, target=task.target, name=ENTRY_NAME)


def device_type_of(artifact: Artifact) -> str:
    """Where the code of ``artifact`` runs: the device type of its target's backend (``"cpu"``,
    ``"cuda"``)."""
    return backends.for_artifact(artifact).device_type


def device_count(device_type: str) -> int:
    """How many devices of ``device_type`` this process sees (0 without a driver or device)."""
    return int(device_memory(device_type).device_count())
