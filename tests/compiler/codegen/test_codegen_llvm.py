"""The LLVM CPU code generator, on hand-written PrimFuncs."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import CPUS, assert_written, for_each_cpu, poisoned

from compiler.codegen.llvm import generate_llvm_ir
from compiler.driver import build
from compiler.errors import CodegenError
from compiler.lowering import lower
from compiler.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Allocate,
    And,
    Broadcast,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IRModule,
    Let,
    LetStmt,
    Max,
    Min,
    Not,
    Or,
    PrimFunc,
    ProducerLoad,
    Ramp,
    Select,
    SeqStmt,
    Var,
    const,
    decl_buffer,
)
from compiler.tir.expr import CommReducer, Reduce

RNG = np.random.default_rng(0)


def load(buf, index):
    return BufferLoad(buf, (index,), buf.dtype)


def store(buf, value, index):
    return BufferStore(buf, value, (index,))


def loop(var, extent, body, kind=ForKind.SERIAL):
    return For(var, const(0, var.dtype), extent, kind, body)


def elementwise(fn, in_dtypes=("float32",), out_dtype="float32", kind=ForKind.SERIAL, n=None, name="f"):
    """A kernel ``Out[i] = fn(In0[i], In1[i], ...)`` over a symbolic length ``n``."""
    n = n if n is not None else Var("n")
    ins = [decl_buffer((n,), dt, f"In{k}") for k, dt in enumerate(in_dtypes)]
    out = decl_buffer((n,), out_dtype, "Out")
    i = Var("i")
    body = loop(i, n, store(out, fn(*[load(b, i) for b in ins]), i), kind)
    return PrimFunc((*ins, out), body, name)


def run(func, *inputs, out_dtype=None, **build_kw):
    out_dtype = out_dtype or func.params[-1].dtype
    mod = build(func, **build_kw)
    out = poisoned(inputs[0].shape, out_dtype)
    mod(*inputs, out)
    return out


# ------------------------------------------------------------------ basic kernels and loop kinds


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED])
@pytest.mark.parametrize("size", [1, 7, 1000])
def test_vector_add_symbolic_length(kind, size):
    f = elementwise(lambda a, b: a + b, ("float32", "float32"), kind=kind)
    a, b = RNG.random(size, dtype=np.float32), RNG.random(size, dtype=np.float32)
    assert_written(run(f, a, b), a + b, rtol=1e-6)


def test_unrolled_constant_loop():
    f = elementwise(lambda a: a * 3.0, kind=ForKind.UNROLLED, n=const(16))
    a = RNG.random(16, dtype=np.float32)
    assert_written(run(f, a), a * 3, rtol=1e-6)


def test_loop_metadata_in_ir():
    vec_f = elementwise(lambda a: a, kind=ForKind.VECTORIZED, n=const(8), name="v")
    vec = generate_llvm_ir(IRModule({"v": vec_f}))
    assert "llvm.loop.vectorize.enable" in vec and "llvm.loop.vectorize.width\", i32 8" in vec
    unr_f = elementwise(lambda a: a, kind=ForKind.UNROLLED, n=const(8), name="u")
    unr = generate_llvm_ir(IRModule({"u": unr_f}))
    assert "llvm.loop.unroll.full" in unr


def _matmul(dtype, parallel=True):
    """C[i, j] = sum_k A[i, k] * B[k, j] with flattened indices and an accumulation loop."""
    n, m, kk = Var("n"), Var("m"), Var("kk")
    A = decl_buffer((n, kk), dtype, "A")
    B = decl_buffer((kk, m), dtype, "B")
    C = decl_buffer((n, m), dtype, "C")
    i, j, k = Var("i"), Var("j"), Var("k")
    Af, Bf, Cf = A.with_shape((n * kk,)), B.with_shape((kk * m,)), C.with_shape((n * m,))
    zero = const(0, dtype)
    body = loop(i, n, loop(j, m, SeqStmt((
        store(Cf, zero, i * m + j),
        loop(k, kk, store(Cf, load(Cf, i * m + j) + load(Af, i * kk + k) * load(Bf, k * m + j), i * m + j)),
    ))), ForKind.PARALLEL if parallel else ForKind.SERIAL)
    return PrimFunc((A, B, C), body, "matmul")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_matmul_dtypes(dtype):
    mod = build(_matmul(dtype))
    a = (RNG.integers(-5, 5, (13, 9))).astype(dtype)
    b = (RNG.integers(-5, 5, (9, 11))).astype(dtype)
    c = poisoned((13, 11), dtype)
    mod(a, b, c)
    assert_written(c, a @ b, rtol=1e-6)


def test_nested_parallel_runs_inner_serially():
    n = Var("n")
    A = decl_buffer((n * n,), "float32", "A")
    B = decl_buffer((n * n,), "float32", "B")
    i, j = Var("i"), Var("j")
    inner = loop(j, n, store(B, load(A, i * n + j) + 1.0, i * n + j), ForKind.PARALLEL)
    body = loop(i, n, inner, ForKind.PARALLEL)
    mod = build(PrimFunc((A, B, n), body, "nested"))  # n is not a plain dimension: pass it
    a = RNG.random(49, dtype=np.float32)
    b = poisoned(49, "float32")
    mod(a, b, 7)
    assert_written(b, a + 1)
    assert mod.get_source().count("call void @GOMP_parallel") == 1


def test_parallel_loop_inside_serial_loop_with_offset():
    n = Var("n")
    A = decl_buffer((n * 4,), "float32", "A")
    i, j = Var("i"), Var("j")
    body = loop(i, const(4), For(j, const(1), n - 1, ForKind.PARALLEL,
                                 store(A, Cast("float32", i * 100 + j), i * n + j)))
    mod = build(PrimFunc((A, n), body, "inner_par"))
    a = np.full(4 * 10, -1.0, np.float32)
    mod(a, 10)
    expect = np.full((4, 10), -1.0, np.float32)
    for ii in range(4):
        expect[ii, 1:10] = ii * 100 + np.arange(1, 10)
    np.testing.assert_array_equal(a.reshape(4, 10), expect)


def test_thread_count_is_honoured(monkeypatch):
    n = Var("n")
    C = decl_buffer((n,), "int32", "C")
    i = Var("i")
    value = Call("int32", "omp_num_threads", ()) * 1000 + Call("int32", "omp_thread_id", ())
    body = loop(i, n, store(C, value, i), ForKind.PARALLEL)
    mod = build(PrimFunc((C,), body, "threads"))
    c = np.zeros(64, np.int32)
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "1")
    mod(c)
    assert set(c.tolist()) == {1000}
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "3")
    mod(c)
    assert set((c // 1000).tolist()) == {3}
    # Static contiguous chunks: thread t takes elements [t * 22, (t + 1) * 22).
    np.testing.assert_array_equal(c % 1000, np.arange(64) // 22)


# ------------------------------------------------------------------ allocations


def _alloc_kernel(tmp_len, kind=ForKind.PARALLEL):
    """Each outer iteration fills a temporary of ``tmp_len`` floats and sums it into Out[i].

    ``T[j] = A[i] + j % 4``, so ``Out[i] = A[i] * tmp_len + 6 * tmp_len / 4``.
    """
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    Out = decl_buffer((n,), "float32", "Out")
    T = decl_buffer((tmp_len,), "float32", "T")
    i, j = Var("i"), Var("j")
    body = loop(i, n, Allocate(T, SeqStmt((
        loop(j, const(tmp_len), store(T, load(A, i) + Cast("float32", FloorMod(j, const(4), "int32")), j)),
        store(Out, const(0.0), i),
        loop(j, const(tmp_len), store(Out, load(Out, i) + load(T, j), i)),
    ))), kind)
    return PrimFunc((A, Out), body, "alloc")


@pytest.mark.parametrize("tmp_len, heap", [(16, False), (40000, True)])
def test_allocate_inside_parallel_loop(tmp_len, heap):
    f = _alloc_kernel(tmp_len)
    ir_text = generate_llvm_ir(IRModule({"alloc": f}))
    assert ("aligned_alloc" in ir_text) == heap
    a = RNG.integers(0, 4, 9).astype(np.float32)
    out = run(f, a)
    assert_written(out, a * tmp_len + tmp_len // 4 * 6)  # sums of small ints are exact


def test_stack_allocation_is_in_entry_block():
    ir_text = generate_llvm_ir(IRModule({"alloc": _alloc_kernel(16, ForKind.SERIAL)}))
    kernel = ir_text[ir_text.index('define internal void @"alloc__kernel"'):]
    entry = kernel[:kernel.index("body:")]
    assert "alloca [16 x float], align 64" in entry


def _loop_blocks(ir_text: str, function: str) -> list[str]:
    """The basic blocks of ``function`` in optimised IR that branch back to themselves."""
    body = ir_text[ir_text.index(f"define void @{function}("):]
    body = body[:body.index("\n}")]
    blocks = re.split(r"\n(?=[\w.]+:)", body)[1:]
    return [b for b in blocks if f"label %{b.split(':')[0]}" in b.strip().split("\n")[-1]]


def test_heap_temporaries_stay_in_registers_across_loops():
    """Two heap blocks: ``U`` holds ``3 * A``; ``T[j]`` sums ``U[j:j + n - 4]`` for each of 4
    ``j``. The blocks are fresh memory, apart from each other, so each sum stays in a register
    through its loop (the only loops that add), instead of a store to ``T`` after every load
    from ``U``, which could otherwise be the same address."""
    n = 40000
    A = decl_buffer((n,), "float32", "A")
    Out = decl_buffer((n,), "float32", "Out")
    T = decl_buffer((n,), "float32", "T")
    U = decl_buffer((n,), "float32", "U")
    i, j = Var("i"), Var("j")
    body = Allocate(U, Allocate(T, SeqStmt((
        loop(i, const(n), store(U, load(A, i) * 3.0, i)),
        loop(j, const(4), SeqStmt((
            store(T, const(0.0), j),
            loop(i, const(n - 4), store(T, load(T, j) + load(U, i + j), j)),
        ))),
        loop(i, const(n), store(Out, load(T, FloorMod(i, const(4), "int32")) * load(A, i), i)),
    ))))
    f = PrimFunc((A, Out), body, "sums")
    summing = [b for b in _loop_blocks(build(f).get_source("ll"), "sums") if "fadd" in b]
    assert summing and not any("store" in b for b in summing), summing
    a = RNG.integers(1, 4, n).astype(np.float32)
    sums = np.array([(a[k:k + n - 4] * 3).sum(dtype=np.float64) for k in range(4)], np.float32)
    assert_written(run(f, a), sums[np.arange(n) % 4] * a, rtol=1e-6)  # sums of small ints are exact


def test_allocate_symbolic_size_uses_heap():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    Out = decl_buffer((n,), "float32", "Out")
    T = decl_buffer((n,), "float32", "T")
    i = Var("i")
    body = Allocate(T, SeqStmt((loop(i, n, store(T, load(A, i) * 2.0, i)),
                                loop(i, n, store(Out, load(T, n - 1 - i), i)))))
    a = RNG.random(33, dtype=np.float32)
    assert_written(run(PrimFunc((A, Out), body, "rev"), a), (a * 2)[::-1])


@pytest.mark.parametrize("where", ["kernel", "parallel body", "parallel body, inside a heap block"])
def test_a_failed_heap_allocation_raises_memory_error(where, tmp_path):
    """A temporary of ``m`` floats, ``m`` a scalar argument: at 2^60 (2^62 bytes, more than any
    address space) aligned_alloc returns NULL, and the call raises MemoryError instead of
    writing through it; the module then runs the next call as usual, and so does its exported
    library. In a parallel body the threads that failed return, and so does the function
    after the region; a heap block the function holds around the region is freed on the way."""
    from compiler.runtime import load_module

    m = Var("m", "int64")
    A = decl_buffer((4,), "float32", "A")
    Out = decl_buffer((4, 4), "float32", "Out")
    T = decl_buffer((m,), "float32", "T")
    i, j, r = Var("i", "int64"), Var("j"), Var("r")
    fill = Allocate(T, SeqStmt((
        loop(i, m, store(T, load(A, FloorMod(i, const(4, "int64"), "int64")) * 2.0, i)),
        loop(j, const(4), BufferStore(Out, load(T, Cast("int64", j)) + Cast("float32", r), (r, j))),
    )))
    if where == "kernel":
        body = loop(r, const(4), fill)
    else:
        body = loop(r, const(4), fill, ForKind.PARALLEL)
        if where.endswith("heap block"):  # 128 KiB: on the heap, and always allocated
            U = decl_buffer((32768,), "float32", "U")
            body = Allocate(U, SeqStmt((store(U, const(1.0), const(0)), body)))
    func = PrimFunc((A, Out, m), body, "temp")
    if where.endswith("heap block"):  # the way out after the region frees U (a scratch block)
        after_region = generate_llvm_ir(lower(func)).split('call void @"GOMP_parallel"', 1)[1]
        assert re.search(r'alloc\.failed.*:\n\s+call void @"__autotune_scratch_free"', after_region)
    built = build(func)
    built.export_library(str(tmp_path / "temp.so"))
    a = RNG.random(4, dtype=np.float32) + 1
    for mod in (built, load_module(str(tmp_path / "temp.so"))):
        with pytest.raises(MemoryError, match="temp: out of memory"):
            mod(a, poisoned((4, 4), "float32"), 2**60)
        out = poisoned((4, 4), "float32")
        mod(a, out, 8)
        assert_written(out, a * 2 + np.arange(4, dtype=np.float32)[:, None])
        assert mod.time_evaluator(mod.entry_name, number=2, repeat=1)(a, out, 8).mean > 0
        with pytest.raises(MemoryError, match="temp: out of memory"):
            mod.time_evaluator(mod.entry_name, number=2, repeat=1)(a, out, 2**60)


# ------------------------------------------------------------------ expressions


def test_select_is_lazy_and_guards_loads():
    """The untaken side would load from address ~0: evaluating it eagerly would crash."""
    script = textwrap.dedent("""
        import numpy as np
        from compiler.driver import build
        from compiler.tir import *
        n, off = Var("n"), Var("off", "int64")
        A = decl_buffer((n,), "float32", "A"); B = decl_buffer((n,), "float32", "B")
        i = Var("i")
        bad = BufferLoad(A, (Cast("int64", i) + off,), "float32")
        good = BufferLoad(A, (i,), "float32")
        body = For(i, const(0), n, ForKind.SERIAL,
                   BufferStore(B, Select(i < 0, bad, good + 1.0, "float32"), (i,)))
        mod = build(PrimFunc((A, B, off), body, "guard"))
        a = np.arange(64, dtype="float32"); b = np.zeros(64, "float32")
        mod(a, b, -(a.ctypes.data // 4))
        assert (b == a + 1).all()
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_select_with_padding():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n + 2,), "float32", "B")
    i = Var("i")
    value = Select((i >= 1) & (i <= n), BufferLoad(A, (i - 1,), "float32"), const(0.0), "float32")
    body = loop(i, n + 2, store(B, value, i))
    mod = build(PrimFunc((A, B), body, "pad"))
    a = RNG.random(10, dtype=np.float32)
    b = poisoned(12, "float32")
    mod(a, b)
    assert_written(b, np.pad(a, 1))


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf, "fabs": np.abs, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    # TVM's: round takes halves away from zero (llvm.round), nearbyint to even (llvm.nearbyint).
    "round": lambda x: np.where(np.abs(x - np.trunc(x)) >= 0.5, np.trunc(x) + np.sign(x), np.trunc(x)),
    "nearbyint": np.rint,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
# The ops defined on part of the line only: their inputs are drawn there (low, high).
_DOMAINS = {"asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 5), "tan": (-1.5, 1.5)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(_UNARY))
def test_unary_call_ops(op, dtype):
    positive = op in ("log", "log2", "log10", "sqrt", "rsqrt")
    x = (RNG.random(37) * 4 + 0.1 if positive else RNG.random(37) * 8 - 4).astype(dtype)
    x[:4] = [0.5, 1.5, -2.5, 2.5] if not positive else [0.5, 1.5, 2.5, 3.5]  # halves
    if op in _DOMAINS:
        x = RNG.uniform(*_DOMAINS[op], 37).astype(dtype)
    f = elementwise(lambda a: Call(dtype, op, (a,)), (dtype,), dtype)
    assert_written(run(f, x), _UNARY[op](x).astype(dtype), rtol=2e-6, atol=1e-6)


def test_pow_and_float16_math():
    f = elementwise(lambda a, b: Call("float32", "pow", (a, b)), ("float32", "float32"))
    a, b = (RNG.random(20) * 3).astype(np.float32), (RNG.random(20) * 3 - 1).astype(np.float32)
    assert_written(run(f, a, b), a ** b, rtol=1e-5)
    for op in ("exp", "tanh", "erf", "sqrt"):
        h = elementwise(lambda x, op=op: Call("float16", op, (x,)), ("float16",), "float16")
        x = (RNG.random(20) * 2).astype(np.float16)
        expect = _UNARY[op](x.astype(np.float32)).astype(np.float16)
        assert_written(run(h, x).astype(np.float32), expect.astype(np.float32), rtol=2e-3)


def test_isnan_and_int_abs():
    f = elementwise(lambda a: Call("bool", "isnan", (a,)), ("float32",), "bool")
    x = np.array([1.0, np.nan, -np.inf, np.nan], np.float32)
    assert_written(run(f, x), np.isnan(x))
    g = elementwise(lambda a: Call("int32", "abs", (a,)), ("int32",), "int32")
    y = np.array([-5, 0, 7, -(2**31)], np.int32)
    assert_written(run(g, y), np.abs(y))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_floordiv_floormod_match_python(dtype):
    vals = [-7, -6, -1, 0, 1, 5, 6, 7, -100, 100]
    a = np.array([x for x in vals for _ in vals], dtype)
    b = np.array([y for _ in vals for y in (3, -3, 1, -1, 7, -7, 2, -2, 5, 9)], dtype)
    fd = elementwise(lambda x, y: FloorDiv(x, y, dtype), (dtype, dtype), dtype)
    fm = elementwise(lambda x, y: FloorMod(x, y, dtype), (dtype, dtype), dtype)
    assert_written(run(fd, a, b), [int(x) // int(y) for x, y in zip(a, b, strict=True)])
    assert_written(run(fm, a, b), [int(x) % int(y) for x, y in zip(a, b, strict=True)])
    # Constant positive divisor (the common case in index arithmetic).
    fd4 = elementwise(lambda x: FloorDiv(x, const(4, dtype), dtype), (dtype,), dtype)
    fm4 = elementwise(lambda x: FloorMod(x, const(4, dtype), dtype), (dtype,), dtype)
    assert_written(run(fd4, a), [int(x) // 4 for x in a])
    assert_written(run(fm4, a), [int(x) % 4 for x in a])


def test_truncating_div_and_float_floor_ops():
    a = np.array([-7, 7, -7, 7, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    div = elementwise(lambda x, y: Div(x, y, "int32"), ("int32", "int32"), "int32")
    assert_written(run(div, a, b), np.trunc(a / b).astype(np.int32))
    x = np.array([-7.5, 7.5, -7.5, 2.0], np.float32)
    y = np.array([2.0, -2.0, -2.0, 0.5], np.float32)
    fd = elementwise(lambda p, q: FloorDiv(p, q, "float32"), ("float32", "float32"))
    fm = elementwise(lambda p, q: FloorMod(p, q, "float32"), ("float32", "float32"))
    assert_written(run(fd, x, y), np.floor_divide(x, y))
    assert_written(run(fm, x, y), np.mod(x, y))


@pytest.mark.parametrize("src, dst, values", [
    ("float32", "int8", [-128.9, -3.7, 0.0, 3.7, 127.2]),
    ("float32", "uint8", [0.0, 3.7, 255.9]),
    ("int8", "float32", [-128, -1, 0, 127]),
    ("uint8", "int32", [0, 200, 255]),
    ("int32", "uint8", [-1, 256, 300, 7]),
    ("int64", "int32", [2**40 + 5, -3]),
    ("int32", "int64", [-(2**31), 2**31 - 1]),
    ("float32", "float16", [0.1, -2.5, 65504.0]),
    ("float16", "float32", [0.1, -2.5, 1000.0]),
    ("float64", "float32", [1e-3, 1e30]),
    ("float32", "float64", [0.1, -1e20]),
    ("int32", "bool", [0, 1, -5]),
    ("float32", "bool", [0.0, -0.0, 0.5, np.nan]),
    ("bool", "int32", [True, False]),
    ("bool", "float32", [True, False]),
    ("uint32", "float64", [2**32 - 1, 0]),
])
def test_casts(src, dst, values):
    x = np.array(values).astype(src)
    f = elementwise(lambda a: Cast(dst, a), (src,), dst)
    assert_written(run(f, x), x.astype(dst))


def test_comparisons_logic_min_max():
    a = np.array([1, 5, -3, 5, 0], np.int32)
    b = np.array([2, 5, -4, 1, 0], np.int32)
    cases = {
        EQ: np.equal, NE: np.not_equal, LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal,
    }
    for cls, ref in cases.items():
        f = elementwise(lambda x, y, cls=cls: cls(x, y, "bool"), ("int32", "int32"), "bool")
        assert_written(run(f, a, b), ref(a, b))
    logic = elementwise(lambda x, y: Or(And(LT(x, y, "bool"), NE(x, const(0), "bool"), "bool"),
                                        Not(GT(x, const(-10), "bool")), "bool"),
                        ("int32", "int32"), "bool")
    assert_written(run(logic, a, b), ((a < b) & (a != 0)) | ~(a > -10))
    mm = elementwise(lambda x, y: Min(x, y, "int32") * 100 + Max(x, y, "int32"), ("int32", "int32"), "int32")
    assert_written(run(mm, a, b), np.minimum(a, b) * 100 + np.maximum(a, b))
    u = elementwise(lambda x, y: Min(x, y, "uint32"), ("uint32", "uint32"), "uint32")
    ua, ub = np.array([1, 2**32 - 1], np.uint32), np.array([2**31, 5], np.uint32)
    assert_written(run(u, ua, ub), np.minimum(ua, ub))
    fnan = elementwise(lambda x, y: NE(x, y, "bool"), ("float32", "float32"), "bool")
    nan = np.array([np.nan, 1.0], np.float32)
    assert_written(run(fnan, nan, nan), nan != nan)


def test_let_if_and_bool_buffers():
    n = Var("n")
    A = decl_buffer((n,), "int32", "A")
    Mask = decl_buffer((n,), "bool", "Mask")
    Out = decl_buffer((n,), "int32", "Out")
    i, t, u = Var("i"), Var("t"), Var("u")
    body = loop(i, n, LetStmt(t, load(A, i) * 2, IfThenElse(
        load(Mask, i),
        store(Out, Let(u, t + 1, u * u, "int32"), i),
        store(Out, -t, i))))
    mod = build(PrimFunc((A, Mask, Out), body, "letif"))
    a = np.arange(-4, 6, dtype=np.int32)
    mask = a % 3 == 0
    out = poisoned(10, "int32")
    mod(a, mask, out)
    assert_written(out, np.where(mask, (2 * a + 1) ** 2, -2 * a))
    # Storing booleans.
    g = elementwise(lambda x: GT(x, const(0), "bool"), ("int32",), "bool")
    assert_written(run(g, a), a > 0)


def test_scalar_parameters():
    n = Var("n")
    alpha, k = Var("alpha", "float32"), Var("k", "int64")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    i = Var("i")
    body = loop(i, n, store(B, load(A, i) * alpha + Cast("float32", k), i))
    mod = build(PrimFunc((A, B, alpha, k), body, "axpk"))
    a = RNG.random(10, dtype=np.float32)
    b = poisoned(10, "float32")
    mod(a, b, 2.5, -(2**40))
    assert_written(b, a * np.float32(2.5) + np.float32(-(2**40)), rtol=1e-6)


def test_multi_dimensional_indices_are_flattened():
    n = Var("n")
    A = decl_buffer((n, 3), "float32", "A")
    B = decl_buffer((3, n), "float32", "B")
    i, j = Var("i"), Var("j")
    body = loop(i, n, loop(j, const(3), BufferStore(B, BufferLoad(A, (i, j), "float32"), (j, i))))
    mod = build(PrimFunc((A, B), body, "transpose"))
    a = RNG.random((5, 3), dtype=np.float32)
    b = poisoned((3, 5), "float32")
    mod(a, b)
    assert_written(b, a.T)


def test_vector_nodes():
    A = decl_buffer((16,), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    i = Var("i")
    contiguous = BufferLoad(A, (Ramp(i * 4, const(1), 4, "int32"),), "float32x4", 4)
    body = loop(i, const(4), BufferStore(B, contiguous + Broadcast(const(1.0), 4, "float32x4"),
                                         (Ramp(i * 4, const(1), 4, "int32"),)))
    mod = build(PrimFunc((A, B), body, "vec"))
    a = RNG.random(16, dtype=np.float32)
    b = poisoned(16, "float32")
    mod(a, b)
    assert_written(b, a + 1)
    # Strided gather and scatter.
    strided = BufferLoad(A, (Ramp(i, const(4), 4, "int32"),), "float32x4", 4)
    body = loop(i, const(4), BufferStore(B, strided, (Ramp(i * 4, const(1), 4, "int32"),)))
    mod = build(PrimFunc((A, B), body, "gather"))
    b = poisoned(16, "float32")
    mod(a, b)
    assert_written(b, a.reshape(4, 4).T.reshape(-1))


def test_evaluate_and_attr_statements():
    f = elementwise(lambda a: a + 1.0)
    body = SeqStmt((Evaluate(const(0)), f.body))
    mod = build(PrimFunc(f.params, body, "ev"))
    a = RNG.random(4, dtype=np.float32)
    out = poisoned(4, "float32")
    mod(a, out)
    assert_written(out, a + 1)


# ------------------------------------------------------------------ errors and sources


def _one_store(value):
    A = decl_buffer((4,), "float32", "A")
    return PrimFunc((A,), store(A, value, const(0)), "bad")


def test_unlowered_nodes_are_rejected():
    k = Var("k")
    from compiler.tir.expr import IterVar, Range
    axis = (IterVar(Range(const(0), const(4)), k),)
    red = Reduce(CommReducer.SUM, const(1.0), axis, const(True), "float32")
    with pytest.raises(CodegenError, match="Reduce"):
        build(_one_store(red))

    class FakeTensor:
        name = "T"
    with pytest.raises(CodegenError, match="ProducerLoad"):
        build(_one_store(ProducerLoad(FakeTensor(), (const(0),), "float32")))
    with pytest.raises(CodegenError, match="unknown intrinsic"):
        build(_one_store(Call("float32", "no_such_op", (const(1.0),))))


def test_thread_binding_and_undefined_vars_are_rejected(monkeypatch):
    # The code generator's own checks, which the verifier would pre-empt.
    monkeypatch.delenv("COMPILER_VERIFY_IR", raising=False)
    A = decl_buffer((4,), "float32", "A")
    i = Var("i")
    bound = For(i, const(0), const(4), ForKind.THREAD_BINDING, store(A, const(1.0), i), "threadIdx.x")
    with pytest.raises(CodegenError, match="threadIdx.x"):
        build(PrimFunc((A,), bound, "gpu"))
    m = Var("m")
    with pytest.raises(CodegenError, match="m"):
        build(PrimFunc((A,), store(A, Cast("float32", m), const(0)), "free"))


@pytest.mark.parametrize("name", ["free", "tanhf", "GOMP_parallel", "__autotune_metadata"])
def test_reserved_function_names_are_rejected(name):
    with pytest.raises(CodegenError, match="reserved"):
        build(elementwise(lambda a: a, name=name))


def test_sources():
    f = elementwise(lambda a, b: a + b, ("float32", "float32"), kind=ForKind.PARALLEL)
    mod = build(f)
    ll = mod.get_source("ll")
    assert "noalias" in ll and "fadd" in ll and "GOMP_parallel" in ll
    assert mod.get_source("asm").strip()
    with pytest.raises(ValueError):
        mod.get_source("cuda")
    fast = build(f, target="llvm -fast-math")
    assert "fadd fast" in fast.get_source("ll")
    assert "fadd fast" not in ll


def _int64_to_float():
    return elementwise(lambda a: Cast("float32", a) * 2.0, ("int64",), "float32")


@for_each_cpu
def test_explicit_cpu_target(cpu):
    """Code is generated for the CPU the target names, whatever machine compiles it."""
    mod = build(_int64_to_float(), target=cpu.target)
    # Vectors of int64 become floats in one instruction with AVX-512 DQ; without it, one at a time.
    assert ("vcvtqq2ps" in mod.get_source("asm")) == ("avx512dq" in cpu.features)
    if cpu.runs_here():
        a = RNG.integers(-(2**40), 2**40, 40)
        out = poisoned(40, "float32")
        mod(a, out)
        assert_written(out, a.astype(np.float32) * 2)


def test_target_features_add_to_the_cpu():
    haswell = next(c for c in CPUS if c.name == "haswell")
    plain = build(_int64_to_float(), target=haswell.target).get_source("asm")
    extended = build(_int64_to_float(), target=f"{haswell.target} -mattr=+avx512f,+avx512dq,+avx512vl")
    assert "vcvtqq2ps" not in plain and "vcvtqq2ps" in extended.get_source("asm")


def _axpy_split_by(factor: int):
    """axpy with its loop split by ``factor`` and left scalar: LLVM unrolls the inner loop."""
    from compiler import te

    n = 4096
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 3.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=factor)
    return lower(s, [A, B, C])


@pytest.mark.parametrize("cpu", [c for c in CPUS if "avx512f" in c.features], ids=str)
def test_loops_left_scalar_are_not_vectorized_with_gathers(cpu):
    """LLVM's loop vectorizer would vectorize the outer loop of an unrolled split of 16 with
    a gather per load and a scatter per store (4x slower than plain code on Zen 4): x86
    targets prefer neither, unless the target's -mattr asks for them."""
    f = _axpy_split_by(16)
    asm = build(f, target=cpu.target).get_source("asm")
    assert "vgather" not in asm and "vscatter" not in asm
    wanted = build(f, target=f"{cpu.target} -mattr=-prefer-no-gather,-prefer-no-scatter").get_source("asm")
    assert "vscatter" in wanted  # the vectorizer's choice that the default avoids
    if cpu.runs_here():
        a, b = RNG.standard_normal(4096).astype("float32"), RNG.standard_normal(4096).astype("float32")
        out = poisoned(4096, "float32")
        build(f, target=cpu.target)(a, b, out)
        assert_written(out, a * np.float32(3.0) + b, rtol=1e-6, atol=1e-6)  # FMA or not


@pytest.mark.parametrize("cpu", [c for c in CPUS if c.name == "znver3"], ids=str)
def test_a_function_the_slp_vectorizer_breaks_still_builds(cpu):
    """LLVM 22's SLP vectorizer turns the fully unrolled float index arithmetic of this bilinear
    resize (align corners, 6x9 to 3x4) into instructions that do not dominate their uses, and the
    code generator then aborts the whole process. The optimised module is verified, and optimised
    again without the SLP vectorizer where it is broken."""
    from compiler import te, topi

    X = te.placeholder((1, 2, 6, 9), name="X")
    out = topi.image.resize2d(X, None, (3, 4), method="linear",
                              coordinate_transformation_mode="align_corners")
    f = build(te.create_schedule(out.op), [X, out], target=cpu.target)
    if cpu.runs_here():
        x = RNG.uniform(-1, 1, (1, 2, 6, 9)).astype("float32")
        y = poisoned((1, 2, 3, 4), "float32")
        f(x, y)
        want = topi.testing.resize2d_python(x, (3, 4), "linear", "align_corners")
        assert_written(y, want, rtol=1e-6, atol=1e-6)


def _row_gather(rows: int, cols: int, unroll: bool):
    """``out[i, j] = a[(i * 5) % 7, j] * 2`` with ``j`` unrolled: every copy reads the same row."""
    from compiler import te

    A = te.placeholder((7, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[(i * 5) % 7, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    if unroll:
        s[B].unroll(B.op.axis[1])
    return A, B, lower(s, [A, B])


def test_an_operation_is_emitted_once_per_block_whatever_copies_compute_it():
    """The eight unrolled copies each compute the row ``(i * 5) % 7`` and its offset: the block
    computes them once, and a value is never used in a block that does not compute it (LLVM's
    verifier would refuse the module: the kernel would not build)."""
    _, _, unrolled = _row_gather(6, 8, unroll=True)
    body = generate_llvm_ir(unrolled)
    body = body[body.index("define"):]
    assert body.count("srem") == 1 and body.count("mul nsw i32 %\"i\", 5") == 1
    _, _, rolled = _row_gather(6, 8, unroll=False)
    assert generate_llvm_ir(rolled).count("srem") == 1  # in the inner loop's block, once
    for f in (unrolled, rolled):
        a = RNG.standard_normal((7, 8)).astype("float32")
        out = poisoned((6, 8), "float32")
        build(f)(a, out)
        assert_written(out, a[(np.arange(6) * 5) % 7] * 2.0)
