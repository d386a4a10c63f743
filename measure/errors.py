"""Errors raised while building or running candidates."""

__all__ = ["MeasureError", "SimulatedDeviceError", "refuse_simulated"]


class MeasureError(Exception):
    """Base class of measurement errors."""


class SimulatedDeviceError(MeasureError):
    """Candidates would be timed on a simulated device (the GPU simulator): their timings
    say nothing of the hardware's speed, so they are refused, never recorded."""


def refuse_simulated(device_type: str, what: str = "candidates") -> None:
    """Raise :class:`SimulatedDeviceError` when code for ``device_type`` runs on a simulator
    in this process (``COMPILER_CUDA_SIMULATOR=1`` for ``cuda``)."""
    from compiler.runtime.device import device_memory

    if device_type != "cpu" and device_memory(device_type).simulated():
        raise SimulatedDeviceError(
            f"cannot time {what} for {device_type!r}: {device_type} code runs on the GPU simulator here "
            "(COMPILER_CUDA_SIMULATOR=1), whose timings say nothing of a GPU's speed; unset "
            "COMPILER_CUDA_SIMULATOR and measure on a machine with the GPU (or a Ray cluster with one)")
