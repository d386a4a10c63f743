"""Built functions called with random bad arguments: every bad call raises
RuntimeArgumentError, every good one computes the right answer, none crashes.

Hypothesis draws a function, a valid call and one change to it (a wrong count,
shape or dtype, None, a list, a strided, negative-stride, Fortran-ordered,
unaligned or read-only array, a 0-d array, an aliased output, a bad scalar).
The whole loop runs in a child interpreter, for JIT-compiled functions and for
the same functions loaded from a shared library, so that a crash is a failed
test and not a dead pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import poisoned

EXAMPLES = 300  # per child; each example is one call

# ---------------------------------------------------------------------- the functions


@dataclass
class _Case:
    """A built function, how to make a valid call of it, and what it computes."""

    name: str
    buffers: tuple  # positions of array arguments
    outputs: tuple  # positions of the arrays it writes
    any_strides: tuple  # positions of arrays declared with symbolic strides

    def good_args(self, rng: np.random.Generator, n: int) -> list:
        return _GOOD[self.name](rng, n)

    def expected(self, args: list) -> dict:
        """Output position -> what it must hold after a call on ``args``."""
        return _REFERENCE[self.name]([_host(a) for a in args])


_GOOD = {
    "vadd": lambda rng, n: [rng.standard_normal(n).astype("float32"),
                            rng.standard_normal(n).astype("float32"), poisoned(n, "float32")],
    "scale": lambda rng, n: [rng.integers(-50, 50, (4, n)).astype("int32"), int(rng.integers(-9, 9)),
                             poisoned((4, n), "int32")],
    "strided": lambda rng, n: [rng.standard_normal((n, 3)), poisoned((n, 3), "float64")],
    "fscale": lambda rng, n: [rng.standard_normal(n).astype("float16"), float(rng.uniform(-4, 4)),
                              poisoned(n, "float16")],
}
_REFERENCE = {
    "vadd": lambda a: {2: a[0] + a[1]},
    "scale": lambda a: {2: a[0] * np.int32(np.asarray(a[1]).item())},
    "strided": lambda a: {1: a[0] + 1.0},
    "fscale": lambda a: {2: a[0] * np.float16(np.asarray(a[1]).item())},
}
CASES = [_Case("vadd", (0, 1, 2), (2,), ()), _Case("scale", (0, 2), (2,), ()),
         _Case("strided", (0, 1), (1,), (0,)), _Case("fscale", (0, 2), (2,), ())]
# Scalars each function takes, and ones it must refuse.
_SCALARS = {
    "scale": ([7, -3, np.int16(3), np.int64(-2), np.uint8(5), np.array(4), np.array(4, "int8")],
              [1.5, "2", 2**40, -(2**31) - 1, True, np.bool_(False), np.array([3]), np.float32(2.0), 2**1000,
               1j, b"1", [], np.array(3.0)]),
    "fscale": ([0.5, -2, np.float64(0.25), np.float16(1.5), np.int32(3), np.array(2.0), np.array(-1)],
               ["2", True, np.array([1.0]), 2**1100, 1e300, -70000.0, 1j, None, [1.0], np.longdouble(2),
                np.array("2")]),
}


def _build_modules() -> dict:
    import compiler
    from compiler import te, tir

    n = te.var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    mods = {"vadd": compiler.build(s, [A, B, C], name="vadd")}

    m, k = te.var("m"), te.var("k", "int32")
    A = te.placeholder((4, m), name="A", dtype="int32")
    B = te.compute((4, m), lambda i, j: A[i, j] * k, name="B")
    mods["scale"] = compiler.build(te.create_schedule(B.op), [A, k, B], name="scale")

    n, sa, sb = te.var("n"), te.var("sa"), te.var("sb")
    A = te.placeholder((n, 3), name="A", dtype="float64")
    B = te.compute((n, 3), lambda i, j: A[i, j] + 1.0, name="B")
    binds = {A: tir.decl_buffer((n, 3), "float64", "A", strides=(sa, sb))}
    mods["strided"] = compiler.build(te.create_schedule(B.op), [A, B], name="strided", binds=binds)

    n, alpha = te.var("n"), te.var("alpha", "float16")
    A = te.placeholder((n,), name="A", dtype="float16")
    B = te.compute((n,), lambda i: A[i] * alpha, name="B")
    mods["fscale"] = compiler.build(te.create_schedule(B.op), [A, alpha, B], name="fscale")
    return mods


def _host(a):
    from compiler.runtime.ndarray import NDArray

    return a.numpy() if isinstance(a, NDArray) else a


# ---------------------------------------------------------------------- the changes
# Each takes (case, args, position, rng) and returns (args, "bad" | "good"), or None
# where it does not apply to that position.


def _layout(case, k, view):
    """A view with other strides is fine where the buffer is declared with symbolic strides,
    or where numpy calls it C-contiguous anyway (one element or none)."""
    return view, ("good" if k in case.any_strides or view.flags.c_contiguous else "bad")


def _strided(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    arr = args[k]
    view = np.empty((2 * arr.shape[0], *arr.shape[1:]), arr.dtype)[::2]
    view[...] = arr
    return _layout(case, k, view)


def _negative(case, args, k, rng):
    if not isinstance(args[k], np.ndarray) or args[k].shape[0] < 2:
        return None
    view = np.empty_like(args[k])[::-1]
    view[...] = args[k]
    return _layout(case, k, view)


def _fortran(case, args, k, rng):
    if not isinstance(args[k], np.ndarray) or args[k].ndim != 2:
        return None
    return _layout(case, k, np.asfortranarray(args[k]))


def _unaligned(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    arr = args[k]
    raw = np.empty(arr.nbytes + 64 + arr.itemsize, np.uint8)
    start = (-raw.ctypes.data) % 64 + arr.itemsize  # one element past a 64-byte boundary
    view = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    return view, "good"


def _device_array(case, args, k, rng):
    import compiler

    if not isinstance(args[k], np.ndarray):
        return None
    return compiler.nd.array(args[k]), "good"


def _read_only(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    arr = args[k].copy()
    arr.flags.writeable = False
    return arr, ("bad" if k in case.outputs else "good")


def _other_dtype(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    choices = [d for d in ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool")
               if d != args[k].dtype.name]
    with np.errstate(invalid="ignore", over="ignore"):  # NaN or large values to ints
        return args[k].astype(choices[rng.integers(len(choices))]), "bad"


def _byte_swapped(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    return args[k].astype(args[k].dtype.newbyteorder()), "bad"


def _more_dims(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    return args[k][None], "bad"


def _zero_d(case, args, k, rng):
    value = args[k]
    if isinstance(value, np.ndarray):
        return np.array(value.flat[0] if value.size else 0, value.dtype), "bad"
    return np.array(value), "good"  # a 0-d array is a fine scalar


def _other_shape(case, args, k, rng):
    if not isinstance(args[k], np.ndarray):
        return None
    arr = args[k]
    axis = int(rng.integers(arr.ndim))
    shape = list(arr.shape)
    shape[axis] += 1
    return np.resize(arr, shape), "bad"


def _none(case, args, k, rng):
    return None, "bad"


def _as_list(case, args, k, rng):
    value = args[k]
    return (value.tolist() if isinstance(value, np.ndarray) else [value]), "bad"


def _not_an_array(case, args, k, rng):
    return [b"bytes", "text", {"a": 1}, object(), 3 + 4j][int(rng.integers(5))], "bad"


def _bad_scalar(case, args, k, rng):
    if isinstance(args[k], np.ndarray):
        return None
    bad = _SCALARS[case.name][1]
    return bad[int(rng.integers(len(bad)))], "bad"


def _other_scalar(case, args, k, rng):
    if isinstance(args[k], np.ndarray):
        return None
    good = _SCALARS[case.name][0]
    return good[int(rng.integers(len(good)))], "good"


def _misaligned(case, args, k, rng):
    """Data one byte off its element size: copied for contiguous buffers, refused for strided ones."""
    arr = args[k]
    if not isinstance(arr, np.ndarray) or arr.itemsize == 1:
        return None
    raw = np.empty(arr.nbytes + 1, np.uint8)
    view = raw[1:].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    return view, ("bad" if k in case.any_strides and arr.size else "good")


def _aliased_output(case, args, k, rng):
    if k not in case.outputs:
        return None
    inputs = [j for j in case.buffers if j not in case.outputs]
    j = inputs[int(rng.integers(len(inputs)))]
    if args[j].shape != args[k].shape or args[j].dtype != args[k].dtype:
        return None
    return args[j], ("bad" if args[j].size else "good")  # empty arrays share nothing


CHANGES = {f.__name__[1:]: f for f in (
    _strided, _negative, _fortran, _unaligned, _device_array, _read_only, _other_dtype, _byte_swapped,
    _more_dims, _zero_d, _other_shape, _none, _as_list, _not_an_array, _bad_scalar, _other_scalar,
    _aliased_output, _misaligned)}


# ---------------------------------------------------------------------- one call, checked


def _call(mod, case: _Case, args: list, kind: str) -> str:
    """Call ``mod`` on ``args``; return the outcome, raising AssertionError on a wrong one."""
    from compiler.errors import RuntimeArgumentError

    try:
        mod(*args)
    except RuntimeArgumentError:
        assert kind == "bad", "a good call raised"
        return "raised"
    assert kind == "good", "a bad call returned"
    for k, want in case.expected(args).items():
        got = _host(args[k])
        assert np.isfinite(got).all() if got.dtype.kind == "f" else True, f"output {k} not fully written"
        np.testing.assert_array_equal(got, want)
    return "computed"


ALL_CHANGES = sorted(CHANGES) + ["count", "unchanged"]


def _try(mods: dict, counts: dict, case: _Case, change: str, n: int, seed: int, position: int) -> None:
    """One valid call of ``case`` on ``n`` elements, changed by ``change``, made and checked."""
    rng = np.random.default_rng(seed)
    args = case.good_args(rng, n)
    if change == "count":
        args, kind = (args[:-1] if position % 2 else [*args, args[-1]]), "bad"
    elif change == "unchanged":
        kind = "good"
    else:
        options = [(k, changed) for k in range(len(args))
                   if (changed := CHANGES[change](case, args, k, rng)) is not None]
        if not options:
            return
        k, (args[k], kind) = options[position % len(options)]
    outcome = _call(mods[case.name], case, args, kind)
    key = f"{case.name}:{change}:{outcome}"
    counts[key] = counts.get(key, 0) + 1


def fuzz(mode: str, workdir: str, examples: int) -> dict:
    """Every change at every position once, then ``examples`` drawn by hypothesis (run this in
    a child process); returns how often each function, change and outcome occurred."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from compiler.runtime import load_module

    mods = _build_modules()
    if mode == "so":
        for name, mod in list(mods.items()):
            path = Path(workdir) / f"{name}.so"
            mod.export_library(path)
            mods[name] = load_module(path)
    counts: dict = {}
    for case in CASES:
        for change in ALL_CHANGES:
            for position in range(3):
                for n in (0, 1, 7):
                    _try(mods, counts, case, change, n, seed=position * 100 + n, position=position)

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=st.sampled_from(CASES), change=st.sampled_from(ALL_CHANGES), n=st.integers(0, 40),
           seed=st.integers(0, 2**32 - 1), position=st.integers(0, 5))
    def run(case, change, n, seed, position):
        _try(mods, counts, case, change, n, seed, position)

    run()
    return counts


def _fuzz_in_child(mode: str, tmp_path) -> dict:
    here = Path(__file__).parent
    code = (f"import json, sys\n"
            f"import compiler  # first: on the path, tests/compiler would hide the package\n"
            f"sys.path[:0] = [{str(here)!r}, {str(here.parents[1])!r}]\n"
            f"from test_bad_arguments import fuzz\n"
            f"print('COUNTS', json.dumps(fuzz({mode!r}, {str(tmp_path)!r}, {EXAMPLES})))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, f"the fuzzing process failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COUNTS "))
    return json.loads(line[len("COUNTS "):])


@pytest.mark.parametrize("mode", ["jit", "so"])
def test_random_bad_arguments_raise_and_good_ones_compute(mode, tmp_path):
    counts = _fuzz_in_child(mode, tmp_path)
    tried = {key.split(":")[1] for key in counts}
    assert tried == set(ALL_CHANGES), f"changes never tried: {set(ALL_CHANGES) - tried}"
    outcomes = {key.split(":", 1)[1] for key in counts}
    # Both sides of the layout rules were reached: refused for contiguous buffers, computed
    # for the one declared with strides.
    for change in ("strided", "negative", "fortran"):
        assert {f"{change}:raised", f"{change}:computed"} <= outcomes, change
    assert sum(counts.values()) >= EXAMPLES
