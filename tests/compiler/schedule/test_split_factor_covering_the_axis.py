"""Split by a factor at least the axis' extent: one outer iteration, so the inner loop runs
over the axis alone (no guard, no iterations past its end); loops bound to GPU threads keep
the factor, since every stage of a kernel binds a thread axis with one extent."""

from __future__ import annotations

import re

import numpy as np
from cuda_helpers import simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te


def _ranges(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"in range\((\d+)\)", text)]


def test_nested_split_has_no_panel_past_the_end(rng):
    """The GEMM's column blocks: 196 columns in a block of 256, panels of 32. Seven panels
    hold the columns (the last one partly); an eighth would be all padding."""
    A = te.placeholder((4, 196), name="A")
    B = te.compute((4, 196), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    jc, j2 = s[B].split(B.op.axis[1], factor=256)
    jr, ji = s[B].split(j2, factor=32)
    s[B].vectorize(ji)
    text = str(compiler.lower(s, [A, B]))
    # six full panels, then the seventh (columns 192-195) alone: no loop over panels 6 and 7
    assert _ranges(text) == [4, 6] and "range(6, 8)" not in text and "192" in text, text
    f = compiler.build(s, [A, B], target="llvm")
    a, b = random_array(rng, (4, 196), "float32"), poisoned((4, 196), "float32")
    f(a, b)
    assert_written(b, a + 1)


def test_a_loop_bound_to_threads_keeps_the_factor(rng):
    """A cooperative fetch: 32 threads compute a row and share the copy of its 8 inputs,
    split by the thread count (32 >= 8); the copy's threadIdx.x keeps extent 32, the one the
    compute binds, and threads past the 8 points are guarded off."""
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 32), lambda i, j: A[i, j // 4] * 3.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[1], tx)
    s[AA].compute_at(s[B], B.op.axis[0])
    _, inner = s[AA].split(s[AA].fuse(*s[AA].op.axis), factor=32)
    s[AA].bind(inner, tx)
    a, b = random_array(rng, (4, 8), "float32"), poisoned((4, 32), "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, np.repeat(a, 4, axis=1) * 3)
