"""Device arrays (``compiler.nd``): C-contiguous, 64-byte aligned host storage for the CPU,
and on other devices what their registered :class:`~compiler.runtime.device.DeviceMemory`
makes (device memory through pycuda for CUDA GPUs)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from .device import ALIGNMENT, Device, aligned_empty, cpu, device_memory

__all__ = ["NDArray", "array", "empty", "aligned_empty", "ALIGNMENT"]


class NDArray:
    """An array on a device. On the CPU it owns an aligned numpy array.

    A bfloat16 array (numpy has no bfloat16) holds its bits as uint16, as TVM's does:
    ``numpy()`` gives them, ``copyfrom`` takes them (or floats, which it rounds to nearest even).
    An array of a vector dtype (``float32x4``) is, as in TVM, one of ``shape`` whose elements
    are vectors: ``numpy()`` gives (and ``copyfrom`` takes) the array of ``shape + (4,)``, and
    kernels take it as that array of float32.
    """

    __slots__ = ("_data", "_device", "_dtype")

    def __init__(self, data: np.ndarray, device: Device, dtype: str | None = None):
        # Private: use array() or empty(). ``data`` must already be aligned and contiguous.
        self._data = data
        self._device = device
        self._dtype = dtype  # when it is not the storage's (bfloat16 in uint16, vector dtypes)

    @property
    def _lanes(self) -> int:
        return 1 if self._dtype is None else dtypes.split_lanes(self._dtype)[1]

    @property
    def shape(self) -> tuple:
        shape = tuple(self._data.shape)
        return shape if self._lanes == 1 else shape[:-1]

    @property
    def dtype(self) -> str:
        return self._dtype or self._data.dtype.name

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._data.size // self._lanes

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
        source = _storage(source, self.dtype)
        want = tuple(self._data.shape)
        if source.shape != want:
            lanes = f" (its {self._lanes} lanes last)" if self._lanes > 1 else ""
            raise ValueError(f"copyfrom: shape {source.shape} does not match the array's {want}{lanes}")
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


def _storage(source, dtype: str) -> np.ndarray:
    """``source`` as an array of the storage of ``dtype``: for bfloat16, uint16 bits are taken as
    they are and floats are rounded to bfloat16."""
    dtype = dtypes.split_lanes(dtype)[0]
    if dtype != "bfloat16":
        return np.asarray(source, dtype=dtypes.to_numpy(dtype))
    source = np.asarray(source)
    if source.dtype == np.uint16:
        return source
    if source.dtype.kind == "f" or source.dtype.kind in "iub":
        return dtypes.float_to_bfloat16(source)
    raise TypeError(f"a bfloat16 array takes uint16 bits or float values, got {source.dtype}")


def _check_device(device: Device | None) -> Device:
    device = cpu(0) if device is None else device
    if not isinstance(device, Device):
        raise TypeError(f"expected a Device such as compiler.cpu(0), got {device!r}")
    device_memory(device.device_type).check_available()
    return device


def array(obj, device: Device | None = None, dtype=None) -> NDArray:
    """An array on ``device`` holding a copy of ``obj`` (numpy array, list, NDArray).

    With ``dtype="bfloat16"``, ``obj`` is uint16 bits or float values (rounded to nearest even);
    with a vector dtype (``"float32x4"``), ``obj``'s last dimension holds the lanes."""
    device = _check_device(device)
    if isinstance(obj, NDArray):
        if dtype is None:
            dtype = obj.dtype
        obj = obj.numpy()
    base, lanes = dtypes.split_lanes(dtype) if dtype is not None else (None, 1)
    if dtype is not None and (base, lanes) != (dtypes.to_numpy(base).name, 1):
        # bfloat16 or a vector dtype: its storage differs from the name
        src = _storage(obj, base)
        dtype = f"{base}x{lanes}" if lanes > 1 else base
        if lanes > 1 and (src.ndim == 0 or src.shape[-1] != lanes):
            raise ValueError(f"an array of {dtype} is made of an array whose last dimension is {lanes}, "
                             f"got shape {src.shape}")
    else:
        src = np.asarray(obj, dtype=None if dtype is None else dtypes.to_numpy(dtype))
        dtypes.check(src.dtype)
        dtype = None
    return NDArray(device_memory(device.device_type).from_host(src, device), device, dtype)


def empty(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An uninitialised array of ``shape`` and ``dtype`` on ``device``."""
    device = _check_device(device)
    if isinstance(shape, int):
        shape = (shape,)
    base, lanes = dtypes.split_lanes(dtype)
    storage = (*shape, lanes) if lanes > 1 else tuple(shape)
    data = device_memory(device.device_type).empty(storage, dtypes.to_numpy(base), device)
    special = base == "bfloat16" or lanes > 1  # the storage's dtype does not name it
    return NDArray(data, device, f"{base}x{lanes}" if lanes > 1 else base if special else None)
