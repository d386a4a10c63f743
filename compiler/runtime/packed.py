"""Python functions that compiled code calls: TVM's global function registry.

``compiler.register_func("name")`` registers a Python function; a compiled function
calls it through ``compiler.tir.call_packed("name", ...)`` (see
:mod:`compiler.tir.packed`), usually from the body of a ``te.extern`` operation.
Buffers arrive as :class:`~compiler.runtime.ndarray.NDArray` views of the memory (strided
views for strided buffers; ``x.numpy()`` copies, ``y.copyfrom(...)``/``host_array`` write
in place), scalars as Python ints, floats, bools and strings.

The machine code reaches Python through one ctypes callback (:func:`install` hands its
address to each module). An exception raised by the Python function cannot cross the
machine code: the callback records it, later packed calls of the same compiled call
are skipped, and the compiled function's caller re-raises it (:func:`raise_pending`)
once the machine code has returned.
"""

from __future__ import annotations

import ctypes
import functools
import json
import threading
from collections.abc import Callable

import numpy as np

from ..errors import CompilerError
from .device import cpu
from .ndarray import NDArray

__all__ = ["register_func", "get_global_func", "list_global_func_names", "remove_global_func",
           "install", "raise_pending", "SETTER_SYMBOL", "CALLBACK_GLOBAL"]

SETTER_SYMBOL = "__autotune_set_packed_callback"
CALLBACK_GLOBAL = "__autotune_packed_callback"

_REGISTRY: dict[str, Callable] = {}
_LOCK = threading.Lock()
_PENDING: list[BaseException] = []


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register ``f`` under ``func_name``, as TVM's ``tvm.register_func``.

    Use as ``@register_func("my.func")``, ``@register_func`` (the function's own name)
    or ``register_func("my.func", f)``. Registering a taken name raises unless
    ``override`` is true. Returns ``f`` (or the decorator).
    """
    if callable(func_name) and f is None:
        return register_func(func_name.__name__, func_name, override)
    if not isinstance(func_name, str) or not func_name:
        raise CompilerError(f"register_func needs a non-empty name, got {func_name!r}")

    def register(func: Callable) -> Callable:
        if not callable(func):
            raise CompilerError(f"register_func({func_name!r}): {func!r} is not callable")
        with _LOCK:
            if func_name in _REGISTRY and not override:
                raise CompilerError(f"a function is already registered as {func_name!r}; "
                                    "pass override=True to replace it")
            _REGISTRY[func_name] = func
        return func

    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name``; None if there is none and ``allow_missing``."""
    func = _REGISTRY.get(name)
    if func is None and not allow_missing:
        raise CompilerError(f"no function is registered as {name!r}")
    return func


def list_global_func_names() -> list[str]:
    """The names of every registered function."""
    return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (KeyError-free if it is not registered)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


# ---------------------------------------------------------------------------- the callback


@functools.lru_cache(maxsize=256)
def _descriptor(raw: bytes) -> tuple[str, list]:
    d = json.loads(raw.decode("utf-8"))
    return d["name"], d["args"]


def _array(address: int, dtype: str, shape: tuple, strides: tuple):
    """A view of the memory at ``address``; ``strides`` in elements (a strided view where they
    are not those of a compact array)."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count == 0:
        return NDArray(np.empty(shape, dt), cpu(0))
    compact = tuple(int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape)))
    if all(s == c or n == 1 for s, c, n in zip(strides, compact, shape)):
        memory = (ctypes.c_char * (count * dt.itemsize)).from_address(address)
        return NDArray(np.frombuffer(memory, dtype=dt).reshape(shape), cpu(0))
    if any(s < 0 for s in strides):
        raise CompilerError(f"packed function argument with negative strides {strides}")
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    memory = (ctypes.c_char * (span * dt.itemsize)).from_address(address)
    flat = np.frombuffer(memory, dtype=dt)
    view = np.lib.stride_tricks.as_strided(flat, shape, tuple(s * dt.itemsize for s in strides))
    return NDArray(view, cpu(0))


def _arguments(kinds: list, slots) -> list:
    args, k = [], 0
    for kind in kinds:
        tag = kind[0]
        if tag == "array":
            ndim = kind[2]
            shape = tuple(int(slots[k + 1 + d]) for d in range(ndim))
            strides = tuple(int(slots[k + 1 + ndim + d]) for d in range(ndim))
            args.append(_array(slots[k], kind[1], shape, strides))
            k += 1 + 2 * ndim
            continue
        raw = slots[k]
        k += 1
        if tag == "int" or tag == "handle":
            args.append(int(raw))
        elif tag == "bool":
            args.append(bool(raw))
        elif tag == "float":
            args.append(float(np.array(raw, dtype=np.int64).view(np.float64)))
        elif tag == "str":
            args.append(ctypes.string_at(raw).decode("utf-8"))
        else:
            raise CompilerError(f"unknown packed argument kind {tag!r}")
    return args


def _call(descriptor: bytes, slots) -> int:
    if _PENDING:  # a call before this one failed: skip the rest, the caller raises the first error
        return -1
    try:
        name, kinds = _descriptor(descriptor)
        func = _REGISTRY.get(name)
        if func is None:
            raise CompilerError(f"compiled code called the packed function {name!r}, but no function is "
                                "registered under that name (compiler.register_func)")
        func(*_arguments(kinds, slots))
        return 0
    except BaseException as e:  # noqa: BLE001  (nothing may unwind through machine code)
        with _LOCK:
            _PENDING.append(e)
        return -1


_CALLBACK_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64))
_CALLBACK = _CALLBACK_TYPE(_call)
_SETTER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def install(setter_address: int) -> None:
    """Give a module the callback, through its setter's address (0: the module makes no packed calls)."""
    if setter_address:
        _SETTER_TYPE(setter_address)(ctypes.cast(_CALLBACK, ctypes.c_void_p).value)


def raise_pending() -> None:
    """Re-raise the first exception a packed function raised during the last compiled call."""
    if not _PENDING:
        return
    with _LOCK:
        errors = list(_PENDING)
        _PENDING.clear()
    raise errors[0]
