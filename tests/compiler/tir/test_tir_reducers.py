"""``tir.sum``/``tir.max``/``tir.min``/``tir.comm_reducer`` are TVM's comm-reducers, the very objects
``te`` re-exports; ``tir.Min``/``tir.Max`` take TVM's two operands; statement constructors take Python
numbers (``tir.Evaluate(0)``) and ``tir.Let`` its three operands, as TVM's do."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te, tir

M, K = 6, 10


def _run(s, args, inputs, out_shape, out_dtype="float32"):
    f = tvm.build(s, args, target="llvm")
    out = tvm.nd.array(np.full(out_shape, np.nan if out_dtype.startswith("float") else -7, out_dtype))
    f(*[tvm.nd.array(x) for x in inputs], out)
    return out.numpy()


def test_te_reducers_are_tir_reducers():
    for name in ("sum", "max", "min", "comm_reducer"):
        assert getattr(te, name) is getattr(tir, name)
    assert "sum" in tir.__all__ and "comm_reducer" in tir.__all__


@pytest.mark.parametrize("name, ref", [("sum", np.sum), ("max", np.max), ("min", np.min)])
def test_tir_reducers_over_a_reduce_axis(name, ref):
    A = te.placeholder((M, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    B = te.compute((M,), lambda i: getattr(tir, name)(A[i, k], axis=k), name="B")
    a = np.random.default_rng(0).standard_normal((M, K)).astype("float32")
    got = _run(te.create_schedule(B.op), [A, B], [a], (M,))
    np.testing.assert_allclose(got, ref(a, axis=1), rtol=1e-5)


def test_tir_reducers_with_init_and_where():
    A = te.placeholder((M, K), name="A")
    C0 = te.placeholder((M,), name="C0")
    k = te.reduce_axis((0, K), name="k")
    B = te.compute((M,), lambda i: tir.sum(A[i, k], axis=k, where=k % 2 == 0, init=C0[i]), name="B")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype("float32")
    c0 = rng.standard_normal(M).astype("float32")
    got = _run(te.create_schedule(B.op), [A, C0, B], [a, c0], (M,))
    np.testing.assert_allclose(got, c0 + a[:, ::2].sum(axis=1), rtol=1e-5)


def test_tir_max_min_of_two_expressions_combine_elementwise():
    A = te.placeholder((M,), name="A")
    B = te.placeholder((M,), name="B")
    C = te.compute((M,), lambda i: tir.max(A[i], B[i]) - tir.min(A[i], 0.0) + tir.sum(A[i], B[i]), name="C")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(M).astype("float32"), rng.standard_normal(M).astype("float32")
    got = _run(te.create_schedule(C.op), [A, B, C], [a, b], (M,))
    np.testing.assert_allclose(got, np.maximum(a, b) - np.minimum(a, 0) + a + b, rtol=1e-5)


def test_tir_comm_reducer_product_and_argmax():
    prod = tir.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, dtype=t), name="prod")

    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tir.Select(keep, x[0], y[0]), tir.Select(keep, x[1], y[1])

    argmax = tir.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), tir.min_value(t1)), name="argmax")
    A = te.placeholder((M, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    P = te.compute((M,), lambda i: prod(A[i, k], axis=k), name="P")
    k2 = te.reduce_axis((0, K), name="k2")
    idx, val = te.compute((M,), lambda i: argmax((k2.var, A[i, k2]), axis=k2), name="T")
    a = np.random.default_rng(3).uniform(0.5, 1.5, (M, K)).astype("float32")
    np.testing.assert_allclose(_run(te.create_schedule(P.op), [A, P], [a], (M,)), a.prod(axis=1), rtol=1e-5)
    f = tvm.build(te.create_schedule([idx.op, val.op]), [A, idx, val], target="llvm")
    out_i, out_v = tvm.nd.array(np.full(M, -7, "int32")), tvm.nd.array(np.full(M, np.nan, "float32"))
    f(tvm.nd.array(a), out_i, out_v)
    np.testing.assert_array_equal(out_i.numpy(), a.argmax(axis=1))
    np.testing.assert_allclose(out_v.numpy(), a.max(axis=1))
    # Called on two plain values, a user reducer combines them.
    x, y = te.var("x", "float32"), te.var("y", "float32")
    combined = prod(x, y)
    assert isinstance(combined, tir.Mul) and combined.a is x and combined.b is y


def test_reducer_errors_name_the_problem():
    A = te.placeholder((M,), name="A")
    with pytest.raises(TypeError, match="sum needs axis"):
        tir.sum(A[0])
    i = te.compute((M,), lambda i: A[i], name="B").op.axis[0]
    with pytest.raises(TypeError, match="not a reduce_axis"):
        tir.max(A[0], axis=i)
    with pytest.raises(TypeError, match="fcombine must be a function"):
        tir.comm_reducer(1, lambda t: 0)


def test_min_max_nodes_take_two_operands():
    x = te.var("x")
    n = tir.Max(x, 3)
    assert isinstance(n, tir.Max) and n.dtype == "int32" and str(n) == "max(x, 3)"
    m = tir.Min(te.var("f", "float32"), 1)
    assert m.dtype == "float32" and m.b.dtype == "float32"


def test_statements_convert_python_numbers():
    ev = tir.Evaluate(0)
    assert isinstance(ev.value, tir.IntImm) and ev.value.dtype == "int32"
    x = te.var("x")
    let = tir.LetStmt(x, 2, tir.Evaluate(x))
    assert isinstance(let.value, tir.IntImm)
    assert tir.IfThenElse(1, tir.Evaluate(0)).condition.dtype == "bool"
    assert isinstance(tir.AttrStmt(x, "pragma_x", 1, tir.Evaluate(0)).value, tir.IntImm)
    loop = tir.For(te.var("i"), 0, 4, tir.ForKind.SERIAL, tir.Evaluate(0))
    assert isinstance(loop.extent, tir.IntImm)
    let = tir.Let(x, 1, x + 1)  # TVM's three operands: the dtype is the body's
    assert let.dtype == "int32" and isinstance(let.value, tir.IntImm)


def test_hand_written_ir_with_python_numbers_builds_and_runs():
    n = 8
    A = te.placeholder((n,), name="A")

    def gen(ins, outs):
        ib = tir.ir_builder.create()
        ib.emit(tir.Evaluate(0))
        x = te.var("x")
        with ib.for_range(0, n, name="i") as i:
            y = te.var("y", "float32")
            value = tir.Let(y, ins[0].vload(i), y * x.astype("float32") + y)
            ib.emit(tir.LetStmt(x, 2, tir.BufferStore(outs[0], value, (i,))))
            ib.emit(tir.IfThenElse(i < 1, tir.BufferStore(outs[0], 5, [i])))
        return ib.get()

    C = te.extern((n,), [A], gen, name="C")
    a = np.random.default_rng(4).standard_normal(n).astype("float32")
    got = _run(te.create_schedule(C.op), [A, C], [a], (n,))
    want = a * 3
    want[0] = 5
    np.testing.assert_allclose(got, want, rtol=1e-6)
