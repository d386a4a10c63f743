"""Our own exp, log, tanh, sigmoid and erf (compiler/codegen/vector_math.py): ulps, special values, IR."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_written, for_each_cpu, poisoned
from scipy.special import erf

import compiler
from compiler import te

OPS = ("exp", "log", "tanh", "sigmoid", "erf")
# (op, dtype) of every op we implement: float64 erf is libm's, not ours
CASES = [(op, dtype) for op in OPS for dtype in ("float32", "float64") if (op, dtype) != ("erf", "float64")]
LANES = 16
N = 100_000
# Worst error allowed, in units in the last place of the correctly rounded result.
MAX_ULP = {"float32": 2.0, "float64": 2.0}
# Outputs start out holding this: outside the range of every op here (log's is about [-745, 710]),
# so an element still holding it was never written. NaN would not do: NaN is a valid result.
UNWRITTEN = -12345.0


def _sigmoid(x):
    x = np.asarray(x)
    t = np.exp(-np.abs(x))
    return np.where(x < 0, t, 1) / (1 + t)


_REFERENCE = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sigmoid, "erf": erf}
_TE = {"exp": te.exp, "log": te.log, "tanh": te.tanh, "sigmoid": te.sigmoid, "erf": te.erf}
_MODULES: dict = {}


def kernel(op: str, dtype: str, vector: bool, target: str = "llvm"):
    """``B[i] = op(A[i])`` over ``N`` elements, vectorized ``LANES`` wide or scalar."""
    key = (op, dtype, vector, target)
    if key not in _MODULES:
        A = te.placeholder((N,), name="A", dtype=dtype)
        B = te.compute((N,), lambda i: _TE[op](A[i]), name="B")
        s = te.create_schedule(B.op)
        if vector:
            _, inner = s[B].split(B.op.axis[0], factor=LANES)
            s[B].vectorize(inner)
        name = f"{op}_{dtype}_{'v' if vector else 's'}"
        _MODULES[key] = compiler.build(s, [A, B], target=target, name=name)
    return _MODULES[key]


def call(f, x: np.ndarray) -> np.ndarray:
    """``f`` on ``x`` padded to ``N`` elements; fails if it left an element unwritten."""
    padded = np.resize(x, N)  # the rest repeats x: real inputs, never zeros
    out = np.full(N, UNWRITTEN, x.dtype)
    f(padded, out)
    assert not (out == UNWRITTEN).any(), f"elements {np.flatnonzero(out == UNWRITTEN)[:8]} were not written"
    return out[: x.size]


def run(op: str, dtype: str, vector: bool, x: np.ndarray) -> np.ndarray:
    return call(kernel(op, dtype, vector), x)


def reference(op: str, dtype: str, x: np.ndarray) -> np.ndarray:
    """``op(x)`` in more precision than ``dtype``: float64 for float32, long double for float64."""
    wide = np.float64 if dtype == "float32" else np.longdouble
    with np.errstate(all="ignore"):
        return _REFERENCE[op](x.astype(wide))


def ulp_error(got: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """|got - exact| in ulps of ``dtype`` at ``exact``; where the rounded result is not finite
    (or either is NaN) 0 if ``got`` equals it exactly, else inf."""
    info = np.finfo(dtype)
    with np.errstate(all="ignore"):
        rounded = exact.astype(dtype)
    finite = np.isfinite(rounded) & np.isfinite(got)
    _, e = np.frexp(np.where(finite, exact, 1).astype(np.longdouble))
    ulp = np.ldexp(np.ones_like(exact, dtype=np.longdouble),
                   np.maximum(e - 1, info.minexp) - info.nmant)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.longdouble) - exact.astype(np.longdouble)) / ulp
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    return np.where(finite, err, np.where(same, 0.0, np.inf)).astype(np.float64)


def sample(op: str, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """``N`` points: uniform on [-100, 100] (log: (0, 100]; erf: [-5, 5], where it is not yet
    1), plus logarithmically spread ones."""
    half = N // 2
    uniform = rng.uniform(-5, 5, half) if op == "erf" else rng.uniform(-100, 100, half)
    spread = np.sign(rng.uniform(-1, 1, N - half)) * 10.0 ** rng.uniform(-40, 3, N - half)
    if op == "log":
        uniform, spread = np.abs(uniform), 10.0 ** rng.uniform(-45, 38.5, N - half)
    return np.concatenate([uniform, spread]).astype(dtype)


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_ulp_error_on_random_points(op, dtype, vector):
    x = sample(op, dtype, np.random.default_rng([OPS.index(op), dtype == "float64"]))
    err = ulp_error(run(op, dtype, vector, x), reference(op, dtype, x), dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[dtype], f"{op}({x[worst]!r}) is {err[worst]:.2f} ulp off"


def _special(dtype: str) -> np.ndarray:
    info = np.finfo(dtype)
    tiny, big = float(info.smallest_subnormal), float(info.max)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, float(info.tiny), 1.0, -1.0, big, -big,
              0.625, -0.625, 0.6249999, 0.875, -0.875, 0.8749999, 3.9, -3.95, 4.0, 4.5, 1e-30, -1e-30,
              20.0, -20.0, 30.0, -30.0,
              88.72, 88.73, -87.33, -103.0, -103.98, -104.0, -120.0, 709.78, 709.8, -745.1, -746.0]
    return np.array(values, dtype)


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_special_values(op, dtype, vector):
    x = _special(dtype)
    got = run(op, dtype, vector, x)
    exact = reference(op, dtype, x)
    err = ulp_error(got, exact, dtype)
    bad = err > MAX_ULP[dtype]
    assert not bad.any(), f"{op} at {x[bad]}: got {got[bad]}, expected {exact[bad].astype(dtype)}"
    # Signs of zeros: tanh and erf keep it, exp/sigmoid of -0 are 1 and 1/2.
    zeros = np.array([0.0, -0.0], dtype)
    if op in ("tanh", "erf"):
        np.testing.assert_array_equal(np.signbit(run(op, dtype, vector, zeros)), [False, True])


@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_vector_and_scalar_paths_agree_bitwise(op, dtype):
    x = sample(op, dtype, np.random.default_rng(7))
    np.testing.assert_array_equal(run(op, dtype, True, x), run(op, dtype, False, x))


def test_edge_behaviour_of_exp_and_log():
    f32 = np.float32
    x = np.array([np.inf, -np.inf, np.nan, 89.0, -104.0, 0.0, -1e-45], f32)
    np.testing.assert_array_equal(run("exp", "float32", True, x), [np.inf, 0, np.nan, np.inf, 0, 1, 1])
    y = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 1e-45], f32)
    got = run("log", "float32", True, y)
    np.testing.assert_array_equal(got[:7], [-np.inf, -np.inf, np.nan, np.inf, np.nan, np.nan, 0.0])
    np.testing.assert_allclose(got[7], np.log(np.float64(y[7])), rtol=1e-6)  # the smallest subnormal
    # NaNs of any payload stay NaN
    payloads = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x7FFFFFFF, 0xFFBFFFFF], np.uint32)
    for op in OPS:
        assert np.isnan(run(op, "float32", True, payloads.view(f32))).all(), op
        assert np.isnan(run(op, "float32", False, payloads.view(f32))).all(), op
    # exp rounds gradually into the subnormals, down to the smallest one
    sub = np.array([-88.0, -95.0, -100.0, -103.2], f32)
    err = ulp_error(run("exp", "float32", True, sub), np.exp(sub.astype(np.float64)), "float32")
    assert err.max() <= 1.0, err


@pytest.mark.parametrize("op", OPS)
def test_float16_goes_through_float32(op):
    A = te.placeholder((64,), name="A", dtype="float16")
    B = te.compute((64,), lambda i: _TE[op](A[i]), name="B")
    s = te.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(inner)
    f = compiler.build(s, [A, B])
    x = np.linspace(0.01 if op == "log" else -4, 4, 64).astype(np.float16)
    out = poisoned(64, np.float16)
    f(x, out)
    assert_written(out, _REFERENCE[op](x.astype(np.float64)).astype(np.float16))


@for_each_cpu
@pytest.mark.parametrize("op", OPS)
def test_vectorized_loop_has_no_libm_calls(op, cpu):
    f = kernel(op, "float32", True, cpu.target)
    ir_text = f.get_source("ll")
    for libm in ("@expf", "@logf", "@tanhf", "@erff", "@llvm.exp.", "@llvm.log."):
        assert libm not in ir_text, f"{op}: {libm} in the optimized IR"
    # the loop body works on whole vectors: a 16-lane fma of the polynomial is there
    assert "<16 x float>" in ir_text and "llvm.fma.v16f32" in ir_text
    if cpu.runs_here():  # the same results as the host's code, special values included
        x = np.concatenate([_special("float32"), sample(op, "float32", np.random.default_rng(5))[:4096]])
        np.testing.assert_array_equal(call(f, x), run(op, "float32", True, x))


def test_fast_math_target_gives_the_same_results():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=LANES)
    s[B].vectorize(inner)
    fast = compiler.build(s, [A, B], target="llvm -fast-math")
    x = sample("exp", "float32", np.random.default_rng(3))
    np.testing.assert_array_equal(call(fast, x), run("exp", "float32", True, x))
