"""Small AutoTVM templates that the AutoTVM-API tests register, written as AutoTVM code is.

Each is a context manager that registers the template under the name given and removes it on
exit, so that test modules can use their own names side by side.
"""

from __future__ import annotations

import contextlib

from autotune import autotvm
from compiler import te
from search_spaces import unregister_template


@contextlib.contextmanager
def matmul_template(name: str):
    """``C = A @ B`` of ``(N, L) x (L, M)``, with knobs ``tile_y`` and ``tile_x`` (two-way splits)."""

    @autotvm.template(name)
    def matmul(N, L, M, dtype):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)
        k = te.reduce_axis((0, L), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        y, x = s[C].op.axis
        k = s[C].op.reduce_axis[0]
        cfg = autotvm.get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_split("tile_x", x, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        xo, xi = cfg["tile_x"].apply(s, C, x)
        s[C].reorder(yo, xo, k, yi, xi)
        return s, [A, B, C]

    try:
        yield matmul
    finally:
        unregister_template(name)


@contextlib.contextmanager
def elementwise_template(name: str, fn):
    """``B[i] = fn(A[i])`` over ``(n,)`` of ``dtype``, with knobs ``tile`` (a
    two-way split) and ``unroll`` (unroll the inner loop or not)."""

    @autotvm.template(name)
    def elementwise(n, dtype):
        A = te.placeholder((n,), name="A", dtype=dtype)
        B = te.compute((n,), lambda i: fn(A[i]), name="B")
        s = te.create_schedule(B.op)
        cfg = autotvm.get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg.define_knob("unroll", [0, 1])
        _, inner = cfg["tile"].apply(s, B, B.op.axis[0])
        if cfg["unroll"].val:
            s[B].unroll(inner)
        return s, [A, B]

    try:
        yield elementwise
    finally:
        unregister_template(name)
