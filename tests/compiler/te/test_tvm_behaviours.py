"""TE and schedule behaviours that code written for TVM relies on, written the way such code
is written (only the imports renamed): schedule introspection, singleton loops, pragmas
that name loop kinds, groups, automatic inlining, tensor arithmetic with broadcasting,
operation attributes and tags, and lower/build entry points."""

import numpy as np
import pytest

import compiler as tvm
from compiler import te, tir, topi

RNG = np.random.default_rng(7)


def _rand(shape, dtype="float32"):
    return RNG.uniform(0.5, 2.0, size=shape).astype(dtype)


def _poisoned(shape, dtype="float32"):
    fill = np.nan if np.dtype(dtype).kind == "f" else -12345
    return tvm.nd.array(np.full(shape, fill, dtype=dtype))


def _run(f, arrays, out_shape, out_dtype="float32", *scalars):
    out = _poisoned(out_shape, out_dtype)
    f(*[tvm.nd.array(a) for a in arrays], out, *scalars)
    return out.numpy()


# ------------------------------------------------------------------ schedule introspection

def test_stage_map_and_stage_attributes():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    assert s.stage_map[B.op] is s[B] and s.stage_map[A.op] is s[A]
    assert s.outputs[0] is B.op and [st.op for st in s.stages] == [A.op, B.op]
    xo, xi = s[B].split(B.op.axis[0], nparts=4)
    assert isinstance(s[B].relations[0], te.schedule.Split)
    assert list(s[B].leaf_iter_vars) == [xo, xi]
    assert list(s[B].all_iter_vars) == [B.op.axis[0], xo, xi]


def test_iter_var_attrs_report_loop_kinds_with_tvm_numbers():
    A = te.placeholder((20, 10), name="A")
    T = te.compute((20, 10), lambda i, j: A[i, j] * 3, name="T")
    s = te.create_schedule(T.op)
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=10, y_factor=5)
    s[T].vectorize(yi)
    s[T].unroll(xi)
    s[T].parallel(xo)
    s[T].pragma(yo, "auto_unroll_max_step", 16)
    attrs = s[T].iter_var_attrs
    Attr = te.schedule.IterVarAttr
    assert attrs[xi].iter_type == Attr.Unrolled == 5
    assert attrs[yi].iter_type == Attr.Vectorized == 6
    assert attrs[xo].iter_type == Attr.Parallelized == 7
    assert te.schedule.IterVar.Unrolled == tir.IterVar.Unrolled == 5 and tir.IterVar.Tensorized == 8
    assert [k.value for k in attrs[yo].pragma_keys] == ["auto_unroll_max_step"]
    assert attrs[yo].pragma_values[0].value == 16
    a = _rand((20, 10))
    np.testing.assert_allclose(_run(tvm.build(s, [A, T]), [a], (20, 10)), a * 3, rtol=1e-6)


def test_pragma_names_of_loop_kinds_apply_those_primitives():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].pragma(xo, "parallel")
    s[B].pragma(xi, "vectorize")
    attrs = s[B].iter_var_attrs
    assert attrs[xo].iter_type == te.schedule.IterVarAttr.Parallelized
    assert attrs[xi].iter_type == te.schedule.IterVarAttr.Vectorized
    a = _rand(64)
    np.testing.assert_allclose(_run(tvm.build(s, [A, B]), [a], (64,)), a * 2 + 1, rtol=1e-6)
    with pytest.raises(tvm.error.TVMError, match="unknown pragma 'no_such_pragma'"):
        s[B].pragma(xo, "no_such_pragma")


def test_unsupported_primitives_refuse_by_name():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], factor=8)
    with pytest.raises(tvm.error.TVMError, match="env_threads is not supported"):
        s[B].env_threads([te.thread_axis("threadIdx.x")])
    with pytest.raises(tvm.error.TVMError, match="normalize is not supported"):
        s.normalize()


# ------------------------------------------------------------------ singleton loops

def test_fuse_of_no_axes_gives_a_rank0_reduction_a_loop_to_split():
    X = te.placeholder((10,), dtype="int32", name="X")
    k = te.reduce_axis((0, 10), name="k")
    Y = te.compute((), lambda: te.sum(X[k], axis=k), name="Y")
    s = te.create_schedule(Y.op)
    fused = s[Y].fuse(*Y.op.axis)
    assert isinstance(s[Y].relations[-1], te.schedule.Singleton)
    assert s[Y].leaf_iter_vars[0] is fused
    s[Y].split(fused, nparts=20)
    x = RNG.integers(-50, 50, size=10).astype("int32")
    out = tvm.nd.array(np.array(-12345, dtype="int32"))
    tvm.build(s, [Y, X])(out, tvm.nd.array(x))
    assert out.numpy() == x.sum()


def test_fuse_of_no_axes_adds_an_outer_loop_of_one_iteration():
    A = te.placeholder((6, 5), name="A")
    B = te.compute((6, 5), lambda i, j: A[i, j] - 1, name="B")
    s = te.create_schedule(B.op)
    one = s[B].fuse()
    assert list(s[B].leaf_iter_vars) == [one, *B.op.axis]
    a = _rand((6, 5))
    np.testing.assert_allclose(_run(tvm.build(s, [A, B]), [a], (6, 5)), a - 1, rtol=1e-6)


def test_rank0_placeholder_scales_a_reduction():
    m = te.size_var("m")
    A = te.placeholder((m,), name="A")
    scale = te.placeholder((), name="scale")
    k = te.reduce_axis((0, m), name="k")
    T = te.compute((), lambda: te.sum(A[k] * scale(), axis=k), name="T")
    assert tuple(T.shape) == ()
    f = tvm.build(te.create_schedule(T.op), [A, scale, T, m])
    a = _rand(13)
    out = tvm.nd.array(np.array(np.nan, dtype="float32"))
    f(tvm.nd.array(a), tvm.nd.array(np.array(1.5, dtype="float32")), out, 13)
    np.testing.assert_allclose(out.numpy(), a.sum() * 1.5, rtol=1e-5)


# ------------------------------------------------------------------ groups

def _chain(m=8, n=6):
    x = te.compute((m, n), lambda i, j: tir.const(1, "float32") * i + j, name="x")
    x1 = te.compute(x.shape, lambda *i: x(*i) + 1, name="x1")
    x2 = te.compute(x.shape, lambda *i: x1(*i) * 2, name="x2")
    return x, x1, x2


def test_group_computed_at_a_consumer_loop():
    x, x1, x2 = _chain()
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert s[x1].group is g and s[x].group is g and g.num_child_stages == 2
    g.compute_at(s[x2], x2.op.axis[0])
    assert g.attach_stage is s[x2] and g.attach_ivar is x2.op.axis[0] and g.attach_type == "scope"
    s[x].compute_at(s[x1], x1.op.axis[1])
    i, j = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
    out = _poisoned((8, 6))
    tvm.build(s, [x2])(out)
    np.testing.assert_allclose(out.numpy(), (i + j + 1.0) * 2)


def test_groups_nest_and_take_inner_groups_whole():
    x, x1, x2 = _chain()
    s = te.create_schedule(x2.op)
    g1 = s.create_group(outputs=x1, inputs=x)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert set(s.groups) == {g1, g2}
    assert s[x1].group is g1 and g1.group is g2 and s[x].group is g2
    assert g2.num_child_stages == 2 and g1.num_child_stages == 1
    with pytest.raises(tvm.error.TVMError, match="part of an existing group"):
        s.create_group(outputs=x2, inputs=x)  # x1 and x2: g2 without its stage x
    g2.compute_at(s[x2], x2.op.axis[0])
    i, j = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
    out = _poisoned((8, 6))
    tvm.build(s, [x2])(out)
    np.testing.assert_allclose(out.numpy(), (i + j + 1.0) * 2)


# ------------------------------------------------------------------ automatic inlining

def test_auto_inline_passes_pick_their_kind_of_stage():
    A = te.placeholder((8, 4), name="A")
    v = te.placeholder((8,), name="v")
    E = te.compute((8, 4), lambda i, j: A[i, j] * 2, name="E")           # elementwise
    J = te.compute((8, 4), lambda i, j: E[i, j] + v[i], name="J")        # injective, not elementwise
    k = te.reduce_axis((0, 4), name="k")
    R = te.compute((8,), lambda i: te.sum(J[i, k], axis=k), name="R")   # a reduction: never inlined
    s = te.create_schedule(R.op)
    te.schedule.AutoInlineElemWise(s)
    assert s[E].attach_type == "inline" and s[J].attach_type == "root"
    te.schedule.AutoInlineInjective(s)
    assert s[J].attach_type == "inline" and s[R].attach_type == "root"
    a, vv = _rand((8, 4)), _rand(8)
    np.testing.assert_allclose(_run(tvm.build(s, [A, v, R]), [a, vv], (8,)), (a * 2 + vv[:, None]).sum(1),
                               rtol=1e-5)


def test_auto_inline_leaves_scheduled_stages_alone():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1, name="B")
    C = te.compute((16,), lambda i: B[i] * 3, name="C")
    s = te.create_schedule(C.op)
    s[B].split(B.op.axis[0], factor=4)
    te.schedule.AutoInlineBroadcast(s)
    assert s[B].attach_type == "root"
    a = _rand(16)
    np.testing.assert_allclose(_run(tvm.build(s, [A, C]), [a], (16,)), (a + 1) * 3, rtol=1e-6)


# ------------------------------------------------------------------ tensor arithmetic

def test_tensor_operators_build_elementwise_and_broadcast_computes():
    n = te.var("n")
    A = te.placeholder((), name="A")
    B = te.placeholder((10, 5), name="B")
    elem = B[0, 0]
    for t in (1 + A, A + 1, A + n, A + A, 1 + B, B + 1, B + n, A + B, B + A, B + B, B + elem, A - elem):
        assert isinstance(t, te.Tensor)
    assert (1 + B).op.tag == (B - n).op.tag == topi.tag.ELEMWISE
    assert (A + B).op.tag == (B * B).op.tag == topi.tag.BROADCAST
    assert isinstance(elem + elem, tir.PrimExpr)
    assert topi.tag.is_broadcast((A + B).op.tag) and topi.tag.is_injective("injective,pad")
    assert not topi.tag.is_broadcast("injective")


def test_tensor_expression_with_scalars_and_a_var():
    x = te.var("x")
    A, B, C = (te.placeholder((5, 10), name=nm) for nm in "ABC")
    D = 3 + A - B * C + x
    f = tvm.build(te.create_schedule(D.op), [x, A, B, C, D])
    a, b, c = _rand((5, 10)), _rand((5, 10)), _rand((5, 10))
    out = _poisoned((5, 10))
    f(2, tvm.nd.array(a), tvm.nd.array(b), tvm.nd.array(c), out)
    np.testing.assert_allclose(out.numpy(), 3 + a - b * c + 2, rtol=1e-5)


def test_an_expression_on_the_left_of_a_tensor():
    x = te.var("x", "float32")
    A = te.placeholder((6,), name="A")
    B = x * A          # a Var on the left: the tensor's reflected operator builds the compute
    C = A[0] - B       # so does an element of a tensor
    assert B.op.tag == "elemwise" and C.op.tag == "elemwise"
    f = tvm.build(te.create_schedule(C.op), [x, A, C])
    a = _rand((6,))
    out = _poisoned((6,))
    f(3.0, tvm.nd.array(a), out)
    # a[0] - 3a may contract to one fused multiply-add, rounded once where numpy rounds twice;
    # near zero that differs by an ulp of the operands, not of the result
    np.testing.assert_allclose(out.numpy(), a[0] - 3.0 * a, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "A"


def test_compute_op_body_is_an_array_of_the_outputs_bodies():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    assert len(B.op.body) == 1 and isinstance(B.op.body[0], tir.Reduce)
    assert B.op.body[0].axis[0].var.name == "k"
    C, D = te.compute((4,), lambda i: (A[i, 0] + 1, A[i, 1] * 2), name="CD")
    assert len(C.op.body) == 2 and C.op.body is D.op.body


@pytest.mark.parametrize("lhs, rhs, op", [
    ((2, 3), (), "add"),
    ((5, 2, 3), (1,), "add"),
    ((1, 32), (6, 32), "sub"),
    ((5, 6, 7), (2, 5, 6, 1), "mul"),
    ((2, 3, 1, 8), (6, 8), "div"),
])
def test_broadcasting_matches_numpy(lhs, rhs, op):
    A = te.placeholder(lhs, name="A")
    B = te.placeholder(rhs, name="B")
    C = {"add": A + B, "sub": A - B, "mul": A * B, "div": A / B}[op]
    ref_op = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    a, b = _rand(lhs), _rand(rhs)
    ref = ref_op(a, b)
    assert tuple(int(d) for d in C.shape) == ref.shape
    np.testing.assert_allclose(_run(tvm.build(te.create_schedule(C.op), [A, B, C]), [a, b], ref.shape), ref,
                               rtol=1e-5)


def test_topi_broadcast_functions_and_integer_division():
    A = te.placeholder((4, 3), dtype="int32", name="A")
    B = te.placeholder((3,), dtype="int32", name="B")
    C = topi.divide(A, B)
    assert C.op.name == "T_divide" and C.op.tag == topi.tag.BROADCAST
    a = RNG.integers(-40, 40, size=(4, 3)).astype("int32")
    b = np.array([3, -4, 7], dtype="int32")
    got = _run(tvm.build(te.create_schedule(C.op), [A, B, C]), [a, b], (4, 3), "int32")
    np.testing.assert_array_equal(got, np.trunc(a / b).astype("int32"))  # C's division, as tir.div
    with pytest.raises(tvm.error.TVMError, match="do not broadcast"):
        topi.add(te.placeholder((4, 3)), te.placeholder((2, 3)))


def test_tensor_divided_by_a_var_with_symbolic_shape():
    shape = [te.size_var("n0"), te.size_var("n1")]
    k = te.var("k", dtype="float32")
    A = te.placeholder(shape, name="A")
    B = A / k
    s = te.create_schedule(B.op)
    s[B].fuse(*s[B].op.axis)
    f = tvm.build(s, [A, B, k, *shape])
    a = _rand((3, 7))
    out = _poisoned((3, 7))
    f(tvm.nd.array(a), out, 4.0, 3, 7)
    np.testing.assert_allclose(out.numpy(), a / 4, rtol=1e-6)


# ------------------------------------------------------------------ reductions, attrs, tags

def test_cache_write_of_a_reduction_whose_extent_and_reducer_use_the_output_axis():
    X = te.placeholder((10,), name="X")

    def body(n):
        rv = te.reduce_axis((0, n), name="rv")
        init = lambda dtype: tir.Select(n > 1, tir.const(0, dtype), n.astype(dtype))  # noqa: E731
        capped = te.comm_reducer(lambda a, b: te.max(a + b, n.astype("float32")), init, name="capped")
        return capped(X[rv], axis=rv)

    Y = te.compute(X.shape, body, name="Y")
    s = te.create_schedule(Y.op)
    s.cache_write(Y, "local")
    x = RNG.uniform(-1, 3, size=10).astype("float32")
    ref = np.empty(10, dtype="float32")
    for n in range(10):
        acc = np.float32(0 if n > 1 else n)
        for r in range(n):
            acc = max(acc + x[r], np.float32(n))
        ref[n] = acc
    np.testing.assert_allclose(_run(tvm.build(s, [X, Y]), [x], (10,)), ref, rtol=1e-6)


def test_operation_attrs_hold_immediates_and_tags_come_from_one_place():
    A = te.placeholder((4, 4), name="A")
    with te.tag_scope(tag="gemm"):
        k = te.reduce_axis((0, 4), name="k")
        C = te.compute((4, 4), lambda i, j: te.sum(A[i, k] * A[j, k], axis=k),
                       attrs={"hello": 1, "arr": [10, 12]})
    assert C.op.tag == "gemm" and "hello" in C.op.attrs and "xx" not in C.op.attrs
    assert C.op.attrs["hello"].value == 1 and C.op.attrs["arr"][1].value == 12
    with pytest.raises(ValueError, match="cannot be nested"):
        with te.tag_scope(tag="conv"):
            with te.tag_scope(tag="gemm"):
                pass
    with pytest.raises(ValueError, match="give the tag in one place"):
        with te.tag_scope(tag="conv"):
            te.compute((4,), lambda i: A[i, 0], tag="other")


# ------------------------------------------------------------------ lower and build

def test_build_of_a_lowered_module_and_of_its_function():
    A = te.placeholder((37,), name="A")
    B = te.compute((37,), lambda i: A[i] * 3, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=8)
    mod = tvm.lower(s, [A, B], name="triple")
    assert isinstance(mod["triple"], tir.PrimFunc)
    a = _rand(37)
    np.testing.assert_allclose(_run(tvm.build(mod, target="llvm"), [a], (37,)), a * 3, rtol=1e-6)
    np.testing.assert_allclose(_run(tvm.build(mod["triple"], target="llvm"), [a], (37,)), a * 3, rtol=1e-6)


def test_output_shape_over_a_var_that_is_only_an_argument():
    n, m, x = te.size_var("n"), te.size_var("m"), te.size_var("x")
    A = te.placeholder((n, m), name="A")
    B = te.compute((m, n // x), lambda i, j: A[i, j] + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B, x])
    a = _rand((6, 6))
    out = _poisoned((6, 3))
    f(tvm.nd.array(a), out, 2)
    np.testing.assert_allclose(out.numpy(), a[:, :3] + 1, rtol=1e-6)


# ------------------------------------------------------------------ tensor intrinsics called in a compute

def _vadd_intrin(n):
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def fcompute(ins, outs):
        ib = tir.ir_builder.create()
        xs, ys, zs = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="e") as e:
            zs[e] = xs[e] + ys[e]
        return ib.get()

    return te.decl_tensor_intrin(z.op, fcompute, default_buffer_params={"offset_factor": n})


def test_tensor_intrinsic_called_on_regions_in_a_compute():
    vadd = _vadd_intrin(16)
    A = te.placeholder((6, 16), name="A")
    B = te.placeholder((6, 16), name="B")
    C = te.compute((6, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    s = te.create_schedule(C.op)
    assert s[C].iter_var_attrs[C.op.axis[1]].tensor_intrin is vadd
    s[C].split(C.op.axis[0], factor=4)  # the loops outside the intrinsic stay schedulable
    a, b = _rand((6, 16)), _rand((6, 16))
    np.testing.assert_allclose(_run(tvm.build(s, [A, B, C]), [a, b], (6, 16)), a + b, rtol=1e-6)
    with pytest.raises(TypeError, match="is a region"):
        te.compute((6,), lambda i: A[i, 0:16] + 1)


def _gemv_intrin(m, n):
    w = te.placeholder((m, n), name="w")
    x = te.placeholder((n,), name="x")
    k = te.reduce_axis((0, n), name="k")
    z = te.compute((m,), lambda i: te.sum(w[i, k] * x[k], axis=k), name="z")

    def fcompute(ins, outs):
        def program(zero, accumulate):
            ib = tir.ir_builder.create()
            ws, xs, zs = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
            with ib.for_range(0, m, name="r") as r:
                if zero:
                    zs[r] = tir.const(0, "float32")
                if accumulate:
                    with ib.for_range(0, n, name="c") as c:
                        zs[r] = zs[r] + ws[r * n + c] * xs[c]
            return ib.get()

        return program(True, True), program(True, False), program(False, True)

    return te.decl_tensor_intrin(z.op, fcompute, default_buffer_params={"offset_factor": 1})


def test_reducing_tensor_intrinsic_called_with_an_outer_reduce_axis():
    gemv = _gemv_intrin(4, 4)
    A = te.placeholder((2, 3, 4, 4), name="A")
    X = te.placeholder((3, 4), name="X")
    kb = te.reduce_axis((0, 3), name="kb")
    C = te.compute((2, 4), lambda i: gemv(A[i, kb, 0:4, 0:4], X[kb, 0:4], reduce_axis=kb), name="C")
    s = te.create_schedule(C.op)
    a, x = _rand((2, 3, 4, 4)), _rand((3, 4))
    got = _run(tvm.build(s, [A, X, C]), [a, x], (2, 4))
    np.testing.assert_allclose(got, np.einsum("ikrc,kc->ir", a, x), rtol=1e-5)
    with pytest.raises(tvm.error.TVMError, match="must span the input's extent 4"):
        te.compute((2, 4), lambda i: gemv(A[i, kb, 0:4, 0:3], X[kb, 0:4], reduce_axis=kb))


# ------------------------------------------------------------------ symbolic split factors

@pytest.mark.parametrize("how", ["factor", "nparts"])
def test_split_by_a_var_given_when_the_function_is_called(how):
    n, f = te.var("n"), te.var("f")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2 - 1, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], **{how: f})
    fb = tvm.build(s, [A, B, n, f])
    for size, parts in [(20, 3), (21, 7), (5, 16)]:
        a = _rand(size)
        out = _poisoned(size)
        fb(tvm.nd.array(a), out, size, parts)
        np.testing.assert_allclose(out.numpy(), a * 2 - 1, rtol=1e-6)
    with pytest.raises(tvm.error.TVMError, match="integer expression"):
        s[B].split(s[B].leaf_iter_vars[0], factor=te.var("g", dtype="float32"))


def test_rfactor_of_a_reduction_split_by_a_var():
    n, f = te.var("n"), te.var("f")
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((1,), lambda _: te.sum(A[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    _, ki = s[C].split(k, factor=f)
    s.rfactor(C, ki)
    a = _rand(23)
    out = _poisoned(1)
    tvm.build(s, [A, C, n, f])(tvm.nd.array(a), out, 23, 4)
    np.testing.assert_allclose(out.numpy(), [a.sum()], rtol=1e-5)
