"""Device arrays (``compiler.nd``): C-contiguous, 64-byte aligned host storage for the CPU,
and on other devices what their registered :class:`~compiler.runtime.device.DeviceMemory`
makes (device memory through pycuda for CUDA GPUs)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from .device import ALIGNMENT, Device, aligned_empty, cpu, device_memory

__all__ = ["NDArray", "array", "empty", "aligned_empty", "ALIGNMENT"]


class NDArray:
    """An array on a device. On the CPU it owns an aligned numpy array."""

    __slots__ = ("_data", "_device")

    def __init__(self, data: np.ndarray, device: Device):
        # Private: use array() or empty(). ``data`` must already be aligned and contiguous.
        self._data = data
        self._device = device

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self) -> str:
        return self._data.dtype.name

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def host_array(self) -> np.ndarray:
        """The numpy array holding the data (shared, not a copy). For the runtime."""
        if self._device.device_type != "cpu":
            raise ValueError(f"an array on {self._device} has no host array; use .numpy()")
        return self._data

    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents."""
        return self._data.copy()

    asnumpy = numpy

    def __array__(self, dtype=None, copy=None):
        return self._data.astype(dtype) if dtype is not None else self._data.copy()

    def copyfrom(self, source) -> NDArray:
        """Overwrite the contents with ``source`` (array-like of the same shape)."""
        if isinstance(source, NDArray):
            source = source._data
        source = np.asarray(source, dtype=self._data.dtype)
        if source.shape != self.shape:
            raise ValueError(f"copyfrom: shape {source.shape} does not match the array's {self.shape}")
        device_memory(self._device.device_type).upload(self._data, source)
        return self

    def copyto(self, target):
        """Copy into a numpy array or NDArray (returned), or onto a device (a new NDArray)."""
        if isinstance(target, Device):
            return array(self._data, target)
        if isinstance(target, NDArray):
            target.copyfrom(self.numpy())
            return target
        if isinstance(target, np.ndarray):
            if target.shape != self.shape:
                raise ValueError(f"copyto: shape {target.shape} does not match the array's {self.shape}")
            np.copyto(target, self.numpy())
            return target
        raise TypeError(f"copyto expects a numpy array, an NDArray or a Device, got {type(target).__name__}")

    def __repr__(self) -> str:
        return f"<NDArray {self.shape} {self.dtype} on {self._device}>\n{self._data!r}"


def _check_device(device: Device | None) -> Device:
    device = cpu(0) if device is None else device
    if not isinstance(device, Device):
        raise TypeError(f"expected a Device such as compiler.cpu(0), got {device!r}")
    device_memory(device.device_type).check_available()
    return device


def array(obj, device: Device | None = None, dtype=None) -> NDArray:
    """An array on ``device`` holding a copy of ``obj`` (numpy array, list, NDArray)."""
    device = _check_device(device)
    if isinstance(obj, NDArray):
        obj = obj.numpy()
    src = np.asarray(obj, dtype=None if dtype is None else dtypes.to_numpy(dtype))
    dtypes.check(src.dtype)
    return NDArray(device_memory(device.device_type).from_host(src, device), device)


def empty(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An uninitialised array of ``shape`` and ``dtype`` on ``device``."""
    device = _check_device(device)
    if isinstance(shape, int):
        shape = (shape,)
    return NDArray(device_memory(device.device_type).empty(shape, dtypes.to_numpy(dtype), device), device)
