"""TVM's integer, bit and float intrinsics, written as TVM code writes them (``tvm.tir.truncdiv``,
``te.floormod``, ``a >> 2``, ``tir.popcount``, ...), on negative and edge values, against numpy:
in generated code (scalar and vectorised loops) and in the constant folder."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te, tir
from compiler.arith import Analyzer
from compiler.errors import DTypeError
from compiler.tir.evaluate import evaluate

N = 64
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _wrap(value: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    return (value - int(info.min)) % (int(info.max) - int(info.min) + 1) + int(info.min)


def _popcount(x: int, bits: int) -> int:
    return bin(x & ((1 << bits) - 1)).count("1")


def _clz(x: int, bits: int) -> int:
    return bits - (x & ((1 << bits) - 1)).bit_length()


def _operands(dtype: str, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random values over the dtype's whole range with its edges, nonzero divisors (never the
    trapping ``MIN / -1``) and shift amounts below the width."""
    info = np.iinfo(dtype)
    bits = info.bits
    edges = [int(info.min), int(info.max), 0, 1, int(info.max) - 1]
    if info.min < 0:
        edges += [-1, int(info.min) + 1, -7, 7]
    a = [int(v) for v in rng.integers(info.min, info.max, size=N, endpoint=True, dtype=dtype)]
    b = [int(v) for v in rng.integers(info.min, info.max, size=N, endpoint=True, dtype=dtype)]
    a[:len(edges)] = edges
    b[:len(edges)] = [-2, 3, -3, 5, -1, 2, -7, 7, 1] if info.min < 0 else [2, 3, 7, 5, 1]
    # Small divisors of both signs elsewhere too, where quotients and remainders are interesting.
    small = rng.integers(1, 9, size=N // 4)
    b[N // 2:N // 2 + N // 4] = [int(v) if info.min == 0 or k % 2 else -int(v) for k, v in enumerate(small)]
    b = [v if v != 0 else 3 for v in b]
    b = [1 if (x == info.min and y == -1) else y for x, y in zip(a, b)]
    s = [int(v) for v in rng.integers(0, bits, size=N)]
    s[:4] = [0, 1, bits - 1, bits // 2]
    return np.array(a, dtype), np.array(b, dtype), np.array(s, dtype)


# name -> (fcompute(a, b, s), reference(a, b, s, dtype) over Python ints, result dtype or None)
INT_OPS = {
    "floordiv_op": (lambda a, b, s: a // b, lambda a, b, s, dt: a // b, None),
    "floormod_op": (lambda a, b, s: a % b, lambda a, b, s, dt: a % b, None),
    "tir.floordiv": (lambda a, b, s: tir.floordiv(a, b), lambda a, b, s, dt: a // b, None),
    "tir.floormod": (lambda a, b, s: tir.floormod(a, b), lambda a, b, s, dt: a % b, None),
    "te.indexdiv": (lambda a, b, s: te.indexdiv(a, b), lambda a, b, s, dt: a // b, None),
    "te.indexmod": (lambda a, b, s: te.indexmod(a, b), lambda a, b, s, dt: a % b, None),
    "truncdiv": (lambda a, b, s: tir.truncdiv(a, b), lambda a, b, s, dt: _trunc_div(a, b), None),
    "truncmod": (lambda a, b, s: tir.truncmod(a, b), lambda a, b, s, dt: a - _trunc_div(a, b) * b, None),
    "te.truncmod": (lambda a, b, s: te.truncmod(a, b), lambda a, b, s, dt: a - _trunc_div(a, b) * b, None),
    "tir.div": (lambda a, b, s: tir.div(a, b), lambda a, b, s, dt: _trunc_div(a, b), None),
    "and": (lambda a, b, s: a & b, lambda a, b, s, dt: a & b, None),
    "or": (lambda a, b, s: a | b, lambda a, b, s, dt: a | b, None),
    "xor": (lambda a, b, s: a ^ b, lambda a, b, s, dt: a ^ b, None),
    "not": (lambda a, b, s: ~a, lambda a, b, s, dt: ~a, None),
    "bitwise_and": (lambda a, b, s: tir.bitwise_and(a, b), lambda a, b, s, dt: a & b, None),
    "bitwise_or": (lambda a, b, s: tir.bitwise_or(a, b), lambda a, b, s, dt: a | b, None),
    "bitwise_xor": (lambda a, b, s: tir.bitwise_xor(a, b), lambda a, b, s, dt: a ^ b, None),
    "bitwise_not": (lambda a, b, s: tir.bitwise_not(a), lambda a, b, s, dt: ~a, None),
    "shl": (lambda a, b, s: a << s, lambda a, b, s, dt: a << s, None),
    "shr": (lambda a, b, s: a >> s, lambda a, b, s, dt: a >> s, None),
    "shift_left": (lambda a, b, s: tir.shift_left(a, s), lambda a, b, s, dt: a << s, None),
    "shift_right": (lambda a, b, s: tir.shift_right(a, s), lambda a, b, s, dt: a >> s, None),
    "shr_const": (lambda a, b, s: a >> 3, lambda a, b, s, dt: a >> 3, None),
    "popcount": (lambda a, b, s: tir.popcount(a), lambda a, b, s, dt: _popcount(a, np.iinfo(dt).bits), None),
    "clz": (lambda a, b, s: tir.clz(a), lambda a, b, s, dt: _clz(a, np.iinfo(dt).bits), "int32"),
}


def _int_reference(name: str, a, b, s, dtype: str) -> np.ndarray:
    ref, out_dtype = INT_OPS[name][1], INT_OPS[name][2] or dtype
    values = [ref(int(x), int(y), int(z), dtype) for x, y, z in zip(a, b, s)]
    return np.array([_wrap(v, out_dtype) for v in values], out_dtype)


def _elementwise(fn, inputs: list, name: str):
    """``te.compute`` of ``fn`` on the elements of ``inputs`` (one index)."""
    return te.compute((N,), lambda i: fn(*(t[i] for t in inputs)), name=name)


def _build(inputs: list, outputs: list, vectorize: bool):
    s = te.create_schedule([o.op for o in outputs])
    if vectorize:
        for o in outputs:
            _, inner = s[o].split(o.op.axis[0], factor=8)
            s[o].vectorize(inner)
    return tvm.build(s, [*inputs, *outputs], target="llvm")


def _run(f, arrays: list, outputs: list) -> list:
    outs = []
    for o in outputs:
        poison = np.full((N,), 0x5A, dtype=o.dtype) if o.dtype != "bool" else np.zeros((N,), bool)
        outs.append(tvm.nd.array(poison))
    f(*[tvm.nd.array(x) for x in arrays], *outs)
    return [o.numpy() for o in outs]


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_ops_match_numpy(dtype, vectorize):
    a, b, s = _operands(dtype, np.random.default_rng(hash((dtype, vectorize)) % 2**32))
    A, B, S = (te.placeholder((N,), dtype=dtype, name=n) for n in "ABS")
    names = list(INT_OPS)
    outputs = [_elementwise(INT_OPS[n][0], [A, B, S], f"C{k}") for k, n in enumerate(names)]
    for name, out in zip(names, outputs):
        assert out.dtype == (INT_OPS[name][2] or dtype), name
    results = _run(_build([A, B, S], outputs, vectorize), [a, b, s], outputs)
    for name, got in zip(names, results):
        np.testing.assert_array_equal(got, _int_reference(name, a, b, s, dtype), err_msg=f"{name} on {dtype}")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_constant_folding_matches_generated_code(dtype):
    a, b, s = _operands(dtype, np.random.default_rng(7))
    an = Analyzer()
    for name, (fn, _, out_dtype) in INT_OPS.items():
        want = _int_reference(name, a[:12], b[:12], s[:12], dtype)
        for k in range(12):
            x, y, z = (tir.const(int(v[k]), dtype) for v in (a, b, s))
            folded = an.simplify(fn(x, y, z))
            assert isinstance(folded, tir.IntImm), f"{name}({a[k]}, {b[k]}) on {dtype} did not fold: {folded}"
            assert folded.dtype == (out_dtype or dtype)
            assert folded.value == want[k], f"{name}({a[k]}, {b[k]}, {s[k]}) on {dtype}"


def test_simplifier_keeps_negative_operand_semantics():
    # Rewrites of // and % and truncdiv/truncmod with symbolic terms, for negative numerators
    # and divisors, in generated code (where the simplifier rewrites before codegen).
    a = np.arange(-40, 24, dtype="int32")
    b = np.random.default_rng(3).integers(-30, 30, size=N).astype("int32")
    A, B = te.placeholder((N,), dtype="int32", name="A"), te.placeholder((N,), dtype="int32", name="B")
    cases = {
        "(a*8+b)//8": (lambda x, y: (x * 8 + y) // 8, lambda x, y: (x * 8 + y) // 8),
        "(a*8+b)%8": (lambda x, y: (x * 8 + y) % 8, lambda x, y: (x * 8 + y) % 8),
        "a//-3": (lambda x, y: x // -3, lambda x, y: x // -3),
        "a%-3": (lambda x, y: x % -3, lambda x, y: x % -3),
        "truncdiv(a*4+3,4)": (lambda x, y: tir.truncdiv(x * 4 + 3, 4), lambda x, y: _trunc_div(x * 4 + 3, 4)),
        "truncmod(a*4+3,4)": (lambda x, y: tir.truncmod(x * 4 + 3, 4),
                              lambda x, y: x * 4 + 3 - _trunc_div(x * 4 + 3, 4) * 4),
        "truncmod(a,-5)": (lambda x, y: tir.truncmod(x, -5), lambda x, y: x - _trunc_div(x, -5) * -5),
        "truncdiv(a,-5)": (lambda x, y: tir.truncdiv(x, -5), lambda x, y: _trunc_div(x, -5)),
        "((a%8)+8)%8": (lambda x, y: (x % 8 + 8) % 8, lambda x, y: (x % 8 + 8) % 8),
        "(a//4)*4+a%4": (lambda x, y: (x // 4) * 4 + x % 4, lambda x, y: x),
    }
    outputs = [_elementwise(fn, [A, B], f"C{k}") for k, (fn, _) in enumerate(cases.values())]
    results = _run(_build([A, B], outputs, False), [a, b], outputs)
    for (name, (_, ref)), got in zip(cases.items(), results):
        want = np.array([ref(int(x), int(y)) for x, y in zip(a, b)], "int32")
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_symbolic_truncmod_folds_only_when_numerator_is_non_negative():
    an = Analyzer()
    x = te.var("x")
    assert not isinstance(an.simplify(tir.truncmod(x * 4 + 3, 4)), tir.IntImm)  # x may be negative
    assert not isinstance(an.simplify(tir.truncdiv(x * 4 + 3, 4) - x), tir.IntImm)
    assert an.simplify(tir.truncmod(tir.const(-7), 2)).value == -1
    assert an.simplify(tir.truncdiv(tir.const(-7), 2)).value == -3
    assert an.simplify(tir.floordiv(tir.const(-7), 2)).value == -4
    assert an.simplify(tir.floormod(tir.const(-7), 2)).value == 1
    assert an.simplify(tir.floormod(tir.const(7), -2)).value == -1


def test_truncmod_bounds_have_the_sign_of_the_numerator():
    an = Analyzer()
    x = te.var("x")
    assert an.const_int_bound(tir.truncmod(x, 4)) == (-3, 3)
    assert an.const_int_bound(tir.truncmod(x, -5)) == (-4, 4)
    with an.bound(x, (tir.const(-10), tir.const(-2))):
        assert an.const_int_bound(tir.truncmod(x, 4)) == (-3, 0)


def test_float_ops_match_numpy():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(N) * 10).astype("float32")
    halves = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5]
    x[:8] = halves
    x[8:12] = [np.nan, np.inf, -np.inf, -0.0]
    y = (rng.standard_normal(N) * 3).astype("float32")
    y[np.abs(y) < 0.1] = 0.7
    X, Y = te.placeholder((N,), name="X"), te.placeholder((N,), name="Y")
    cases = {
        "nearbyint": (lambda a, b: tir.nearbyint(a), lambda a, b: np.rint(a)),
        # TVM's round is llvm.round: halves away from zero (C's round), unlike nearbyint's.
        "round": (lambda a, b: tir.round(a), lambda a, b: np.where(np.abs(a - np.trunc(a)) >= 0.5,
                                                                    np.trunc(a) + np.sign(a), np.trunc(a))),
        "te.nearbyint": (lambda a, b: te.nearbyint(a), lambda a, b: np.rint(a)),
        "fmod": (lambda a, b: tir.fmod(a, b), lambda a, b: np.fmod(a, b)),
        "tir.div": (lambda a, b: tir.div(a, b), lambda a, b: a / b),
        "floordiv": (lambda a, b: tir.floordiv(a, b), lambda a, b: np.floor(a / b)),
        "isnan": (lambda a, b: tir.isnan(a), lambda a, b: np.isnan(a)),
        "isinf": (lambda a, b: te.isinf(a), lambda a, b: np.isinf(a)),
        "isfinite": (lambda a, b: tir.isfinite(a), lambda a, b: np.isfinite(a)),
        "reinterpret_i32": (lambda a, b: tir.reinterpret("int32", a), lambda a, b: a.view("int32")),
        "reinterpret_u32": (lambda a, b: tir.reinterpret("uint32", a), lambda a, b: a.view("uint32")),
    }
    for vectorize in (False, True):
        outputs = [_elementwise(fn, [X, Y], f"F{k}") for k, (fn, _) in enumerate(cases.values())]
        results = _run(_build([X, Y], outputs, vectorize), [x, y], outputs)
        with np.errstate(all="ignore"):
            for (name, (_, ref)), got in zip(cases.items(), results):
                np.testing.assert_array_equal(got, ref(x, y), err_msg=f"{name} vectorize={vectorize}")


def test_round_and_nearbyint_evaluate_as_they_run():
    # The evaluator (the interpreters' and the GPU simulator's arithmetic) agrees with the code.
    for v, rounded, even in ((2.5, 3.0, 2.0), (-2.5, -3.0, -2.0), (0.5, 1.0, 0.0), (1.49, 1.0, 1.0)):
        assert evaluate(tir.round(tir.const(v, "float32"))) == rounded
        assert evaluate(tir.nearbyint(tir.const(v, "float32"))) == even


def test_reinterpret_round_trips_and_checks_width():
    bits = np.random.default_rng(5).integers(-2**62, 2**62, size=N, dtype="int64")
    A = te.placeholder((N,), dtype="int64", name="A")
    F = te.compute((N,), lambda i: tir.reinterpret("float64", A[i]), name="F")
    back = te.compute((N,), lambda i: tir.reinterpret("int64", F[i]), name="back")
    got_f, got_back = _run(_build([A], [F, back], False), [bits], [F, back])
    np.testing.assert_array_equal(got_f.view("int64"), bits)
    np.testing.assert_array_equal(got_back, bits)
    with pytest.raises(DTypeError, match="width"):
        tir.reinterpret("int16", A[0])
    assert Analyzer().simplify(tir.reinterpret("int32", tir.const(1.0, "float32"))) is not None


def test_bool_bitwise_is_logical_and_bad_operands_are_refused():
    a = np.array([True, False, True, False] * (N // 4))
    b = np.array([True, True, False, False] * (N // 4))
    A, B = te.placeholder((N,), dtype="bool", name="A"), te.placeholder((N,), dtype="bool", name="B")
    outputs = [te.compute((N,), lambda i: A[i] & B[i], name="and_"),
               te.compute((N,), lambda i: A[i] | B[i], name="or_"),
               te.compute((N,), lambda i: A[i] ^ B[i], name="xor_"),
               te.compute((N,), lambda i: ~A[i], name="not_")]
    got = _run(_build([A, B], outputs, False), [a, b], outputs)
    for g, want in zip(got, (a & b, a | b, a ^ b, ~a)):
        np.testing.assert_array_equal(g, want)
    X = te.placeholder((N,), name="X")
    with pytest.raises(DTypeError, match="integer"):
        te.compute((N,), lambda i: X[i] & 1)
    with pytest.raises(DTypeError, match="integer"):
        te.compute((N,), lambda i: ~X[i])
    with pytest.raises(DTypeError, match="truncmod"):
        tir.fmod(te.var("n"), 3)
    with pytest.raises(DTypeError, match="integer"):
        tir.popcount(X[0])
    with pytest.raises(ValueError, match="undefined"):
        te.var("n") << 32


def test_names_are_where_tvm_has_them():
    for name in ("truncdiv", "truncmod", "div", "floordiv", "floormod", "indexdiv", "indexmod", "popcount",
                 "nearbyint", "fmod", "isnan", "isinf", "isfinite", "clz", "reinterpret", "shift_left",
                 "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "exp", "sqrt",
                 "abs", "power", "Mod"):
        assert hasattr(tir, name), name
    for name in ("truncdiv", "truncmod", "div", "floordiv", "floormod", "indexdiv", "indexmod", "popcount",
                 "nearbyint", "fmod", "isnan", "isinf", "isfinite"):
        assert getattr(te, name) is getattr(tir, name), name
    assert "truncmod" in str(tir.truncmod(te.var("x"), 3))
    # The node constructors take TVM's two operands.
    x, y = te.var("x"), te.var("y", "int64")
    assert isinstance(tir.truncmod(x, 3), tir.Mod) and tir.Mod(x, 3).dtype == "int32"
    assert tir.FloorDiv(y, 2).dtype == "int64" and tir.FloorDiv(y, 2).b.dtype == "int64"
    assert tir.LT(x, 2).dtype == "bool" and tir.And(x < 1, x > 0).dtype == "bool"
    # Constants in TVM's (dtype, value) order mean what they mean in TVM, as does ours.
    for imm, value, dtype in ((tir.IntImm("int64", 5), 5, "int64"), (tir.IntImm(5, "int8"), 5, "int8"),
                              (tir.FloatImm("float64", 0.5), 0.5, "float64")):
        assert (imm.value, imm.dtype) == (value, dtype)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_cuda_kernels_with_integer_and_float_ops_assemble(dtype):
    # The NVPTX code generator shares the CPU one's expressions; its PTX must assemble.
    from cuda_helpers import build_ptx

    A, B, S = (te.placeholder((N,), dtype=dtype, name=n) for n in "ABS")
    outputs = [_elementwise(INT_OPS[n][0], [A, B, S], f"C{k}") for k, n in enumerate(INT_OPS)]
    X, Y = te.placeholder((N,), name="X"), te.placeholder((N,), name="Y")
    outputs += [_elementwise(lambda a, b: tir.fmod(a, b) + tir.nearbyint(a), [X, Y], "F"),
                _elementwise(lambda a, b: tir.isinf(a) | tir.isfinite(b), [X, Y], "G")]
    s = te.create_schedule([o.op for o in outputs])
    for o in outputs:
        bx, tx = s[o].split(o.op.axis[0], factor=32)
        s[o].bind(bx, te.thread_axis("blockIdx.x"))
        s[o].bind(tx, te.thread_axis("threadIdx.x"))
    build_ptx(s, [A, B, S, X, Y, *outputs])


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_integer_division_that_would_trap_does_not_crash(dtype):
    # x86 traps on x / 0 and on MIN / -1; generated code divides by 1 there instead: MIN / -1
    # wraps to MIN (as the constant folder computes it), x / 0 gives x and x % 0 gives 0.
    info = np.iinfo(dtype)
    a = np.array([int(info.min), 5, int(info.max), 0] * (N // 4), dtype)
    b = np.array([-1 if info.min < 0 else 0, 0, 0, 0] * (N // 4), dtype)
    A, B = te.placeholder((N,), dtype=dtype, name="A"), te.placeholder((N,), dtype=dtype, name="B")
    ops = [lambda x, y: x // y, lambda x, y: x % y, tir.truncdiv, tir.truncmod]
    outputs = [_elementwise(f, [A, B], f"D{k}") for k, f in enumerate(ops)]
    for vectorize in (False, True):
        got = _run(_build([A, B], outputs, vectorize), [a, b], outputs)
        np.testing.assert_array_equal(got[0], a)  # MIN // -1 wraps to MIN; x // 0 is x
        np.testing.assert_array_equal(got[2], a)
        np.testing.assert_array_equal(got[1], np.zeros(N, dtype))
        np.testing.assert_array_equal(got[3], np.zeros(N, dtype))
    an = Analyzer()
    if info.min < 0:
        low = tir.const(int(info.min), dtype)
        assert an.simplify(low // tir.const(-1, dtype)).value == info.min
        assert an.simplify(tir.truncdiv(low, tir.const(-1, dtype))).value == info.min
        assert an.simplify(tir.truncmod(low, tir.const(-1, dtype))).value == 0
