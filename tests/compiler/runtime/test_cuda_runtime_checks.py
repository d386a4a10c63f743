"""The CUDA runtime without a GPU: the errors it gives without pycuda, artifact round
trips, argument checks, and its use of pycuda's API (contexts, PTX loading, prepared
launches, events) against a fake ``pycuda.driver`` that keeps pycuda's rules: memory,
modules and events need a current context, a context is pushed and popped per thread,
``prepare`` formats are ``struct`` formats, grid and block are tuples of Python ints."""

from __future__ import annotations

import importlib.abc
import struct
import sys
import threading

import numpy as np
import pytest
from cuda_helpers import vector_add_schedule
from helpers import assert_written, poisoned

import compiler
from compiler import te, tir
from compiler.errors import CompilerError, RuntimeArgumentError
from compiler.runtime import cuda as cuda_rt
from compiler.runtime.device import PYCUDA_MISSING, cuda, require_pycuda

TARGET = "cuda -arch=sm_80"


def _vadd():
    s, args = vector_add_schedule()
    return compiler.build(s, args, target=TARGET, name="vadd")


# ---------------------------------------------------------------------------- without pycuda


class _FailingImport(importlib.abc.MetaPathFinder):
    """Makes ``import pycuda...`` fail the way a missing or a broken pycuda does."""

    def __init__(self, error: ImportError):
        self.error = error

    def find_spec(self, name, path=None, target=None):
        if name == "pycuda" or name.startswith("pycuda."):
            raise self.error
        return None


def _fail_pycuda_import(monkeypatch, error: ImportError) -> None:
    for name in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_FailingImport(error), *sys.meta_path])


def test_missing_pycuda_says_how_to_install_it(monkeypatch):
    _fail_pycuda_import(monkeypatch, ModuleNotFoundError("No module named 'pycuda'", name="pycuda"))
    with pytest.raises(RuntimeError) as info:
        require_pycuda()
    assert str(info.value) == PYCUDA_MISSING
    assert cuda_rt.unavailable_reason() == PYCUDA_MISSING
    assert cuda_rt.attached_arch() is None
    with pytest.raises(RuntimeError, match="pycuda is not installed"):
        cuda(0).sync()
    cuda_rt.device_limits()  # the defaults


def test_pycuda_that_cannot_load_the_driver_says_so(monkeypatch):
    _fail_pycuda_import(monkeypatch, ImportError("libcuda.so.1: cannot open shared object file",
                                                 name="pycuda._driver"))
    with pytest.raises(RuntimeError, match=r"cannot be imported \(libcuda\.so\.1.*NVIDIA driver"):
        require_pycuda()
    assert "libcuda.so.1" in cuda_rt.unavailable_reason()


def test_cpu_device_sync_needs_nothing():
    compiler.cpu(0).sync()


# ---------------------------------------------------------------------------- artifacts and arguments


def test_artifact_round_trips_through_bytes_and_files(tmp_path):
    mod = _vadd()
    again = cuda_rt.load_artifact(mod.save_artifact())
    assert again.get_source("ptx") == mod.get_source("ptx")
    assert again.entry_name == mod.entry_name and again.function_names == mod.function_names
    assert again.launch_plan() == mod.launch_plan()
    assert again.function_info("vadd").signature == mod.function_info("vadd").signature
    path = tmp_path / "vadd.ptxmod"
    mod.export_library(path)
    assert cuda_rt.load_artifact(str(path)).launch_plan() == mod.launch_plan()
    assert cuda_rt.load_artifact(mod.artifact()).imported_modules[0].kernel_names == ["vadd_kernel0"]


def test_foreign_or_newer_artifacts_are_rejected():
    art = _vadd().artifact()
    with pytest.raises(CompilerError, match="not a CUDA module artifact"):
        cuda_rt.load_artifact({**art, "type_key": "llvm"})
    with pytest.raises(CompilerError, match="version"):
        cuda_rt.load_artifact({**art, "version": cuda_rt.ARTIFACT_VERSION + 1})


def test_arguments_are_checked_before_the_gpu_is_touched():
    mod, a = _vadd(), np.zeros(16, "float32")
    with pytest.raises(RuntimeArgumentError, match="expected 3 arguments"):
        mod(a, a)
    with pytest.raises(RuntimeArgumentError, match="is on cpu\\(0\\).*compiler.cuda"):
        mod(compiler.nd.array(a), a, np.zeros(16, "float32"))
    with pytest.raises(RuntimeArgumentError, match="dtype float64"):
        mod(a, a.astype("float64"), np.zeros(16, "float32"))
    with pytest.raises(RuntimeArgumentError, match="shares memory"):
        mod(a, np.zeros(16, "float32"), a)


def test_strided_numpy_arguments_must_be_contiguous_for_the_gpu():
    n, sa = te.var("n"), te.var("sa")
    A = te.placeholder((n, 64), name="A")
    B = te.compute((n, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    f = compiler.build(s, [A, B], target=TARGET, binds={A: tir.decl_buffer((n, 64), "float32", "A",
                                                                              strides=(sa, 1))})
    view = np.zeros((6, 100), "float32")[:, :64]  # its device copy would be 64, not 100, apart
    with pytest.raises(RuntimeArgumentError, match="C-contiguous"):
        f(view, np.zeros((6, 64), "float32"))


# ---------------------------------------------------------------------------- a fake pycuda.driver


class _FakeDriver:
    """Enough of pycuda.driver, with its rules checked (see the module docstring)."""

    def __init__(self, gpus: int = 2):
        self.gpus = gpus
        self.tls = threading.local()
        self.memory: dict[int, bytearray] = {}
        self.next_ptr = 1 << 20
        self.loaded: list[bytes] = []
        self.launches: list[tuple] = []
        self.kernels: dict = {}  # kernel name -> fn(driver, grid, block, *unpacked args)
        self.pushes = 0
        drv = self

        class Error(Exception):
            pass

        class LogicError(Error):
            pass

        class Context:
            def __init__(self, device: int):
                self.device = device

            def __eq__(self, other):
                return isinstance(other, Context) and other.device == self.device

            def __ne__(self, other):
                return not self == other

            __hash__ = None

            def push(self):
                drv.stack().append(self)
                drv.pushes += 1

            @staticmethod
            def pop():
                if not drv.stack():
                    raise LogicError("context::pop failed: cannot pop non-current context")
                drv.stack().pop()

            @staticmethod
            def get_current():
                return drv.stack()[-1] if drv.stack() else None

            @staticmethod
            def synchronize():
                drv.current()

        class Device:
            def __init__(self, number: int):
                if not 0 <= number < drv.gpus:
                    raise LogicError("cuDeviceGet failed: invalid device ordinal")
                self.number = number

            @staticmethod
            def count():
                return drv.gpus

            def retain_primary_context(self):
                return Context(self.number)

            def compute_capability(self):
                return (8, 0)

        class Allocation:
            def __init__(self, ptr: int, device: int):
                self.ptr, self.device = ptr, device

            def __int__(self):
                return self.ptr

        class Function:
            def __init__(self, name: str, device: int):
                self.name, self.device = name, device
                self.arg_format = None

            def prepare(self, arg_types):
                assert isinstance(arg_types, str)
                self.arg_format = arg_types
                return self

            def prepared_call(self, grid, block, *args):
                assert drv.current().device == self.device, "launched outside its context"
                for dims in (grid, block):
                    assert isinstance(dims, tuple) and len(dims) == 3, dims
                    assert all(type(d) is int and d > 0 for d in dims), dims
                # pycuda packs with its own copy of struct, which knows no "e" (float16)
                assert set(self.arg_format) <= set("bBhHiIlLqQfd?P"), self.arg_format
                packed = struct.pack("@" + self.arg_format, *args)
                values = struct.unpack("@" + self.arg_format, packed)
                drv.launches.append((self.name, self.arg_format, grid, block, values))
                drv.kernels[self.name](drv, grid, block, *values)

            def __call__(self, *args, **kwargs):
                raise AssertionError("the runtime launches through prepared_call")

        class Module:
            def __init__(self, device: int):
                self.device = device

            def get_function(self, name: str):
                return Function(name, self.device)

        class Event:
            def __init__(self):
                drv.current()
                self.recorded = False

            def record(self, stream=None):
                drv.current()
                self.recorded = True
                return self

            def synchronize(self):
                return self

            def time_till(self, end):
                assert self.recorded and end.recorded
                return 2.0  # milliseconds

        self.Error, self.LogicError, self.Context, self.Device, self.Event = (Error, LogicError, Context,
                                                                              Device, Event)
        self.Allocation, self.Module = Allocation, Module

    def init(self, flags: int = 0) -> None:
        pass

    def stack(self) -> list:
        if not hasattr(self.tls, "stack"):
            self.tls.stack = []
        return self.tls.stack

    def current(self):
        if not self.stack():
            raise self.LogicError("no currently active context?")
        return self.stack()[-1]

    def mem_alloc(self, nbytes: int):
        assert nbytes > 0
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + nbytes + 256
        self.memory[ptr] = bytearray(nbytes)
        return self.Allocation(ptr, self.current().device)

    def memcpy_htod(self, dest, src) -> None:
        self.current()
        data = memoryview(np.ascontiguousarray(src)).cast("B")
        self.memory[int(dest)][:len(data)] = data

    def memcpy_dtoh(self, dest: np.ndarray, src) -> None:
        self.current()
        dest.reshape(-1).view(np.uint8)[:] = np.frombuffer(self.memory[int(src)], np.uint8)[:dest.nbytes]

    def module_from_buffer(self, buffer, options=(), message_handler=None):
        self.current()
        self.loaded.append(bytes(buffer))
        return self.Module(self.current().device)

    def array(self, ptr: int, n: int, dtype="float32") -> np.ndarray:
        return np.frombuffer(self.memory[ptr], dtype)[:n]


def _vadd_kernel(drv, grid, block, a, b, c, n):
    """What vadd_kernel0 computes: c[i] = a[i] + b[i] for i < n."""
    assert grid[0] * block[0] >= n
    drv.array(c, n)[:] = drv.array(a, n) + drv.array(b, n)


@pytest.fixture
def fake(monkeypatch):
    drv = _FakeDriver()
    drv.kernels["vadd_kernel0"] = _vadd_kernel
    monkeypatch.setattr(cuda_rt, "driver", lambda: drv)
    monkeypatch.setattr(cuda_rt, "_contexts", {})
    monkeypatch.setattr(cuda_rt, "require_pycuda", lambda: drv)
    return drv


def test_launch_through_pycuda_prepared_calls(fake, rng):
    mod = _vadd()
    a, b = rng.standard_normal(300).astype("float32"), rng.standard_normal(300).astype("float32")
    c = poisoned(300, "float32")
    mod(a, b, c)
    assert_written(c, a + b)
    (ptx,) = fake.loaded
    assert ptx.endswith(b"\0") and ptx[:-1].decode() == mod.get_source("ptx")  # NUL-terminated PTX
    name, fmt, grid, block, values = fake.launches[-1]
    assert (name, fmt, grid, block) == ("vadd_kernel0", "PPPi", (5, 1, 1), (64, 1, 1))
    assert values[3] == 300
    assert fake.stack() == []  # no context left current


def test_device_arrays_modules_and_timing(fake, rng):
    mod = _vadd()
    host = [rng.standard_normal(100).astype("float32") for _ in range(2)]
    dev = cuda(1)
    a, b = (compiler.nd.array(x, dev) for x in host)
    c = compiler.nd.array(poisoned(100, "float32"), dev)
    mod(a, b, c)
    assert_written(c.numpy(), host[0] + host[1])
    result = mod.time_evaluator(mod.entry_name, dev, number=4, repeat=3)(a, b, c)
    assert result.results == (2.0 / 1e3 / 4,) * 3
    assert len(fake.loaded) == 1  # loaded once into cuda(1)'s context
    dev.sync()
    assert fake.stack() == []
    with pytest.raises(RuntimeArgumentError, match="several GPUs"):
        mod(compiler.nd.array(host[0], cuda(0)), b, c)


def test_calls_from_other_threads_leave_no_context_behind(fake, rng):
    mod = _vadd()
    a = rng.standard_normal(64).astype("float32")
    seen = []

    def work():
        c = poisoned(64, "float32")
        mod(a, a, c)
        x = compiler.nd.array(a, cuda(0))
        seen.append((np.array_equal(c, 2 * a), np.array_equal(x.numpy(), a), list(fake.stack())))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [(True, True, [])] * 3  # pycuda aborts when a thread ends with a context pushed


def test_activations_nest_and_restore_the_previous_context(fake):
    assert fake.Context.get_current() is None
    with cuda_rt.activate(0):
        with cuda_rt.activate(1):
            assert fake.Context.get_current().device == 1
            with cuda_rt.activate(1):
                assert len(fake.stack()) == 2  # already current: not pushed again
        assert fake.Context.get_current().device == 0
    assert fake.stack() == []
    with pytest.raises(ValueError), cuda_rt.activate(0):
        raise ValueError("inside")
    assert fake.stack() == []
    with pytest.raises(RuntimeError, match=r"cuda\(5\) does not exist: this machine has 2 GPU"):
        compiler.nd.empty((4,), "float32", cuda(5))


def test_rejected_ptx_is_a_compiler_error(fake, monkeypatch):
    def reject(buffer, options=(), message_handler=None):
        raise fake.LogicError("cuModuleLoadDataEx failed: a PTX JIT compilation failed")

    monkeypatch.setattr(fake, "module_from_buffer", reject)
    with pytest.raises(CompilerError, match="rejected the PTX \\(built for sm_80\\).*JIT"):
        _vadd()(*(np.zeros(8, "float32") for _ in range(3)))
    assert fake.stack() == []


def test_float16_scalars_are_passed_as_their_bits(fake, rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="float16")
    alpha = te.var("alpha", dtype="float16")
    B = te.compute((n,), lambda i: A[i] * alpha, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    mod = compiler.build(s, [A, alpha, B], target=TARGET, name="scale")

    def scale_kernel(drv, grid, block, *values):
        fmt = drv.launches[-1][1]
        a, b = (drv.array(v, 40, "float16") for v, c in zip(values, fmt) if c == "P")
        b[:] = a * np.uint16(values[fmt.index("H")]).view(np.float16)

    fake.kernels["scale_kernel0"] = scale_kernel
    a = rng.standard_normal(40).astype("float16")
    out = poisoned(40, "float16")
    mod(a, 1.5, out)
    fmt, values = fake.launches[-1][1], fake.launches[-1][-1]
    assert "e" not in fmt and "H" in fmt
    assert np.uint16(values[fmt.index("H")]).view(np.float16) == np.float16(1.5)
    assert_written(out, a * np.float16(1.5))
