"""Property: every legal choice of split factors and loop order computes the same matmul."""

from __future__ import annotations

import numpy as np
from helpers import build_and_check, random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import te

N, L, M = 24, 20, 28
_RNG = np.random.default_rng(7)
_A = random_array(_RNG, (N, L), "float32")
_B = random_array(_RNG, (L, M), "float32")
_C = _A @ _B


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fi=st.integers(1, 30), fj=st.integers(1, 30), fk=st.integers(1, 24),
    order=st.permutations(range(6)),
    inner=st.sampled_from(["none", "vectorize", "unroll"]),
    par=st.booleans(),
)
def test_random_splits_and_orders(fi, fj, fk, order, inner, par):
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((L, M), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=fi)
    jo, ji = s[C].split(j, factor=fj)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=fk)
    axes = [io, ii, jo, ji, ko, ki]
    ordered = [axes[p] for p in order]
    s[C].reorder(*ordered)
    innermost = ordered[-1]
    if inner == "vectorize" and innermost.iter_type == 0:
        s[C].vectorize(innermost)
    elif inner == "unroll":
        s[C].unroll(innermost)
    outermost = ordered[0]
    if par and outermost.iter_type == 0:
        s[C].parallel(outermost)
    build_and_check(s, [A, B, C], [_A, _B], [_C], rtol=1e-4, atol=1e-5)
