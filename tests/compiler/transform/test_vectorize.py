"""Explicit vectorization: the vectorize pass, vector code generation, alignment, fast-math."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from helpers import SUPPORTED_DTYPES, assert_written, build_and_check, for_each_cpu, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.codegen.llvm import generate_llvm_ir
from compiler.tir import (
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    PrimFunc,
    Ramp,
    Var,
    const,
    decl_buffer,
    interpreter,
)
from compiler.tir.analysis import collect
from compiler.transform import MAX_LANES, vectorize_loops


def _nodes(node, cls):
    return collect(getattr(node, "body", node), lambda n: isinstance(n, cls))


def _vectorized_loops(func):
    return [f for f in _nodes(func, For) if f.kind is ForKind.VECTORIZED]


def _elementwise(n, factor, fn=lambda a, b: a + b, dtype="float32"):
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].vectorize(xi)
    return s, [A, B, C]


def _matmul(n, m, k, dtype="float32"):
    A = te.placeholder((n, k), name="A", dtype=dtype)
    B = te.placeholder((k, m), name="B", dtype=dtype)
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


# ----------------------------------------------------------------------------- the pass


def test_lowered_vector_loop_is_ramp_and_vector_loads():
    s, args = _elementwise(1024, 16)
    func = compiler.lower(s, args)["main"]
    assert not _vectorized_loops(func)
    (st,) = _nodes(func, BufferStore)
    assert isinstance(st.indices[0], Ramp) and st.indices[0].lanes == 16
    loads = _nodes(func, BufferLoad)
    assert len(loads) == 2 and all(ld.lanes == 16 and isinstance(ld.indices[0], Ramp) for ld in loads)
    assert all(ld.predicate is None for ld in loads) and st.predicate is None
    # simple_mode leaves the loop nest as scheduled
    simple = compiler.lower(s, args, simple_mode=True)["main"]
    assert len(_vectorized_loops(simple)) == 1 and not _nodes(simple, Ramp)


def test_guarded_tail_becomes_masked_accesses():
    s, args = _elementwise(100, 16)
    func = compiler.lower(s, args)["main"]
    assert not _vectorized_loops(func)
    masked = [st for st in _nodes(func, BufferStore) if st.predicate is not None]
    assert masked and all(ld.predicate is not None for ld in _nodes(masked[-1], BufferLoad))


def test_wide_loops_are_chunked():
    s, args = _elementwise(200, 200)  # 3 chunks of 64 lanes and one of 8
    func = compiler.lower(s, args)["main"]
    widths = sorted({ld.lanes for ld in _nodes(func, BufferLoad)})
    assert widths == [200 - 3 * MAX_LANES, MAX_LANES]


def _hand_loop(body_fn, n=16, dtype="float32"):
    A = decl_buffer((n + 1,), dtype, "A")
    B = decl_buffer((n + 1,), dtype, "B")
    i = Var("i")
    return PrimFunc((A, B), For(i, const(0), const(n), ForKind.VECTORIZED, body_fn(A, B, i)))


def _ld(buf, idx):
    return BufferLoad(buf, (idx,), buf.dtype)


@pytest.mark.parametrize("case", ["same_element", "carried", "serial_prefix"])
def test_loops_with_cross_lane_effects_stay_scalar_and_correct(case, rng):
    if case == "same_element":  # every lane accumulates into B[0]
        def body(A, B, i):
            return BufferStore(B, _ld(B, const(0)) + _ld(A, i), (const(0),))
    elif case == "carried":  # lane i reads what lane i - 1 wrote
        def body(A, B, i):
            return BufferStore(A, _ld(A, i) + const(1.0), (i + 1,))
    else:  # two stores to the same buffer at different elements
        def body(A, B, i):
            return tir.seq(BufferStore(B, _ld(A, i), (i,)), BufferStore(B, _ld(A, i) * 2.0, (i + 1,)))
    func = _hand_loop(body)
    lowered = compiler.lower(func)
    assert len(_vectorized_loops(lowered["main"])) == 1  # kept: LLVM may still vectorize it safely
    a, b = random_array(rng, 17, "float32"), random_array(rng, 17, "float32")
    want_a, want_b = a.copy(), b.copy()
    interpreter.run(func, {"A": want_a, "B": want_b})
    compiler.build(lowered)(a, b)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)


def test_vectorize_pass_on_a_bare_statement():
    A = decl_buffer((8,), "float32", "A")
    i = Var("i")
    stmt = For(i, const(0), const(8), ForKind.VECTORIZED, BufferStore(A, _ld(A, i) * 2.0, (i,)))
    out = vectorize_loops(stmt)
    assert isinstance(out, BufferStore) and out.indices[0].lanes == 8


def test_nested_affine_indices_come_out_simplified(rng):
    # The index is affine at every level, and one level is not (a vector load of an index
    # buffer added to a ramp): every ramp's base must come out simplified all the same.
    n = 64
    A = decl_buffer((4 * n,), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    idx = decl_buffer((8,), "int32", "idx")
    i, j = Var("i"), Var("j")
    flat = (((j + 0) * 2 + i) * 1 + 3) * 2 - 6  # 4j + 2i, the terms spread over the levels
    body = BufferStore(B, _ld(A, flat) + tir.Cast("float32", _ld(idx, i) + (i * 3 + j * 0)), (j * 8 + i,))
    func = PrimFunc((A, B, idx), For(j, const(0), const(8), ForKind.SERIAL,
                                     For(i, const(0), const(8), ForKind.VECTORIZED, body)))
    out = vectorize_loops(func)
    ramps = _nodes(out, Ramp)
    assert len(ramps) == 4  # the store's index, the load of A, the load of idx, and i * 3
    an = compiler.arith.Analyzer()
    for ramp in ramps:
        assert str(an.simplify(ramp.base)) == str(ramp.base), ramp
    (load_a,) = [ld for ld in _nodes(out, BufferLoad) if ld.buffer is A]
    assert str(load_a.indices[0].base) == str(an.simplify(j * 4)) and load_a.indices[0].stride.value == 2
    a, ix = random_array(rng, 4 * n, "float32"), rng.integers(-5, 5, 8).astype("int32")
    b, want = poisoned(n, "float32"), np.full(n, np.nan, "float32")
    interpreter.run(func, {"A": a, "B": want, "idx": ix})
    compiler.build(out)(a, b, ix)
    np.testing.assert_array_equal(b, want)


# ----------------------------------------------------------------------------- emitted LLVM IR


@for_each_cpu
@pytest.mark.parametrize("lanes", [8, 16])
def test_emitted_ir_has_vectors_of_the_loop_width(lanes, cpu):
    s, args = _elementwise(1024, lanes)
    ll = compiler.build(s, args, target=cpu.target, name="vadd").get_source("ll")
    assert re.search(rf"load <{lanes} x float>", ll)
    assert re.search(rf"fadd contract <{lanes} x float>", ll)
    assert re.search(rf"store <{lanes} x float>", ll)


@for_each_cpu
def test_only_the_kernels_own_buffers_are_taken_as_64_byte_aligned(cpu, rng):
    """An argument is assumed aligned to its element only (numpy starts a large array 16
    bytes into a cache line); a stage the kernel allocates is 64-byte aligned, and its
    vector accesses at multiples of 16 floats say so."""
    A = te.placeholder((1024,), name="A")
    B = te.compute((1024,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((1024,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    for T in (B, C):
        _, xi = s[T].split(T.op.axis[0], factor=16)
        s[T].vectorize(xi)
    raw = random_array(rng, 1025, "float32")
    a = raw[1:]  # 4 bytes past an aligned start
    assert a.ctypes.data % 64
    f = build_and_check(s, [A, C], [a], [(a + 1) * 2], name="stages", target=cpu.target, run=cpu.runs_here())
    ll = f.get_source("ll")
    loads = set(re.findall(r"load <16 x float>, ptr %[\w.]+, align (\d+)", ll))
    stores = set(re.findall(r"store <16 x float> %[\w.]+, ptr %[\w.]+, align (\d+)", ll))
    assert loads == stores == {"4", "64"}  # A and C: their element's 4 bytes; B: 64


@for_each_cpu
def test_loops_llvm_vectorizes_use_the_cpus_vector_width_on_unaligned_arguments(cpu, rng):
    """A loop that LLVM vectorizes itself takes the vector width the CPU prefers (512 bits on
    Zen 4, 256 on Intel's AVX-512 parts and AVX2-only ones) and claims only the element's
    alignment of the arguments, so a view that starts mid-line runs as it is."""
    A = te.placeholder((1024,), name="A")
    C = te.compute((1024,), lambda i: A[i] * 3.0, name="C")
    a = random_array(rng, 1025, "float32")[1:]
    f = build_and_check(te.create_schedule(C.op), [A, C], [a], [a * 3], name="scale", target=cpu.target,
                        run=cpu.runs_here())
    vec_loads = re.findall(r"load <(\d+) x float>, ptr %[\w.]+, align (\d+)", f.get_source("ll"))
    lanes = cpu.vector_bits // 32
    assert vec_loads and {int(n) for n, _ in vec_loads} == {lanes}
    assert {int(al) for _, al in vec_loads} == {4}
    asm = f.get_source("asm")
    registers = {r for r in ("ymm", "zmm") if f"%{r}" in asm}
    assert registers == {"zmm" if cpu.vector_bits == 512 else "ymm"}


def test_transposed_access_is_a_gather(rng):
    n = 24
    A = te.placeholder((n, n), name="A")
    C = te.compute((n, n), lambda i, j: A[j, i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].vectorize(ji)
    func = compiler.lower(s, [A, C])["main"]
    (ld,) = _nodes(func, BufferLoad)
    assert ld.lanes == 8 and isinstance(ld.indices[0], Ramp) and ld.indices[0].stride.value == n
    assert "llvm.masked.gather.v8f32" in generate_llvm_ir(compiler.lower(s, [A, C]))
    a = random_array(rng, (n, n), "float32")
    build_and_check(s, [A, C], [a], [a.T + 1])


def test_fast_math_is_opt_in():
    s, args = _elementwise(256, 16, fn=lambda a, b: a * b + a / b)
    plain = compiler.build(s, args, name="f").get_source("ll")
    fast = compiler.build(s, args, target="llvm -fast-math", name="f").get_source("ll")
    flags = r"\b(fadd|fsub|fmul|fdiv) (fast|reassoc|nnan|ninf|nsz|arcp|afn)\b"
    assert not re.search(flags, plain)
    assert re.search(r"\b(fadd|fmul|fdiv) fast\b", fast)


# ----------------------------------------------------------------------------- correctness


@pytest.mark.parametrize("factor", [4, 8, 16])
def test_tails_for_every_extent(factor, rng):
    for n in range(1, 41):
        s, args = _elementwise(n, factor, fn=lambda a, b: a * b - a)
        a, b = random_array(rng, n, "float32"), random_array(rng, n, "float32")
        build_and_check(s, args, [a, b], [a * b - a], name=f"tail{n}")


def test_symbolic_extent_tail(rng):
    n = te.var("n")
    s, args = _elementwise(n, 16)
    f = compiler.build(s, args)
    for size in (1, 15, 16, 17, 40):
        a, b = random_array(rng, size, "float32"), random_array(rng, size, "float32")
        c = poisoned(size, "float32")
        f(a, b, c)
        assert_written(c, a + b, rtol=1e-6)


def _masked_moves(asm: str) -> str:
    """How ``asm`` masks vector loads and stores: AVX-512 mask registers, vmaskmov, or not at all."""
    if re.search(r"\{%k[1-7]\}", asm):
        return "k-register"
    return "vmaskmov" if re.search(r"\bv(p)?maskmov", asm) else "scalar"


@for_each_cpu
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_every_dtype(dtype, cpu, rng):
    if dtype == "bool":
        fn, ref = (lambda a, b: a & ~b), (lambda a, b: a & ~b)
    else:
        fn, ref = (lambda a, b: a * b + a), (lambda a, b: a * b + a)
    n = 45  # two whole 16-lane vectors and a masked tail
    s, args = _elementwise(n, 16, fn=fn, dtype=dtype)
    assert not _vectorized_loops(compiler.lower(s, args)["main"])
    a, b = random_array(rng, n, dtype), random_array(rng, n, dtype)
    tol = 1e-2 if dtype == "float16" else 1e-6
    f = build_and_check(s, args, [a, b], [ref(a, b)], rtol=tol, atol=tol, target=cpu.target,
                        run=cpu.runs_here())
    ll = f.get_source("ll")
    assert "@llvm.masked.load" in ll and "@llvm.masked.store" in ll
    # AVX-512 masks any element size; AVX2 only 32- and 64-bit ones, smaller ones go one by one.
    if "avx512bw" in cpu.features:
        want = "k-register"
    else:
        want = "vmaskmov" if np.dtype(dtype).itemsize >= 4 else "scalar"
    assert _masked_moves(f.get_source("asm")) == want


@for_each_cpu
@pytest.mark.parametrize("n, lanes", [(23, 16), (25, 16), (39, 32), (71, 32)])
def test_a_masked_tail_writes_nothing_past_its_last_lane(n, lanes, cpu, rng):
    """The tail's mask is a constant with whole 256-bit halves false (23 = 16 + 7) or not
    (25 = 16 + 9); the output is the front of a larger poisoned block, whose rest must stay
    poison: a store that wrote a masked-off half whole would overwrite it."""
    if not cpu.runs_here():
        pytest.skip(f"this host cannot run {cpu} code")
    s, args = _elementwise(n, lanes)
    f = compiler.build(s, args, target=cpu.target)
    assert "@llvm.masked.store" in f.get_source("ll")
    a, b = random_array(rng, n, "float32"), random_array(rng, n, "float32")
    block = poisoned(n + lanes, "float32")
    f(a, b, block[:n])
    assert_written(block[:n], a + b, rtol=1e-6)
    assert np.isnan(block[n:]).all(), "a masked store wrote past the end of its output"


@pytest.mark.parametrize("dst", ["float32", "int32", "float64", "int8"])
def test_vector_casts(dst, rng):
    n = 37
    A = te.placeholder((n,), name="A", dtype="float32" if dst != "float32" else "int32")
    C = te.compute((n,), lambda i: (A[i] * 3).astype(dst), name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(xi)
    a = random_array(rng, n, A.dtype)
    build_and_check(s, [A, C], [a], [(a * 3).astype(dst)])


@pytest.mark.parametrize("op", ["exp", "sqrt", "tanh", "sigmoid", "abs", "log"])
def test_vector_math(op, rng):
    n = 37
    A = te.placeholder((n,), name="A")
    f = {"exp": te.exp, "sqrt": lambda x: te.sqrt(te.abs(x)), "tanh": te.tanh, "abs": te.abs,
         "sigmoid": lambda x: tir.Call(x.dtype, "sigmoid", (x,)), "log": lambda x: te.log(te.abs(x))}[op]
    ref = {"exp": np.exp, "sqrt": lambda x: np.sqrt(np.abs(x)), "tanh": np.tanh, "abs": np.abs,
           "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "log": lambda x: np.log(np.abs(x))}[op]
    C = te.compute((n,), lambda i: f(A[i]), name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(xi)
    a = random_array(rng, n, "float32")
    build_and_check(s, [A, C], [a], [ref(a)], rtol=1e-5, atol=1e-6)


def test_padding_select_reads_only_valid_lanes(rng):
    n, pad = 37, 3
    A = te.placeholder((n,), name="A")
    P = te.compute((n + 2 * pad,),
                   lambda i: te.if_then_else(te.all(i >= pad, i < n + pad), A[i - pad], 0.0), name="P")
    s = te.create_schedule(P.op)
    _, xi = s[P].split(P.op.axis[0], factor=16)
    s[P].vectorize(xi)
    func = compiler.lower(s, [A, P])["main"]
    assert not _vectorized_loops(func)
    a_loads = [ld for ld in _nodes(func, BufferLoad) if ld.buffer.name == "A"]
    assert a_loads and all(ld.predicate is not None for ld in a_loads)
    a = random_array(rng, n, "float32")
    build_and_check(s, [A, P], [a], [np.pad(a, pad)])


def test_vectorized_matmul_reduction(rng):
    A, B, C = _matmul(33, 40, 27)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    func = compiler.lower(s, [A, B, C])["main"]
    assert not _vectorized_loops(func)
    c_stores = [st for st in _nodes(func, BufferStore) if st.buffer.name == "C"]
    assert all(isinstance(st.indices[0], Ramp) for st in c_stores)
    a, b = random_array(rng, (33, 27), "float32"), random_array(rng, (27, 40), "float32")
    build_and_check(s, [A, B, C], [a, b], [a @ b], rtol=1e-4, atol=1e-4)


def _register_tiled_matmul(n, m, k):
    A, B, C = _matmul(n, m, k)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 32)
    s[CC].compute_at(s[C], jo)
    ic, jc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, factor=4)
    s[CC].reorder(ko, ki, ic, jc)
    s[CC].unroll(ki)
    s[CC].unroll(ic)
    s[CC].vectorize(jc)
    s[C].vectorize(ji)
    return s, [A, B, C]


@pytest.mark.parametrize("shape", [(64, 64, 64), (50, 37, 45)])
def test_register_tiled_matmul(shape, rng):
    n, m, k = shape
    s, args = _register_tiled_matmul(n, m, k)
    a, b = random_array(rng, (n, k), "float32"), random_array(rng, (k, m), "float32")
    build_and_check(s, args, [a, b], [a @ b], rtol=1e-4, atol=1e-4)


@for_each_cpu
def test_register_tile_stays_in_registers(cpu, rng):
    s, args = _register_tiled_matmul(64, 64, 64)
    a, b = random_array(rng, (64, 64), "float32"), random_array(rng, (64, 64), "float32")
    f = build_and_check(s, args, [a, b], [a @ b], rtol=1e-4, atol=1e-4, target=cpu.target,
                        run=cpu.runs_here())
    ll = f.get_source("ll")
    # The 4 x 32 accumulator lives in registers: no stack slot, vector FMAs on 32 lanes.
    assert not re.search(r"alloca \[\d+ x float\]", ll)
    assert re.search(r"fmul contract <32 x float>", ll) and re.search(r"fadd contract <32 x float>", ll)


# ----------------------------------------------------------------------------- alignment


@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
@pytest.mark.parametrize("shape", [(1,), (3,), (7, 5), (1000,)])
def test_runtime_arrays_are_64_byte_aligned(shape, dtype):
    for arr in (compiler.nd.empty(shape, dtype), compiler.nd.array(np.zeros(shape, dtype))):
        assert arr.host_array.ctypes.data % 64 == 0
        assert ctypes.addressof(ctypes.c_char.from_buffer(arr.host_array)) % 64 == 0


def test_kernel_allocations_are_64_byte_aligned():
    s, args = _register_tiled_matmul(64, 64, 64)
    text = generate_llvm_ir(compiler.lower(s, args))
    allocas = re.findall(r"alloca \[\d+ x float\](?:, align (\d+))?", text)
    assert allocas and all(a == "64" for a in allocas)


# ----------------------------------------------------------------------------- reference semantics


def _schedule(case):
    if case == "tail":
        return _elementwise(37, 16)
    if case == "matmul":
        return _register_tiled_matmul(9, 37, 6)
    if case == "transpose":
        A = te.placeholder((12, 12), name="A")
        C = te.compute((12, 12), lambda i, j: A[j, i] * 2.0, name="C")
    else:  # padding
        A = te.placeholder((21,), name="A")
        C = te.compute((27,), lambda i: te.if_then_else(te.all(i >= 3, i < 24), A[i - 3], 0.0), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].split(C.op.axis[-1], factor=8)[1])
    return s, [A, C]


@pytest.mark.parametrize("case", ["tail", "padding", "transpose", "matmul"])
def test_vector_ir_interprets_like_the_scalar_ir(case, rng):
    """The reference interpreter runs vector IR too: before and after the pass agree."""
    s, args = _schedule(case)
    scalar = compiler.lower(s, args, simple_mode=True)["main"]
    vector = compiler.lower(s, args)["main"]
    assert _nodes(vector, Ramp) and not _vectorized_loops(vector)
    shapes = {t.name: tuple(d.value for d in t.shape) for t in args}
    inputs = {t.name: random_array(rng, shapes[t.name], "float32") for t in args[:-1]}
    results = []
    for func in (scalar, vector):
        bufs = {k: v.copy() for k, v in inputs.items()}
        bufs[args[-1].name] = poisoned(shapes[args[-1].name], "float32")
        results.append(interpreter.run(func, bufs)[args[-1].name])
    assert_written(results[1], results[0], rtol=1e-6)
