"""compiler.graph.ops.indexing: ``cumsum``, ``trilu``, ``one_hot``, ``gather_nd``, ``scatter_nd`` and
``scatter_elements`` agree with themselves as test_ops.py checks the rest of the catalog: ``infer``
gives the type of ``evaluate``'s result, and ``compute`` (through ``compiler.topi``) built with a
plain schedule and run on poisoned outputs matches ``evaluate``. Then ``infer`` refuses bad inputs.
Indices are random, negative and out of range included (they clip, as ``take``'s do)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import get_op, registered_ops
from tests.compiler.graph.test_ops import Case, case_id, check_case, check_refused

F32, I32, I64 = "float32", "int32", "int64"
_RNG = np.random.default_rng(1234)


def _f(*shape, dtype=F32):
    return (shape, dtype)


def _idx(shape, n: int, dtype=I64) -> np.ndarray:
    """Random indices for an axis of ``n``: some negative, some out of range either way."""
    return _RNG.integers(-n - 2, n + 2, shape).astype(dtype)


def _scalar(value, dtype=F32) -> np.ndarray:
    return np.array(value, dtype)


CASES = [
    Case("cumsum", [_f(2, 3, 4)], dict(axis=1), "axis1"),
    Case("cumsum", [_f(3, 5, dtype=I32)], dict(axis=-1, exclusive=True), "int32-exclusive"),
    Case("cumsum", [_f(2, 5)], dict(axis=1, reverse=True), "reverse", atol=1e-5),
    Case("cumsum", [_f(4, 3)], dict(axis=0, reverse=True, exclusive=True), "reverse-exclusive", atol=1e-5),
    Case("cumsum", [_f(2, 3)], dict(axis=None, dtype="float64"), "flat-float64"),
    Case("trilu", [_f(3, 4)], dict(k=0, upper=True), "upper"),
    Case("trilu", [_f(2, 4, 3)], dict(k=-1, upper=False), "lower-batched"),
    Case("trilu", [_f(3, 5, dtype=I32)], dict(k=2), "upper-k2-int32"),
    Case("one_hot", [np.array([[0, -1, 4], [2, -5, 3]], I64), _scalar(1.5), _scalar(-0.5)],
         dict(depth=4, axis=-1), "negative-and-outside"),
    Case("one_hot", [_idx((3, 2), 5, I32), _scalar(7.0), _scalar(2.0)], dict(depth=5, axis=0, dtype=I32),
         "axis0-int32"),
    Case("gather_nd", [_f(3, 4, 2), _idx((2, 5), 3)], {}, "two-axes"),
    Case("gather_nd", [_f(2, 3, 4), _idx((1, 2, 3), 3)], dict(batch_dims=1), "batch"),
    Case("gather_nd", [_f(2, 3, 2), _idx((3, 2, 2), 2, I32)], {}, "elements-int32"),
    Case("gather_nd", [_f(3, 4), _idx((1,), 3)], {}, "one-tuple"),
    Case("scatter_elements", [_f(4, 3), _idx((5, 3), 4), _f(5, 3)], dict(axis=0), "update-duplicates"),
    Case("scatter_elements", [_f(2, 5, 3), _idx((2, 7, 2), 5), _f(2, 7, 2)], dict(axis=1, reduction="add"),
         "add-short", atol=1e-5),
    Case("scatter_elements", [_f(3, 4), _idx((3, 3), 4, I32), _f(3, 3)], dict(axis=-1, reduction="mul"),
         "mul"),
    Case("scatter_elements", [_f(3, 4, dtype=I32), _idx((2, 6), 4), _f(2, 6, dtype=I32)],
         dict(axis=1, reduction="max"), "max-int32"),
    Case("scatter_elements", [_f(4, 2), _idx((6, 2), 4), _f(6, 2)], dict(axis=0, reduction="min"), "min"),
    Case("scatter_nd", [_f(4, 3), _idx((1, 5), 4), _f(5, 3)], {}, "update-duplicates"),
    Case("scatter_nd", [_f(3, 4, 2), _idx((2, 2, 3), 3), _f(2, 3, 2)], dict(mode="add"), "add", atol=1e-5),
    Case("scatter_nd", [_f(3, 4), _idx((2,), 3), _f()], dict(mode="mul"), "mul-one-slice"),
    Case("scatter_nd", [_f(4, 2, 2, dtype=I32), _idx((1, 6), 4, I32), _f(6, 2, 2, dtype=I32)],
         dict(mode="max"), "max-int32"),
    Case("scatter_nd", [_f(3, 3), _idx((2, 4), 3), _f(4)], dict(mode="min"), "min-elements"),
]
INDEXING_OPS = {"cumsum", "trilu", "one_hot", "gather_nd", "scatter_nd", "scatter_elements"}


def test_every_op_of_the_module_has_a_case():
    module = {n for n in registered_ops() if get_op(n).infer.__module__ == "compiler.graph.ops.indexing"}
    assert module == INDEXING_OPS
    assert module <= {c.op for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_infer_evaluate_compute_agree(case: Case):
    check_case(case)


def test_scatter_update_lets_the_last_duplicate_win():
    data, updates = np.zeros((3,), F32) + 9, np.array([1, 2, 3, 4], F32)
    indices = np.array([2, 0, 2, -1], I64)  # 2 three times (-1 is 2), 0 once
    (out,) = get_op("scatter_elements").evaluate([data, indices, updates], {})
    np.testing.assert_array_equal(out, [2, 9, 4])
    (out,) = get_op("scatter_nd").evaluate([data, indices.reshape(1, 4), updates], {})
    np.testing.assert_array_equal(out, [2, 9, 4])


BAD = [  # op, input types, attrs, what the message says
    ("cumsum", [((2, 3), F32)], dict(axis=2), "out of range"),
    ("cumsum", [((2, 3), "bool")], dict(axis=0), "numeric"),
    ("cumsum", [((2, 3), F32)], dict(axis=0, exclusive="yes"), "exclusive must be a bool"),
    ("trilu", [((3,), F32)], {}, "at least 2 dimensions"),
    ("trilu", [((3, 3), F32)], dict(k=1.5), "k must be an int"),
    ("one_hot", [((3,), F32), ((), F32), ((), F32)], dict(depth=3), "int32 or int64"),
    ("one_hot", [((3,), I64), ((2,), F32), ((), F32)], dict(depth=3), "on_value must be a scalar"),
    ("one_hot", [((3,), I64), ((), F32), ((), F32)], dict(depth=0), "depth must be a positive int"),
    ("one_hot", [((3,), I64), ((), F32), ((), F32)], dict(depth=2, axis=2), "out of range"),
    ("gather_nd", [((3, 4), F32), ((3, 2), I64)], {}, "do not fit"),
    ("gather_nd", [((3, 4), F32), ((), I64)], {}, "first axis"),
    ("gather_nd", [((2, 4, 3), F32), ((1, 3), I64)], dict(batch_dims=1), "batch axes"),
    ("scatter_elements", [((3, 4), F32), ((2, 4), I64), ((2, 3), F32)], {}, "share one shape"),
    ("scatter_elements", [((3, 4), F32), ((2, 5), I64), ((2, 5), F32)], dict(axis=0), "reach past"),
    ("scatter_elements", [((3, 4), F32), ((2, 4), I64), ((2, 4), "float64")], {}, "dtype"),
    ("scatter_elements", [((3, 4), F32), ((2, 4), I64), ((2, 4), F32)], dict(reduction="mean"), "reduction"),
    ("scatter_nd", [((3, 4), F32), ((1, 2), I64), ((2, 3), F32)], {}, "do not fit"),
    ("scatter_nd", [((3, 4), F32), ((3, 2), I64), ((2,), F32)], {}, "1 <= M <= 2"),
    ("scatter_nd", [((3, 4), F32), ((1, 2), F32), ((2, 4), F32)], {}, "int32 or int64"),
    ("scatter_nd", [((3, 4), F32), ((1, 2), I64), ((2, 4), F32)], dict(mode="none"), "mode must be"),
]


@pytest.mark.parametrize("op,types,attrs,message", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_infer_refuses_bad_inputs(op, types, attrs, message):
    check_refused(op, types, attrs, message)
