"""Split by ``nparts`` over an extent that ``nparts`` does not divide: the loops cover more
points than the axis (nparts=4 over 9: 4 x 3 = 12), so the stage is guarded even where the
inner extent divides the axis (3 divides 9)."""

from __future__ import annotations

import pytest
from cuda_helpers import simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te


@pytest.mark.parametrize("extent, nparts", [(9, 4), (10, 4), (12, 4), (36, 5)])
def test_split_by_nparts_writes_each_point_once(rng, extent, nparts):
    A = te.placeholder((extent,), name="A")
    B = te.compute((extent,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], nparts=nparts)
    s[B].bind(outer, te.thread_axis("threadIdx.x"))
    a = random_array(rng, extent, "float32")
    b = poisoned(extent, "float32")
    simulate(s, [A, B], [a, b])  # the simulator refuses an access out of bounds
    assert_written(b, a * 2)


def test_cooperative_fetch_with_nested_nparts_splits(rng):
    """The shape of AutoTVM's cooperative fetch: a fused 36-point tile split by nparts=4 twice."""
    A = te.placeholder((6, 6), name="A")
    B = te.compute((6, 6), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(*B.op.axis)
    tz, rest = s[B].split(fused, nparts=4)  # 9 points each
    ty, rest = s[B].split(rest, nparts=4)   # ceil(9 / 4) = 3 each: 12 > 9
    s[B].bind(tz, te.thread_axis("threadIdx.z"))
    s[B].bind(ty, te.thread_axis("threadIdx.y"))
    assert "if " in str(compiler.lower(s, [A, B]))
    a = random_array(rng, (6, 6), "float32")
    b = poisoned((6, 6), "float32")
    simulate(s, [A, B], [a, b])
    assert_written(b, a + 1)
