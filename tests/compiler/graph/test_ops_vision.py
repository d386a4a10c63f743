"""compiler.graph.ops.vision: ``topk`` and ``vision.roi_align`` agree with themselves as test_ops.py
checks the rest of the catalog: ``infer`` gives the types of ``evaluate``'s results, and ``compute``
(through ``compiler.topi``) built with a plain schedule and run on poisoned outputs matches
``evaluate``. Then ``infer`` refuses bad inputs. (``image.grid_sample`` has its cases in
test_ops.py, with the other image operator.)"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import get_op, registered_ops
from tests.compiler.graph.test_ops import Case, case_id, check_case, check_refused

F32, I32, I64 = "float32", "int32", "int64"
_RNG = np.random.default_rng(4321)


def _f(*shape, dtype=F32):
    return (shape, dtype)


def _ties(*shape) -> np.ndarray:
    """Random small whole numbers: many ties in every row."""
    return np.round(_RNG.uniform(-3, 3, shape)).astype(F32)


def _rois(n: int, batch: int, extent: float, low: float = -2.0) -> np.ndarray:
    """``n`` regions ``[batch_index, x1, y1, x2, y2]``: some reaching outside an image of about
    ``extent``, some inverted (narrower than nothing), one batch index out of range."""
    start = _RNG.uniform(low, extent, (n, 2))
    size = _RNG.uniform(-1.0, extent / 2, (n, 2))
    index = _RNG.integers(0, batch, (n, 1)).astype(float)
    index[-1] = batch + 1  # clamped into the batch
    return np.concatenate([index, start, start + size], axis=1).astype(F32)


_NAN_ROWS = _ties(3, 7)
_NAN_ROWS[0, 2] = _NAN_ROWS[1, 5] = _NAN_ROWS[1, 0] = np.nan
_EMPTY = np.array([[0, 1.0, 1.0, 1.0, 3.0], [0, 2.0, 2.0, 4.0, 1.5]], F32)  # zero height, inverted

CASES = [
    Case("topk", [_ties(3, 9, 2)], dict(k=3, axis=1, dtype=I64), "largest-ties"),
    Case("topk", [_f(4, 6, dtype=I32)], dict(k=4, axis=-1, is_ascend=True, ret_type="values"),
         "ascending-int32-values"),
    Case("topk", [_NAN_ROWS], dict(k=0, axis=1, ret_type="indices"), "whole-axis-nan"),
    Case("topk", [_ties(17, 2)], dict(k=5, axis=0, ret_type="both", is_ascend=True), "ascending-axis0"),
    Case("vision.roi_align", [_f(2, 3, 6, 7), _rois(4, 2, 8.0)],
         dict(pooled_size=(2, 3), spatial_scale=0.8, sample_ratio=2, mode="avg"), "avg-fixed"),
    Case("vision.roi_align", [_f(1, 2, 5, 5), _rois(3, 1, 7.0)],
         dict(pooled_size=(2, 2), spatial_scale=0.7, sample_ratio=0, max_samples=(3, 3), mode="max",
              aligned=True), "max-adaptive-aligned"),
    Case("vision.roi_align", [_f(1, 2, 4, 5), np.concatenate([_EMPTY, _rois(2, 1, 6.0)])],
         dict(pooled_size=(3, 2), spatial_scale=1.0, sample_ratio=0, max_samples=(4, 3), mode="avg",
              aligned=True), "avg-adaptive-empty"),
    Case("vision.roi_align", [_f(1, 2, 4, 5), _EMPTY],
         dict(pooled_size=(1, 2), sample_ratio=0, max_samples=(2, 2), mode="max", aligned=True), "max-empty"),
    Case("vision.roi_align", [_f(1, 1, 5, 4), _rois(3, 1, 5.0, low=-6.0)],
         dict(pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=3, mode="max"), "max-fixed-outside"),
]
VISION_OPS = {"topk", "vision.roi_align"}


def test_every_op_of_the_module_has_a_case():
    module = {n for n in registered_ops() if get_op(n).infer.__module__ == "compiler.graph.ops.vision"}
    assert module == VISION_OPS
    assert module <= {c.op for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_infer_evaluate_compute_agree(case: Case):
    check_case(case)


def test_topk_breaks_ties_by_the_lower_index_and_puts_nan_first():
    x = np.array([[1, 3, 3, 2, 3], [np.nan, 0, np.nan, 5, 5]], F32)
    values, indices = get_op("topk").evaluate([x], dict(k=3, dtype=I64))
    np.testing.assert_array_equal(indices, [[1, 2, 4], [0, 2, 3]])
    np.testing.assert_array_equal(values, [[3, 3, 3], [np.nan, np.nan, 5]])
    (ascending,) = get_op("topk").evaluate([x], dict(k=2, is_ascend=True, ret_type="indices"))
    np.testing.assert_array_equal(ascending, [[0, 3], [1, 3]])


def test_roi_align_max_is_the_largest_weighted_corner():
    # one sample at (0.5, 0.5) between four pixels: the max mode of ONNX Runtime takes the largest
    # of the weighted corners, 0.25 * 8, where the interpolated value would be (1 + 2 + 3 + 8) / 4
    data = np.array([[[[1, 2], [3, 8]]]], F32)
    rois = np.array([[0, 0, 0, 1, 1]], F32)
    attrs = dict(pooled_size=(1, 1), sample_ratio=1)
    (top,) = get_op("vision.roi_align").evaluate([data, rois], dict(attrs, mode="max"))
    (mean,) = get_op("vision.roi_align").evaluate([data, rois], dict(attrs, mode="avg"))
    assert top.item() == 2.0 and mean.item() == 3.5


BAD = [  # op, input types, attrs, what the message says
    ("topk", [((3, 4), F32)], dict(k=5, axis=1), "larger than axis 1"),
    ("topk", [((3, 4), F32)], dict(k=2, axis=2), "out of range"),
    ("topk", [((3, 4), F32)], dict(k=2, dtype="float32"), "dtype must be int32 or int64"),
    ("topk", [((3, 4), F32)], dict(ret_type="sorted"), "ret_type must be one of"),
    ("topk", [((3, 0), F32)], dict(k=1), "empty axis"),
    ("topk", [((), F32)], {}, "at least one axis"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 4), F32)], dict(pooled_size=(2, 2), sample_ratio=2),
     r"\(num_rois, 5\)"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 5), "float64")], dict(pooled_size=(2, 2), sample_ratio=2),
     "share one dtype"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 5), F32)], dict(pooled_size=(2, 2)),
     "needs attribute max_samples"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 5), F32)],
     dict(pooled_size=(2, 2), sample_ratio=1, mode="sum"), "mode must be one of"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 5), F32)], dict(pooled_size=(0, 2), sample_ratio=1),
     "pooled_size"),
    ("vision.roi_align", [((1, 2, 4, 4), F32), ((3, 5), F32)],
     dict(pooled_size=(2, 2), sample_ratio=1, spatial_scale=-1.0), "spatial_scale must be a positive"),
    ("vision.roi_align", [((2, 4, 4), F32), ((3, 5), F32)], dict(pooled_size=(2, 2), sample_ratio=1), "4-D"),
]


@pytest.mark.parametrize("op,types,attrs,message", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_infer_refuses_bad_inputs(op, types, attrs, message):
    check_refused(op, types, attrs, message)
