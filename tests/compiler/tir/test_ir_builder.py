"""``tir.ir_builder`` as TVM code uses it in extern ops: ``buffer_ptr`` indexing, ``allocate``,
``if_scope``/``else_scope``, ``for_range`` kinds, ``let``, ``new_scope``, ``scope_attr``;
every kernel compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import build_ptx, simulate
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import te, tir
from compiler.errors import LoweringError
from compiler.tir import interpreter


def build_extern(shape, inputs, fcompute, dtype=None):
    C = te.extern(shape, inputs, fcompute, name="C", dtype=dtype)
    return compiler.build(te.create_schedule(C.op), [*inputs, C], target="llvm")


def prefix_sum(ins, outs):
    ib = tir.ir_builder.create()
    a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    n = ins[0].shape[0]
    c[0] = a[0]
    with ib.for_range(1, n, name="i") as i:
        c[i] = c[i - 1] + a[i]
    return ib.get()


def test_prefix_sum_over_a_symbolic_length(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="int32")
    f = build_extern((n,), [A], prefix_sum)
    for size in (1, 7, 33):
        a = random_array(rng, size, "int32")
        c = poisoned(size, "int32")
        f(a, c)
        assert_written(c, np.cumsum(a).astype("int32"))


def test_clamp_with_if_else_and_nested_else():
    def clamp(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 12, name="i", kind="parallel") as i:
            with ib.if_scope(a[i] < 0.25):
                c[i] = tir.const(0.25, "float32")
            with ib.else_scope():
                with ib.if_scope(a[i] > 0.75):
                    c[i] = 0.75
                with ib.else_scope():
                    c[i] = a[i]
        return ib.get()

    A = te.placeholder((12,), name="A")
    f = build_extern((12,), [A], clamp)
    a = np.linspace(0, 1, 12, dtype="float32")
    c = poisoned(12, "float32")
    f(a, c)
    assert_written(c, np.clip(a, 0.25, 0.75))


@pytest.mark.parametrize("scope", ["local", "global", ""])
def test_scratch_buffer_from_allocate(rng, scope):
    """A scratch buffer (a reversed copy) of constant size on the stack, or sized by a symbolic
    length on the heap; a two-dimensional one indexed both ways."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        size = 16 if scope == "local" else n
        tmp = ib.allocate("float32", (size,), name="tmp", scope=scope)
        grid = ib.allocate("float32", (2, 3), name="grid", scope="local")
        with ib.for_range(0, 6, name="g", kind="unroll") as g:
            grid[g] = g.astype("float32")  # a flat index into a 2-d buffer
        with ib.for_range(0, n, name="i") as i:
            tmp[i] = a[n - 1 - i]
        with ib.for_range(0, n, name="i", kind="vectorize" if scope == "local" else "serial") as i:
            c[i] = tmp[i] * 2.0 + grid[1, 2]
        return ib.get()

    f = build_extern((n,), [A], fcompute)
    for size in (5, 16):
        a = random_array(rng, size, "float32")
        c = poisoned(size, "float32")
        f(a, c)
        assert_written(c, a[::-1] * 2 + 5)


def test_let_new_scope_and_scope_attr(rng):
    A = te.placeholder((10,), name="A", dtype="int32")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        first = ib.let("first", a[0] + 1)
        with ib.new_scope():
            ib.scope_attr(tir.const(0), "pragma_note", "kept in the IR")
            count = ib.allocate("int32", (1,), name="count", scope="local")
            count[0] = 0
            with ib.for_range(0, 10, name="i") as i:
                with ib.if_scope(a[i] > first):
                    count[0] += 1
            with ib.for_range(0, 10, name="i") as i:
                c[i] = a[i] + first + count[0]
        return ib.get()

    f = build_extern((10,), [A], fcompute)
    a = random_array(rng, 10, "int32")
    c = poisoned(10, "int32")
    f(a, c)
    first = a[0] + 1
    assert_written(c, a + first + np.sum(a > first))


def collatz_steps(ins, outs):
    """For each input, how many Collatz steps reach 1: a while loop on scratch buffers."""
    ib = tir.ir_builder.create()
    with ib.for_range(0, ins[0].shape[0], name="i") as i:
        _collatz_of_element(ib, ins[0], outs[0], i)
    return ib.get()


def _collatz_of_element(ib, inp, out, i):
    a, c = ib.buffer_ptr(inp), ib.buffer_ptr(out)
    value = ib.allocate("int32", (1,), name="value", scope="local")
    steps = ib.allocate("int32", (1,), name="steps", scope="local")
    value[0] = a[i]
    steps[0] = 0
    with ib.while_loop(value[0] > 1):
        with ib.if_scope(value[0] % 2 == 0):
            value[0] = value[0] // 2
        with ib.else_scope():
            value[0] = value[0] * 3 + 1
        steps[0] += 1
    c[i] = steps[0]


def collatz_reference(a):
    out = []
    for v in a:
        n = 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            n += 1
        out.append(n)
    return np.array(out, dtype="int32")


def test_while_loop(rng):
    A = te.placeholder((9,), name="A", dtype="int32")
    a = rng.integers(1, 60, 9).astype("int32")
    f = build_extern((9,), [A], collatz_steps)
    c = poisoned(9, "int32")
    f(a, c)
    assert_written(c, collatz_reference(a))
    # The reference interpreter runs the same loop.
    inp, out = tir.decl_buffer((9,), "int32", "a"), tir.decl_buffer((9,), "int32", "c")
    stmt = collatz_steps([inp], [out])
    assert "while value[0] > 1:" in str(stmt)
    got = interpreter.run(tir.PrimFunc((inp, out), stmt, "collatz"),
                          {"a": a.copy(), "c": poisoned(9, "int32")})["c"]
    assert_written(got, collatz_reference(a))


def test_while_loop_on_the_gpu_simulator_where_threads_leave_it_at_different_steps(rng):
    def collatz_per_thread(ins, outs):
        ib = tir.ir_builder.create()
        bx, tx = te.thread_axis("blockIdx.x"), te.thread_axis("threadIdx.x")
        ib.scope_attr(bx, "thread_extent", 1)
        ib.scope_attr(tx, "thread_extent", 9)
        _collatz_of_element(ib, ins[0], outs[0], tx)
        return ib.get()

    A = te.placeholder((9,), name="A", dtype="int32")
    C = te.extern((9,), [A], collatz_per_thread, name="C", dtype="int32")
    s = te.create_schedule(C.op)
    a = rng.integers(1, 60, 9).astype("int32")
    c = poisoned(9, "int32")
    simulate(s, [A, C], [a, c])
    assert_written(c, collatz_reference(a))
    build_ptx(s, [A, C])  # the while loop assembles for the GPU too


def test_pointer_bound_to_an_address(rng):
    """``ib.pointer``: a typed pointer, here bound to the address of the input's third element."""
    A = te.placeholder((10,), name="A")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        c = ib.buffer_ptr(outs[0])
        p = ib.pointer("float32", name="p")
        ib.emit(lambda body: tir.LetStmt(p.data, ins[0].access_ptr("r", offset=2), body))
        with ib.for_range(0, 10, name="i") as i:
            with ib.if_scope(i < 8):
                c[i] = p[i]
            with ib.else_scope():
                c[i] = 0.0
        return ib.get()

    f = build_extern((10,), [A], fcompute)
    a = random_array(rng, 10, "float32")
    c = poisoned(10, "float32")
    f(a, c)
    assert_written(c, np.r_[a[2:], 0, 0].astype("float32"))


def test_statements_in_order_and_default_loop_names():
    ib = tir.ir_builder.create()
    buf = tir.decl_buffer((4, 4), "float32", "X")
    x = ib.buffer_ptr(buf)
    with ib.for_range(0, 4) as i:
        with ib.for_range(0, 4) as j:
            x[i, j] = 1.0
    with ib.for_range(0, 4) as k:
        ib.emit(tir.call_extern("int32", "f", k))
    assert (i.name, j.name, k.name) == ("i", "j", "k")
    text = str(ib.get())
    assert text.index("X[i, j] = 1") < text.index("call_extern('f', k)")


def test_errors_are_clear():
    ib = tir.ir_builder.create()
    x = ib.buffer_ptr(tir.decl_buffer((4, 4), "float32", "X"))
    with pytest.raises(LoweringError, match="else_scope must directly follow an if_scope"):
        with ib.else_scope():
            pass
    with pytest.raises(LoweringError, match="while_loop needs a boolean condition"):
        ib.while_loop(x[0, 0]).__enter__()
    with pytest.raises(LoweringError, match="holds float32, the value .* is int32"):
        x[0, 0] = tir.const(1, "int32")
    with pytest.raises(LoweringError, match="has 2 dimensions, indexed with 3"):
        x[0, 0, 0] = 1.0
    with pytest.raises(LoweringError, match="unknown kind 'bogus'"):
        ib.for_range(0, 4, kind="bogus").__enter__()
    with pytest.raises(LoweringError, match="buffer_ptr.*shape"):
        ib.buffer_ptr(tir.decl_buffer((4, 4), "float32", "X"), shape=(16,))
    with ib.for_range(0, 4):
        with pytest.raises(LoweringError, match="get called inside an open"):
            ib.get()
