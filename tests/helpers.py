"""Shared test helpers: arrays that expose unwritten outputs, random inputs of any dtype,
and the CPU models that code-generation tests compile for whatever the host is."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

__all__ = ["SENTINEL", "BOOL_POISON", "SUPPORTED_DTYPES", "poisoned", "random_array", "assert_written",
           "build_and_check", "each_config_computes_the_reference", "covering_pairs", "Cpu", "CPUS",
           "for_each_cpu", "host_features"]

SUPPORTED_DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool")

SENTINEL = -123456789  # clipped to the range of each integer dtype
BOOL_POISON = 0x5A  # the byte of a poisoned bool: neither False (0) nor True (1)


def poisoned(shape: tuple[int, ...] | int, dtype: str | np.dtype) -> np.ndarray:
    """An array whose every element is a value no kernel should produce.

    Floats are NaN, integers the sentinel clipped to the dtype's range, and bools hold
    the byte :data:`BOOL_POISON`, which is neither True nor False (numpy reads it as True,
    so compare with :func:`assert_written`, which looks at the bytes). Compare a kernel's
    output written into it against a reference to detect elements it never wrote.
    """
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.full(shape, int(np.clip(SENTINEL, info.min, info.max)), dtype=dt)
    if dt.kind == "b":
        return np.full(shape, BOOL_POISON, dtype=np.uint8).view(dt)
    raise TypeError(f"poisoned: unsupported dtype {dt}")


def assert_written(got: np.ndarray, want: np.ndarray, *, rtol: float = 0.0, atol: float = 0.0,
                   err_msg: str = "") -> None:
    """Check that ``got``, a kernel's output written into a :func:`poisoned` array, equals ``want``.

    Floats compare with ``rtol``/``atol`` (exactly by default) and NaN never equals NaN, so an element left
    NaN fails even where ``want`` was produced the same way; a ``want`` that is NaN
    somewhere is refused (NaN poison cannot tell it from an unwritten element: poison
    such outputs with a finite value instead). Bools compare byte by byte, so the
    poison byte fails where numpy would read it as True; integers compare exactly.
    """
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape} {err_msg}"
    if got.dtype.kind == "f":
        assert not np.isnan(want).any(), "the reference holds NaN: NaN poison cannot reveal unwritten ones"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=False, err_msg=err_msg)
    elif got.dtype.kind == "b":
        np.testing.assert_array_equal(got.view(np.uint8), want.astype(np.uint8), err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


def random_array(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: str | np.dtype) -> np.ndarray:
    """Random non-zero data of ``dtype`` (bools are random but may be False).

    Floats lie in [0.5, 1.5) with a random sign; integers in small ranges that do not
    overflow a few sums or products: [1, 8) with a random sign for signed types, [1, 16)
    for unsigned ones.
    """
    dt = np.dtype(dtype)
    if dt.kind == "f":
        sign = rng.choice(np.array([-1.0, 1.0]), size=shape)
        return (sign * rng.uniform(0.5, 1.5, size=shape)).astype(dt)
    if dt.kind == "i":
        sign = rng.choice(np.array([-1, 1]), size=shape)
        return (sign * rng.integers(1, 8, size=shape)).astype(dt)
    if dt.kind == "u":
        return rng.integers(1, 16, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    raise TypeError(f"random_array: unsupported dtype {dt}")


def covering_pairs(configs: list) -> list:
    """Configs among ``configs`` in which every pair of values of two knobs that any of them holds
    together appears (chosen greedily, the most pairs not yet seen first): the interactions of two
    knobs at a fraction of the builds of every config."""
    def pairs(cfg) -> set:
        values = sorted((name, repr(value)) for name, value in cfg.knob_values().items())
        return {(a, b) for i, a in enumerate(values) for b in values[i + 1:]}

    wanted = set().union(*(pairs(c) for c in configs))
    chosen = []
    while wanted:
        best = max(configs, key=lambda c: len(pairs(c) & wanted))
        chosen.append(best)
        wanted -= pairs(best)
    return chosen


def each_config_computes_the_reference(cpu, task, configs, seed: int) -> None:
    """Build each of ``configs`` of ``task`` for ``cpu``; where it runs here, each writes the
    reference's output on random data (drawn with ``seed``) into a poisoned array."""
    import compiler

    inputs, (expected,) = task.reference_data(np.random.default_rng(seed))
    for cfg in configs:
        f = compiler.build(*task.instantiate(cfg), target=task.target)
        if cpu.runs_here():
            out = poisoned(expected.shape, expected.dtype)
            f(*inputs, out)
            assert_written(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def build_and_check(schedule, args, inputs, expected, *, rtol=1e-5, atol=1e-5, name="kernel",
                    target="llvm", run=True):
    """Build ``schedule`` for ``args``, run it on ``inputs`` with poisoned outputs, compare.

    ``args`` lists the input tensors then the output tensor(s); ``expected`` holds the
    reference result for each output, in order. ``run=False`` only builds (for code
    compiled for a CPU this machine is not, see :meth:`Cpu.runs_here`). Returns the
    built module.
    """
    import compiler

    f = compiler.build(schedule, list(args), target=target, name=name)
    if run:
        outputs = [poisoned(e.shape, e.dtype) for e in expected]
        f(*inputs, *outputs)
        for got, want in zip(outputs, expected, strict=True):
            assert_written(got, want, rtol=rtol, atol=atol)
    return f


# ----------------------------------------------------------------------------- CPU models


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """The CPU features this machine has, as LLVM names them."""
    import llvmlite.binding as llvm

    return frozenset(name for name, on in llvm.get_host_cpu_features().items() if on)


_AVX2 = frozenset({"sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf",
                   "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"})
_AVX512 = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
_ZEN = frozenset({"sse4a", "prfchw"})
_ZEN4 = frozenset({"avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg",
                   "avx512vpopcntdq", "avx512bf16", "gfni"})


@dataclass(frozen=True)
class Cpu:
    """An x86-64 CPU model that code-generation tests compile for, whatever the host is.

    ``vector_bits`` is the vector width LLVM prefers for it (its ``prefer-vector-width``
    tuning: Intel's AVX-512 parts prefer 256 bits, Zen 4 512), which decides the width
    of the loops LLVM vectorizes itself. ``features`` are the instruction-set extensions
    of the model (as in LLVM's X86.td) that LLVM may select from plain IR, without target
    intrinsics: code compiled for the model can run where all of them are present.
    """

    name: str
    vector_bits: int
    features: frozenset[str]

    @property
    def target(self) -> str:
        """The target string that compiles for this model."""
        return f"llvm -mcpu={self.name}"

    def runs_here(self) -> bool:
        """Whether this machine has every feature the model's code may use."""
        return self.features <= host_features()

    def __str__(self) -> str:
        return self.name


# Two AVX-512 models (Intel, preferring 256-bit vectors, and AMD, preferring 512) and two
# AVX2-only ones (Intel, AMD): whatever machine runs the suite, the code for each is checked.
CPUS = (
    Cpu("skylake-avx512", 256, _AVX2 | _AVX512 | {"prfchw"}),
    Cpu("znver4", 512, _AVX2 | _ZEN | _AVX512 | _ZEN4),
    Cpu("haswell", 256, _AVX2),
    Cpu("znver3", 256, _AVX2 | _ZEN),
)

for_each_cpu = pytest.mark.parametrize("cpu", CPUS, ids=str)
"""Decorator: run a test once per model of :data:`CPUS`, as its ``cpu`` argument."""

for_each_vector_width = pytest.mark.parametrize(
    "cpu", [next(c for c in CPUS if c.vector_bits == 256 and "avx512f" in c.features),
            next(c for c in CPUS if "avx512f" not in c.features)], ids=str)
"""Decorator: run a test once per vector register width (an AVX-512 and an AVX2 model), for the
tests that build many configs: their templates' code depends on the width, not the model."""


def children_running(pid: int, module: str) -> list[int]:
    """Process ids, ascending, of the live (not zombie) children of ``pid`` whose command line
    names ``module`` (such as ``measure.worker_main``), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(ppid) == pid and state != "Z" and module.encode() in cmdline:
            found.append(int(entry.name))
    return sorted(found)
