"""compiler.frontend.onnx.composed: the ONNX operators imported as compositions of catalog operators,
each run by the graph interpreter and compiled (outputs poisoned), against ONNX Runtime or, where it
refuses the case, a numpy reference of the ONNX definition."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, UnsupportedOperatorError, build_graph, evaluate  # noqa: E402
from tests.helpers import assert_written, poisoned  # noqa: E402
from tests.onnx_helpers import (  # noqa: E402
    F32,
    I64,
    RNG,
    check_single,
    make_model,
    rand,
    reduction_node,
    run_both,
    single,
)


def _run_against(model, feeds: dict[str, np.ndarray], expected: np.ndarray, rtol=1e-4, atol=1e-5):
    """The graph of ``model``, after checking it against ``expected`` as :func:`run_both` does
    against ONNX Runtime: interpreted, and compiled into poisoned outputs."""
    graph = from_onnx(model)
    (got,) = evaluate(graph, feeds)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    out = poisoned(expected.shape, expected.dtype)
    build_graph(graph)(*[feeds[v.name] for v in graph.inputs], out)
    assert_written(out, expected, rtol=rtol, atol=atol)
    return graph


def _unshaped(op: str, inputs, feeds, consts=None, opset=17, **attrs):
    """A one-node model without ONNX's shape inference (which fails on the operator's function body
    or infers a wrong broadcast shape)."""
    node = helper.make_node(op, list(inputs), ["y"], name=f"{op}_0", **attrs)
    return make_model([node], feeds, consts, [("y", F32, None)], opset, check=False)


# ---------------------------------------------------------------------------- Einsum

MATRIX_OPS = {"nn.batch_matmul", "nn.dense"}


@pytest.mark.parametrize("equation, shapes, constant, product", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], False, "nn.batch_matmul"),  # attention scores
    ("bhqk,bhkd->bhqd", [(1, 2, 3, 4), (1, 2, 4, 5)], False, "nn.batch_matmul"),  # attention output
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], False, "nn.batch_matmul"),
    ("ij,jk->ik", [(3, 4), (4, 5)], False, "nn.batch_matmul"),
    ("bnd,dh->bnh", [(2, 3, 4), (4, 5)], True, "nn.dense"),  # a projection by a weight
    ("bnd,dh->bnh", [(2, 3, 4), (4, 5)], False, "nn.batch_matmul"),
    ("ik,jk->ij", [(3, 4), (5, 4)], False, "nn.dense"),
    ("ij,jk", [(3, 4), (4, 5)], False, "nn.batch_matmul"),  # implicit output
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], False, "nn.batch_matmul"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], False, "nn.batch_matmul"),
    ("i,i->", [(5,), (5,)], False, "nn.dense"),
])
def test_einsum_contractions_run_as_matrix_products(equation, shapes, constant, product):
    feeds = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    consts = {}
    if constant:
        consts["x1"] = feeds.pop("x1")
    graph = check_single("Einsum", ["x0", "x1", "x2"][:len(shapes)], feeds, consts, opset=12,
                         equation=equation)
    counts = graph.op_counts()
    assert counts[product] == len(shapes) - 1
    # the products the templates tune: no transposed operands, one batch size
    for node in graph.nodes:
        if node.op == "nn.batch_matmul":
            assert not node.attrs["transpose_a"] and not node.attrs["transpose_b"]
            assert node.inputs[0].shape[0] == node.inputs[1].shape[0]


@pytest.mark.parametrize("equation, shape, ops", [
    ("ij->ji", (3, 4), {"transpose"}),
    ("bij->jb", (2, 3, 4), {"sum", "transpose"}),
    ("i...->...", (3, 2, 4), {"sum"}),
])
def test_einsum_of_one_operand_transposes_and_sums(equation, shape, ops):
    graph = check_single("Einsum", ["x"], {"x": rand(*shape)}, opset=12, equation=equation)
    assert set(graph.op_counts()) == ops


@pytest.mark.parametrize("equation, shapes", [
    ("i,j->ij", [(3,), (4,)]),  # nothing summed: a broadcast multiply
    ("ij,kl->", [(2, 3), (4, 5)]),
])
def test_einsum_without_contraction_multiplies(equation, shapes):
    feeds = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    graph = check_single("Einsum", list(feeds), feeds, opset=12, equation=equation)
    assert graph.op_counts()["multiply"] == 1 and not set(graph.op_counts()) & MATRIX_OPS


def test_einsum_broadcasts_axes_of_one():
    feeds = {"a": rand(1, 3, 4), "b": rand(2, 4, 5)}
    graph = run_both(_unshaped("Einsum", ["a", "b"], feeds, opset=12, equation="...ij,...jk->...ik"), feeds)
    assert set(graph.op_counts()) & MATRIX_OPS


def test_einsum_implicit_output_sorts_upper_case_first():
    # numpy's order, which the ONNX reference follows (ONNX Runtime refuses upper-case labels here)
    feeds = {"a": rand(3, 4), "b": rand(4, 2)}
    model = _unshaped("Einsum", ["a", "b"], feeds, opset=12, equation="bA,Ac")
    _run_against(model, feeds, np.einsum("bA,Ac", feeds["a"], feeds["b"]))


def test_einsum_of_constants_folds():
    consts = {"a": rand(2, 3), "b": rand(3, 4)}
    nodes = [helper.make_node("Einsum", ["a", "b"], ["e"], equation="ij,jk->ik"),
             helper.make_node("Add", ["x", "e"], ["y"])]
    feeds = {"x": rand(2, 4)}
    graph = run_both(make_model(nodes, feeds, consts, opset=12), feeds)
    assert graph.op_counts() == {"add": 1}


@pytest.mark.parametrize("equation, shapes, error, message", [
    ("ii->i", [(3, 3)], UnsupportedOperatorError, "repeated in term 'ii'"),
    ("ij,jk->ik", [(3, 4)], GraphError, "2 operand terms for 1 inputs"),
    ("ij->k", [(3, 4)], GraphError, "output label 'k' is in no input"),
    ("i1->i", [(3, 4)], GraphError, "more than letters"),
    ("ij->", [(3, 4, 5)], GraphError, "does not fit input 0"),
    ("...i->i", [(3, 4)], GraphError, "no '...'"),
    ("ij,jk->ik", [(3, 4), (5, 6)], GraphError, "label 'j' has lengths 4 and 5"),
])
def test_einsum_bad_equations_are_named(equation, shapes, error, message):
    feeds = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    model = _unshaped("Einsum", list(feeds), feeds, opset=12, equation=equation)
    with pytest.raises(error, match=rf"node 'Einsum_0'.*{message}"):
        from_onnx(model)


# ---------------------------------------------------------------------------- reductions and Hardmax


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceLogSum"])
@pytest.mark.parametrize("opset, axes, keepdims", [(13, [1], 1), (18, [0, -1], 0), (18, None, 1)])
def test_product_and_log_sum_reductions(op, opset, axes, keepdims):
    inputs, consts, attrs = reduction_node(axes, keepdims, opset >= 18)
    graph = check_single(op, inputs, {"x": rand(2, 3, 4, low=0.5)}, consts, opset=opset, **attrs)
    assert ("prod" if op == "ReduceProd" else "sum") in graph.op_counts()


def test_log_sum_with_empty_axes_reduces_nothing():
    graph = check_single("ReduceLogSum", ["x"], {"x": rand(2, 3, low=0.5)}, opset=18, noop_with_empty_axes=1)
    assert graph.op_counts() == {"log": 1}


def test_product_of_integers():
    x = RNG.integers(-3, 4, (2, 3, 4)).astype("int64")
    check_single("ReduceProd", ["x"], {"x": x}, opset=13, outputs=[("y", I64)], axes=[1], keepdims=0)


@pytest.mark.parametrize("opset, attrs", [(13, {}), (13, {"axis": 1}), (11, {"axis": 1})])
def test_hardmax_marks_the_first_largest(opset, attrs):
    x = np.round(rand(3, 4, 5))  # whole numbers: ties, which the first index wins
    graph = check_single("Hardmax", ["x"], {"x": x}, opset=opset, **attrs)
    assert graph.op_counts()["argmax"] == 1


# ---------------------------------------------------------------------------- normalisations


@pytest.mark.parametrize("p, axis", [(1, 1), (2, -1)])
def test_lp_normalization(p, axis):
    check_single("LpNormalization", ["x"], {"x": rand(2, 3, 4)}, p=p, axis=axis)


@pytest.mark.parametrize("axes", [None, [2, 3]])
def test_mean_variance_normalization(axes):
    attrs = {} if axes is None else {"axes": axes}
    feeds = {"x": rand(2, 3, 4, 5)}
    graph = run_both(_unshaped("MeanVarianceNormalization", ["x"], feeds, opset=13, **attrs), feeds)
    assert graph.op_counts()["nn.layer_norm"] == 1


def _lrn_reference(x, size, alpha, beta, bias):
    """ONNX's LRN: squares summed over ``floor((size - 1) / 2)`` channels before and the rest after."""
    before = (size - 1) // 2
    padded = np.pad(x.astype("float64") ** 2, ((0, 0), (before, size - 1 - before), (0, 0), (0, 0)))
    total = sum(padded[:, k:k + x.shape[1]] for k in range(size))
    return (x / (bias + alpha / size * total) ** beta).astype(x.dtype)


@pytest.mark.parametrize("size", [3, 4])
def test_lrn(size):
    x = rand(2, 5, 3, 4)
    attrs = dict(size=size, alpha=0.3, beta=0.6, bias=1.5)
    if size % 2:
        check_single("LRN", ["x"], {"x": x}, **attrs)
    else:  # ONNX Runtime takes odd sizes only
        _run_against(single("LRN", ["x"], {"x": x}, **attrs), {"x": x}, _lrn_reference(x, **attrs))


def test_lrn_after_a_convolution():
    # AlexNet's order: the convolution's output may be channel-blocked; LRN reads it as NCHW rows
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c"], ["y"], size=5, alpha=1e-2, beta=0.75, bias=2.0)]
    feeds = {"x": rand(1, 3, 6, 6)}
    run_both(make_model(nodes, feeds, {"w": rand(8, 3, 3, 3)}), feeds)


@pytest.mark.parametrize("scale_shape, attrs", [((4,), {}), ((3, 4), {"axis": 1, "epsilon": 1e-3})])
def test_rms_normalization(scale_shape, attrs):
    check_single("RMSNormalization", ["x", "s"], {"x": rand(2, 3, 4)}, {"s": rand(*scale_shape)}, opset=23,
                 **attrs)


# ---------------------------------------------------------------------------- pools


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 7, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], p=1)),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1], p=3)),
    ((1, 2, 7, 6), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),  # a last window half outside
    ((1, 2, 7), dict(kernel_shape=[3], pads=[1, 1])),
])
def test_lp_pool(shape, attrs):
    graph = check_single("LpPool", ["x"], {"x": rand(*shape)}, opset=18, **attrs)
    assert graph.op_counts()["nn.avg_pool2d"] == 1


@pytest.mark.parametrize("p", [2, 3])
def test_global_lp_pool(p):
    check_single("GlobalLpPool", ["x"], {"x": rand(2, 3, 4, 5)}, p=p)


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("op, shape, opset, attrs, error, message", [
    ("LpNormalization", (2, 3), 17, {"p": 3}, GraphError, "p=3 is not 1 or 2"),
    ("LRN", (1, 3, 2, 2), 17, {"size": 0}, GraphError, "size=0"),
    ("LpPool", (1, 2, 3, 3, 3), 18, {"kernel_shape": [2, 2, 2]}, UnsupportedOperatorError, "3-D pooling"),
    ("GlobalLpPool", (2, 3), 17, {}, GraphError, "spatial axes"),
    ("MeanVarianceNormalization", (2, 3, 4), 13, {}, GraphError, "axis 3 is out of range"),
])
def test_bad_nodes_are_named(op, shape, opset, attrs, error, message):
    model = _unshaped(op, ["x"], {"x": rand(*shape)}, opset=opset, **attrs)
    with pytest.raises(error, match=rf"node '{op}_0'.*{message}"):
        from_onnx(model)


def test_log_sum_of_integers_is_refused():
    x = np.arange(1, 7, dtype="int64").reshape(2, 3)
    node = helper.make_node("ReduceLogSum", ["x"], ["y"], name="n")
    model = make_model([node], {"x": x}, outputs=[("y", I64)], opset=13, check=False)
    with pytest.raises(UnsupportedOperatorError, match="dtype int64"):
        from_onnx(model)
