"""CUDA glue: device memory, PTX modules and kernel launches through pycuda.

Nothing here imports pycuda until it is needed: building for CUDA (PTX included)
works without it and without a GPU; running does not.

A CUDA build gives a host :class:`CUDAModule`, the one ``build()`` returns. Calling it
checks the arguments as a CPU module does (shapes, dtypes, symbolic sizes bound
consistently), evaluates the launch dimensions from those sizes, allocates the
workspaces of intermediate buffers and launches the kernels in order. Its device code
is ``mod.imported_modules[0]`` (:class:`CUDADeviceModule`, ``get_source("ptx")``).

The artifact a measure worker ships is :meth:`CUDAModule.save_artifact` (JSON bytes:
the PTX and the launch plans); :func:`load_artifact` turns it back into a module in
another process.

Without a GPU, ``COMPILER_CUDA_SIMULATOR=1`` makes ``cuda`` a simulated device
(:func:`simulator_enabled`): arrays live in host memory (:class:`HostStorage`,
:data:`SIMULATED_MEMORY`) and the CUDA backend runs its modules' kernels in the GPU
simulator (:mod:`compiler.backends.cuda_simulator`). Without the variable nothing here
simulates anything.

Contexts: every GPU is used through its primary context (the CUDA runtime's), retained
once per process and made current only for the duration of each operation
(:func:`activate`), as pycuda's own ``scoped_context_activation`` does; none is left on
a thread's context stack, because pycuda aborts the process when a thread (or the
interpreter) ends with a context still on it. Temporaries are dropped inside the
operation; arrays that Python frees later are freed by pycuda, which activates the
context for that itself in the thread that first used the GPU (elsewhere it skips the
free: memory of arrays dropped in other threads outlives them until the process ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import CompilerError, RuntimeArgumentError
from .arguments import ArgumentPacker, FunctionInfo, UnsupportedSize, evaluate_size_text
from .device import Device, DeviceMemory, require_pycuda
from .ndarray import NDArray
from .timer import BenchmarkResult

__all__ = ["CUDAModule", "CUDADeviceModule", "CUDAFunction", "DeviceStorage", "DeviceLimits", "MEMORY",
           "load_artifact", "CUDAArgumentChecker", "HostStorage", "SIMULATED_MEMORY", "SIMULATOR_ENV",
           "simulator_enabled",
           "activate", "synchronize", "device_count", "attached_arch", "unavailable_reason", "program_steps",
           "ARTIFACT_VERSION"]

ARTIFACT_VERSION = 1
#: Set to 1 to run CUDA code in the GPU simulator (on a machine without a GPU).
SIMULATOR_ENV = "COMPILER_CUDA_SIMULATOR"
_CAST = re.compile(r"\b(?:u?int(?:8|16|32|64))\(")
_lock = threading.Lock()
_contexts: dict[int, object] = {}  # device id -> its retained primary context (pycuda Context)


# ---------------------------------------------------------------------------- driver and contexts


def driver():
    """pycuda.driver, initialised; a RuntimeError that says what is missing otherwise."""
    drv = require_pycuda()
    try:
        drv.init()
    except Exception as e:  # pycuda.driver.Error, or a missing libcuda
        raise RuntimeError(f"pycuda is installed but the CUDA driver cannot start ({e}); "
                           "is there an NVIDIA GPU and driver on this machine?") from None
    return drv


def _primary_context(drv, device_id: int):
    """The primary context of GPU ``device_id``, retained on first use (not made current)."""
    with _lock:
        ctx = _contexts.get(device_id)
        if ctx is None:
            count = drv.Device.count()
            if device_id >= count:
                raise RuntimeError(f"cuda({device_id}) does not exist: this machine has {count} GPU(s)")
            ctx = _contexts[device_id] = drv.Device(device_id).retain_primary_context()
    return ctx


@contextlib.contextmanager
def activate(device_id: int = 0):
    """Make the primary context of GPU ``device_id`` current in this thread for a ``with``
    block (yields pycuda.driver); the previous context, if any, is current again after it.

    A no-op when that context is current already, so blocks nest. Device memory, modules
    and events made inside belong to that context.
    """
    drv = driver()
    ctx = _primary_context(drv, device_id)
    current = drv.Context.get_current()
    if current is not None and current == ctx:
        yield drv
        return
    ctx.push()
    try:
        yield drv
    finally:
        drv.Context.pop()


def synchronize(device_id: int = 0) -> None:
    """Wait until GPU ``device_id`` has finished the work this process queued on it."""
    with activate(device_id) as drv:
        drv.Context.synchronize()


def attached_arch(device_id: int = 0) -> str | None:
    """``sm_XX`` of the attached GPU, or None without pycuda, driver or GPU."""
    try:
        drv = driver()
        major, minor = drv.Device(device_id).compute_capability()
    except Exception:  # noqa: BLE001 - any failure means "no GPU to ask"
        return None
    return f"sm_{major}{minor}"


def unavailable_reason() -> str | None:
    """Why CUDA code cannot run here (pycuda, driver or GPU missing), or None when it can."""
    try:
        drv = driver()
        if drv.Device.count() == 0:
            return "the CUDA driver reports no GPU"
    except RuntimeError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"CUDA is not usable: {e}"
    return None


@dataclass(frozen=True)
class DeviceLimits:
    """What one block may use: threads, and bytes of static shared memory."""

    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024


def device_limits(device_id: int = 0) -> DeviceLimits:
    """The block limits of GPU ``device_id`` (the defaults without one)."""
    try:
        drv = driver()
        dev = drv.Device(device_id)
        attr = drv.device_attribute
        return DeviceLimits(dev.get_attribute(attr.MAX_THREADS_PER_BLOCK),
                            min(48 * 1024, dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)))
    except Exception:  # noqa: BLE001
        return DeviceLimits()


# ---------------------------------------------------------------------------- device memory


class DeviceStorage:
    """The memory of an NDArray on a GPU (what ``NDArray._data`` holds for CUDA arrays)."""

    def __init__(self, shape: tuple, dtype, device_id: int = 0):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device_id = device_id
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        with activate(device_id) as drv:
            self.allocation = drv.mem_alloc(max(1, self.nbytes))  # cuMemAlloc rejects 0 bytes

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def ptr(self) -> int:
        return int(self.allocation)

    def upload(self, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"copyfrom: shape {host.shape} does not match the array's {self.shape}")
        if self.nbytes:
            with activate(self.device_id) as drv:
                drv.memcpy_htod(self.allocation, host)

    def download(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            with activate(self.device_id) as drv:
                drv.memcpy_dtoh(out, self.allocation)  # synchronous: earlier kernel faults raise here
        return out

    # The NDArray methods written for numpy storage use these.
    def copy(self) -> np.ndarray:
        return self.download()

    def astype(self, dtype) -> np.ndarray:
        return self.download().astype(dtype)

    def __array__(self, dtype=None, copy=None):
        out = self.download()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"<{self.nbytes} bytes on cuda({self.device_id})>"


def empty_storage(shape, dtype, device: Device) -> DeviceStorage:
    return DeviceStorage(shape, dtype, device.device_id)


def array_storage(host: np.ndarray, device: Device) -> DeviceStorage:
    st = DeviceStorage(host.shape, host.dtype, device.device_id)
    st.upload(host)
    return st


def _check_pycuda() -> None:
    require_pycuda()


def device_count() -> int:
    """How many GPUs this process sees (0 without pycuda, a driver or a GPU)."""
    if unavailable_reason() is not None:
        return 0
    return int(driver().Device.count())


#: How arrays live on a CUDA GPU, for the device type the CUDA backend registers.
MEMORY = DeviceMemory(from_host=array_storage, empty=empty_storage, upload=DeviceStorage.upload,
                      check_available=_check_pycuda, synchronize=synchronize,
                      unavailable_reason=unavailable_reason, device_count=device_count)


# ---------------------------------------------------------------------------- the simulated device


def simulator_enabled() -> bool:
    """Whether ``COMPILER_CUDA_SIMULATOR`` asks for the GPU simulator (``1``, ``true``, ``yes``,
    ``on``); read at every use, so that setting it in a running process takes effect."""
    value = os.environ.get(SIMULATOR_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise RuntimeError(f"{SIMULATOR_ENV}={os.environ[SIMULATOR_ENV]!r}: use 1 to run CUDA code in the "
                       "GPU simulator, or 0 (or leave it unset) for the GPU")


class HostStorage:
    """The memory of an NDArray on the simulated GPU: a compact numpy array in host memory,
    with :class:`DeviceStorage`'s interface (the simulator reads and writes ``host``)."""

    def __init__(self, shape: tuple, dtype, device_id: int = 0):
        if device_id != 0:
            raise RuntimeError(f"cuda({device_id}) does not exist: the GPU simulator "
                               f"({SIMULATOR_ENV}=1) is one device, cuda(0)")
        self.host = np.empty(tuple(int(s) for s in shape), np.dtype(dtype))
        self.device_id = device_id

    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)
    ndim = property(lambda self: self.host.ndim)
    size = property(lambda self: self.host.size)
    nbytes = property(lambda self: self.host.nbytes)

    def upload(self, host: np.ndarray) -> None:
        host = np.asarray(host, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"copyfrom: shape {host.shape} does not match the array's {self.shape}")
        np.copyto(self.host, host)

    def download(self) -> np.ndarray:
        return self.host.copy()

    copy = download

    def astype(self, dtype) -> np.ndarray:
        return self.host.astype(dtype)

    def __array__(self, dtype=None, copy=None):
        return self.host.copy() if dtype is None else self.host.astype(dtype)

    def __repr__(self) -> str:
        return f"<{self.nbytes} bytes on the simulated cuda({self.device_id})>"


def _simulated_array(host: np.ndarray, device: Device) -> HostStorage:
    st = HostStorage(host.shape, host.dtype, device.device_id)
    st.upload(host)
    return st


#: How arrays live on the simulated GPU (host memory; nothing to wait for, always there).
SIMULATED_MEMORY = DeviceMemory(
    from_host=_simulated_array,
    empty=lambda shape, dtype, device: HostStorage(shape, dtype, device.device_id),
    upload=HostStorage.upload, device_count=lambda: 1, simulated=lambda: True)


# ---------------------------------------------------------------------------- modules


class CUDADeviceModule:
    """The device side of a CUDA build: the PTX of every kernel (loaded on first launch)."""

    type_key = "cuda"

    def __init__(self, ptx: str, arch: str, kernels: list[str], sources: dict | None = None,
                 functions: list | None = None):
        self.ptx = ptx
        self.arch = arch
        self.kernel_names = list(kernels)
        self._sources = dict(sources or {})
        self._loaded: dict[int, object] = {}
        #: The kernels' loop IR (device PrimFuncs) for a module built in this process, which the
        #: GPU simulator runs; None for one loaded from an artifact (PTX only).
        self.functions = None if functions is None else list(functions)

    @property
    def imported_modules(self) -> list:
        return []

    def get_source(self, fmt: str = "ptx") -> str:
        """``"ptx"``; also ``"ll"`` (the LLVM IR) and ``"cuda"`` (a readable CUDA C rendering)
        for modules built in this process."""
        if fmt == "ptx":
            return self.ptx
        if fmt in self._sources:
            return self._sources[fmt]
        raise ValueError(f"unknown source format {fmt!r} for a CUDA device module; use "
                         f"{', '.join(['ptx', *self._sources])}")

    def kernel(self, name: str, device_id: int):
        """The pycuda function of kernel ``name`` on GPU ``device_id`` (the module is loaded into
        that GPU's primary context on first use)."""
        with activate(device_id) as drv:
            mod = self._loaded.get(device_id)
            if mod is None:
                # cuModuleLoadDataEx takes PTX as a NUL-terminated string (pycuda passes only the
                # buffer's address, not its length).
                try:
                    mod = drv.module_from_buffer(self.ptx.encode("utf-8") + b"\0")
                except Exception as e:
                    raise CompilerError(f"the GPU driver rejected the PTX (built for {self.arch}): "
                                        f"{e}") from None
                mod = self._loaded.setdefault(device_id, mod)
            return mod.get_function(name)

    def __repr__(self) -> str:
        return f"<CUDADeviceModule {self.arch} kernels={self.kernel_names}>"


class CUDAModule:
    """The host module of a CUDA build: call it like a CPU module, on CUDA arrays or numpy arrays."""

    type_key = "cuda_host"

    def __init__(self, device_module: CUDADeviceModule, plans: dict, infos: dict, entry_name: str):
        if entry_name not in infos:
            raise CompilerError(f"entry function {entry_name!r} is not among {list(infos)}")
        self._dev = device_module
        self._plans = dict(plans)
        self._infos = dict(infos)
        self._functions: dict[str, CUDAFunction] = {}
        self.entry_name = entry_name

    @property
    def imported_modules(self) -> list:
        return [self._dev]

    @property
    def function_names(self) -> list[str]:
        return list(self._infos)

    def function_info(self, name: str) -> FunctionInfo:
        return self._lookup(name)

    def launch_plan(self, name: str | None = None) -> dict:
        """The kernels ``name`` launches, their launch dimensions and workspaces (plain data)."""
        self._lookup(name or self.entry_name)
        return json.loads(json.dumps(self._plans[name or self.entry_name]))

    def _lookup(self, name: str) -> FunctionInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise AttributeError(f"module has no function {name!r}; it has {list(self._infos)}") from None

    def get_function(self, name: str) -> CUDAFunction:
        func = self._functions.get(name)
        if func is None:
            func = self._function(self._lookup(name), self._plans[name], self._dev)
            self._functions[name] = func
        return func

    def _function(self, info: FunctionInfo, plan: dict, device_module: CUDADeviceModule):
        """The callable host function ``info`` (a subclass runs it elsewhere)."""
        return CUDAFunction(info, plan, device_module)

    __getitem__ = get_function

    def __call__(self, *args) -> None:
        self.get_function(self.entry_name)(*args)

    def get_source(self, fmt: str = "ptx") -> str:
        """The device code: ``"ptx"``, ``"ll"`` or ``"cuda"`` (see :class:`CUDADeviceModule`)."""
        return self._dev.get_source(fmt)

    def time_evaluator(self, func_name: str, dev: Device | None = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cache_flush: bool | str = False):
        """A callable timing ``func_name`` with CUDA events; returns a BenchmarkResult (seconds per call).

        ``cache_flush`` is accepted for symmetry with CPU modules and ignored.
        """
        del cache_flush
        if dev is not None and dev.device_type != "cuda":
            raise ValueError(f"a CUDA module runs on a GPU, not on {dev}")
        func = self.get_function(func_name)
        device_id = dev.device_id if dev is not None else None

        def evaluate(*args) -> BenchmarkResult:
            return func.time(args, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             device_id=device_id)

        return evaluate

    # ------------------------------------------------------------------ artifacts

    def artifact(self) -> dict:
        """Everything needed to run this module in another process, as plain data."""
        return {"version": ARTIFACT_VERSION, "type_key": "cuda", "arch": self._dev.arch, "ptx": self._dev.ptx,
                "kernels": self._dev.kernel_names, "entry": self.entry_name,
                "functions": [{"info": self._infos[n].to_json(), "plan": self._plans[n]}
                              for n in self._infos]}

    def save_artifact(self) -> bytes:
        """The artifact as JSON bytes (see :func:`load_artifact`)."""
        return json.dumps(self.artifact()).encode("utf-8")

    def export_library(self, path) -> None:
        """Write the artifact to ``path`` (load it with :func:`compiler.runtime.cuda.load_artifact`)."""
        with open(path, "wb") as f:
            f.write(self.save_artifact())

    def __repr__(self) -> str:
        return f"<CUDAModule {self._dev.arch} functions={list(self._infos)} entry={self.entry_name!r}>"


def load_artifact(data) -> CUDAModule:
    """A :class:`CUDAModule` from :meth:`CUDAModule.save_artifact` bytes (or the dict, or a path)."""
    if isinstance(data, (bytes, bytearray)):
        data = json.loads(data.decode("utf-8"))
    elif isinstance(data, str):
        with open(data, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    if not isinstance(data, dict) or data.get("type_key") != "cuda":
        raise CompilerError("not a CUDA module artifact")
    if data.get("version") != ARTIFACT_VERSION:
        raise CompilerError(f"CUDA artifact version {data.get('version')}, expected {ARTIFACT_VERSION}")
    dev = CUDADeviceModule(data["ptx"], data["arch"], data["kernels"])
    infos, plans = {}, {}
    for f in data["functions"]:
        info = FunctionInfo.from_json(f["info"])
        infos[info.name] = info
        plans[info.name] = f["plan"]
    return CUDAModule(dev, plans, infos, data["entry"])


# ---------------------------------------------------------------------------- calls


class CUDAArgumentChecker(ArgumentPacker):
    """The CPU argument checks, for arrays on a GPU as well as numpy arrays: ``check(args)``
    gives the arrays by argument position and the bound sizes."""

    def _check_buffer(self, i, spec, value, bound, deferred):
        if isinstance(value, NDArray) and value.device.device_type == "cuda":
            st = value._data
            if st.dtype != self._np_dtype[i]:
                raise self._err(i, f"dtype {st.dtype.name} does not match the expected {spec.dtype}")
            shape = spec.shape or []
            if st.ndim != len(shape):
                raise self._err(i, f"expected {len(shape)} dimensions {tuple(shape)}, "
                                   f"got {st.ndim} {st.shape}")
            for d, (want, got) in enumerate(zip(shape, st.shape, strict=True)):
                self._match(i, f"dimension {d}", want, got, bound, deferred)
            if spec.strides is not None:  # device arrays are compact
                for d, want in enumerate(spec.strides):
                    got = int(np.prod(st.shape[d + 1:], dtype=np.int64))
                    self._match(i, f"stride {d} (in elements)", want, got, bound, deferred)
            if spec.elem_offset is not None:
                self._match(i, "elem_offset", spec.elem_offset, 0, bound, deferred)
            return value
        if isinstance(value, NDArray) and value.device.device_type != "cuda":
            raise self._err(i, f"array is on {value.device}, but this function runs on a GPU; "
                               "copy it with nd.array(..., compiler.cuda(0))")
        arr = super()._check_buffer(i, spec, value, bound, deferred)
        if not arr.flags.c_contiguous:  # its device copy is compact: the strides bound here would lie
            raise self._err(i, "a numpy array is copied to the GPU compactly, so it must be C-contiguous; "
                               "pass np.ascontiguousarray(...)")
        return arr

    @staticmethod
    def _shares_memory(a, b) -> bool:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.may_share_memory(a, b)
        return a is b or getattr(a, "_data", None) is getattr(b, "_data", 0)


def evaluate_size(text: str, env: dict) -> int:
    """A launch dimension or workspace size (printed expression) for the bound scalars ``env``."""
    try:
        return int(evaluate_size_text(_CAST.sub("(", str(text)), env))
    except UnsupportedSize:
        raise CompilerError(f"cannot evaluate the launch size {text!r}") from None
    except KeyError as e:
        raise RuntimeArgumentError(f"the launch size {text!r} needs {e.args[0]}, "
                                   "which no argument binds") from None


def program_steps(plan: dict, env: dict):
    """The launches of ``plan`` (a launch plan, see
    :class:`~compiler.transform.split_host_device.GPUFunction`) in the order they run, each
    as ``(launch index, scalars)``: ``env`` plus the values of the host loops around it (the
    time loop of a scan launches its kernels once per step)."""
    def walk(items: list, scope: dict):
        for item in items:
            if isinstance(item, int):
                yield item, scope
                continue
            lo = evaluate_size(item["min"], scope)
            for value in range(lo, lo + evaluate_size(item["extent"], scope)):
                yield from walk(item["body"], {**scope, item["loop"]: value})

    program = plan.get("program")
    yield from walk(list(range(len(plan["launches"]))) if program is None else program, dict(env))


_SCALAR_TYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
                 "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float16": np.float16,
                 "float32": np.float32, "float64": np.float64, "bool": np.int8}


def _loop_dtypes(program: list) -> dict:
    """The dtype of every host loop variable of a launch program."""
    out = {}
    for item in program:
        if isinstance(item, dict):
            out[item["loop"]] = item["dtype"]
            out.update(_loop_dtypes(item["body"]))
    return out


class _Prepared:
    """A call with checked arguments on GPU ``device_id``: ``run()`` launches its kernels (with
    that GPU's context current, see :func:`activate`)."""

    def __init__(self, device_id: int, launches: list, copy_back: list, keep: list):
        self.device_id = device_id
        self.launches = launches    # (pycuda Function prepared for its argument types, grid, block, args)
        self.copy_back = copy_back  # (DeviceStorage, numpy array it goes back to)
        self.keep = keep            # the device memory the launches' pointers point into

    def run(self) -> None:
        # Function.prepared_call packs the arguments with the format given to prepare(); __call__
        # would work out that format again on every launch, inside the timed loop.
        for fn, grid, block, args in self.launches:
            fn.prepared_call(grid, block, *args)

    def finish(self) -> None:
        for storage, host in self.copy_back:
            np.copyto(host, storage.download())

    def release(self) -> None:
        """Drop the temporary device memory; call it with the context current, so that pycuda
        frees it in any thread."""
        self.launches, self.copy_back, self.keep = [], [], []


class CUDAFunction:
    """One host function of a CUDA module: checks, then launches its kernels."""

    def __init__(self, info: FunctionInfo, plan: dict, device_module: CUDADeviceModule):
        self.info = info
        self.plan = plan
        self._dev = device_module
        self._checker = CUDAArgumentChecker(info)
        self._scalar_dtypes = {a.name: a.dtype for a in info.signature.args if a.kind == "scalar"}
        self._scalar_dtypes.update({n: d for n, d in info.signature.scalar_vars})

    @property
    def name(self) -> str:
        return self.info.name

    def prepare(self, args: tuple, device_id: int | None = None) -> _Prepared:
        arrays, bound = self._checker.check(args)
        env = {name: value for name, (value, _) in bound.items()}
        devices = {a.device.device_id for a in arrays.values() if isinstance(a, NDArray)}
        if device_id is None:
            device_id = min(devices) if devices else 0
        if devices - {device_id}:
            raise RuntimeArgumentError(f"{self.name}: arrays on several GPUs ({sorted(devices)}); "
                                       f"the call runs on cuda({device_id})")
        with activate(device_id):
            return self._prepare(arrays, env, device_id)

    def _prepare(self, arrays: dict, env: dict, device_id: int) -> _Prepared:
        storages: dict = {}
        copy_back: list = []
        for i, a in arrays.items():
            if isinstance(a, NDArray):
                storages[i] = a._data
            else:
                st = array_storage(np.asarray(a), Device("cuda", device_id))
                storages[i] = st
                if i in self._checker.written:
                    copy_back.append((st, a))
        workspaces = []
        for w in self.plan["workspaces"]:
            size = evaluate_size(w["size"], env)
            workspaces.append(DeviceStorage((max(0, size),), w["dtype"], device_id))
        launches = []
        loop_dtypes = _loop_dtypes(self.plan.get("program") or [])
        for index, scope in program_steps(self.plan, env):
            launch = self.plan["launches"][index]
            grid = tuple(evaluate_size(g, scope) for g in launch["grid"])
            if min(grid) <= 0:
                continue  # nothing to compute for these sizes
            if grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
                raise RuntimeArgumentError(f"{self.name}: grid {grid} of kernel {launch['kernel']} exceeds "
                                           "the device's limits")
            # The argument types Function.__call__ would infer: "P" for a device pointer, the
            # numpy type's struct character for a scalar.
            fmt, kargs = "", []
            for kind, ref in launch["args"]:
                if kind in ("param", "workspace"):
                    st = storages[ref] if kind == "param" else workspaces[ref]
                    fmt += "P"
                    kargs.append(int(st.allocation))
                else:
                    scalar = _SCALAR_TYPES[self._scalar_dtypes.get(ref) or loop_dtypes.get(ref, "int32")]
                    if scalar is np.float16:  # pycuda's struct packer has no "e": pass the bits
                        fmt += "H"
                        kargs.append(int(np.float16(scope[ref]).view(np.uint16)))
                    else:
                        fmt += np.dtype(scalar).char
                        kargs.append(scalar(scope[ref]))
            fn = self._dev.kernel(launch["kernel"], device_id)
            fn.prepare(fmt)
            # pycuda reads grid and block as tuples of Python ints (Boost.Python takes no numpy ints)
            block = tuple(int(b) for b in launch["block"])
            launches.append((fn, grid, block, tuple(kargs)))
        return _Prepared(device_id, launches, copy_back, [storages, workspaces])

    def __call__(self, *args) -> None:
        prepared = self.prepare(args)
        with activate(prepared.device_id):
            try:
                prepared.run()
                prepared.finish()  # numpy results back (synchronises); CUDA arrays stay on the device
            finally:
                prepared.release()

    def time(self, args: tuple, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
             device_id: int | None = None) -> BenchmarkResult:
        """Seconds per call, timed with CUDA events around ``number`` launches, ``repeat`` times."""
        prepared = self.prepare(args, device_id)
        with activate(prepared.device_id) as drv:
            start = end = None
            try:
                prepared.run()  # warm up: caches
                drv.Context.synchronize()
                results = []
                for _ in range(max(1, repeat)):
                    n = max(1, number)
                    while True:
                        start, end = drv.Event(), drv.Event()
                        start.record()
                        for _ in range(n):
                            prepared.run()
                        end.record()
                        end.synchronize()
                        ms = start.time_till(end)
                        if ms >= min_repeat_ms or n >= 1 << 20:
                            break
                        n = max(n * 2, int(n * min_repeat_ms / max(ms, 1e-3)) + 1)
                    results.append(ms / 1e3 / n)
                prepared.finish()
            finally:
                start = end = None  # events, like memory, are destroyed with the context current
                prepared.release()
        return BenchmarkResult(tuple(results))

    def __repr__(self) -> str:
        return f"<CUDAFunction {self.name}>"
