"""Runtime modules: compiled functions you can call, time, inspect and export.

A :class:`Module` is backend-neutral. What it needs from the code that produced
it (an LLVM JIT, a loaded shared library, a C compiler's library) is a small code object:

* ``type_key`` -- the kind of code ("llvm" for LLVM-compiled CPU code);
* ``address(name) -> int`` -- the address of an exported ``void name(void **, int64_t *)``,
  of the thread-count setter (:data:`threads.SETTER_SYMBOL`), of the setter of the
  callback that ``call_packed`` reaches Python through (:data:`packed.SETTER_SYMBOL`), of
  the native timing loop (:data:`timer.TIMER_SYMBOL`), of the reader of the allocation
  failure flag (:data:`ALLOC_FAILED_SYMBOL`) or of the setter of the kernels' scratch region
  (:data:`SCRATCH_SETTER_SYMBOL`), 0 when absent;
* ``source(fmt) -> str`` -- the code as text (``"ll"``, ``"asm"``);
* ``export(path, metadata_json)`` -- write a shared library;
* optionally ``save_object(path, metadata_json)`` -- write an object file (``Module.save``).
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from ..errors import CompilerError
from . import packed as _packed
from .arguments import ArgumentPacker, FunctionInfo
from .device import Device, aligned_empty
from .threads import SETTER_SYMBOL, ThreadCountSetter
from .timer import FLUSH_MODEL, TIMER_SYMBOL, BenchmarkResult, NativeTimer, check_cache_flush, time_calls

__all__ = ["Module", "Function", "ModuleCode", "METADATA_VERSION", "ALLOC_FAILED_SYMBOL",
           "SCRATCH_SETTER_SYMBOL"]

METADATA_VERSION = 1
# int32(void), exported by CPU modules whose code allocates on the heap: it returns whether an
# allocation failed since it was last called (the code freed what it held and returned early),
# and clears that.
ALLOC_FAILED_SYMBOL = "__autotune_take_alloc_failure"
# void(void *), exported by CPU modules whose kernels have scratch (compiler.codegen.llvm_scratch):
# it sets the region those kernels take their scratch from (NULL: the heap).
SCRATCH_SETTER_SYMBOL = "__autotune_set_scratch"
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_SET_SCRATCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_TAKE_FAILURE = ctypes.CFUNCTYPE(ctypes.c_int32)


class ModuleCode(Protocol):
    """The code behind a Module: see the module docstring."""

    type_key: str

    def address(self, name: str) -> int: ...

    def source(self, fmt: str) -> str: ...

    def export(self, path: str, metadata_json: str) -> None: ...


class Function:
    """One compiled function; calling it checks the arguments, then runs the kernel."""

    def __init__(self, info: FunctionInfo, address: int, threads: ThreadCountSetter, owner: Module):
        self.info = info
        self._packer = ArgumentPacker(info)
        self._address = address
        self._cfunc = _KERNEL(address)
        self._threads = threads
        self._owner = owner  # keeps the machine code alive as long as the function is

    @property
    def name(self) -> str:
        return self.info.name

    def __call__(self, *args) -> None:
        packed = self._packer.pack(args)
        with self._owner._one_call:
            self._threads.update()
            self._cfunc(packed.buffers, packed.scalars)
            packed.finish()
            self._raise_errors()

    def time(self, args: tuple, **options) -> BenchmarkResult:
        """Time calls on ``args`` (checked and packed once) in the native loop (see :mod:`.timer`).
        With ``cache_flush="model"`` the function's scratch is a region of its own, evicted with
        the arguments before each call, as a model's executor places it in a workspace that
        other kernels used meanwhile."""
        packed = self._packer.pack(args)
        cfunc, buffers, scalars = self._cfunc, packed.buffers, packed.scalars
        timer = self._owner._native_timer()
        with self._owner._one_call:
            self._threads.update()
            if timer is not None:
                with self._owner._scratch_region(self.info, options.get("cache_flush", False)) as region:
                    result = timer.time(self._address, buffers, scalars, packed.keep_alive, evicted=region,
                                        **options)
            else:  # a library exported before this version of the native timer
                result = time_calls(lambda: cfunc(buffers, scalars), **options)
            packed.finish()
            self._raise_errors()
        return result

    def _raise_errors(self) -> None:
        """Raise what went wrong in the machine code that has just returned: what a Python
        function it called raised, or a heap allocation that failed."""
        failed = self._owner._take_alloc_failure()
        _packed.raise_pending()
        if failed:
            raise MemoryError(f"{self.name}: out of memory for a temporary buffer of the function; "
                              "it stopped early, so its outputs are incomplete")

    def __repr__(self) -> str:
        return f"<Function {self.name}>"


class Module:
    """Compiled functions: call the entry function with ``module(*args)``.

    One call of a module's code runs at a time: a call from another thread waits for the one
    running. The module's code keeps state of its own between and during calls (the thread
    count, the flag of a failed allocation; a model's workspace and the scratch pointer its
    executor sets), so two calls at once would corrupt each other's results; each would use
    every thread anyway.
    """

    def __init__(self, backend: ModuleCode, functions: dict[str, FunctionInfo], entry_name: str,
                 attrs: dict | None = None):
        if entry_name not in functions:
            raise CompilerError(f"entry function {entry_name!r} is not among {list(functions)}")
        self._backend = backend
        self._infos = dict(functions)
        self._functions: dict[str, Function] = {}
        self._threads = ThreadCountSetter(backend.address(SETTER_SYMBOL))
        _packed.install(backend.address(_packed.SETTER_SYMBOL))  # for call_packed in its code
        self._timer: NativeTimer | None | bool = False  # looked up on first use
        # re-entrant: a Python callback of the code (call_packed) may call the module again
        self._one_call = threading.RLock()
        failure = backend.address(ALLOC_FAILED_SYMBOL)
        self._take_failure = _TAKE_FAILURE(failure) if failure else None
        setter = backend.address(SCRATCH_SETTER_SYMBOL)
        self._set_scratch = _SET_SCRATCH(setter) if setter else None
        self.entry_name = entry_name
        #: Plain data about the module that its library carries along (JSON): a model's executor
        #: keeps its plan here (see :mod:`compiler.graph`).
        self.attrs: dict = dict(attrs or {})

    @property
    def type_key(self) -> str:
        return self._backend.type_key

    @property
    def imported_modules(self) -> list:
        """Device modules this host module launches (none for CPU code)."""
        return []

    @property
    def function_names(self) -> list[str]:
        return list(self._infos)

    def function_info(self, name: str) -> FunctionInfo:
        return self._lookup(name)

    def _lookup(self, name: str) -> FunctionInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise AttributeError(f"module has no function {name!r}; it has {list(self._infos)}") from None

    def get_function(self, name: str) -> Function:
        """The function called ``name`` (AttributeError if there is none)."""
        func = self._functions.get(name)
        if func is None:
            info = self._lookup(name)
            func = Function(info, self._backend.address(name), self._threads, self)
            self._functions[name] = func
        return func

    __getitem__ = get_function

    def _take_alloc_failure(self) -> bool:
        """Whether a heap allocation of the module's code failed since the last call (and clear it)."""
        return self._take_failure is not None and self._take_failure() != 0

    @contextmanager
    def _scratch_region(self, info: FunctionInfo, cache_flush) -> Iterator[list]:
        """Where ``cache_flush`` is "model" and the function ``info`` describes has scratch, its
        scratch taken from a region of its own while the block runs (the region, in a list, for
        the timer to evict); else nothing changes (an empty list)."""
        if not (info.scratch_bytes and self._set_scratch) or check_cache_flush(cache_flush) != FLUSH_MODEL:
            yield []
            return
        region = aligned_empty((info.scratch_bytes,), "uint8", 64)
        self._set_scratch(region.ctypes.data)
        try:
            yield [region]
        finally:
            self._set_scratch(None)

    def _native_timer(self) -> NativeTimer | None:
        if self._timer is False:
            address = self._backend.address(TIMER_SYMBOL)
            self._timer = NativeTimer(address) if address else None
        return self._timer

    def __call__(self, *args) -> None:
        self.get_function(self.entry_name)(*args)

    def get_source(self, fmt: str = "ll") -> str:
        """The code as text: ``"ll"`` (optimised LLVM IR) or ``"asm"``."""
        return self._backend.source(fmt)

    def time_evaluator(self, func_name: str, dev: Device | None = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cache_flush: bool | str = False, warm=()):
        """A callable that times ``func_name`` on its arguments and returns a BenchmarkResult.

        ``results`` holds ``repeat`` entries, each the mean seconds per call of one
        measurement: ``number`` calls, and more in batches until the measurement took
        ``min_repeat_ms`` by the clock; ``cache_flush=True`` evicts the arguments but the first (the
        input, which a model's previous operator has just written) from the caches before every
        call, untimed, as TVM's ``enable_cpu_cache_flush`` does; ``cache_flush="weights"`` keeps
        the last (the output) too, and ``cache_flush="model"`` then has the thread pool write the
        first, as the operator before it leaves its input inside a model. ``warm``: positions
        among the buffer arguments that ``cache_flush`` leaves in the caches (what other
        operators of a model wrote besides the input: a residual). The loop runs in native code;
        see :mod:`compiler.runtime.timer`.
        """
        if dev is not None and dev.device_type != "cpu":
            raise ValueError(f"a {self.type_key} module runs on the CPU, not on {dev}")
        func = self.get_function(func_name)
        warm = tuple(warm)
        buffers = sum(spec.kind == "buffer" for spec in func.info.signature.args)
        bad = [k for k in warm if type(k) is not int or not 0 <= k < buffers]
        if bad:
            raise ValueError(f"warm names positions among the {buffers} buffer arguments of {func_name!r} "
                             f"(0 to {buffers - 1}), got {bad}")

        def evaluate(*args) -> BenchmarkResult:
            return func.time(args, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             cache_flush=cache_flush, warm=warm)

        return evaluate

    def metadata_json(self) -> str:
        """What a shared library must carry to be loaded back as this module."""
        meta = {"version": METADATA_VERSION, "type_key": self.type_key, "entry": self.entry_name,
                "functions": [info.to_json() for info in self._infos.values()]}
        if self.attrs:
            meta["attrs"] = self.attrs
        features = getattr(self._backend, "vector_features", None)
        if features:  # checked by load_module against the CPU that loads the library
            meta["vector_features"] = list(features)
        return json.dumps(meta)

    def export_library(self, path) -> None:
        """Write a shared library that :func:`compiler.runtime.load_module` reads back."""
        self._backend.export(str(path), self.metadata_json())

    def save(self, path, fmt: str = "") -> None:
        """Write this module as an object file (``.o``), as TVM's ``Module.save``.

        :func:`compiler.contrib.cc.create_shared` links it into a shared library that
        :func:`compiler.runtime.load_module` reads back. Only modules built for the CPU
        (not ones loaded from a library) can be saved.
        """
        path = str(path)
        fmt = fmt or path.rpartition(".")[2]
        if fmt not in ("o", "obj"):
            raise CompilerError(f"Module.save writes object files (.o), not {fmt!r} ({path}); "
                                "use export_library for a shared library")
        save = getattr(self._backend, "save_object", None)
        if save is None:
            raise CompilerError(f"this {self.type_key} module has no object code to save "
                                "(only modules built for the CPU do); use export_library")
        save(path, self.metadata_json())

    def __repr__(self) -> str:
        return f"<Module {self.type_key} functions={list(self._infos)} entry={self.entry_name!r}>"
