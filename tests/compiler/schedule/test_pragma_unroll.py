"""``Stage.pragma``: ``auto_unroll_max_step`` and ``unroll_explicit`` with TVM's meaning.

Under the annotated axis, a loop is unrolled when its constant trip count times the
statements its body runs (unrolled inner loops counted in full) is at most the step,
and no loop inside it stays rolled; ``unroll_explicit = 0`` leaves such loops to LLVM
(``llvm.loop.unroll.full``, ``#pragma unroll`` in the CUDA text) instead of copying them.
Every kernel is checked against numpy with poisoned outputs; CUDA ones on the GPU
simulator, and assembled with ptxas.
"""

from __future__ import annotations

import pytest
from cuda_helpers import bind_thread_tiles, build_ptx, gpu_function, simulate, square_matmul
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te
from compiler.codegen.llvm import generate_llvm_ir
from compiler.errors import ScheduleError
from compiler.tir import stmt as S
from compiler.tir.analysis import collect


def _loops(func) -> dict:
    """``{loop variable name: loop kind}`` of the loops left in a lowered function."""
    return {f.loop_var.name: f.kind for f in collect(func.body, lambda n: isinstance(n, S.For))}


def _cpu_schedule(step, explicit=None):
    """Tiles of 4 x 4 outputs, each a reduction over 8: the pragma on the outermost axis."""
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    jo, ji = s[C].split(j, factor=4)
    s[C].reorder(io, jo, ii, ji)
    s[C].pragma(io, "auto_unroll_max_step", step)
    if explicit is not None:
        s[C].pragma(io, "unroll_explicit", explicit)
    return s, [A, B, C]


def _run(f, rng):
    a, b = random_array(rng, (16, 8), "float32"), random_array(rng, (8, 16), "float32")
    c = poisoned((16, 16), "float32")
    f(a, b, c)
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)


# The body of j.inner runs 1 + 8 statements once k is unrolled: k fits a step of 8
# (8 x 1), j.inner one of 36 (4 x 9), i.inner one of 144 (4 x 36).
@pytest.mark.parametrize("step, rolled", [
    (0, {"i.outer", "j.outer", "i.inner", "j.inner", "k"}),
    (8, {"i.outer", "j.outer", "i.inner", "j.inner"}),
    (35, {"i.outer", "j.outer", "i.inner", "j.inner"}),
    (36, {"i.outer", "j.outer", "i.inner"}),
    (144, {"i.outer", "j.outer"}),
])
def test_auto_unroll_max_step_unrolls_loops_whose_trip_product_fits(rng, step, rolled):
    s, args = _cpu_schedule(step)
    loops = _loops(compiler.lower(s, args)["main"])
    assert set(loops) == rolled
    assert all(kind is S.ForKind.SERIAL for kind in loops.values())
    _run(compiler.build(s, args, target="llvm"), rng)


def test_unroll_explicit_0_leaves_the_loops_to_llvm(rng):
    s, args = _cpu_schedule(144, explicit=0)
    func = compiler.lower(s, args)["main"]
    loops = _loops(func)
    assert loops == {"i.outer": S.ForKind.SERIAL, "j.outer": S.ForKind.SERIAL,
                     "i.inner": S.ForKind.UNROLLED, "j.inner": S.ForKind.UNROLLED,
                     "k": S.ForKind.UNROLLED}
    assert generate_llvm_ir(compiler.lower(s, args)).count('"llvm.loop.unroll.full"') == 3
    _run(compiler.build(s, args, target="llvm"), rng)


def test_explicit_unroll_requests_become_llvm_hints_under_unroll_explicit_0():
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].unroll(C.op.reduce_axis[0])
    s[C].pragma(i, "unroll_explicit", 0)
    assert _loops(compiler.lower(s, [A, B, C])["main"])["k"] is S.ForKind.UNROLLED


def test_simple_mode_shows_the_pragmas_and_still_builds(rng):
    s, args = _cpu_schedule(36)
    text = str(compiler.lower(s, args, simple_mode=True))
    assert "pragma_auto_unroll_max_step = 36" in text
    _run(compiler.build(compiler.lower(s, args, simple_mode=True), target="llvm"), rng)


def _cuda_schedule(step, explicit):
    """AutoTVM's CUDA template shape: 2 x 2 outputs per thread in registers, pragmas on
    the outermost (block) axis."""
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    by, _, _, tx, _, _ = bind_thread_tiles(s[C], block=8, threads=4)
    s[CL].compute_at(s[C], tx)
    s[C].pragma(by, "auto_unroll_max_step", step)
    s[C].pragma(by, "unroll_explicit", explicit)
    return s, [A, B, C]


@pytest.mark.parametrize("explicit", [1, 0])
def test_pragmas_of_a_cuda_template(rng, explicit):
    s, args = _cuda_schedule(512, explicit)
    (kernel,) = gpu_function(s, args).kernels
    loops = _loops(kernel)
    if explicit:
        assert loops == {}
    else:
        assert set(loops) == {"i.c", "j.c", "k", "i.inner.inner", "j.inner.inner"}
        assert all(kind is S.ForKind.UNROLLED for kind in loops.values())
    a, b = random_array(rng, (16, 8), "float32"), random_array(rng, (8, 16), "float32")
    c = poisoned((16, 16), "float32")
    simulate(s, args, [a, b, c])
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)
    mod = build_ptx(s, args)
    assert ("#pragma unroll" in mod.get_source("cuda")) == (not explicit)


def test_a_small_step_leaves_the_cuda_loops_rolled():
    s, args = _cuda_schedule(0, 1)
    (kernel,) = gpu_function(s, args).kernels
    assert set(_loops(kernel)) == {"i.c", "j.c", "k", "i.inner.inner", "j.inner.inner"}


def test_unknown_pragmas_are_refused_naming_the_known_ones():
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="'auto_unroll_max_step', 'unroll_explicit'"):
        s[C].pragma(C.op.axis[0], "parallel_launch_point")


@pytest.mark.parametrize("key, value", [("auto_unroll_max_step", -1), ("auto_unroll_max_step", 1.5),
                                        ("unroll_explicit", 2)])
def test_pragma_values_are_checked(key, value):
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=key):
        s[C].pragma(C.op.axis[0], key, value)


def test_an_annotated_axis_cannot_be_split():
    A, B, C = square_matmul(16, 8)
    s = te.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "auto_unroll_max_step", 16)
    with pytest.raises(ScheduleError, match="before annotating"):
        s[C].split(C.op.axis[0], factor=2)
