"""Devices: where arrays live and kernels run."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Device", "device", "cpu", "cuda", "require_pycuda"]

_NAMES = {"llvm": "cpu", "cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}

PYCUDA_MISSING = ("pycuda is not installed (pip install 'autotune-compiler[cuda]'); "
                  "it is needed for CUDA devices")


@dataclass(frozen=True, slots=True)
class Device:
    """A device: ``device_type`` is "cpu" or "cuda", ``device_id`` its index."""

    device_type: str
    device_id: int = 0

    def __post_init__(self):
        if self.device_type not in ("cpu", "cuda"):
            raise ValueError(f"unknown device type {self.device_type!r}; use 'cpu' or 'cuda'")
        if not isinstance(self.device_id, int) or self.device_id < 0:
            raise ValueError(f"device id must be a non-negative int, got {self.device_id!r}")

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def sync(self) -> None:
        """Wait for the device's pending work (nothing to wait for on the CPU)."""
        if self.device_type == "cuda":
            from .cuda import synchronize

            synchronize(self.device_id)


def device(name: str, device_id: int = 0) -> Device:
    """A device by name: "llvm" or "cpu", "cuda" or "gpu"."""
    try:
        kind = _NAMES[name.split()[0] if isinstance(name, str) and name.strip() else name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown device name {name!r}; use one of {', '.join(_NAMES)}") from None
    return Device(kind, device_id)


def cpu(device_id: int = 0) -> Device:
    """The CPU device."""
    return Device("cpu", device_id)


def cuda(device_id: int = 0) -> Device:
    """A CUDA GPU (creating it needs no GPU; using it for arrays needs pycuda)."""
    return Device("cuda", device_id)


def require_pycuda():
    """Import and return pycuda.driver, or raise a RuntimeError saying how to install it (or, for
    an installed pycuda that fails to import, why: typically no NVIDIA driver, libcuda.so)."""
    try:
        import pycuda.driver as drv  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "pycuda":  # pycuda is there, something it needs is not
            raise RuntimeError(f"pycuda is installed but cannot be imported ({e})") from None
        raise RuntimeError(PYCUDA_MISSING) from None
    except ImportError as e:  # e.g. its extension is there but libcuda.so (the driver) is not
        raise RuntimeError(f"pycuda is installed but cannot be imported ({e}); is the NVIDIA driver "
                           "installed?") from None
    return drv
