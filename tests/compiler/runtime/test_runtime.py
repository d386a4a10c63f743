"""Targets, devices, arrays, runtime modules: argument checking, timing, export and load."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from helpers import host_features

from compiler.driver import build
from compiler.errors import CompilerError, RuntimeArgumentError, TargetError
from compiler.runtime import Module, load_module
from compiler.runtime import ndarray as nd
from compiler.runtime.arguments import ArgumentPacker, FunctionInfo
from compiler.runtime.device import Device, cpu, cuda, device
from compiler.target import Target
from compiler.tir import (
    BufferLoad,
    BufferStore,
    Cast,
    For,
    ForKind,
    IRModule,
    PrimFunc,
    Select,
    SeqStmt,
    Var,
    const,
    decl_buffer,
)

RNG = np.random.default_rng(1)


def _vadd(name="vadd", kind=ForKind.PARALLEL):
    n = Var("n")
    A, B, C = (decl_buffer((n,), "float32", x) for x in "ABC")
    i = Var("i")
    body = For(i, const(0), n, kind,
               BufferStore(C, BufferLoad(A, (i,), "float32") + BufferLoad(B, (i,), "float32"), (i,)))
    return PrimFunc((A, B, C), body, name)


@pytest.fixture(scope="module")
def vadd() -> Module:
    return build(_vadd())


def _scale2d():
    """B[i, j] = A[i, j] * s over a (n, 4) array; flattened by hand."""
    n = Var("n")
    s = Var("s", "float32")
    A = decl_buffer((n, 4), "float32", "A")
    B = decl_buffer((n, 4), "float32", "B")
    i = Var("i")
    Af, Bf = A.with_shape((n * 4,)), B.with_shape((n * 4,))
    body = For(i, const(0), n * 4, ForKind.SERIAL, BufferStore(Bf, BufferLoad(Af, (i,), "float32") * s, (i,)))
    return PrimFunc((A, B, s), body, "scale2d")


# ------------------------------------------------------------------ targets


def test_target_parsing_and_printing():
    t = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma -fast-math")
    assert (t.kind, t.mcpu, t.mattr, t.fast_math) == ("llvm", "skylake-avx512", ["+avx512f", "+fma"], True)
    assert t.model == "skylake-avx512"
    assert str(t) == "llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma -fast-math"
    assert Target(str(t)) == t and hash(Target(str(t))) == hash(t)
    # Options in another order print canonically.
    assert str(Target("llvm  -fast-math -mcpu=znver4")) == "llvm -mcpu=znver4 -fast-math"
    host = Target("llvm")
    assert host.mcpu and host.model == host.mcpu and not host.fast_math and host.mattr == []
    assert str(host) == "llvm"
    c = Target("cuda -arch=sm_90")
    assert (c.kind, c.arch, c.model, c.mcpu) == ("cuda", "sm_90", "sm_90", None)
    assert str(Target("cuda")) == "cuda"
    assert t.options["mcpu"] == "skylake-avx512"


@pytest.mark.parametrize("bad", ["", "opencl", "llvm mcpu=x", "llvm -mcpu", "llvm -bogus=1",
                                 "llvm -fast-math=1", "llvm -mattr=avx2", "llvm -mcpu=a -mcpu=b",
                                 "cuda -mcpu=x"])
def test_target_errors(bad):
    with pytest.raises(TargetError):
        Target(bad)


def test_target_context_and_from_any():
    assert Target.current() is None
    assert Target.from_any(None) is None
    with Target("llvm -mcpu=znver4") as outer:
        assert Target.current() is outer
        with Target("cuda"):
            assert Target.current().kind == "cuda"
        assert Target.from_any(None) == outer
    assert Target.current() is None
    t = Target("llvm")
    assert Target.from_any(t) is t and Target.from_any("llvm") == t
    with pytest.raises(TargetError):
        Target.from_any(42)


# ------------------------------------------------------------------ devices and arrays


def test_devices():
    assert device("llvm", 0) == cpu(0) == Device("cpu", 0)
    assert device("gpu", 1) == cuda(1) and str(cuda(1)) == "cuda(1)"
    with pytest.raises(ValueError):
        device("tpu")
    assert "pycuda" not in sys.modules  # creating a CUDA device imports nothing


def test_cuda_arrays_need_pycuda():
    try:
        import pycuda  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="pycuda is not installed"):
            nd.empty((4,), "float32", cuda(0))
    else:
        pytest.skip("pycuda is installed")


def test_ndarray_basics():
    src = RNG.random((3, 5)).astype(np.float32)
    a = nd.array(src)
    assert a.shape == (3, 5) and a.dtype == "float32" and a.device == cpu(0)
    assert a.host_array.ctypes.data % 64 == 0 and a.host_array.flags.c_contiguous
    out = a.numpy()
    out[0, 0] = 42  # a copy
    assert a.numpy()[0, 0] == src[0, 0]
    e = nd.empty((7,), "int8")
    assert e.shape == (7,) and e.dtype == "int8" and e.host_array.ctypes.data % 64 == 0
    e.copyfrom(np.arange(7))
    np.testing.assert_array_equal(e.numpy(), np.arange(7))
    target = np.zeros(7, np.int8)
    e.copyto(target)
    np.testing.assert_array_equal(target, np.arange(7))
    moved = e.copyto(cpu(0))
    assert isinstance(moved, nd.NDArray) and moved is not e
    with pytest.raises(ValueError):
        e.copyfrom(np.arange(6))
    assert nd.array([1, 2, 3], dtype="int32").dtype == "int32"
    assert nd.array(np.zeros((0, 3), np.float64)).shape == (0, 3)


# ------------------------------------------------------------------ calling modules


def test_call_with_ndarrays_and_numpy(vadd):
    a, b = RNG.random(100, dtype=np.float32), RNG.random(100, dtype=np.float32)
    A, B, C = nd.array(a), nd.array(b), nd.empty((100,), "float32")
    vadd(A, B, C)
    np.testing.assert_allclose(C.numpy(), a + b)
    c = np.full(100, np.nan, np.float32)
    vadd(a, B, c)
    np.testing.assert_allclose(c, a + b)
    assert vadd.entry_name == "vadd" and vadd.type_key == "llvm" and vadd.imported_modules == []
    vadd["vadd"](a, b, c)
    vadd.get_function("vadd")(a, b, c)
    with pytest.raises(AttributeError):
        vadd.get_function("nope")


def test_unaligned_numpy_arguments_are_passed_in_place(vadd):
    """CPU code assumes only element alignment: a view that starts mid-line is neither copied
    in nor copied back."""
    raw = np.full(3 * 101 + 1, np.nan, np.float32)
    a, b, c = raw[1:102], raw[102:203], raw[203:304]  # misaligned views of one array; c poisoned
    a[:], b[:] = RNG.random(101) + 0.5, RNG.random(101) + 0.5
    assert c.ctypes.data % 64 != 0
    info = vadd.function_info("vadd")
    assert [arg.align for arg in info.signature.args if arg.kind == "buffer"] == [4, 4, 4]
    packed = ArgumentPacker(info).pack((a, b, c))
    assert list(packed.buffers) == [a.ctypes.data, b.ctypes.data, c.ctypes.data] and packed.copy_back == []
    vadd(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_a_kernel_that_assumes_aligned_arguments_gets_aligned_copies(vadd):
    """A module whose signature claims the runtime's alignment (or, exported without the
    field, claims nothing) gets misaligned arrays copied into aligned memory, and the
    outputs copied back."""
    raw = np.full(3 * 101 + 1, np.nan, np.float32)
    a, b, c = raw[1:102], raw[102:203], raw[203:304]
    a[:], b[:] = RNG.random(101) + 0.5, RNG.random(101) + 0.5
    sig = vadd.function_info("vadd").to_json()
    for claim in (64, None):
        for arg in sig["signature"]["args"]:
            arg["align"] = claim
            if claim is None:
                del arg["align"]
        info = FunctionInfo.from_json(sig)
        packed = ArgumentPacker(info).pack((a, b, c))
        assert all(p % 64 == 0 for p in packed.buffers)
        assert [dst is c for _, dst in packed.copy_back] == [True]
        np.copyto(packed.copy_back[0][0], a + b)  # as the kernel would write it
        packed.finish()
        np.testing.assert_array_equal(c, a + b)
        c[:] = np.nan


@pytest.mark.parametrize("args, match", [
    (lambda a, b, c: (a, b), "expected 3 arguments"),
    (lambda a, b, c: (a, b, c, c), "expected 3 arguments"),
    (lambda a, b, c: (a, [1.0] * 8, c), "expected an NDArray or numpy.ndarray, got list"),
    (lambda a, b, c: (a, b.astype(np.float64), c), "dtype float64 does not match the expected float32"),
    (lambda a, b, c: (a, b.reshape(2, 4), c), "expected 1 dimensions"),
    (lambda a, b, c: (a, b[:7], c), "n = 7.*n = 8"),
    (lambda a, b, c: (a, np.zeros(16, np.float32)[::2], c), "not C-contiguous"),
    (lambda a, b, c: (a, b, a), "shares memory with argument 0"),
    (lambda a, b, c: (a, b, np.zeros(8, np.float32)[None, :].repeat(1, 0)[0].view()), None),
])
def test_argument_errors(vadd, args, match):
    a, b, c = (np.zeros(8, np.float32) for _ in range(3))
    call_args = args(a, b, c)
    if match is None:
        vadd(*call_args)  # a fresh array is fine
        return
    with pytest.raises(RuntimeArgumentError, match=match) as info:
        vadd(*call_args)
    assert "vadd" in str(info.value)


def test_read_only_output_and_cpu_only(vadd):
    a = np.zeros(4, np.float32)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(RuntimeArgumentError, match="read-only"):
        vadd(a, a, ro)
    vadd(ro, ro, a)  # reading from read-only arrays (even the same one twice) is fine


def test_constant_shapes_and_scalars():
    mod = build(_scale2d())
    a = RNG.random((3, 4), dtype=np.float32)
    b = np.full((3, 4), np.nan, np.float32)
    mod(a, b, 2)
    np.testing.assert_allclose(b, a * 2)
    with pytest.raises(RuntimeArgumentError, match="dimension 1 is 5, expected 4"):
        mod(np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32), 1.0)
    with pytest.raises(RuntimeArgumentError, match="expected a number"):
        mod(a, b, "2")
    with pytest.raises(RuntimeArgumentError, match="expected a number"):
        mod(a, b, None)


def test_scalar_argument_checks():
    n = Var("n")
    k = Var("k", "int8")
    A = decl_buffer((n,), "int8", "A")
    i = Var("i")
    body = For(i, const(0), n, ForKind.SERIAL, BufferStore(A, k, (i,)))
    mod = build(PrimFunc((A, k), body, "fill"))
    a = np.zeros(5, np.int8)
    mod(a, -3)
    np.testing.assert_array_equal(a, -3)
    mod(a, np.int16(4))
    np.testing.assert_array_equal(a, 4)
    with pytest.raises(RuntimeArgumentError, match="out of range for int8"):
        mod(a, 300)
    with pytest.raises(RuntimeArgumentError, match="expected an integer"):
        mod(a, 1.5)


def test_explicit_scalar_must_agree_with_shapes():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    i = Var("i")
    body = For(i, const(0), n, ForKind.SERIAL, BufferStore(A, Cast("float32", n), (i,)))
    mod = build(PrimFunc((A, n), body, "fill_n"))
    a = np.zeros(6, np.float32)
    mod(a, 6)
    np.testing.assert_array_equal(a, 6)
    with pytest.raises(RuntimeArgumentError, match="n = 5"):
        mod(a, 5)


def test_derived_shapes_are_checked():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n + 2,), "float32", "B")
    i = Var("i")
    body = For(i, const(0), n, ForKind.SERIAL, BufferStore(B, BufferLoad(A, (i,), "float32"), (i + 1,)))
    mod = build(PrimFunc((A, B), body, "shift"))
    a = RNG.random(5, dtype=np.float32)
    b = np.zeros(7, np.float32)
    mod(a, b)
    np.testing.assert_array_equal(b[1:6], a)
    with pytest.raises(RuntimeArgumentError, match=r"dimension 0 is 6, expected n \+ 2 = 7"):
        mod(a, np.zeros(6, np.float32))


def test_strided_buffers_bind_strides_and_offset():
    n, m, sa = Var("n"), Var("m"), Var("sa")
    off = Var("off")
    A = decl_buffer((n, m), "float32", "A", strides=(sa, const(1)), elem_offset=off)
    B = decl_buffer((n, m), "float32", "B")
    i, j = Var("i"), Var("j")
    body = For(i, const(0), n, ForKind.SERIAL, For(j, const(0), m, ForKind.SERIAL,
               BufferStore(B, BufferLoad(A, (i, j), "float32"), (i, j))))
    mod = build(PrimFunc((A, B), body, "copy_strided"))
    big = RNG.random((6, 10), dtype=np.float32)
    view = big[1:5, 2:7]  # not contiguous, not aligned
    out = np.zeros((4, 5), np.float32)
    mod(view, out)
    np.testing.assert_array_equal(out, view)
    with pytest.raises(RuntimeArgumentError, match="not C-contiguous"):
        mod(out, view)  # B has no explicit strides


def test_scalar_that_cannot_be_inferred():
    n = Var("n")
    A = decl_buffer((n * 2,), "float32", "A")
    i = Var("i")
    mod = build(PrimFunc((A,), For(i, const(0), n, ForKind.SERIAL, BufferStore(A, const(1.0), (i,))), "half"))
    with pytest.raises(RuntimeArgumentError, match="n is not bound"):
        mod(np.zeros(8, np.float32))


def test_errors_never_crash_in_a_subprocess():
    """A battery of wrong calls: each raises, and the interpreter survives to say so."""
    script = textwrap.dedent("""
        import numpy as np
        from compiler.driver import build
        from compiler.errors import RuntimeArgumentError
        from compiler.tir import *
        n = Var("n")
        A, B, C = (decl_buffer((n,), "float32", x) for x in "ABC")
        i = Var("i")
        value = BufferLoad(A, (i,), "float32") + BufferLoad(B, (i,), "float32")
        f = PrimFunc((A, B, C), For(i, const(0), n, ForKind.PARALLEL, BufferStore(C, value, (i,))), "f")
        mod = build(f)
        good = np.zeros(4, np.float32)
        bad_calls = [(), (good,), (good, good, None), (good, good, 3.0),
                     (good, good, np.zeros(3, np.float32)),
                     (good, good, np.zeros((4, 1), np.float32)), (good, good, np.zeros(4, np.int32)),
                     (good, good, good), (object(), good, good)]
        for args in bad_calls:
            try:
                mod(*args)
            except RuntimeArgumentError:
                pass
            else:
                raise SystemExit(f"no error for {args}")
        print("survived")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "survived" in proc.stdout, proc.stderr


# ------------------------------------------------------------------ timing


def test_time_evaluator(vadd):
    a = nd.array(RNG.random(4096, dtype=np.float32))
    c = nd.empty((4096,), "float32")
    res = vadd.time_evaluator("vadd", cpu(0), number=5, repeat=3)(a, a, c)
    assert len(res.results) == 3 and all(t > 0 for t in res.results)
    assert res.min <= res.median <= res.max and res.mean > 0 and res.std >= 0
    np.testing.assert_allclose(c.numpy(), a.numpy() * 2)
    slow = vadd.time_evaluator(vadd.entry_name, cpu(0), number=1, repeat=2, min_repeat_ms=5, cache_flush=True)
    assert len(slow(a, a, c).results) == 2
    with pytest.raises(RuntimeArgumentError):
        vadd.time_evaluator("vadd", cpu(0))(a, c)


def test_native_timer_results_and_growth(vadd):
    from compiler.runtime.timer import TIMER_SYMBOL, NativeTimer

    assert isinstance(vadd._native_timer(), NativeTimer)  # not the Python fallback
    other = build(_vadd("other"))
    assert vadd._backend.address(TIMER_SYMBOL) == other._backend.address(TIMER_SYMBOL)  # one per process
    a = nd.array(RNG.random(256, dtype=np.float32))
    c = nd.empty((256,), "float32")
    for repeat in (1, 4, 9):
        res = vadd.time_evaluator("vadd", cpu(0), number=3, repeat=repeat)(a, a, c)
        assert len(res.results) == repeat and all(t > 0 for t in res.results)
    # min_repeat_ms: each measurement runs more calls until it took 5 ms (a call takes far less),
    # so the two take at least 10 ms and their means stay small. A call the OS preempts for 5 ms
    # ends its measurement at once: one mean may come out long, not both.
    started = time.perf_counter()
    grown = vadd.time_evaluator("vadd", cpu(0), number=1, repeat=2, min_repeat_ms=5)(a, a, c)
    assert time.perf_counter() - started >= 10e-3
    assert len(grown.results) == 2 and all(t > 0 for t in grown.results) and min(grown.results) < 5e-3
    flushed = vadd.time_evaluator("vadd", cpu(0), number=4, repeat=3, cache_flush=True)(a, a, c)
    assert len(flushed.results) == 3 and all(t > 0 for t in flushed.results)
    np.testing.assert_allclose(c.numpy(), a.numpy() * 2)
    with pytest.raises(ValueError, match="positive"):
        vadd.time_evaluator("vadd", cpu(0), number=0)(a, a, c)


def test_cache_flush_evicts_every_argument_but_the_first_as_tvm_does():
    # TVM's enable_cpu_cache_flush (cache_flush_cpu_non_first_arg) keeps the first argument, an
    # operator's input, in the caches: inside a model the operator before has just written it.
    from compiler.runtime.timer import flushed_ranges

    data, weight, bias, out = (np.empty(n, np.float32) for n in (300, 1000, 0, 200))
    assert flushed_ranges([data, weight, bias, out]) == [(weight.ctypes.data, weight.nbytes),
                                                         (out.ctypes.data, out.nbytes)]
    assert flushed_ranges([data]) == [] and flushed_ranges([]) == []
    # "weights": the output (last) stays too, a workspace buffer that other operators have just used
    assert flushed_ranges([data, weight, bias, out], "weights") == [(weight.ctypes.data, weight.nbytes)]
    assert flushed_ranges([data, out], "weights") == [] and flushed_ranges([data], "weights") == []
    with pytest.raises(ValueError, match="cache_flush must be one of"):
        flushed_ranges([data, out], "output")
    # "model" evicts as "weights" does; the input is then written, not evicted
    assert flushed_ranges([data, weight, bias, out], "model") == [(weight.ctypes.data, weight.nbytes)]
    # a residual (what the model's kernels before wrote) stays in the caches where named warm
    residual = np.empty(200, np.float32)
    assert flushed_ranges([data, weight, residual, out], "model", warm=(2,)) == [(weight.ctypes.data,
                                                                                weight.nbytes)]
    assert flushed_ranges([data, weight, residual, out], "model") == [(weight.ctypes.data, weight.nbytes),
                                                                      (residual.ctypes.data, residual.nbytes)]


def test_the_model_timing_has_the_threads_write_the_input_back_as_it_was(monkeypatch):
    # Each thread of the pool writes one byte of every line of its share of the input after the
    # eviction, as the kernel before leaves it inside a model; the values do not change, to the
    # last partial line (301 floats: 18 lines and 52 bytes), and the kernel computes on them.
    wake = _timer_wake_ir()
    assert "omp_get_thread_num" in wake and "omp_get_num_threads" in wake
    assert "load atomic i8" in wake and "store atomic i8" in wake
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    n = Var("n")
    A, B, C = (decl_buffer((n,), "float32", name) for name in "ABC")
    i = Var("i")
    total = BufferLoad(A, (i,), "float32") + BufferLoad(B, (i,), "float32")
    loop = For(i, const(0), n, ForKind.PARALLEL, BufferStore(C, total, (i,)))
    add = build(PrimFunc((A, B, C), loop, "vadd"))
    a, b = RNG.random(301, dtype=np.float32), RNG.random(301, dtype=np.float32)
    kept = a.copy()
    c = np.full(301, np.nan, np.float32)
    res = add.time_evaluator("vadd", cpu(0), number=1, repeat=5, cache_flush="model")(a, b, c)
    assert len(res.results) == 5 and all(t > 0 for t in res.results)
    np.testing.assert_array_equal(a, kept)
    np.testing.assert_array_equal(c, kept + b)
    frozen = a.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="must be a writeable array"):
        add.time_evaluator("vadd", cpu(0), number=1, cache_flush="model")(frozen, b, c)


def test_the_model_timing_writes_a_blocked_image_by_the_rows_of_each_channel_block(monkeypatch):
    # A channel-blocked image (N, C/b, H, W, b) is written as a convolution whose threads split
    # the height writes it: each thread its share of every channel block's rows, so its planes
    # are N * C/b; anything else is written in equal shares of the whole.
    from compiler import te
    from compiler.runtime.timer import touched_planes

    assert touched_planes(np.empty((2, 3, 5, 7, 4), np.float32)) == 6
    assert touched_planes(np.empty((1, 3, 5, 7), np.float32)) == 1
    assert touched_planes(np.empty((30,), np.float32)) == 1
    assert touched_planes(np.empty((2, 3, 5, 7, 4), np.float32)[:, :, ::2]) == 1  # not contiguous
    text = _timer_wake_ir()
    assert text.count("plane") > 0 and text.count("touch") > 0  # a loop over planes around the lines
    # Each plane 5 * 7 * 4 floats (560 bytes: 8 lines and 48 bytes), on three threads: the values
    # do not change, to the last partial line of every plane, and the kernel computes on them.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "3")
    shape = (2, 3, 5, 7, 4)
    X = te.placeholder(shape, name="X")
    Y = te.compute(shape, lambda *i: X[i] * 2.0 + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    s[Y].parallel(s[Y].fuse(*s[Y].op.axis[:3]))
    double = build(s, [X, Y], name="double")
    x = RNG.standard_normal(shape).astype(np.float32)
    kept = x.copy()
    y = np.full(shape, np.nan, np.float32)
    res = double.time_evaluator("double", cpu(0), number=1, repeat=3, cache_flush="model")(x, y)
    assert len(res.results) == 3 and all(t > 0 for t in res.results)
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(y, kept * 2.0 + 1.0)


def _timer_wake_ir() -> str:
    """The IR text of the timer's wake region (the threads' writes of the input)."""
    from compiler.codegen.llvm_timer import timer_ir

    text = timer_ir("x86_64-unknown-linux-gnu")
    wake = text[text.index("define internal void @\"__autotune_timer_wake\""):]
    return wake[:wake.index("\n}")]


def _slowing(fast_calls: int, slow_steps: int) -> PrimFunc:
    """Counts its calls in ``N[0]``; after ``fast_calls`` calls each call also runs a chain of
    ``slow_steps`` dependent multiply-adds on ``X[0]``."""
    N = decl_buffer((1,), "int64", "N")
    X = decl_buffer((1,), "float32", "X")
    j, at = Var("j", "int64"), (const(0),)
    count = BufferLoad(N, at, "int64") + const(1, "int64")
    steps = Select(count > const(fast_calls, "int64"), const(slow_steps, "int64"), const(0, "int64"))
    step = BufferStore(X, BufferLoad(X, at, "float32") * const(0.999, "float32") + const(1.0, "float32"), at)
    slow = For(j, const(0, "int64"), steps, ForKind.SERIAL, step)
    return PrimFunc((N, X), SeqStmt([BufferStore(N, count, at), slow]), "slowing")


def test_a_measurement_ends_by_the_clock_when_calls_slow_down():
    """A kernel fast for 64 calls, then 0.2 ms per call or more (a million dependent steps): a
    measurement of 20 ms makes two batches of 64 slow calls at most. A count extrapolated from
    the fast calls would be tens of thousands. (20 ms rather than less: the fast calls must
    end inside the measurement even when a busy host holds the process back for a while.)"""
    mod = build(_slowing(64, 1_000_000))
    calls, x = np.zeros(1, np.int64), np.ones(1, np.float32)
    res = mod.time_evaluator("slowing", cpu(0), number=1, repeat=1, min_repeat_ms=20)(calls, x)
    assert 64 < calls[0] <= 250, calls[0]
    assert res.results[0] > 20e-3 / calls[0]  # the mean over every call of the measurement
    # With no min_repeat_ms, one batch of `number` calls after the warm-up call.
    calls[0] = 0
    mod.time_evaluator("slowing", cpu(0), number=7, repeat=3)(calls, x)
    assert calls[0] == 1 + 3 * 7


def test_python_timer_ends_by_the_clock_when_calls_slow_down():
    from compiler.runtime.timer import time_calls

    mod = build(_slowing(64, 1_000_000))
    calls, x = np.zeros(1, np.int64), np.ones(1, np.float32)
    time_calls(lambda: mod(calls, x), number=1, repeat=1, min_repeat_ms=20)
    assert 64 < calls[0] <= 250, calls[0]
    calls[0] = 0
    time_calls(lambda: mod(calls, x), number=7, repeat=3)
    assert calls[0] == 1 + 3 * 7


def test_parallel_loop_uses_the_requested_thread_count(monkeypatch):
    """Each iteration records the OpenMP id of the thread that ran it: contiguous chunks."""
    n = Var("n")
    T = decl_buffer((n,), "int32", "T")
    i = Var("i")
    from compiler.tir import Call
    mod = build(PrimFunc((T,), For(i, const(0), n, ForKind.PARALLEL,
                                   BufferStore(T, Call("int32", "omp_thread_id", ()), (i,))), "tids"))
    for threads, expected in ((1, [0] * 8), (2, [0] * 4 + [1] * 4), (4, [0, 0, 1, 1, 2, 2, 3, 3])):
        monkeypatch.setenv("AUTOTUNE_NUM_THREADS", str(threads))
        ids = np.full(8, -1, np.int32)
        mod(ids)
        assert ids.tolist() == expected


# ------------------------------------------------------------------ build entry points


def test_build_inputs():
    mod = build(_vadd("main"), name="renamed")
    assert mod.entry_name == "renamed"
    two = IRModule({"first": _vadd("first"), "second": _vadd("second", ForKind.SERIAL)})
    m2 = build(two)
    assert m2.entry_name == "first" and set(m2.function_names) == {"first", "second"}
    a = np.ones(4, np.float32)
    c = np.zeros(4, np.float32)
    m2["second"](a, a, c)
    np.testing.assert_array_equal(c, 2)
    m3 = build({"llvm": IRModule({"vadd": _vadd()})}, target_host="llvm")
    assert m3.entry_name == "vadd"
    with Target("llvm -fast-math"):
        assert "fadd fast" in build(_vadd()).get_source()
    # A CPU loop nest has no thread bindings, so it cannot become CUDA kernels.
    with pytest.raises(CompilerError, match="not bound to GPU threads"):
        build(_vadd(), target="cuda -arch=sm_80")
    with pytest.raises(CompilerError, match="not bound to GPU threads"):
        build({"cuda -arch=sm_80": IRModule({"vadd": _vadd()})})


# ------------------------------------------------------------------ export and load


def test_export_and_load_in_a_new_process(tmp_path, vadd):
    path = tmp_path / "vadd.so"
    vadd.export_library(path)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from compiler.runtime import load_module
        from compiler.errors import RuntimeArgumentError
        mod = load_module({str(path)!r})
        assert "llvmlite" not in sys.modules, "loading must not need llvmlite"
        a = np.arange(1000, dtype=np.float32); b = np.ones(1000, np.float32)
        c = np.full(1000, np.nan, np.float32)
        mod(a, b, c)
        assert (c == a + 1).all()
        try:
            mod(a, b)
        except RuntimeArgumentError as e:
            print("checked:", e)
        assert mod._native_timer() is not None, "exported libraries carry the native timer"
        print(mod.entry_name, mod.time_evaluator(mod.entry_name, None, number=2, repeat=2)(a, b, c).results)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "checked: vadd: expected 3 arguments" in proc.stdout and "vadd" in proc.stdout


def test_load_in_process_and_reexport(tmp_path):
    mod = build(_scale2d())
    path = tmp_path / "scale.so"
    mod.export_library(str(path))
    loaded = load_module(path)
    a = RNG.random((2, 4), dtype=np.float32)
    b = np.zeros((2, 4), np.float32)
    loaded(a, b, 3.0)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)
    with pytest.raises(RuntimeArgumentError, match="dimension 1"):
        loaded(np.zeros((2, 3), np.float32), b, 1.0)
    with pytest.raises(CompilerError, match="no 'll' source"):
        loaded.get_source("ll")
    again = tmp_path / "again.so"
    loaded.export_library(again)
    assert load_module(again).entry_name == "scale2d"
    with pytest.raises(FileNotFoundError):
        load_module(tmp_path / "missing.so")


def _thread_count_library(tmp_path):
    """An exported library whose parallel loop writes each element's thread count."""
    n = Var("n")
    C = decl_buffer((n,), "int32", "C")
    i = Var("i")
    from compiler.tir import Call
    body = For(i, const(0), n, ForKind.PARALLEL, BufferStore(C, Call("int32", "omp_num_threads", ()), (i,)))
    path = tmp_path / "threads.so"
    build(PrimFunc((C,), body, "threads")).export_library(path)
    return path


def test_exported_parallel_module_honours_thread_count(tmp_path):
    path = _thread_count_library(tmp_path)
    script = textwrap.dedent(f"""
        import os
        import numpy as np
        from compiler.runtime import load_module
        mod = load_module({str(path)!r})
        c = np.zeros(8, np.int32)
        os.environ["AUTOTUNE_NUM_THREADS"] = "2"; mod(c); first = set(c.tolist())
        os.environ["AUTOTUNE_NUM_THREADS"] = "1"; mod(c); second = set(c.tolist())
        print(first, second)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{2} {1}"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="binding can only narrow a process of 2+ CPUs")
def test_openmp_binding_keeps_every_cpu_for_parallel_loops(tmp_path):
    # With OMP_PROC_BIND=true libgomp pins the initial thread to its first place, and the
    # affinity that thread reads shrinks to one CPU: the default thread count must not follow.
    path = _thread_count_library(tmp_path)
    script = textwrap.dedent(f"""
        import os
        import numpy as np
        cpus = len(os.sched_getaffinity(0))
        from compiler.runtime import load_module
        mod = load_module({str(path)!r})
        c = np.zeros(8, np.int32)
        mod(c); mod(c)
        print(cpus, len(os.sched_getaffinity(0)), sorted(set(c.tolist())))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**env, "OMP_PROC_BIND": "true"})
    assert proc.returncode == 0, proc.stderr
    cpus, bound, threads = proc.stdout.strip().split(" ", 2)
    assert bound == "1"  # libgomp did bind the caller, so the test sees the case it is about
    assert threads == f"[{cpus}]"


def test_fork_after_parallel_run_does_not_hang():
    """libgomp deadlocks in a child forked after a parallel region; the runtime runs it on one thread."""
    script = textwrap.dedent("""
        import multiprocessing as mp
        import numpy as np
        from compiler.driver import build
        from compiler.tir import *
        n = Var("n"); C = decl_buffer((n,), "int32", "C"); i = Var("i")
        value = Call("int32", "omp_num_threads", ())
        body = For(i, const(0), n, ForKind.PARALLEL, BufferStore(C, value, (i,)))
        mod = build(PrimFunc((C,), body, "t"))
        c = np.zeros(8, np.int32)
        mod(c)
        def child(q):
            c = np.zeros(8, np.int32)
            mod(c)
            q.put(c.tolist())
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AUTOTUNE_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str([1] * 8)


def test_double_to_half_is_rounded_once_and_needs_no_libcall():
    """float64 -> float16 (a cast, or a float16 scalar argument): x86 has no instruction for it
    before AVX512-FP16 and LLVM's libcall is unresolved in the JIT, so the kernel jumped to
    address 0. In a child process, so that a crash fails the test. The first values lie just
    above a tie between two halves: rounding to float first, then to half, gets them wrong."""
    script = textwrap.dedent("""
        import numpy as np
        from compiler import te
        from compiler.driver import build
        rng = np.random.default_rng(3)
        a = rng.standard_normal(64) * 10.0 ** rng.integers(-9, 6, 64)
        a[:8] = [1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 1 + 2**-11, 65520.0, 1e300, np.nan, -np.inf,
                 2**-25 + 2**-50]
        with np.errstate(over="ignore"):
            want = a.astype("float16")
        for vectorized in (False, True):
            A = te.placeholder((64,), name="A", dtype="float64")
            B = te.compute((64,), lambda i: A[i].astype("float16"), name="B")
            s = te.create_schedule(B.op)
            if vectorized:
                s[B].vectorize(s[B].split(B.op.axis[0], factor=16)[1])
            b = np.full(64, 7.0, "float16")
            build(s, [A, B])(a, b)
            same = (b.view("uint16") == want.view("uint16")) | (np.isnan(b) & np.isnan(want))
            assert same.all(), (vectorized, a[~same], b[~same], want[~same])
        alpha = te.var("alpha", "float16")
        X = te.placeholder((16,), name="X", dtype="float16")
        Y = te.compute((16,), lambda i: X[i] * alpha, name="Y")
        scale = build(te.create_schedule(Y.op), [X, alpha, Y])
        x, y = rng.standard_normal(16).astype("float16"), np.full(16, np.nan, "float16")
        scale(x, a[0], y)
        np.testing.assert_array_equal(y, x * np.float16(a[0]))
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


def test_float16_code_for_cpus_without_f16c_runs_in_the_jit():
    """Without F16C, LLVM converts halves with calls to __extendhfsf2 and __truncsfhf2, which the
    process lacks: the kernel jumped to address 0. In a child process, so that a crash fails."""
    if "f16c" not in host_features():
        pytest.skip("this CPU has no F16C, which the JIT's float16 conversions use")
    script = textwrap.dedent("""
        import numpy as np
        from compiler import te
        from compiler.driver import build
        rng = np.random.default_rng(4)
        a, d = rng.standard_normal(40).astype("float16"), rng.standard_normal(40)
        for target in ("llvm -mcpu=x86-64", "llvm -mcpu=haswell", "llvm"):
            A = te.placeholder((40,), name="A", dtype="float16")
            D = te.placeholder((40,), name="D", dtype="float64")
            B = te.compute((40,), lambda i: A[i] * 2.0 + D[i].astype("float16"), name="B")
            b = np.full(40, np.nan, "float16")
            build(te.create_schedule(B.op), [A, D, B], target=target)(a, d, b)
            np.testing.assert_array_equal(b, a * np.float16(2) + d.astype("float16"), err_msg=target)
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


def test_float_scalars_out_of_their_range_are_refused():
    alpha = Var("alpha", "float32")
    A = decl_buffer((4,), "float32", "A")
    i = Var("i")
    mod = build(PrimFunc((A, alpha), For(i, const(0), const(4), ForKind.SERIAL,
                                         BufferStore(A, alpha, (i,))), "fill"))
    a = np.zeros(4, np.float32)
    for bad in (1e39, -1e300, 2**1100):  # numpy would make them inf
        with pytest.raises(RuntimeArgumentError, match="out of range for float32"):
            mod(a, bad)
    mod(a, float("-inf"))
    assert np.isneginf(a).all()
    mod(a, 3e38)
    np.testing.assert_array_equal(a, np.float32(3e38))


def test_derived_shapes_with_casts_are_checked():
    n, i = Var("n"), Var("i")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n.astype("int64") * 2,), "float32", "B")
    body = For(i, const(0), n, ForKind.SERIAL, BufferStore(B, BufferLoad(A, (i,), "float32"), (i,)))
    mod = build(PrimFunc((A, B), body, "widen"))
    assert mod.function_info("widen").signature.args[1].shape == ["int64(n) * 2i64"]
    a, b = RNG.random(5, dtype=np.float32), np.zeros(10, np.float32)
    mod(a, b)
    np.testing.assert_array_equal(b[:5], a)
    with pytest.raises(RuntimeArgumentError, match=r"dimension 0 is 7, expected int64\(n\) \* 2i64 = 10"):
        mod(a, np.zeros(7, np.float32))
