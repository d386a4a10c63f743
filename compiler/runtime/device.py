"""Devices: where arrays live and kernels run.

A device type is registered with :func:`register_device_type`: its name, the names that
also select it (a target kind such as ``llvm`` names the device its code runs on) and a
:class:`DeviceMemory`, which says how an array's memory is made and filled there. The host
(``cpu``) is the runtime's own; the backends of :mod:`compiler.backends` register the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Device", "DeviceMemory", "device", "cpu", "cuda", "require_pycuda", "register_device_type",
           "unregister_device_type", "register_device_alias", "unregister_device_alias", "device_memory"]

PYCUDA_MISSING = ("pycuda is not installed (pip install 'autotune-compiler[cuda]'); "
                  "it is needed for CUDA devices")


@dataclass(frozen=True)
class DeviceMemory:
    """How arrays live on one device type (what :class:`~compiler.runtime.NDArray` holds there).

    ``from_host(array, device)`` copies a C-contiguous numpy array onto the device and returns
    the storage, ``empty(shape, dtype, device)`` makes uninitialised storage, and
    ``upload(storage, array)`` overwrites it; the storage itself offers ``copy()``,
    ``astype(dtype)`` and ``shape`` as a numpy array does. ``check_available()`` raises a
    RuntimeError saying what is missing (a driver, a package) before the first array is made;
    ``synchronize(device_id)`` waits for the device's pending work; ``unavailable_reason()``
    says why code cannot run on such a device here (None when it can), and ``device_count()``
    how many this process sees; ``simulated()`` says whether its code runs on a simulator
    instead of the hardware (its timings then mean nothing).
    """

    from_host: Callable
    empty: Callable
    upload: Callable
    check_available: Callable[[], None] = field(default=lambda: None)
    synchronize: Callable[[int], None] = field(default=lambda device_id: None)
    unavailable_reason: Callable[[], str | None] = field(default=lambda: None)
    device_count: Callable[[], int] = field(default=lambda: 1)
    simulated: Callable[[], bool] = field(default=lambda: False)


_MEMORY: dict[str, DeviceMemory] = {}
_NAMES: dict[str, str] = {}  # every name that selects a device type -> the device type


def register_device_type(name: str, memory: DeviceMemory) -> None:
    """Make ``name`` a device type whose arrays ``memory`` keeps (more names select it through
    :func:`register_device_alias`)."""
    _MEMORY[name] = memory
    _NAMES[name] = name


def register_device_alias(alias: str, device_type: str) -> None:
    """Let ``alias`` (a target kind, say) select the registered device type ``device_type``."""
    device_memory(device_type)  # a ValueError naming the known types
    _NAMES[alias] = device_type


def unregister_device_alias(alias: str) -> None:
    """Forget the device name ``alias`` (a device type's own name stays)."""
    if _NAMES.get(alias) != alias:
        _NAMES.pop(alias, None)


def unregister_device_type(name: str) -> None:
    """Forget the device type ``name`` and its aliases (the host's cannot be forgotten)."""
    if name == "cpu":
        raise ValueError("the host device type 'cpu' is the runtime's own and cannot be unregistered")
    _MEMORY.pop(name, None)
    for alias in [a for a, t in _NAMES.items() if t == name]:
        del _NAMES[alias]


def device_memory(device_type: str) -> DeviceMemory:
    """The memory of ``device_type`` (ValueError naming the known ones when it is unknown)."""
    try:
        return _MEMORY[device_type]
    except KeyError:
        raise ValueError(f"unknown device type {device_type!r}; use one of {', '.join(_MEMORY)}") from None


@dataclass(frozen=True, slots=True)
class Device:
    """A device: ``device_type`` is "cpu", "cuda" or another registered type, ``device_id`` its index."""

    device_type: str
    device_id: int = 0

    def __post_init__(self):
        if self.device_type not in _MEMORY:
            known = ", ".join(map(repr, _MEMORY))
            raise ValueError(f"unknown device type {self.device_type!r}; use one of {known}")
        if not isinstance(self.device_id, int) or self.device_id < 0:
            raise ValueError(f"device id must be a non-negative int, got {self.device_id!r}")

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    @property
    def exist(self) -> bool:
        """Whether code can run on this device here (TVM's ``Device.exist``)."""
        memory = _MEMORY[self.device_type]
        return memory.unavailable_reason() is None and self.device_id < memory.device_count()

    @property
    def simulated(self) -> bool:
        """Whether this device is a simulator (``COMPILER_CUDA_SIMULATOR=1`` for ``cuda``): its
        code runs, but its timings say nothing of a real device's speed."""
        return bool(_MEMORY[self.device_type].simulated())

    def sync(self) -> None:
        """Wait for the device's pending work (nothing to wait for on the CPU)."""
        _MEMORY[self.device_type].synchronize(self.device_id)


def device(name: str, device_id: int = 0) -> Device:
    """A device by name: "llvm" or "cpu", "cuda" or "gpu" (a device type, or a target kind
    whose code runs on it)."""
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


# ---------------------------------------------------------------------------- the host

ALIGNMENT = 64  # bytes; what a kernel may assume of an argument whose signature claims no alignment


def aligned_empty(shape, dtype, align: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous numpy array whose data pointer is ``align``-aligned."""
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def _host_copy(src: np.ndarray, device: Device) -> np.ndarray:
    data = aligned_empty(src.shape, src.dtype)
    np.copyto(data, src)
    return data


register_device_type("cpu", DeviceMemory(
    from_host=_host_copy,
    empty=lambda shape, dtype, device: aligned_empty(shape, dtype),
    upload=np.copyto,
))
